#include "runner/plan/damage_signal_spec.hpp"

#include <variant>

#include "core/errors.hpp"

namespace rkv {

namespace {

const rkv_param_spec kFraction = {sizeof(rkv_param_spec),
                                  "fraction",
                                  RKV_PARAM_FLOAT,
                                  "budget fraction f in (0, 1] that layer l alone is compressed to (of its span)",
                                  0,
                                  0,
                                  0.2,
                                  nullptr,
                                  1,
                                  1,
                                  0.0,
                                  1.0,
                                  nullptr};
const char* const kOfChoices[] = {"compression", "sharing", nullptr};
const rkv_param_spec kOf = {sizeof(rkv_param_spec),
                            "of",
                            RKV_PARAM_CHOICE,
                            "which damage: \"compression\" (only layer l compressed to `fraction`) or \"sharing\" (only "
                            "layer l reads layer l - 1's cache; layer 0 gets the largest D_l)",
                            0,
                            0,
                            0.0,
                            "compression",
                            0,
                            0,
                            0.0,
                            0.0,
                            kOfChoices};
const rkv_param_spec kBits = {sizeof(rkv_param_spec),
                              "bits",
                              RKV_PARAM_INT,
                              "of = compression: 32 keeps layer l's kept entries in float32; 8, 4 or 2 also stores them "
                              "with the integer codec at that width (the joint allocator's options)",
                              0,
                              32,
                              0.0,
                              nullptr,
                              1,
                              1,
                              2.0,
                              32.0,
                              nullptr};
const rkv_param_spec kGroup = {sizeof(rkv_param_spec),
                               "group",
                               RKV_PARAM_INT,
                               "bits < 32: channels per scale of the integer codec",
                               0,
                               32,
                               0.0,
                               nullptr,
                               1,
                               1,
                               1.0,
                               4096.0,
                               nullptr};
const rkv_param_spec kSymmetric = {sizeof(rkv_param_spec),
                                   "symmetric",
                                   RKV_PARAM_BOOL,
                                   "bits < 32: symmetric integer codes (else asymmetric, with a zero point)",
                                   0,
                                   0,
                                   0.0,
                                   nullptr,
                                   0,
                                   0,
                                   0.0,
                                   0.0,
                                   nullptr};
const rkv_param_spec* const kParams[] = {&kFraction, &kOf, &kBits, &kGroup, &kSymmetric, nullptr};
const rkv_plugin_descriptor kDescriptor = {
    sizeof(rkv_plugin_descriptor), kDamageSignalId, RKV_KIND_SIGNAL, "1.0.0",
    "oracle: compression damage D_l (mean KL, only layer l compressed with the cell's scorer) or sharing damage (only "
    "layer l reads layer l - 1's cache) on the calibration split",
    kParams, 0};

}  // namespace

CodecSpec damage_codec(const ParamSet& params, int64_t head_dim) {
  const int64_t bits = std::get<int64_t>(params.values().at("bits"));
  if (bits == 32) return CodecSpec{};
  if (bits != 8 && bits != 4 && bits != 2)
    throw InputError("signal damage: bits must be 32, 8, 4 or 2 (got " + std::to_string(bits) + ")");
  if (std::get<std::string>(params.values().at("of")) != "compression")
    throw InputError("signal damage: bits = " + std::to_string(bits) +
                     " needs of = \"compression\" (a shared layer keeps no entries to encode)");
  CodecSpec c;
  c.format = CodecFormat::integer;
  c.bits = static_cast<int>(bits);
  c.group = std::get<int64_t>(params.values().at("group"));
  c.symmetric = std::get<bool>(params.values().at("symmetric"));
  check_codec(c, head_dim, "signal damage (bits, group)");
  return c;
}

const PluginInfo& damage_signal_info() {
  static const PluginInfo info{&kDescriptor, nullptr};
  return info;
}

bool is_damage_signal(const PluginInfo* info) { return info == &damage_signal_info(); }

const PluginInfo& resolve_plugin_or_builtin(const PluginRegistry& reg, const std::string& id, rkv_plugin_kind kind) {
  if ((kind == RKV_KIND_SIGNAL || kind == 0) && (id == "damage" || id == kDamageSignalId)) return damage_signal_info();
  return reg.resolve(id, kind);
}

}  // namespace rkv
