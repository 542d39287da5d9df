#include "runner/plan/compression_sections.hpp"

#include <algorithm>
#include <set>
#include <string>

namespace rkv {

namespace {

/// token_bits and token_shares of [compression.codec] `kp` into `spec` (cache/token_bits.hpp): equal lengths, bits
/// strictly decreasing in {16, 8, 4} above `bits`, shares in [0, 1] summing to at most 1, format "int" and
/// layer_bits = "uniform". A class with share 0 is dropped (so [0] is the uniform cell); ignored for format "none"
/// (one section serves a sweep over formats). Errors name the key.
void parse_token_classes(const TomlContext& c, const toml::table& kp, CodecSpec& spec) {
  const std::vector<int64_t> bits = get_number_list<int64_t>(c, kp, "token_bits", "compression.codec.token_bits", {});
  const std::vector<double> shares = get_number_list<double>(c, kp, "token_shares", "compression.codec.token_shares", {});
  if (spec.format == CodecFormat::none || (bits.empty() && shares.empty())) return;
  const std::string kb = where(c, *kp.get(bits.empty() ? "token_shares" : "token_bits"),
                               bits.empty() ? "compression.codec.token_shares" : "compression.codec.token_bits");
  if (bits.size() != shares.size())
    throw InputError(kb + ": " + std::to_string(bits.size()) + " token_bits but " + std::to_string(shares.size()) +
                     " token_shares (one share per class)");
  if (spec.format != CodecFormat::integer)
    throw InputError(kb + ": per-token bits need format \"int\" (got \"" + codec_format_name(spec.format) + "\")");
  if (spec.layer_bits != "uniform")
    throw InputError(kb + ": per-token bits take layer_bits = \"uniform\" (per-layer and per-token bits do not combine)");
  double sum = 0;
  for (size_t i = 0; i < bits.size(); ++i) {
    const int64_t b = bits[i];
    if ((b != 16 && b != 8 && b != 4 && b != 2) || b <= spec.bits || (i > 0 && b >= bits[i - 1]))
      throw InputError(kb + " must be strictly decreasing values of 16, 8, 4, 2 above compression.codec.bits = " +
                       std::to_string(spec.bits) + " (got " + std::to_string(b) + " at index " + std::to_string(i) + ")");
    const double p = shares[i];
    if (!(p >= 0.0 && p <= 1.0))
      throw InputError(where(c, *kp.get("token_shares"), "compression.codec.token_shares") + " must lie in [0, 1] (got " +
                       std::to_string(p) + " at index " + std::to_string(i) + ")");
    sum += p;
    if (p > 0.0) {
      spec.token_bits.push_back(static_cast<int>(b));
      spec.token_shares.push_back(p);
    }
  }
  if (sum > 1.0 + 1e-12)
    throw InputError(where(c, *kp.get("token_shares"), "compression.codec.token_shares") + " sum to " +
                     std::to_string(sum) + ", more than 1");
}

}  // namespace

const std::vector<std::string>& compression_table_keys(const std::string& table) {
  static const std::vector<std::string> decode = {"policy", "sinks", "recent", "interval", "target"};
  static const std::vector<std::string> codec = {"format",     "bits",       "group",      "symmetric",   "residual",
                                                 "layer_bits", "bits_ratio", "token_bits", "token_shares"};
  static const std::vector<std::string> share = {"groups", "map", "count"};
  static const std::vector<std::string> joint = {"plan", "fractions", "bits", "share", "group", "symmetric"};
  static const std::vector<std::string> none;
  return table == "decode" ? decode : table == "codec" ? codec : table == "share" ? share : table == "joint" ? joint : none;
}

/// [compression.decode] of `root` (runner/decode/policy.hpp): policy (a name of decode_policies()) and
/// the parameters, each policy reading its own (sinks: rolling; recent: h2o; interval, target: periodic), so one
/// section serves a sweep over policies. Integers are range-checked here.
DecodeSpec parse_decode_section(const TomlContext& c, const toml::table& root) {
  DecodeSpec spec;
  const toml::table* cp = sub_table(c, root, "compression", "compression");
  const toml::table* dp = cp ? sub_table(c, *cp, "decode", "compression.decode") : nullptr;
  if (!dp) return spec;
  check_keys(c, *dp, "compression.decode", compression_table_keys("decode"));
  spec.policy = get_string(c, *dp, "policy", "compression.decode.policy", "none");
  const auto& names = decode_policy_names();
  if (std::find(names.begin(), names.end(), spec.policy) == names.end())
    throw InputError(where(c, *dp->get("policy"), "compression.decode.policy") +
                     " must be " + quoted_decode_policies() + " (got \"" + spec.policy +
                     "\"; did you mean '" + closest_match(spec.policy, names) + "'?)");
  spec.sinks = get_int(c, *dp, "sinks", "compression.decode.sinks", 4, 0, kMaxCount);
  spec.recent = get_int(c, *dp, "recent", "compression.decode.recent", -1, 0, kMaxTokens);
  spec.interval = get_int(c, *dp, "interval", "compression.decode.interval", 16, 1, kMaxTokens);
  spec.target = get_int(c, *dp, "target", "compression.decode.target", 0, 1, kMaxTokens);
  return spec;
}

/// [compression.codec] of `root` (cache/codec.hpp): format ("none" | "int" | "kivi" | "q8_0" | "q4_0"), bits, group,
/// symmetric, residual; each format reads the keys it uses (so one section serves a sweep over formats). Integers
/// are range-checked here; what depends on the head dim (group dividing it, blocks of 32) when the model is read.
CodecSpec parse_codec_section(const TomlContext& c, const toml::table& root) {
  CodecSpec spec;
  const toml::table* cp = sub_table(c, root, "compression", "compression");
  const toml::table* kp = cp ? sub_table(c, *cp, "codec", "compression.codec") : nullptr;
  if (!kp) return spec;
  check_keys(c, *kp, "compression.codec", compression_table_keys("codec"));
  const std::string format = get_string(c, *kp, "format", "compression.codec.format", "none");
  if (format != "none") spec.format = parse_codec_format(format, where(c, *kp->get("format"), "compression.codec.format"));
  // q8_0, q4_0 and f16 have fixed layouts: they ignore bits, group and symmetric (each still range-checked here).
  const bool has_bit_width = spec.format == CodecFormat::integer || spec.format == CodecFormat::kivi;
  spec.bits = static_cast<int>(get_int(c, *kp, "bits", "compression.codec.bits", 4, 2, 8));
  if (has_bit_width && spec.bits != 2 && spec.bits != 4 && spec.bits != 8)
    throw InputError(where(c, *kp->get("bits"), "compression.codec.bits") + " must be 2, 4 or 8 (got " +
                     std::to_string(spec.bits) + ")");
  spec.group = get_int(c, *kp, "group", "compression.codec.group", 32, 1, 4096);
  spec.symmetric = get_bool(c, *kp, "symmetric", "compression.codec.symmetric", false);
  const int64_t residual_default = spec.format == CodecFormat::kivi ? 128 : 0;  // KIVI's R = 128 (its Sec. 4.1)
  spec.residual = get_int(c, *kp, "residual", "compression.codec.residual", residual_default, 0, kMaxTokens);
  if (spec.format == CodecFormat::kivi && spec.symmetric)
    throw InputError(where(c, *kp->get("symmetric"), "compression.codec.symmetric") +
                     ": kivi is asymmetric (symmetric applies to format \"int\" only)");
  spec.layer_bits = get_string(c, *kp, "layer_bits", "compression.codec.layer_bits", "uniform");
  if (spec.layer_bits != "uniform" && spec.layer_bits != "profile")
    throw InputError(where(c, *kp->get("layer_bits"), "compression.codec.layer_bits") +
                     " must be \"uniform\" or \"profile\" (got \"" + spec.layer_bits + "\")");
  if (spec.format == CodecFormat::none) spec.layer_bits = "uniform";  // a float32 cache has no bits to spread (sweeps)
  if (spec.layer_bits == "profile" && spec.format != CodecFormat::integer && spec.format != CodecFormat::kivi)
    throw InputError(where(c, *kp->get("layer_bits"), "compression.codec.layer_bits") +
                     ": per-layer bits need format \"int\" or \"kivi\" (a codec with a bit width)");
  if (const toml::node* r = kp->get("bits_ratio")) {
    spec.bits_ratio = get_float(c, *r, "compression.codec.bits_ratio");
    if (!(spec.bits_ratio >= 1.0 && spec.bits_ratio <= 1e6))
      throw InputError(where(c, *r, "compression.codec.bits_ratio") + " must be in [1, 1e6]");
  }
  if (has_bit_width && spec.group * spec.bits % 8 != 0)
    throw InputError(where_table(c, *kp, "compression.codec") + ": group " + std::to_string(spec.group) + " x " +
                     std::to_string(spec.bits) + " bits is not a whole number of bytes");
  parse_token_classes(c, *kp, spec);
  return spec;
}

/// [compression.share] of `root` (runner/plan/share_spec.hpp): groups = g (CLA@g), map = [[layer, source], ...] or
/// count = k (the chooser), at most one of them. Layers are range-checked here (0 <= source < layer <= 100,000); what
/// depends on the model's layer count when the model is read (check_share_support).
ShareSpec parse_share_section(const TomlContext& c, const toml::table& root) {
  ShareSpec spec;
  const toml::table* cp = sub_table(c, root, "compression", "compression");
  const toml::table* sp = cp ? sub_table(c, *cp, "share", "compression.share") : nullptr;
  if (!sp) return spec;
  check_keys(c, *sp, "compression.share", compression_table_keys("share"));
  spec.groups = get_int(c, *sp, "groups", "compression.share.groups", 1, 1, kMaxLayer);
  spec.count = get_int(c, *sp, "count", "compression.share.count", 0, 0, kMaxLayer);
  if (const toml::node* m = sp->get("map")) {
    const std::string bad = " must be an array of [layer, source] pairs of layer indices with 0 <= source < layer";
    if (!m->is_array()) throw InputError(where(c, *m, "compression.share.map") + bad);
    for (const toml::node& e : *m->as_array()) {
      const toml::array* pair = e.as_array();
      if (!pair || pair->size() != 2 || !(*pair)[0].is_integer() || !(*pair)[1].is_integer())
        throw InputError(where(c, e, "compression.share.map") + bad);
      const int64_t layer = (*pair)[0].as_integer()->get(), source = (*pair)[1].as_integer()->get();
      if (source < 0 || source >= layer || layer > kMaxLayer)
        throw InputError(where(c, e, "compression.share.map") + bad + " (got [" + std::to_string(layer) + ", " +
                         std::to_string(source) + "])");
      spec.map.emplace_back(layer, source);
    }
    // What needs no model is checked here, so `validate` reports it (check_share_support repeats it with the layer
    // count once the model is read).
    std::set<int64_t> shared;
    for (const auto& [layer, source] : spec.map)
      if (!shared.insert(layer).second)
        throw InputError(where(c, *m, "compression.share.map") + " names layer " + std::to_string(layer) + " twice");
    for (const auto& [layer, source] : spec.map)
      if (shared.count(source))
        throw InputError(where(c, *m, "compression.share.map") + ": layer " + std::to_string(layer) + " reads layer " +
                         std::to_string(source) + ", which is itself shared; name the layer that keeps its cache");
  }
  if ((spec.groups > 1) + !spec.map.empty() + (spec.count > 0) > 1)
    throw InputError(where_table(c, *sp, "compression.share") +
                     " takes one of groups = g, map = [[layer, source], ...] or count = k");
  return spec;
}

/// [compression.joint] of `root` (runner/plan/joint_spec.hpp): plan ("none" | "damage"), fractions, bits, share, group,
/// symmetric. Every value is range-checked here: 1 to 16 distinct fractions in (0, 1], 1 to 4 distinct bits of
/// {32, 8, 4, 2}, group in [1, 4096] with group x bits whole bytes (the head dim is checked when the model is read).
JointSpec parse_joint_section(const TomlContext& c, const toml::table& root) {
  JointSpec spec;
  const toml::table* cp = sub_table(c, root, "compression", "compression");
  const toml::table* jp = cp ? sub_table(c, *cp, "joint", "compression.joint") : nullptr;
  if (!jp) return spec;
  check_keys(c, *jp, "compression.joint", compression_table_keys("joint"));
  spec.plan = get_string(c, *jp, "plan", "compression.joint.plan", "damage");
  if (spec.plan != "none" && spec.plan != "damage")
    throw InputError(where(c, *jp->get("plan"), "compression.joint.plan") + " must be \"damage\" or \"none\" (got \"" +
                     spec.plan + "\")");
  if (const toml::node* f = jp->get("fractions")) {
    const std::string bad = " must be an array of 1 to 16 distinct fractions in (0, 1]";
    const toml::array* a = f->as_array();
    if (!a || a->empty() || a->size() > 16) throw InputError(where(c, *f, "compression.joint.fractions") + bad);
    spec.fractions.clear();
    for (const toml::node& e : *a) {
      const double v = e.is_integer() ? static_cast<double>(e.as_integer()->get()) : e.is_floating_point() ? e.as_floating_point()->get() : -1.0;
      if (!(v > 0.0 && v <= 1.0) || std::find(spec.fractions.begin(), spec.fractions.end(), v) != spec.fractions.end())
        throw InputError(where(c, e, "compression.joint.fractions") + bad);
      spec.fractions.push_back(v);
    }
  }
  if (const toml::node* b = jp->get("bits")) {
    const std::string bad = " must be an array of 1 to 4 distinct widths of 32 (float32), 8, 4 and 2";
    const toml::array* a = b->as_array();
    if (!a || a->empty() || a->size() > 4) throw InputError(where(c, *b, "compression.joint.bits") + bad);
    spec.bits.clear();
    for (const toml::node& e : *a) {
      const int64_t v = e.is_integer() ? e.as_integer()->get() : -1;
      if ((v != 32 && v != 8 && v != 4 && v != 2) ||
          std::find(spec.bits.begin(), spec.bits.end(), static_cast<int>(v)) != spec.bits.end())
        throw InputError(where(c, e, "compression.joint.bits") + bad);
      spec.bits.push_back(static_cast<int>(v));
    }
  }
  spec.share = get_bool(c, *jp, "share", "compression.joint.share", false);
  spec.group = get_int(c, *jp, "group", "compression.joint.group", 32, 1, 4096);
  spec.symmetric = get_bool(c, *jp, "symmetric", "compression.joint.symmetric", false);
  for (int b : spec.bits)
    if (b != 32 && spec.group * b % 8 != 0)
      throw InputError(where_table(c, *jp, "compression.joint") + ": group " + std::to_string(spec.group) + " x " +
                       std::to_string(b) + " bits is not a whole number of bytes");
  return spec;
}

/// budget.layers: model layer indices >= 0, each at most once (the set A), or the string "global" (then
/// `*global_only` is set and the list is empty).
std::vector<int64_t> compressible_layers(const TomlContext& c, const toml::table& budget, bool* global_only) {
  *global_only = false;
  if (const toml::node* n = budget.get("layers"); n && n->is_string()) {
    if (n->value_or(std::string()) != "global")
      throw InputError(where(c, *n, "budget.layers") + " must be a list of layer indices or \"global\" (got \"" +
                       n->value_or(std::string()) + "\")");
    *global_only = true;
    return {};
  }
  std::vector<int64_t> layers = get_number_list<int64_t>(c, budget, "layers", "budget.layers", {});
  for (size_t i = 0; i < layers.size(); ++i) {
    if (layers[i] < 0 || layers[i] > kMaxLayer)
      throw InputError(where(c, *budget.get("layers"), "budget.layers") + " must hold layer indices in [0, " +
                       std::to_string(kMaxLayer) + "] (got " + std::to_string(layers[i]) + ")");
    for (size_t j = 0; j < i; ++j)
      if (layers[j] == layers[i])
        throw InputError(where(c, *budget.get("layers"), "budget.layers") + " lists layer " + std::to_string(layers[i]) +
                         " twice; it is a set of layer indices");
  }
  return layers;
}

}  // namespace rkv
