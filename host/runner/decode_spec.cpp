#include "runner/decode_spec.hpp"

namespace rkv {

namespace {

std::string str(int64_t v) { return std::to_string(v); }

}  // namespace

const std::vector<std::string>& decode_policy_names() {
  static const std::vector<std::string> names = {"none", "rolling", "h2o", "periodic"};
  return names;
}

std::string DecodeSpec::describe() const {
  if (policy == "rolling") return "rolling(sinks=" + str(sinks) + ")";
  if (policy == "h2o") return "h2o(recent=" + (recent < 0 ? std::string("half") : str(recent)) + ")";
  if (policy == "periodic")
    return "periodic(interval=" + str(interval) + ",target=" + (target == 0 ? std::string("budget") : str(target)) +
           ")";
  return policy;
}

}  // namespace rkv
