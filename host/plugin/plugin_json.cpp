// A plugin's descriptor as JSON (see plugin_json.hpp).
#include "plugin/plugin_json.hpp"

#include <cmath>
#include <cstdint>

#include "plugin/params.hpp"

namespace rkv {

nlohmann::json param_spec_json(const rkv_param_spec& s) {
  nlohmann::json j;
  j["name"] = s.name;
  j["type"] = param_type_name(s.type);
  j["doc"] = s.doc ? s.doc : "";
  switch (s.type) {
    case RKV_PARAM_BOOL: j["default"] = s.default_bool != 0; break;
    case RKV_PARAM_INT: j["default"] = s.default_int; break;
    case RKV_PARAM_FLOAT: j["default"] = s.default_float; break;
    default: j["default"] = s.default_string ? s.default_string : ""; break;
  }
  // An int parameter's bounds are integers (the ABI stores every bound as a double): 1, not 1.0. A bound outside the
  // int64 range or not integral (a plugin's own spec) stays as written.
  auto bound = [&](double v) {
    if (s.type == RKV_PARAM_INT && v == std::floor(v) && std::fabs(v) < 9.2e18) return nlohmann::json(static_cast<int64_t>(v));
    return nlohmann::json(v);
  };
  if (s.has_min) j["min"] = bound(s.min);
  if (s.has_max) j["max"] = bound(s.max);
  if (s.type == RKV_PARAM_CHOICE && s.choices) {
    j["choices"] = nlohmann::json::array();
    for (const char* const* c = s.choices; *c; ++c) j["choices"].push_back(*c);
  }
  return j;
}

nlohmann::json plugin_json(const PluginInfo& p) {
  nlohmann::json j;
  j["id"] = p.id();
  j["kind"] = plugin_kind_name(p.descriptor->kind);
  j["version"] = p.descriptor->version;
  j["path"] = p.library->path;
  j["description"] = p.descriptor->description ? p.descriptor->description : "";
  // The descriptor flags by name: what `plugins describe` prints as text.
  const uint64_t f = p.descriptor->flags;
  j["flags"] = nlohmann::json::array();
  if (f & RKV_FLAG_NEEDS_PROFILE) j["flags"].push_back("needs_profile");
  if (f & RKV_FLAG_NEEDS_SCORES) j["flags"].push_back("needs_scores");
  if (f & RKV_FLAG_SUPPORTS_CUDA) j["flags"].push_back("supports_cuda");
  if (f & RKV_FLAG_PER_PROMPT) j["flags"].push_back("per_prompt");
  j["params"] = nlohmann::json::array();
  if (p.descriptor->params)
    for (const rkv_param_spec* const* s = p.descriptor->params; *s; ++s) j["params"].push_back(param_spec_json(**s));
  return j;
}

}  // namespace rkv
