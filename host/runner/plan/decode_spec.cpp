#include "runner/plan/decode_spec.hpp"

#include "core/errors.hpp"

namespace rkv {

namespace {

std::string describe_none(const DecodeSpec&) { return "none"; }
std::string describe_rolling(const DecodeSpec& s) { return "rolling(sinks=" + std::to_string(s.sinks) + ")"; }
std::string describe_h2o(const DecodeSpec& s) {
  return "h2o(recent=" + (s.recent < 0 ? std::string("half") : std::to_string(s.recent)) + ")";
}
std::string describe_periodic(const DecodeSpec& s) {
  return "periodic(interval=" + std::to_string(s.interval) +
         ",target=" + (s.target == 0 ? std::string("budget") : std::to_string(s.target)) + ")";
}

}  // namespace

const std::vector<DecodePolicyTraits>& decode_policies() {
  // name, evicts, per_entry_state, rescores, accumulates_attention, describe (the table in decode_spec.hpp)
  static const std::vector<DecodePolicyTraits> table = {
      {"none", false, false, false, false, describe_none},
      {"rolling", true, false, false, false, describe_rolling},
      {"h2o", true, true, false, true, describe_h2o},
      {"periodic", true, true, true, false, describe_periodic},
  };
  return table;
}

const DecodePolicyTraits* find_decode_policy(const std::string& name) {
  for (const DecodePolicyTraits& t : decode_policies())
    if (t.name == name) return &t;
  return nullptr;
}

const std::vector<std::string>& decode_policy_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const DecodePolicyTraits& t : decode_policies()) n.push_back(t.name);
    return n;
  }();
  return names;
}

std::string quoted_decode_policies(bool (*keep)(const DecodePolicyTraits&)) {
  std::vector<std::string> names;
  for (const DecodePolicyTraits& t : decode_policies())
    if (!keep || keep(t)) names.push_back("\"" + t.name + "\"");
  std::string out;
  for (size_t i = 0; i < names.size(); ++i)
    out += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  return out;
}

const DecodePolicyTraits& DecodeSpec::traits() const {
  if (const DecodePolicyTraits* t = find_decode_policy(policy)) return *t;
  throw InputError("compression.decode.policy must be " + quoted_decode_policies() + " (got \"" + policy + "\")");
}

std::string DecodeSpec::describe() const {
  const DecodePolicyTraits* t = find_decode_policy(policy);
  return t ? t->describe(*this) : policy;
}

}  // namespace rkv
