// C API: version, strings, contexts, plugin listing, allocation (abi/ripplekv/ripplekv.h).
#include <nlohmann/json.hpp>

#include "capi/capi_handles.hpp"
#include "plugin/plugin_json.hpp"
#include "cache/budget.hpp"
#include "core/format.hpp"
#include "plugin/allocator_call.hpp"
#include "plugin/instance.hpp"
#include "plugin/params.hpp"
#include "plugin/registry.hpp"
#include "ripplekv/build_info.hpp"

using rkv::capi::guarded;
using rkv::capi::require;


extern "C" {

const char* rkv_version(void) { return RIPPLEKV_VERSION_STRING; }

void rkv_string_free(char* s) { std::free(s); }

void rkv_ids_free(int32_t* ids) { std::free(ids); }

rkv_status rkv_context_create(rkv_context** out) {
  if (!out) return RKV_ERROR_INVALID_ARGUMENT;
  *out = new (std::nothrow) rkv_context();
  return *out ? RKV_OK : RKV_ERROR_OUT_OF_MEMORY;
}

void rkv_context_destroy(rkv_context* ctx) { delete ctx; }

const char* rkv_context_last_error(const rkv_context* ctx) { return ctx ? ctx->last_error.c_str() : "ctx is NULL"; }

rkv_status rkv_plugins_json(rkv_context* ctx, char** out_json) {
  if (!ctx) return RKV_ERROR_INVALID_ARGUMENT;
  return guarded(ctx->last_error, [&] {
    require(out_json, "out_json");
    const rkv::PluginRegistry reg = rkv::PluginRegistry::discover();
    nlohmann::json all = nlohmann::json::array();
    for (const rkv::PluginInfo& p : reg.plugins()) all.push_back(rkv::plugin_json(p));
    *out_json = rkv::capi::copy_string(all.dump());
  });
}

rkv_status rkv_allocate(rkv_context* ctx, const rkv_allocate_options* o, int64_t* budgets, size_t capacity) {
  if (!ctx) return RKV_ERROR_INVALID_ARGUMENT;
  return guarded(ctx->last_error, [&] {
    require(o, "options");
    require(o->allocator, "options->allocator");
    require(budgets, "budgets");
    if (o->struct_size < sizeof(rkv_allocate_options))
      throw rkv::InputError("rkv_allocate_options.struct_size " + std::to_string(o->struct_size) + " is too small");
    if (o->n_params > 0) require(o->params, "options->params");
    if (o->n_profile > 0) require(o->profile, "options->profile");
    const int64_t T = o->prefix_tokens;
    if (T < 1) throw rkv::InputError("prefix_tokens must be >= 1 (got " + std::to_string(T) + ")");
    // 0 means unset; anything else is set and checked (a NaN or negative fraction is a bad fraction, not a missing
    // one).
    const bool by_fraction = o->budget_fraction != 0, by_tokens = o->budget_tokens != 0;
    if (!by_fraction && !by_tokens)
      throw rkv::InputError("set exactly one of budget_fraction (in (0, 1]) and budget_tokens (>= 1): both are 0 "
                            "(unset)");
    if (by_fraction && by_tokens)
      throw rkv::InputError("set exactly one of budget_fraction and budget_tokens: both are set (budget_fraction " +
                            rkv::fmt(o->budget_fraction, 6) + ", budget_tokens " + std::to_string(o->budget_tokens) +
                            ")");
    if (by_fraction && !(o->budget_fraction > 0 && o->budget_fraction <= 1))
      throw rkv::InputError("budget_fraction must be in (0, 1] (got " + rkv::fmt(o->budget_fraction, 6) + ")");
    if (by_tokens && o->budget_tokens < 1)
      throw rkv::InputError("budget_tokens must be >= 1 (got " + std::to_string(o->budget_tokens) + ")");
    const std::vector<double> profile(o->profile, o->profile + o->n_profile);
    int64_t L = o->n_layers;
    if (!profile.empty()) {
      if (L != 0 && L != static_cast<int64_t>(profile.size()))
        throw rkv::InputError("n_layers " + std::to_string(L) + " does not match the " +
                              std::to_string(profile.size()) + " layers of the profile");
      L = static_cast<int64_t>(profile.size());
    }
    if (L < 1) throw rkv::InputError("n_layers must be >= 1 (or give a profile)");
    if (capacity < static_cast<size_t>(L))
      throw rkv::InputError("budgets capacity " + std::to_string(capacity) + " < " + std::to_string(L) + " layers");

    const rkv::PluginRegistry reg = rkv::PluginRegistry::discover();
    const rkv::PluginInfo& info = reg.resolve(o->allocator, RKV_KIND_ALLOCATOR);
    std::vector<rkv::UserParam> user;
    for (size_t i = 0; i < o->n_params; ++i) {
      require(o->params[i], "options->params[i]");
      const std::string kv = o->params[i];
      const auto eq = kv.find('=');
      if (eq == std::string::npos || eq == 0) throw rkv::InputError("param '" + kv + "' is not KEY=VALUE");
      user.push_back(rkv::UserParam{kv.substr(0, eq), kv.substr(eq + 1), true, "param " + kv});
    }
    const rkv::ParamSet params = rkv::ParamSet::validate(*info.descriptor, user);
    if ((info.descriptor->flags & RKV_FLAG_NEEDS_PROFILE) && profile.empty())
      throw rkv::InputError("allocator '" + info.id() + "' needs a sensitivity profile");
    const int64_t B = by_fraction ? rkv::budget_total_from_fraction(o->budget_fraction, T, L)
                                  : rkv::budget_total_from_tokens(o->budget_tokens, T, L);
    rkv::HostServices host;
    const rkv::PluginInstance inst = rkv::PluginInstance::create(info, params, host);
    const rkv::Allocation a = rkv::run_allocator(inst, profile, B, T, L, /*protected_count=*/-1);
    for (int64_t l = 0; l < L; ++l) budgets[l] = a.budgets[static_cast<size_t>(l)];
  });
}

}  // extern "C"
