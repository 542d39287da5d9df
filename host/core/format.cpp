#include "core/format.hpp"

#include <cmath>
#include <iomanip>
#include <sstream>

namespace rkv {

std::string fmt(double v, int significant) {
  if (std::isnan(v)) return "nan";
  std::ostringstream os;
  os << std::setprecision(significant) << v;
  return os.str();
}

std::string fixed_decimals(double v, int decimals) {
  if (std::isnan(v)) return "nan";
  std::ostringstream os;
  os << std::fixed << std::setprecision(decimals) << v;
  return os.str();
}

nlohmann::json num(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

}  // namespace rkv
