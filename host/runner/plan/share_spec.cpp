#include "runner/plan/share_spec.hpp"

#include <sstream>

namespace rkv {

std::string ShareSpec::label() const {
  if (groups > 1) return "CLA@" + std::to_string(groups);
  if (count > 0) return std::to_string(count) + " layers by profile";
  if (map.empty()) return "none";
  std::ostringstream os;
  os << "map";
  for (const auto& [layer, source] : map) os << " " << layer << "<-" << source;
  return os.str();
}

}  // namespace rkv
