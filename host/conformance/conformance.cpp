#include "conformance/conformance.hpp"

#include "core/errors.hpp"

namespace rkv {

std::vector<ConformanceCase> check_plugin(const PluginInfo& info, const ParamSet& params) {
  switch (info.descriptor->kind) {
    case RKV_KIND_SCORER: return check_scorer(info, params);
    case RKV_KIND_ALLOCATOR: return check_allocator(info, params);
    case RKV_KIND_SIGNAL: return check_signal(info, params);
    default:
      throw InputError("plugin '" + info.id() + "' has kind " + std::to_string(info.descriptor->kind) +
                       ", which has no conformance checks");
  }
}

bool all_passed(const std::vector<ConformanceCase>& cases) {
  if (cases.empty()) return false;
  for (const auto& c : cases)
    if (!c.passed) return false;
  return true;
}

}  // namespace rkv
