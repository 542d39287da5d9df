#include "runner/plan/joint_spec.hpp"

#include <sstream>

namespace rkv {

namespace {

std::string joined(const std::vector<double>& v) {
  std::ostringstream os;
  for (size_t i = 0; i < v.size(); ++i) os << (i ? "/" : "") << v[i];
  return os.str();
}

}  // namespace

std::string JointSpec::label() const {
  std::vector<double> b(bits.begin(), bits.end());
  std::string s = "joint f " + joined(fractions) + " x bits " + joined(b) + (share ? " + share" : "");
  if (group != 32 || symmetric) s += " (int " + std::string(symmetric ? "sym" : "asym") + "-g" + std::to_string(group) + ")";
  return s;
}

}  // namespace rkv
