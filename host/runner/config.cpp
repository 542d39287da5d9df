#include "runner/config.hpp"
#include "runner/damage_signal.hpp"

#include "runner/decode_spec.hpp"

#include <algorithm>
#include <cstdint>
#include <map>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <toml++/toml.h>

#include "core/errors.hpp"
#include "core/regular_file.hpp"
#include "eval/stats.hpp"
#include "plugin/allocator_call.hpp"
#include "plugin/instance.hpp"
#include "plugin/scorer_call.hpp"
#include "runner/ruler_subtasks.hpp"
#include "runner/scorer_route.hpp"
#include "core/sha256.hpp"

namespace fs = std::filesystem;

namespace rkv {

// ---- paths ------------------------------------------------------------------------------------------------------

std::string asset_cache_dir() {
  if (const char* c = std::getenv("RIPPLEKV_CACHE"); c && *c) return c;
  const char* home = std::getenv("HOME");
  return (fs::path(home ? home : "/root") / ".cache" / "ripplekv").string();
}

std::string resolve_config_path(const std::string& value, const std::string& base_dir) {
  std::string v = value;
  if (v.rfind("austen:", 0) == 0) return (fs::path(asset_cache_dir()) / "austen" / (v.substr(7) + ".txt")).string();
  // ${VAR}
  for (size_t pos; (pos = v.find("${")) != std::string::npos;) {
    const size_t end = v.find('}', pos);
    if (end == std::string::npos) break;
    const std::string name = v.substr(pos + 2, end - pos - 2);
    const char* env = std::getenv(name.c_str());
    std::string rep = env ? env : "";
    if (name == "RIPPLEKV_CACHE" && rep.empty()) rep = asset_cache_dir();
    v = v.substr(0, pos) + rep + v.substr(end + 1);
  }
  if (!v.empty() && v[0] == '~') {
    const char* home = std::getenv("HOME");
    v = std::string(home ? home : "/root") + v.substr(1);
  }
  fs::path p(v);
  if (p.is_relative() && !base_dir.empty()) p = fs::path(base_dir) / p;
  return p.lexically_normal().string();
}

namespace {

// ---- TOML helpers -------------------------------------------------------------------------------------------------

struct Ctx {
  std::string origin;    // config file name for messages
  std::string base_dir;  // for relative paths
};

std::string where(const Ctx& c, const toml::node& n, const std::string& key) {
  std::ostringstream os;
  os << c.origin;
  if (n.source().begin.line) os << ":" << n.source().begin.line;
  os << ": '" << key << "'";
  return os.str();
}

std::string where_table(const Ctx& c, const toml::table& t, const std::string& key) {
  std::ostringstream os;
  os << c.origin;
  if (t.source().begin.line) os << ":" << t.source().begin.line;
  os << ": [" << key << "]";
  return os.str();
}

void check_keys(const Ctx& c, const toml::table& t, const std::string& table_name,
                const std::vector<std::string>& allowed) {
  for (const auto& [k, v] : t) {
    const std::string key(k.str());
    if (std::find(allowed.begin(), allowed.end(), key) != allowed.end()) continue;
    const std::string full = table_name.empty() ? key : table_name + "." + key;
    std::string msg = where(c, v, full) + " is not a known key";
    if (!allowed.empty()) {
      std::string list;
      for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
      msg += (table_name.empty() ? std::string(" at the top level") : " in [" + table_name + "]") + "; valid: " +
             list + "; did you mean '" + closest_match(key, allowed) + "'?";
    }
    throw InputError(msg);
  }
}

const toml::table* sub_table(const Ctx& c, const toml::table& t, const std::string& key, const std::string& full) {
  const toml::node* n = t.get(key);
  if (!n) return nullptr;
  if (!n->is_table()) throw InputError(where(c, *n, full) + " must be a table");
  return n->as_table();
}

// Upper bounds of integer settings, checked where they are read (so `validate` catches them): what their consumers
// hold (int counts, memory for per-token buffers) with room to spare, never a silent narrowing.
constexpr int64_t kMaxTokens = int64_t{1} << 24;  ///< any length in tokens (16,777,216)
constexpr int64_t kMaxCount = 1000000;            ///< examples, trials, resamples, sinks, new tokens
constexpr int64_t kMaxCells = 100000;             ///< [output] max_cells
constexpr int64_t kMaxThreads = 4096;             ///< model.threads
constexpr uint64_t kMaxConfigBytes = uint64_t{64} << 20;  ///< a config file (TOML) of at most 64 MiB

/// Why the file `p` cannot serve as an input text file, or "" when it is a readable regular file:
/// missing, a folder, a FIFO or device (which would block or never end), a symbolic-link loop. Never throws.
std::string input_file_problem(const std::string& p) {
  std::string why;
  switch (path_kind(p, &why)) {
    case PathKind::regular: return "";
    case PathKind::missing: return "does not exist";
    case PathKind::error: return "cannot be read: " + why;
    case PathKind::directory: return "is a folder, not a file";
    case PathKind::other: return "is " + describe_special_file(p) + ", not a regular file";
  }
  return "is not a regular file";
}
constexpr int64_t kMaxLayer = 100000;             ///< budget.layers entries

/// The integer at `key`, or `def` when absent; rkv::InputError naming the line and key when it is not an integer or
/// lies outside [min_value, max_value].
int64_t get_int(const Ctx& c, const toml::table& t, const std::string& key, const std::string& full, int64_t def,
                int64_t min_value, int64_t max_value) {
  const toml::node* n = t.get(key);
  if (!n) return def;
  if (!n->is_integer()) throw InputError(where(c, *n, full) + " must be an integer");
  const int64_t v = n->as_integer()->get();
  if (v < min_value)
    throw InputError(where(c, *n, full) + " must be >= " + std::to_string(min_value) + " (got " + std::to_string(v) + ")");
  if (v > max_value)
    throw InputError(where(c, *n, full) + " must be <= " + std::to_string(max_value) + " (got " + std::to_string(v) + ")");
  return v;
}

double get_float(const Ctx& c, const toml::node& n, const std::string& full) {
  if (n.is_floating_point()) return n.as_floating_point()->get();
  if (n.is_integer()) return static_cast<double>(n.as_integer()->get());
  throw InputError(where(c, n, full) + " must be a number");
}

std::string get_string(const Ctx& c, const toml::table& t, const std::string& key, const std::string& full,
                       const std::string& def) {
  const toml::node* n = t.get(key);
  if (!n) return def;
  if (!n->is_string()) throw InputError(where(c, *n, full) + " must be a string");
  return n->as_string()->get();
}

bool get_bool(const Ctx& c, const toml::table& t, const std::string& key, const std::string& full, bool def) {
  const toml::node* n = t.get(key);
  if (!n) return def;
  if (!n->is_boolean()) throw InputError(where(c, *n, full) + " must be true or false");
  return n->as_boolean()->get();
}

std::vector<std::string> get_string_list(const Ctx& c, const toml::table& t, const std::string& key,
                                         const std::string& full) {
  std::vector<std::string> out;
  const toml::node* n = t.get(key);
  if (!n) return out;
  if (!n->is_array()) throw InputError(where(c, *n, full) + " must be an array of strings");
  for (const auto& e : *n->as_array()) {
    if (!e.is_string()) throw InputError(where(c, e, full) + " must be an array of strings");
    out.push_back(e.as_string()->get());
  }
  return out;
}

template <typename T>
std::vector<T> get_number_list(const Ctx& c, const toml::table& t, const std::string& key, const std::string& full,
                               std::vector<T> def) {
  const toml::node* n = t.get(key);
  if (!n) return def;
  if (!n->is_array()) throw InputError(where(c, *n, full) + " must be an array of numbers");
  std::vector<T> out;
  for (const auto& e : *n->as_array()) {
    if constexpr (std::is_integral_v<T>) {
      if (!e.is_integer()) throw InputError(where(c, e, full) + " must be an array of integers");
      out.push_back(static_cast<T>(e.as_integer()->get()));
    } else {
      out.push_back(static_cast<T>(get_float(c, e, full)));
    }
  }
  return out;
}

ParamValue to_param_value(const Ctx& c, const toml::node& n, const std::string& full) {
  if (n.is_boolean()) return n.as_boolean()->get();
  if (n.is_integer()) return n.as_integer()->get();
  if (n.is_floating_point()) return n.as_floating_point()->get();
  if (n.is_string()) return n.as_string()->get();
  throw InputError(where(c, n, full) + " must be a bool, number or string");
}

nlohmann::json to_json(const toml::node& n) {
  if (n.is_boolean()) return n.as_boolean()->get();
  if (n.is_integer()) return n.as_integer()->get();
  if (n.is_floating_point()) return n.as_floating_point()->get();
  if (n.is_string()) return n.as_string()->get();
  std::ostringstream os;
  n.visit([&](const auto& v) { os << v; });
  return os.str();
}

std::string short_id(const std::string& id) {
  const auto dot = id.rfind('.');
  return dot == std::string::npos ? id : id.substr(dot + 1);
}

// ---- sections ----------------------------------------------------------------------------------------------------

DataConfig parse_data(const Ctx& c, const toml::table& t, const std::string& name, bool calibration) {
  std::vector<std::string> keys = {"files", "examples", "prefix_tokens", "seed"};
  if (calibration) keys.push_back("window_tokens");
  check_keys(c, t, name, keys);
  DataConfig d;
  for (const auto& f : get_string_list(c, t, "files", name + ".files")) {
    const std::string p = resolve_config_path(f, c.base_dir);
    if (const std::string problem = input_file_problem(p); !problem.empty())
      throw InputError(where(c, *t.get("files"), name + ".files") + ": file '" + f + "' (" + p + ") " + problem +
                       (f.rfind("austen:", 0) == 0 && problem == "does not exist" ? "; fetch it with scripts/fetch-assets" : ""));
    d.files.push_back(p);
  }
  if (d.files.empty()) throw InputError(where_table(c, t, name) + " needs files = [...] (e.g. \"austen:emma\")");
  d.examples = get_int(c, t, "examples", name + ".examples", 8, 1, kMaxCount);
  d.prefix_tokens = get_int(c, t, "prefix_tokens", name + ".prefix_tokens", 1024, 1, kMaxTokens);
  if (calibration) d.window_tokens = get_int(c, t, "window_tokens", name + ".window_tokens", 32, 1, kMaxTokens);
  d.seed = static_cast<uint64_t>(get_int(c, t, "seed", name + ".seed", calibration ? 0 : 1, 0, INT64_MAX));
  return d;
}

/// [allocator]: `plugin` must serve rkv.allocator/1 (layer budgets), or rkv.allocator/2 alone when there is no
/// `heads`; `heads` must serve rkv.allocator/2 (per-head budgets). Checked on an instance of each (cheap: the
/// allocators hold no state), so that `validate` catches what would otherwise fail in the middle of a run.
void check_allocator_interfaces(const Ctx& c, const toml::table& t, const PluginChoice& choice) {
  HostServices host;
  const PluginInstance layer = PluginInstance::create(*choice.info, choice.params, host);
  const bool layer_v1 = serves_layer_budgets(layer), layer_v2 = serves_head_budgets(layer);
  const toml::node& pn = *t.get("plugin");
  if (choice.heads) {
    const PluginInstance heads = PluginInstance::create(*choice.heads->info, choice.heads->params, host);
    if (!serves_head_budgets(heads))
      throw InputError(where(c, *t.get("heads"), "allocator.heads") + ": '" + choice.heads->id +
                       "' is not a per-head allocator (it does not serve " RKV_INTERFACE_ALLOCATOR_V2
                       "); heads takes one such as \"adakv\", or \"none\"");
    if (!layer_v1)
      throw InputError(where(c, pn, "allocator.plugin") + ": '" + choice.id +
                       "' gives no layer budgets (it does not serve " RKV_INTERFACE_ALLOCATOR_V1
                       ") to split per head; use a layer allocator such as \"uniform\" with heads = \"" +
                       short_id(choice.heads->id) + "\", or the per-head allocator alone");
  } else if (!layer_v1 && !layer_v2) {
    throw InputError(where(c, pn, "allocator.plugin") + ": '" + choice.id + "' serves neither " RKV_INTERFACE_ALLOCATOR_V1
                     " nor " RKV_INTERFACE_ALLOCATOR_V2);
  }
}

/// [signal] / [scorer] / [allocator]: resolves `plugin`, validates the params in [kind.<short id>].
std::optional<PluginChoice> parse_plugin_section(const Ctx& c, const toml::table& root, const std::string& kind_name,
                                                 rkv_plugin_kind kind, const PluginRegistry& reg) {
  const toml::table* t = sub_table(c, root, kind_name, kind_name);
  if (!t) return std::nullopt;
  const toml::node* pn = t->get("plugin");
  if (!pn) throw InputError(where_table(c, *t, kind_name) + " needs plugin = \"id\"");
  if (!pn->is_string()) throw InputError(where(c, *pn, kind_name + ".plugin") + " must be a string");
  PluginChoice choice;
  try {
    choice.info = &resolve_plugin_or_builtin(reg, pn->as_string()->get(), kind);
  } catch (const InputError& e) {
    throw InputError(where(c, *pn, kind_name + ".plugin") + ": " + e.what());
  }
  choice.id = choice.info->id();
  // [allocator] heads = "<id>" | "none": the per-head allocator (rkv.allocator/2) composed after the layer allocator.
  std::optional<PluginChoice> heads;
  if (const toml::node* hn = kind == RKV_KIND_ALLOCATOR ? t->get("heads") : nullptr) {
    if (!hn->is_string()) throw InputError(where(c, *hn, kind_name + ".heads") + " must be a string");
    const std::string hid = hn->as_string()->get();
    if (hid != "none") {
      heads.emplace();
      try {
        heads->info = &reg.resolve(hid, kind);
      } catch (const InputError& e) {
        throw InputError(where(c, *hn, kind_name + ".heads") + ": " + e.what() +
                         " (heads = \"none\" turns per-head budgets off)");
      }
      heads->id = heads->info->id();
      heads->params = ParamSet::validate(*heads->info->descriptor, {});
    }
  }
  // Every other key must be a param table named after a plugin of this kind (validated against that plugin).
  for (const auto& [k, v] : *t) {
    const std::string key(k.str());
    if (key == "plugin" || (key == "heads" && kind == RKV_KIND_ALLOCATOR)) continue;
    if (key == "route" && kind == RKV_KIND_SCORER) continue;  // [[scorer.route]]: parse_cell (runner/scorer_route.hpp)
    const std::string full = kind_name + "." + key;
    if (!v.is_table())
      throw InputError(where(c, v, full) + " is not a known key in [" + kind_name +
                       "]; plugin params go in a table [" + kind_name + "." + short_id(choice.id) + "]");
    const PluginInfo* owner = nullptr;
    try {
      owner = &resolve_plugin_or_builtin(reg, key, kind);
    } catch (const InputError& e) {
      throw InputError(where(c, v, full) + ": table names no " + kind_name + " plugin: " + e.what());
    }
    std::vector<UserParam> user;
    for (const auto& [pk, pv] : *v.as_table()) {
      const std::string pkey(pk.str());
      std::ostringstream origin;  // a swept value carries no line: name the file alone then
      origin << c.origin;
      if (pv.source().begin.line) origin << ":" << pv.source().begin.line;
      user.push_back(UserParam{pkey, to_param_value(c, pv, full + "." + pkey), false, origin.str()});
    }
    const ParamSet set = ParamSet::validate(*owner->descriptor, user);  // errors name plugin, key and line
    if (is_damage_signal(owner) && !(std::get<double>(set.values().at("fraction")) > 0.0))
      throw InputError(where(c, *v.as_table()->get("fraction"), full + ".fraction") +
                       " must be in (0, 1]: a fraction of 0 keeps no position");
    if (is_damage_signal(owner)) {  // bits, and bits with of = "sharing", checked here so `validate` reports them
      try {
        damage_codec(set, std::get<int64_t>(set.values().at("group")));  // the head dim is checked when profiling
      } catch (const InputError& e) {
        const toml::node* bits = v.as_table()->get("bits");
        throw InputError(bits ? where(c, *bits, full + ".bits") + ": " + e.what() : c.origin + ": " + e.what());
      }
    }
    if (owner == choice.info) choice.params = set;
    if (heads && owner == heads->info) heads->params = set;
  }
  if (!t->get(short_id(choice.id)) && !t->get(choice.id))
    choice.params = ParamSet::validate(*choice.info->descriptor, {});
  if (heads) choice.heads = std::make_shared<PluginChoice>(*heads);
  if (kind == RKV_KIND_ALLOCATOR) check_allocator_interfaces(c, *t, choice);
  return choice;
}

/// [compression.decode] of `root` (runner/decode_policy.hpp): policy ("none" | "rolling" | "h2o" | "periodic") and
/// the parameters, each policy reading its own (sinks: rolling; recent: h2o; interval, target: periodic), so one
/// section serves a sweep over policies. Integers are range-checked here.
DecodeSpec parse_decode_section(const Ctx& c, const toml::table& root) {
  DecodeSpec spec;
  const toml::table* cp = sub_table(c, root, "compression", "compression");
  const toml::table* dp = cp ? sub_table(c, *cp, "decode", "compression.decode") : nullptr;
  if (!dp) return spec;
  check_keys(c, *dp, "compression.decode", {"policy", "sinks", "recent", "interval", "target"});
  spec.policy = get_string(c, *dp, "policy", "compression.decode.policy", "none");
  const auto& names = decode_policy_names();
  if (std::find(names.begin(), names.end(), spec.policy) == names.end())
    throw InputError(where(c, *dp->get("policy"), "compression.decode.policy") +
                     " must be \"none\", \"rolling\", \"h2o\" or \"periodic\" (got \"" + spec.policy +
                     "\"; did you mean '" + closest_match(spec.policy, names) + "'?)");
  spec.sinks = get_int(c, *dp, "sinks", "compression.decode.sinks", 4, 0, kMaxCount);
  spec.recent = get_int(c, *dp, "recent", "compression.decode.recent", -1, 0, kMaxTokens);
  spec.interval = get_int(c, *dp, "interval", "compression.decode.interval", 16, 1, kMaxTokens);
  spec.target = get_int(c, *dp, "target", "compression.decode.target", 0, 1, kMaxTokens);
  return spec;
}

/// token_bits and token_shares of [compression.codec] `kp` into `spec` (cache/token_bits.hpp): equal lengths, bits
/// strictly decreasing in {16, 8, 4} above `bits`, shares in [0, 1] summing to at most 1, format "int" and
/// layer_bits = "uniform". A class with share 0 is dropped (so [0] is the uniform cell); ignored for format "none"
/// (one section serves a sweep over formats). Errors name the key.
void parse_token_classes(const Ctx& c, const toml::table& kp, CodecSpec& spec) {
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

/// [compression.codec] of `root` (cache/codec.hpp): format ("none" | "int" | "kivi" | "q8_0" | "q4_0"), bits, group,
/// symmetric, residual; each format reads the keys it uses (so one section serves a sweep over formats). Integers
/// are range-checked here; what depends on the head dim (group dividing it, blocks of 32) when the model is read.
CodecSpec parse_codec_section(const Ctx& c, const toml::table& root) {
  CodecSpec spec;
  const toml::table* cp = sub_table(c, root, "compression", "compression");
  const toml::table* kp = cp ? sub_table(c, *cp, "codec", "compression.codec") : nullptr;
  if (!kp) return spec;
  check_keys(c, *kp, "compression.codec",
             {"format", "bits", "group", "symmetric", "residual", "layer_bits", "bits_ratio", "token_bits", "token_shares"});
  const std::string format = get_string(c, *kp, "format", "compression.codec.format", "none");
  if (format != "none") spec.format = parse_codec_format(format, where(c, *kp->get("format"), "compression.codec.format"));
  spec.bits = static_cast<int>(get_int(c, *kp, "bits", "compression.codec.bits", 4, 2, 8));
  if (spec.bits != 2 && spec.bits != 4 && spec.bits != 8)
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
  if (spec.format != CodecFormat::none && spec.group * spec.bits % 8 != 0)
    throw InputError(where_table(c, *kp, "compression.codec") + ": group " + std::to_string(spec.group) + " x " +
                     std::to_string(spec.bits) + " bits is not a whole number of bytes");
  parse_token_classes(c, *kp, spec);
  return spec;
}

/// [compression.share] of `root` (runner/share_spec.hpp): groups = g (CLA@g), map = [[layer, source], ...] or
/// count = k (the chooser), at most one of them. Layers are range-checked here (0 <= source < layer <= 100,000); what
/// depends on the model's layer count when the model is read (check_share_support).
ShareSpec parse_share_section(const Ctx& c, const toml::table& root) {
  ShareSpec spec;
  const toml::table* cp = sub_table(c, root, "compression", "compression");
  const toml::table* sp = cp ? sub_table(c, *cp, "share", "compression.share") : nullptr;
  if (!sp) return spec;
  check_keys(c, *sp, "compression.share", {"groups", "map", "count"});
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

/// [compression.joint] of `root` (runner/joint_spec.hpp): plan ("none" | "damage"), fractions, bits, share, group,
/// symmetric. Every value is range-checked here: 1 to 16 distinct fractions in (0, 1], 1 to 4 distinct bits of
/// {32, 8, 4, 2}, group in [1, 4096] with group x bits whole bytes (the head dim is checked when the model is read).
JointSpec parse_joint_section(const Ctx& c, const toml::table& root) {
  JointSpec spec;
  const toml::table* cp = sub_table(c, root, "compression", "compression");
  const toml::table* jp = cp ? sub_table(c, *cp, "joint", "compression.joint") : nullptr;
  if (!jp) return spec;
  check_keys(c, *jp, "compression.joint", {"plan", "fractions", "bits", "share", "group", "symmetric"});
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

/// A joint cell (runner/joint_spec.hpp) decides b_l, bits and sharing itself under budget.bytes_fraction: it needs
/// that budget, no decode policy, no [compression.share] and no route; the allocator and [compression.codec] do not
/// apply (so a sweep crossing them with compression.joint.plan computes the joint cell once), nor does the signal.
void check_joint_cell(const Ctx& c, CellConfig& cell) {
  const std::string what = c.origin + ": [compression.joint] plan = \"" + cell.joint.plan + "\"";
  if (!cell.budget_bytes_fraction)
    throw InputError(what + " splits a byte budget: set [budget] bytes_fraction = x (not fraction or tokens)");
  if (cell.decode.policy != "none")
    throw InputError(what + " with compression.decode.policy = \"" + cell.decode.policy +
                     "\": the plan packs and shares layers, which decode policies cannot evict from; use policy \"none\"");
  if (!cell.share.none())
    throw InputError(what + " with [compression.share] " + cell.share.label() +
                     ": the joint plan chooses the shared layers itself (set compression.joint.share = true)");
  if (!cell.route.empty())
    throw InputError(what + " with a scorer.route: the plan's damages are measured with the one [scorer]");
  cell.codec = CodecSpec{};  // the plan picks each layer's bits
  cell.uses_profile = false;  // its damages are its own profiles (runner/joint_allocation.hpp), not the [signal]'s
}

CellConfig parse_cell(const Ctx& c, const toml::table& root, const PluginRegistry& reg, bool require_signal = true) {
  CellConfig cell;
  cell.signal = parse_plugin_section(c, root, "signal", RKV_KIND_SIGNAL, reg);
  cell.scorer = parse_plugin_section(c, root, "scorer", RKV_KIND_SCORER, reg);
  cell.allocator = parse_plugin_section(c, root, "allocator", RKV_KIND_ALLOCATOR, reg);
  if (!cell.scorer) throw InputError(c.origin + ": a [scorer] section with plugin = \"id\" is required");
  if (!cell.allocator) throw InputError(c.origin + ": an [allocator] section with plugin = \"id\" is required");
  if (const toml::node* route = root.at_path("scorer.route").node()) cell.route = parse_scorer_route(*route, c.origin, reg);
  const bool needs_profile = (cell.allocator->info->descriptor->flags & RKV_FLAG_NEEDS_PROFILE) != 0;
  if (require_signal && needs_profile && !cell.signal)
    throw InputError(c.origin + ": allocator '" + cell.allocator->id +
                     "' needs a sensitivity profile: add a [signal] section with plugin = \"id\"");
  cell.uses_profile = needs_profile;  // otherwise the signal does not change what this cell computes

  const toml::table* b = sub_table(c, root, "budget", "budget");
  if (!b) throw InputError(c.origin + ": a [budget] section with fraction = f, tokens = N or bytes_fraction = x is required");
  check_keys(c, *b, "budget", {"fraction", "tokens", "bytes_fraction", "layers"});
  const toml::node* f = b->get("fraction");
  const toml::node* tk = b->get("tokens");
  const toml::node* bf = b->get("bytes_fraction");
  if ((f != nullptr) + (tk != nullptr) + (bf != nullptr) != 1)
    throw InputError(where_table(c, *b, "budget") +
                     " needs exactly one of fraction = f, tokens = N or bytes_fraction = x");
  if (bf) {
    const double v = get_float(c, *bf, "budget.bytes_fraction");
    if (!(v > 0.0 && v <= 1.0))
      throw InputError(where(c, *bf, "budget.bytes_fraction") + " must be in (0, 1] (got " + std::to_string(v) + ")");
    cell.budget_bytes_fraction = v;
  } else if (f) {
    const double v = get_float(c, *f, "budget.fraction");
    if (!(v > 0.0 && v <= 1.0))
      throw InputError(where(c, *f, "budget.fraction") + " must be in (0, 1] (got " + std::to_string(v) + ")");
    cell.budget_fraction = v;
  } else {
    cell.budget_tokens = get_int(c, *b, "tokens", "budget.tokens", 0, 1, kMaxTokens);
  }
  cell.decode = parse_decode_section(c, root);
  cell.codec = parse_codec_section(c, root);
  if (cell.codec.layer_bits == "profile") {  // the bits follow the cell's sensitivity profile
    if (require_signal && !cell.signal)
      throw InputError(c.origin + ": compression.codec.layer_bits = \"profile\" needs a sensitivity profile: add a "
                       "[signal] section with plugin = \"id\"");
    cell.uses_profile = true;
  }
  cell.share = parse_share_section(c, root);
  if (cell.share.count > 0) {  // the chooser ranks layers by the cell's sensitivity profile
    if (require_signal && !cell.signal)
      throw InputError(c.origin + ": compression.share.count needs a sensitivity profile to choose the layers: add a "
                       "[signal] section with plugin = \"id\"");
    cell.uses_profile = true;
  }
  // A joint cell's own errors first: its plan replaces the codec and sharing the checks below are about.
  cell.joint = parse_joint_section(c, root);
  if (!cell.joint.none()) check_joint_cell(c, cell);
  if (!cell.share.none() && cell.decode.policy != "none")
    throw InputError(c.origin + ": [compression.share] " + cell.share.label() + " with compression.decode.policy = \"" +
                     cell.decode.policy + "\": decode policies evict per layer and a shared layer holds no entries; "
                     "use policy \"none\" with sharing");
  if (!cell.codec.none() && cell.decode.policy != "none")
    throw InputError(c.origin + ": [compression.codec] " + cell.codec.label() + " with compression.decode.policy = \"" +
                     cell.decode.policy + "\": a decode policy evicts from a packed cache, which is not supported; "
                     "use policy \"none\" with a codec");
  if (!cell.route.empty() && cell.decode.policy == "periodic")
    throw InputError(c.origin + ": 'scorer.route' with compression.decode.policy = \"periodic\": the periodic policy "
                     "re-scores every layer with the one [scorer] while decoding; use a route with another policy");
  return cell;
}

/// Sets a dotted key in a table (creating intermediate tables); used to apply a sweep value. Throws InputError when a
/// part of the key names something other than a table (e.g. `scorer = 1` with a sweep of "scorer.plugin").
void set_dotted(const Ctx& c, toml::table& root, const std::string& dotted, const toml::node& value) {
  toml::table* t = &root;
  std::stringstream ss(dotted);
  std::vector<std::string> parts;
  for (std::string p; std::getline(ss, p, '.');) parts.push_back(p);
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    toml::node* n = t->get(parts[i]);
    if (!n) {
      t->insert_or_assign(parts[i], toml::table{});
      n = t->get(parts[i]);
    }
    std::string prefix = parts[0];
    for (size_t k = 1; k <= i; ++k) prefix += "." + parts[k];
    if (!n->is_table()) throw InputError(where(c, *n, prefix) + " must be a table to sweep \"" + dotted + "\"");
    t = n->as_table();
  }
  t->insert_or_assign(parts.back(), value);
}

/// Keys a sweep may vary: any key of the cell-level sections (plugin choices, plugin params, budget). Returns the
/// setting the key names, canonically ("scorer.<full plugin id>.<param>"), so two keys naming one setting are found.
std::string check_sweep_key(const Ctx& c, const toml::node& where_node, const std::string& key,
                            const PluginRegistry& reg) {
  auto fail = [&](const std::string& why) { throw InputError(where(c, where_node, "sweep." + key) + ": " + why); };
  // "allocator.plugin." or "scorer..window" would silently name another setting than the one recorded.
  if (key.empty() || key.front() == '.' || key.back() == '.' || key.find("..") != std::string::npos)
    fail("a sweep key has no empty components (no leading, trailing or doubled '.')");
  std::stringstream ss(key);
  std::vector<std::string> parts;
  for (std::string p; std::getline(ss, p, '.');) parts.push_back(p);
  const std::vector<std::string> sections = {"signal", "scorer", "allocator", "budget", "compression"};
  if (parts.size() < 2) fail("a sweep key is a dotted key such as \"allocator.plugin\" or \"budget.fraction\"");
  if (std::find(sections.begin(), sections.end(), parts[0]) == sections.end())
    fail("cannot be swept; sweep keys start with one of: signal, scorer, allocator, budget, compression.decode, "
         "compression.codec, compression.share, compression.joint (did you mean '" + closest_match(parts[0], sections) + "'?)");
  if (parts[0] == "compression") {
    const std::vector<std::string> decode_keys = {"policy", "sinks", "recent", "interval", "target"};
    const std::vector<std::string> codec_keys = {"format", "bits", "group", "symmetric", "residual", "layer_bits",
                                                 "bits_ratio", "token_bits", "token_shares"};
    const std::vector<std::string> share_keys = {"groups", "map", "count"};
    const std::vector<std::string> joint_keys = {"plan", "fractions", "bits", "share", "group", "symmetric"};
    const std::vector<std::string>* keys = parts.size() == 3 && parts[1] == "decode"  ? &decode_keys
                                           : parts.size() == 3 && parts[1] == "codec" ? &codec_keys
                                           : parts.size() == 3 && parts[1] == "share" ? &share_keys
                                           : parts.size() == 3 && parts[1] == "joint" ? &joint_keys
                                                                                      : nullptr;
    if (!keys || std::find(keys->begin(), keys->end(), parts[2]) == keys->end())
      fail("of [compression] only the decode policy, the codec, sharing and the joint plan are swept: "
           "compression.decode.policy, .sinks, .recent, .interval, .target; compression.codec.format, .bits, .group, "
           ".symmetric, .residual, .layer_bits, .bits_ratio, .token_bits, .token_shares; compression.share.groups, "
           ".map, .count; compression.joint.plan, .fractions, .bits, .share, .group, .symmetric");
    return key;
  }
  if (parts[0] == "budget") {
    const std::vector<std::string> keys = {"fraction", "tokens", "bytes_fraction"};
    if (parts.size() != 2 || std::find(keys.begin(), keys.end(), parts[1]) == keys.end())
      fail("unknown budget key; valid: budget.fraction, budget.tokens, budget.bytes_fraction");
    return key;
  }
  const rkv_plugin_kind kind =
      parts[0] == "signal" ? RKV_KIND_SIGNAL : parts[0] == "scorer" ? RKV_KIND_SCORER : RKV_KIND_ALLOCATOR;
  if (parts.size() == 2) {
    if (parts[1] == "heads" && kind == RKV_KIND_ALLOCATOR) return key;
    if (parts[1] == "route" && kind == RKV_KIND_SCORER) return key;  // each value an array of route tables ([]: none)
    if (parts[1] != "plugin") fail("unknown key; did you mean '" + parts[0] + ".plugin'?");
    return key;
  }
  if (parts.size() != 3) fail("plugin params are swept as \"" + parts[0] + ".<plugin>.<param>\"");
  const PluginInfo* info = nullptr;
  try {
    info = &resolve_plugin_or_builtin(reg, parts[1], kind);
  } catch (const InputError& e) {
    fail(e.what());
  }
  std::vector<std::string> names;
  for (auto* s = info->descriptor->params; s && *s; ++s) names.emplace_back((*s)->name);
  if (std::find(names.begin(), names.end(), parts[2]) == names.end()) {
    std::string list;
    for (auto& n : names) list += (list.empty() ? "" : ", ") + n;
    fail("plugin '" + info->id() + "' has no parameter '" + parts[2] + "'" +
         (names.empty() ? "" : "; valid: " + list + "; did you mean '" + closest_match(parts[2], names) + "'?"));
  }
  return parts[0] + "." + info->id() + "." + parts[2];
}

std::string hex16(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

/// Swept values a cell's label names: per plugin id, "param=value" of its swept params; and the other swept settings
/// its plugins and budget do not show, as "key=value". Only keys whose values differ between cells are named.
struct SweptNames {
  std::map<std::string, std::vector<std::string>> plugin_params;  // plugin id -> ["window=16", ...]
  std::vector<std::string> others;                                // ["data.eval.prefix_tokens=512", ...]
};

/// A swept value as a label shows it: strings without quotes, numbers and booleans as TOML writes them.
std::string label_value(const nlohmann::json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

/// The sweep keys the label already shows through the plugin ids, the budget and the decode policy.
bool shown_by_label(const std::string& key) {
  static const std::set<std::string> shown = {"signal.plugin",   "scorer.plugin",        "allocator.plugin",
                                              "allocator.heads", "budget.fraction",      "budget.tokens",
                                              "budget.bytes_fraction",
                                              "compression.decode.policy", "scorer.route"};
  return shown.count(key) > 0;
}

SweptNames swept_names(const Cell& cell, const std::set<std::string>& varying) {
  SweptNames names;
  const CellConfig& cc = cell.config;
  for (const auto& [key, value] : cell.values.items()) {
    if (!varying.count(key) || shown_by_label(key)) continue;
    const auto first_dot = key.find('.'), last_dot = key.rfind('.');
    const std::string kind = key.substr(0, first_dot);
    const std::optional<PluginChoice>* choice = kind == "signal"    ? &cc.signal
                                                : kind == "scorer"  ? &cc.scorer
                                                : kind == "allocator" ? &cc.allocator
                                                                      : nullptr;
    if (choice && first_dot != last_dot) {  // "<kind>.<plugin>.<param>": named inside that plugin's parentheses
      const std::string plugin = key.substr(first_dot + 1, last_dot - first_dot - 1);
      const std::string param = key.substr(last_dot + 1);
      const PluginChoice* own = choice->has_value() ? &**choice : nullptr;
      const PluginChoice* heads = kind == "allocator" && own ? own->heads.get() : nullptr;
      for (const PluginChoice* p : {own, heads}) {
        if (p && (plugin == p->id || plugin == short_id(p->id))) {
          names.plugin_params[p->id].push_back(param + "=" + label_value(value));
          break;
        }
      }
      continue;  // a param of a plugin this cell does not use changes nothing it computes
    }
    if (key.rfind("compression.decode.", 0) == 0) continue;  // DecodeSpec::describe names the params a policy reads
    if (key.rfind("compression.codec.", 0) == 0) continue;   // CodecSpec::label names the params a format reads
    if (key.rfind("compression.share.", 0) == 0) continue;   // ShareSpec::label names the sharing
    if (key.rfind("compression.joint.", 0) == 0) continue;   // JointSpec::label names the plan's grid
    names.others.push_back(key + "=" + label_value(value));
  }
  return names;
}

/// "snapkv" or "snapkv(window=16,kernel=5)".
std::string plugin_label(const PluginChoice& p, const SweptNames& names) {
  std::string s = short_id(p.id);
  const auto it = names.plugin_params.find(p.id);
  if (it == names.plugin_params.end()) return s;
  std::string params;
  for (const auto& kv : it->second) params += (params.empty() ? "" : ",") + kv;
  return s + "(" + params + ")";
}

/// A cell's group in two parts: "<allocator>(<signal>)/<heads> + <scorer>" and the settings after its budget
/// (", decode ...", ", key=value"). Not for the full-cache cell.
std::pair<std::string, std::string> cell_group(const Cell& cell, const std::set<std::string>& varying) {
  const CellConfig& cc = cell.config;
  const SweptNames names = swept_names(cell, varying);
  std::ostringstream methods, settings;
  if (!cc.joint.none()) {  // the plan replaces the allocator, the codec and sharing
    methods << "joint(" << cc.joint.plan << ") + " << plugin_label(*cc.scorer, names);
    settings << ", " << cc.joint.label();
    for (const auto& o : names.others) settings << ", " << o;
    return {methods.str(), settings.str()};
  }
  methods << plugin_label(*cc.allocator, names);
  // The damage signal is the oracle (runner/damage_signal.hpp): its cells are the ceiling, and their label says so;
  // with of = "sharing" it is the sharing damage. The signal is shown where the profile is used: beside the
  // allocator (or the codec's per-layer bits), and in the share chooser's setting.
  std::string signal;
  if (cc.uses_profile && cc.signal) {
    const auto of = cc.signal->params.values().find("of");
    const bool sharing = of != cc.signal->params.values().end() && of->second == ParamValue(std::string("sharing"));
    signal = plugin_label(*cc.signal, names) +
             (is_damage_signal(cc.signal->info) ? (sharing ? ": sharing damage" : ": oracle") : "");
  }
  const bool allocator_profile = (cc.allocator->info->descriptor->flags & RKV_FLAG_NEEDS_PROFILE) != 0;
  if (cc.uses_profile && (allocator_profile || cc.codec.layer_bits == "profile")) methods << "(" << signal << ")";
  if (cc.allocator->heads) methods << "/" << plugin_label(*cc.allocator->heads, names);
  methods << " + " << plugin_label(*cc.scorer, names);
  if (!cc.route.empty()) methods << " + route[" << route_label(cc.route) << "]";
  if (cc.decode.policy != "none") settings << ", decode " << cc.decode.describe();
  if (!cc.codec.none()) settings << ", kv " << cc.codec.label();
  if (cc.share.count > 0)
    settings << ", share " << cc.share.count << " layers by " << signal;
  else if (!cc.share.none())
    settings << ", share " << cc.share.label();
  for (const auto& o : names.others) settings << ", " << o;
  return {methods.str(), settings.str()};
}

std::string budget_label(const CellConfig& cc) {
  std::ostringstream os;
  if (cc.budget_bytes_fraction) os << "kv bytes=" << *cc.budget_bytes_fraction;
  else if (cc.budget_fraction) os << "f=" << *cc.budget_fraction;
  else os << *cc.budget_tokens << " tok";
  return os.str();
}

/// Labels and plot groups of every cell: "<group> @ <budget>", where the group names the allocator (and its signal),
/// the per-head allocator, the scorer, each with the swept params that differ between cells, the decode policy and
/// any other swept setting that differs. Cells that would still share a label (e.g. two values of a param that none
/// of their plugins reads) gain " [key=value, ...]" of the swept values that set them apart, so labels are unique.
void label_cells(std::vector<Cell>& cells, bool rerotate) {
  std::map<std::string, std::set<std::string>> values_of;
  for (const Cell& c : cells)
    for (const auto& [key, value] : c.values.items()) values_of[key].insert(value.dump());
  std::set<std::string> varying;
  for (const auto& [key, values] : values_of)
    if (values.size() > 1) varying.insert(key);
  for (Cell& c : cells) {
    if (c.config.full_cache) continue;
    auto [methods, settings] = cell_group(c, varying);
    if (rerotate) settings += ", rerotated keys";
    c.group = methods + settings;
    c.label = methods + " @ " + budget_label(c.config) + settings;
  }
  std::map<std::string, std::vector<Cell*>> by_label;
  for (Cell& c : cells) by_label[c.label].push_back(&c);
  for (auto& [label, same] : by_label) {
    if (same.size() < 2) continue;
    std::map<std::string, std::set<std::string>> values_here;  // the keys that set these cells apart
    for (const Cell* c : same)
      for (const auto& [key, value] : c->values.items()) values_here[key].insert(value.dump());
    for (Cell* c : same) {
      std::string extra;
      for (const auto& [key, value] : c->values.items())
        if (values_here[key].size() > 1) extra += (extra.empty() ? "" : ", ") + key + "=" + label_value(value);
      c->label += " [" + extra + "]";
      c->group += " [" + extra + "]";
    }
  }
}

std::string effective_key(const CellConfig& cell) {
  if (cell.full_cache) return "full";
  std::ostringstream os;
  auto plugin = [&](const std::optional<PluginChoice>& p) {
    if (p) os << p->id << "{" << p->params.to_string() << "}";
    os << "|";
  };
  plugin(cell.uses_profile ? cell.signal : std::nullopt);
  plugin(cell.scorer);
  if (!cell.route.empty()) os << "route=" << route_key(cell.route) << "|";
  plugin(cell.joint.none() ? cell.allocator : std::nullopt);  // a joint cell's plan replaces the allocator
  if (cell.joint.none() && cell.allocator && cell.allocator->heads) {
    os << "heads=";
    plugin(std::optional<PluginChoice>(*cell.allocator->heads));
  }
  if (cell.budget_bytes_fraction) os << "bytes=" << *cell.budget_bytes_fraction;
  else if (cell.budget_fraction) os << "f=" << *cell.budget_fraction;
  else os << "tokens=" << *cell.budget_tokens;
  os << "|decode=" << cell.decode.describe();
  if (!cell.codec.none()) os << "|codec=" << cell.codec.label();  // absent for none: older effective keys unchanged
  if (!cell.share.none()) os << "|share=" << cell.share.label();  // likewise
  if (!cell.joint.none()) os << "|joint=" << cell.joint.plan << ":" << cell.joint.label();  // likewise
  return os.str();
}

/// The keys of [compression], in run configs and compression configs alike.
const std::vector<std::string> kCompressionKeys = {"query_aware", "rerotate", "decode", "codec", "share", "joint"};
/// The top-level keys of the run schema (DESIGN.md "Config").
const std::vector<std::string> kRunSections = {"plugin_paths", "model",  "data",        "signal", "scorer", "allocator",
                                               "budget",       "compression", "tasks", "sweep",  "output"};

/// budget.layers: model layer indices >= 0, each at most once (the set A), or the string "global" (then
/// `*global_only` is set and the list is empty).
std::vector<int64_t> compressible_layers(const Ctx& c, const toml::table& budget, bool* global_only) {
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

/// The cartesian product of the sweep's lists must have at most `max_cells` cells ([output] max_cells): refused here,
/// before any cell is built, naming [sweep], the count and the limit and how to raise it (issue 19, fault 14).
void check_sweep_size(const Ctx& c, const toml::table& root, const std::vector<std::pair<std::string, toml::array>>& axes,
                      int64_t max_cells) {
  double cells = 1;  // a double: the product of many long lists must not wrap around
  std::string factors;
  for (const auto& [key, values] : axes) {
    cells *= static_cast<double>(values.size());
    factors += (factors.empty() ? "" : " x ") + std::to_string(values.size());
  }
  if (cells <= static_cast<double>(max_cells)) return;
  const toml::node* sw = root.get("sweep");
  std::ostringstream count;
  count.precision(0);
  count << std::fixed << cells;
  throw InputError((sw ? where(c, *sw, "sweep") : c.origin + ": [sweep]") + ": the sweep has " + count.str() +
                   " cells (" + factors + "), more than the limit of " + std::to_string(max_cells) +
                   "; shorten its lists, split it into several configs, or raise the limit with max_cells = N in "
                   "[output] (at most " + std::to_string(kMaxCells) + ")");
}

/// compression.decode.policy = "periodic" re-scores with the cell's scorer while decoding, so the scorer must declare
/// decode-time scoring (rkv_scorer_requirements.decode_scoring). Checked at validate time on a nominal model shape
/// (30 layers, H 8 over H_kv 2, d 64; no model is loaded here): a scorer that refuses that shape is left to the run's
/// own check on the real one.
void check_decode_scoring(const Ctx& c, const Cell& cell, const HostServices& host) {
  const PluginChoice& scorer = *cell.config.scorer;
  ScorerRequirements req;
  try {
    const PluginInstance inst = PluginInstance::create(*scorer.info, scorer.params, host);
    req = query_scorer_requirements(inst, rkv_attention_shape{sizeof(rkv_attention_shape), 30, 8, 2, 64});
  } catch (const InputError&) {
    return;
  }
  if (req.decode_scoring) return;
  const std::string params = scorer.params.to_string();
  throw InputError(c.origin + ": compression.decode.policy = \"periodic\" re-scores with the cell's scorer while "
                   "decoding, and scorer '" + scorer.id + "'" + (params.empty() ? "" : " with " + params) +
                   " does not support decode-time scoring" +
                   (cell.values.empty() ? "" : " (in sweep cell " + cell.values.dump() + ")"));
}

/// `<table>.context_tokens`: a non-empty list of prompt lengths, each in [64, 2^24] (ruler, multi_question).
std::vector<int64_t> context_lengths(const Ctx& c, const toml::table& t, const std::string& table,
                                     const std::vector<int64_t>& fallback) {
  const std::string key = table + ".context_tokens";
  std::vector<int64_t> lengths = get_number_list<int64_t>(c, t, "context_tokens", key, fallback);
  if (lengths.empty()) throw InputError(where(c, *t.get("context_tokens"), key) + " lists no length");
  for (int64_t n : lengths)
    if (n < 64 || n > kMaxTokens)
      throw InputError(where(c, *t.get("context_tokens"), key) + " must be in [64, " + std::to_string(kMaxTokens) +
                       "] (got " + std::to_string(n) + ")");
  return lengths;
}

/// [tasks.ruler]: subtask names (known, each once), context lengths in [64, 2^24], examples, seed, max_new_tokens,
/// and at most kMaxCount prompts in all.
RulerConfig parse_ruler(const Ctx& c, const toml::table& t) {
  check_keys(c, t, "tasks.ruler", {"subtasks", "context_tokens", "examples", "seed", "max_new_tokens"});
  RulerConfig r;
  const std::vector<std::string> known = ruler_subtask_names();
  r.subtasks = t.get("subtasks") ? get_string_list(c, t, "subtasks", "tasks.ruler.subtasks") : known;
  if (r.subtasks.empty()) throw InputError(where(c, *t.get("subtasks"), "tasks.ruler.subtasks") + " lists no subtask");
  for (size_t i = 0; i < r.subtasks.size(); ++i) {
    const std::string& name = r.subtasks[i];
    if (!find_ruler_subtask(name)) {
      std::string all;
      for (const auto& k : known) all += (all.empty() ? "" : ", ") + k;
      throw InputError(where(c, *t.get("subtasks"), "tasks.ruler.subtasks") + ": unknown subtask '" + name +
                       "'; known: " + all + "; did you mean '" + closest_match(name, known) + "'?");
    }
    if (std::find(r.subtasks.begin(), r.subtasks.begin() + static_cast<int64_t>(i), name) !=
        r.subtasks.begin() + static_cast<int64_t>(i))
      throw InputError(where(c, *t.get("subtasks"), "tasks.ruler.subtasks") + " lists '" + name + "' twice");
  }
  r.context_tokens = context_lengths(c, t, "tasks.ruler", r.context_tokens);
  r.examples = get_int(c, t, "examples", "tasks.ruler.examples", r.examples, 1, kMaxCount);
  const double prompts = static_cast<double>(r.subtasks.size()) * static_cast<double>(r.context_tokens.size()) *
                         static_cast<double>(r.examples);
  if (prompts > static_cast<double>(kMaxCount))
    throw InputError(where_table(c, t, "tasks.ruler") + ": subtasks x context_tokens x examples = " +
                     std::to_string(static_cast<int64_t>(prompts)) + " prompts, more than " + std::to_string(kMaxCount) +
                     "; lower tasks.ruler.examples");
  r.seed = static_cast<uint64_t>(get_int(c, t, "seed", "tasks.ruler.seed", 42, 0, INT64_MAX));
  r.max_new_tokens = get_int(c, t, "max_new_tokens", "tasks.ruler.max_new_tokens", 0, 0, kMaxCount);
  return r;
}

/// [tasks.multi_question]: context lengths in [64, 2^24], questions, examples, seed, max_new_tokens, and at most
/// kMaxCount prompts (each context once plus once per question).
MultiQuestionConfig parse_multi_question(const Ctx& c, const toml::table& t) {
  check_keys(c, t, "tasks.multi_question", {"context_tokens", "questions", "examples", "seed", "max_new_tokens"});
  MultiQuestionConfig m;
  m.context_tokens = context_lengths(c, t, "tasks.multi_question", m.context_tokens);
  m.questions = get_int(c, t, "questions", "tasks.multi_question.questions", m.questions, 1, kMaxCount);
  m.examples = get_int(c, t, "examples", "tasks.multi_question.examples", m.examples, 1, kMaxCount);
  const double prompts = static_cast<double>(m.context_tokens.size()) * static_cast<double>(m.examples) *
                         (static_cast<double>(m.questions) + 1.0);
  if (prompts > static_cast<double>(kMaxCount))
    throw InputError(where_table(c, t, "tasks.multi_question") + ": context_tokens x examples x (questions + 1) = " +
                     std::to_string(static_cast<int64_t>(prompts)) + " prompts, more than " + std::to_string(kMaxCount) +
                     "; lower tasks.multi_question.examples or questions");
  m.seed = static_cast<uint64_t>(get_int(c, t, "seed", "tasks.multi_question.seed", 42, 0, INT64_MAX));
  m.max_new_tokens =
      get_int(c, t, "max_new_tokens", "tasks.multi_question.max_new_tokens", m.max_new_tokens, 1, kMaxCount);
  return m;
}

RunPlan build_plan(toml::table root, const std::string& text, const Ctx& c) {
  RunPlan plan;
  plan.config_text = text;
  plan.config_sha256 = sha256_hex(text.data(), text.size());

  check_keys(c, root, "", kRunSections);
  for (const auto& p : get_string_list(c, root, "plugin_paths", "plugin_paths"))
    plan.plugin_paths.push_back(resolve_config_path(p, c.base_dir));
  plan.registry = std::make_shared<PluginRegistry>(PluginRegistry::discover(plan.plugin_paths));

  // [model]
  const toml::table* m = sub_table(c, root, "model", "model");
  if (!m) throw InputError(c.origin + ": a [model] section with path = \"...\" is required");
  check_keys(c, *m, "model", {"path", "backend", "dtype", "threads", "weights"});
  const std::string mp = get_string(c, *m, "path", "model.path", "");
  if (mp.empty()) throw InputError(where_table(c, *m, "model") + " needs path = \"model.gguf or HF folder\"");
  plan.model_path = resolve_config_path(mp, c.base_dir);
  {
    std::string why;
    const PathKind kind = path_kind(plan.model_path, &why);
    if (kind == PathKind::missing)
      throw InputError(where(c, *m->get("path"), "model.path") + ": '" + plan.model_path +
                       "' does not exist (scripts/fetch-assets fetches SmolLM2)");
    if (kind == PathKind::error)
      throw InputError(where(c, *m->get("path"), "model.path") + ": '" + plan.model_path + "' cannot be read: " + why);
    if (kind == PathKind::other)  // a FIFO would block the run in open() until someone writes to it
      throw InputError(where(c, *m->get("path"), "model.path") + ": '" + plan.model_path + "' is " +
                       describe_special_file(plan.model_path) + "; expected a .gguf file or a Hugging Face model folder");
  }
  plan.backend = get_string(c, *m, "backend", "model.backend", "cpu");
  if (plan.backend != "cpu" && plan.backend != "cuda" && plan.backend != "auto")
    throw InputError(where(c, *m->get("backend"), "model.backend") + " must be \"cpu\", \"cuda\" or \"auto\"");
  plan.dtype = get_string(c, *m, "dtype", "model.dtype", "f32");
  if (plan.dtype != "f32" && plan.dtype != "bf16")
    throw InputError(where(c, *m->get("dtype"), "model.dtype") + " must be \"f32\" or \"bf16\" (bf16: cuda only)");
  plan.threads = get_int(c, *m, "threads", "model.threads", 0, 0, kMaxThreads);
  const std::string weights = get_string(c, *m, "weights", "model.weights", "quantized");
  if (weights != "quantized" && weights != "f32")
    throw InputError(where(c, *m->get("weights"), "model.weights") +
                     " must be \"quantized\" (GGUF blocks, the fast CPU path) or \"f32\" (dequantized at load, exact)");
  plan.weights = weights == "f32" ? WeightStorage::f32 : WeightStorage::quantized;

  // [data]
  const toml::table* d = sub_table(c, root, "data", "data");
  if (!d) throw InputError(c.origin + ": a [data] section with [data.calibration] and [data.eval] is required");
  check_keys(c, *d, "data", {"calibration", "eval"});
  const toml::table* cal = sub_table(c, *d, "calibration", "data.calibration");
  const toml::table* ev = sub_table(c, *d, "eval", "data.eval");
  if (!cal || !ev) throw InputError(c.origin + ": both [data.calibration] and [data.eval] are required");
  plan.calibration = parse_data(c, *cal, "data.calibration", true);
  plan.eval = parse_data(c, *ev, "data.eval", false);
  // Disjoint by content, not by name: a symlink or a copy of a calibration text is the same text.
  std::map<std::string, std::string> calibration_by_sha256;
  for (const auto& f : plan.calibration.files) calibration_by_sha256.emplace(sha256_file(f), f);
  for (const auto& f : plan.eval.files) {
    const auto same = calibration_by_sha256.find(sha256_file(f));
    if (same == calibration_by_sha256.end()) continue;
    throw InputError(where_table(c, *ev, "data.eval") + ": file '" + f + "'" +
                     (same->second == f ? std::string(" is also a calibration file")
                                        : " has the same content as calibration file '" + same->second + "'") +
                     "; calibration and evaluation sets must be disjoint");
  }

  // [compression], [tasks], [output]
  if (const toml::table* cp = sub_table(c, root, "compression", "compression")) {
    check_keys(c, *cp, "compression", kCompressionKeys);
    plan.query_aware = get_bool(c, *cp, "query_aware", "compression.query_aware", false);
    plan.rerotate = get_bool(c, *cp, "rerotate", "compression.rerotate", false);
  }
  if (const toml::table* t = sub_table(c, root, "tasks", "tasks")) {
    check_keys(c, *t, "tasks", {"run", "lm_fidelity", "needle", "ruler", "multi_question", "longbench"});
    if (t->get("run")) plan.tasks = get_string_list(c, *t, "run", "tasks.run");
    const std::vector<std::string> known = {"lm_fidelity", "needle", "ruler", "multi_question", "longbench"};
    for (const auto& name : plan.tasks)
      if (std::find(known.begin(), known.end(), name) == known.end())
        throw InputError(where(c, *t->get("run"), "tasks.run") + ": unknown task '" + name +
                         "'; known: lm_fidelity, needle, ruler, multi_question, longbench; did you mean '" + closest_match(name, known) + "'?");
    if (plan.tasks.empty()) throw InputError(where(c, *t->get("run"), "tasks.run") + " lists no task");
    if (const toml::table* lf = sub_table(c, *t, "lm_fidelity", "tasks.lm_fidelity")) {
      check_keys(c, *lf, "tasks.lm_fidelity", {"continuation_tokens"});
      plan.continuation_tokens = get_int(c, *lf, "continuation_tokens", "tasks.lm_fidelity.continuation_tokens", 64, 1,
                                         kMaxTokens);
    }
    if (const toml::table* nd = sub_table(c, *t, "needle", "tasks.needle")) {
      check_keys(c, *nd, "tasks.needle", {"context_tokens", "depths", "trials", "seed"});
      plan.needle.context_tokens =
          get_number_list<int64_t>(c, *nd, "context_tokens", "tasks.needle.context_tokens", plan.needle.context_tokens);
      plan.needle.depths = get_number_list<double>(c, *nd, "depths", "tasks.needle.depths", plan.needle.depths);
      for (int64_t n : plan.needle.context_tokens)
        if (n < 64 || n > kMaxTokens)
          throw InputError(where(c, *nd->get("context_tokens"), "tasks.needle.context_tokens") + " must be in [64, " +
                           std::to_string(kMaxTokens) + "] (got " + std::to_string(n) + ")");
      for (double x : plan.needle.depths)
        if (!(x >= 0.0 && x <= 1.0)) throw InputError(where(c, *nd->get("depths"), "tasks.needle.depths") + " must be in [0, 1]");
      plan.needle.trials = get_int(c, *nd, "trials", "tasks.needle.trials", 2, 1, kMaxCount);
      const double prompts = static_cast<double>(plan.needle.context_tokens.size()) *
                             static_cast<double>(plan.needle.depths.size()) * static_cast<double>(plan.needle.trials);
      if (prompts > static_cast<double>(kMaxCount))
        throw InputError(where_table(c, *nd, "tasks.needle") + ": context_tokens x depths x trials = " +
                         std::to_string(static_cast<int64_t>(prompts)) + " prompts, more than " +
                         std::to_string(kMaxCount) + "; lower tasks.needle.trials");
      plan.needle.seed = static_cast<uint64_t>(get_int(c, *nd, "seed", "tasks.needle.seed", 7, 0, INT64_MAX));
    }
    if (const toml::table* rt = sub_table(c, *t, "ruler", "tasks.ruler")) plan.ruler = parse_ruler(c, *rt);
    if (const toml::table* mq = sub_table(c, *t, "multi_question", "tasks.multi_question"))
      plan.multi_question = parse_multi_question(c, *mq);
    if (const toml::table* lb = sub_table(c, *t, "longbench", "tasks.longbench")) {
      check_keys(c, *lb, "tasks.longbench", {"files", "max_context_tokens", "datasets"});
      for (const auto& f : get_string_list(c, *lb, "files", "tasks.longbench.files")) {
        const std::string p = resolve_config_path(f, c.base_dir);
        if (const std::string problem = input_file_problem(p); !problem.empty())
          throw InputError(where(c, *lb->get("files"), "tasks.longbench.files") + ": file '" + p + "' " + problem);
        plan.longbench.files.push_back(p);
      }
      plan.longbench.max_context_tokens = get_int(c, *lb, "max_context_tokens", "tasks.longbench.max_context_tokens", 0, 0,
                                                      kMaxTokens);
      if (const toml::table* ds = sub_table(c, *lb, "datasets", "tasks.longbench.datasets")) {
        for (const auto& [k, v] : *ds) {
          const std::string name(k.str()), full = "tasks.longbench.datasets." + name;
          if (!v.is_table()) throw InputError(where(c, v, full) + " must be a table");
          check_keys(c, *v.as_table(), full, {"prompt", "max_new_tokens"});
          LongBenchDatasetConfig lbd;
          lbd.prompt = get_string(c, *v.as_table(), "prompt", full + ".prompt", "");
          lbd.max_new_tokens = get_int(c, *v.as_table(), "max_new_tokens", full + ".max_new_tokens", 0, 0, kMaxCount);
          plan.longbench.datasets[name] = lbd;
        }
      }
    }
    if (std::find(plan.tasks.begin(), plan.tasks.end(), "longbench") != plan.tasks.end() && plan.longbench.files.empty())
      throw InputError(c.origin + ": task longbench needs [tasks.longbench] files = [\"...jsonl\"]");
  }
  if (const toml::table* o = sub_table(c, root, "output", "output")) {
    check_keys(c, *o, "output", {"dir", "bootstrap_resamples", "max_cells"});
    const std::string dir = get_string(c, *o, "dir", "output.dir", "");
    if (!dir.empty()) plan.output_dir = resolve_config_path(dir, c.base_dir);
    plan.bootstrap_resamples = get_int(c, *o, "bootstrap_resamples", "output.bootstrap_resamples", 2000, 100, kMaxCount);
    // At most 100,000: validate holds every cell's config (about 3 KB each; a million took 3.4 GB and two minutes).
    plan.max_cells = get_int(c, *o, "max_cells", "output.max_cells", plan.max_cells, 1, kMaxCells);
  }
  if (const toml::table* b = sub_table(c, root, "budget", "budget")) {
    plan.compressible_layers = compressible_layers(c, *b, &plan.compress_global_only);
  }

  // [sweep]: the cartesian product of every listed key. The values are copied out and [sweep] is removed from the
  // root, which each cell then edits in place (copies of toml++ nodes lose their source lines, which errors name).
  std::vector<std::pair<std::string, toml::array>> axes;
  if (const toml::table* sw = sub_table(c, root, "sweep", "sweep")) {
    std::map<std::string, std::string> key_of_setting;  // canonical setting -> the sweep key that names it
    for (const auto& [k, v] : *sw) {
      const std::string key(k.str());
      const std::string setting = check_sweep_key(c, v, key, *plan.registry);
      if (const auto [it, fresh] = key_of_setting.emplace(setting, key); !fresh)
        throw InputError(where(c, v, "sweep." + key) + ": names the same setting as \"" + it->second +
                         "\" (" + setting + "); sweep each setting once");
      if (!v.is_array() || v.as_array()->empty())
        throw InputError(where(c, v, "sweep." + key) + " must be a non-empty array of values");
      axes.emplace_back(key, *v.as_array());
    }
  }
  check_sweep_size(c, root, axes, plan.max_cells);
  {
    std::ostringstream all;
    all << root;
    const std::string all_text = all.str();
    plan.run_id = sha256_hex(all_text.data(), all_text.size()).substr(0, 16);
    root.erase("sweep");
    std::ostringstream os;
    os << root;
    const std::string base_text = os.str();
    plan.base_sha256 = sha256_hex(base_text.data(), base_text.size());
  }

  // The full-cache reference first.
  Cell full;
  full.values = nlohmann::json::object();
  full.config.full_cache = true;
  // Its id depends on the non-swept config: the full cache of another model, data or task set is another cell (two
  // configs writing into one folder never share a reference cell file).
  full.id = hex16(fnv1a64("full-cache/" + plan.base_sha256));
  full.label = full.group = "full cache";
  full.effective_key = "full";
  plan.cells.push_back(full);

  std::vector<size_t> index(axes.size(), 0);
  std::set<std::string> seen_ids;
  while (true) {
    nlohmann::json values = nlohmann::json::object();
    for (size_t a = 0; a < axes.size(); ++a) {
      const toml::node& v = *axes[a].second.get(index[a]);
      set_dotted(c, root, axes[a].first, v);
      values[axes[a].first] = to_json(v);
    }
    Cell cell;
    try {
      cell.config = parse_cell(c, root, *plan.registry);
    } catch (const InputError& e) {
      throw InputError(std::string(e.what()) + (axes.empty() ? "" : " (in sweep cell " + values.dump() + ")"));
    }
    cell.values = values;
    // A route is part of the cell even when it is not swept: its key joins the hash (ids without a route unchanged).
    cell.id = hex16(fnv1a64(values.dump() + (cell.config.route.empty() ? "" : "|route=" + route_key(cell.config.route))));
    cell.effective_key = effective_key(cell.config);
    // A float32 cache (codec format "none") ignores every other codec key: of a sweep over them it keeps one cell,
    // the one at their first values, instead of repeating the float32 cell under each.
    // Likewise a joint cell ignores every codec key (its plan picks the bits), and a cell without a joint plan every
    // compression.joint key but the plan.
    bool ignored_codec_variant = false;
    for (size_t a = 0; a < axes.size(); ++a) {
      if (index[a] == 0) continue;
      const std::string& key = axes[a].first;
      const bool codec_key = key.rfind("compression.codec.", 0) == 0, joint_key = key.rfind("compression.joint.", 0) == 0;
      const bool joint = !cell.config.joint.none();
      ignored_codec_variant = ignored_codec_variant ||
                              (codec_key && (joint || (cell.config.codec.none() && key != "compression.codec.format"))) ||
                              (joint_key && !joint && key != "compression.joint.plan");
    }
    if (!ignored_codec_variant && seen_ids.insert(cell.id).second) plan.cells.push_back(cell);
    size_t a = 0;
    for (; a < axes.size(); ++a) {
      if (++index[a] < axes[a].second.size()) break;
      index[a] = 0;
    }
    if (a == axes.size()) break;
  }
  label_cells(plan.cells, plan.rerotate);  // [compression] rerotate: a run-level setting, named per cell
  // Create every distinct plugin once, so checks a plugin makes at creation (e.g. snapkv's odd kernel) fail here,
  // in `validate`, rather than after a run has loaded the model.
  HostServices host;
  std::set<std::string> created;
  for (const Cell& cell : plan.cells) {
    std::vector<const std::optional<PluginChoice>*> choices = {&cell.config.signal, &cell.config.scorer,
                                                                &cell.config.allocator};
    std::vector<std::optional<PluginChoice>> routed;
    for (const RouteEntry& e : cell.config.route) routed.emplace_back(e.scorer);
    for (const auto& r : routed) choices.push_back(&r);
    for (const auto* choice : choices) {
      if (!*choice || !(*choice)->info->library) continue;  // a host builtin (the damage signal) has no instance
      const std::string key = (*choice)->id + "{" + (*choice)->params.to_string() + "}";
      if (!created.insert(key).second) continue;
      try {
        PluginInstance::create(*(*choice)->info, (*choice)->params, host);
      } catch (const InputError& e) {
        throw InputError(c.origin + ": " + e.what() + (cell.values.empty() ? "" : " (in sweep cell " + cell.values.dump() + ")"));
      }
    }
    if (cell.config.decode.policy == "periodic") check_decode_scoring(c, cell, host);
  }
  return plan;
}

}  // namespace

RunPlan load_run_plan_from_string(const std::string& text, const std::string& origin, const std::string& base_dir) {
  toml::table root;
  try {
    root = toml::parse(text, origin);
  } catch (const toml::parse_error& e) {
    std::ostringstream os;
    os << origin << ":" << e.source().begin.line << ":" << e.source().begin.column << ": TOML syntax error: "
       << e.description();
    throw InputError(os.str());
  }
  Ctx c{origin, base_dir};
  RunPlan plan = build_plan(std::move(root), text, c);
  plan.config_path = origin;
  return plan;
}

CompressionConfig load_compression_config(const std::string& path) {
  // Only a regular file of at most kMaxConfigBytes: a FIFO, /dev/zero or a folder is refused, naming the path.
  const std::string text = read_regular_file(path, "compression config", kMaxConfigBytes);
  toml::table root;
  try {
    root = toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    std::ostringstream os;
    os << path << ":" << e.source().begin.line << ":" << e.source().begin.column << ": TOML syntax error: "
       << e.description();
    throw InputError(os.str());
  }
  const Ctx c{path, fs::absolute(fs::path(path)).parent_path().string()};
  check_keys(c, root, "", kRunSections);  // a run config is also a compression config; a misspelt section is not
  CompressionConfig out;
  std::vector<std::string> paths;
  for (const auto& p : get_string_list(c, root, "plugin_paths", "plugin_paths"))
    paths.push_back(resolve_config_path(p, c.base_dir));
  out.registry = std::make_shared<PluginRegistry>(PluginRegistry::discover(paths));
  out.cell = parse_cell(c, root, *out.registry, /*require_signal=*/false);
  if (const toml::table* b = sub_table(c, root, "budget", "budget")) out.compressible_layers = compressible_layers(c, *b, &out.compress_global_only);
  if (const toml::table* cp = sub_table(c, root, "compression", "compression")) {
    check_keys(c, *cp, "compression", kCompressionKeys);  // a misspelt rerotate is an error, not ignored
    out.rerotate = get_bool(c, *cp, "rerotate", "compression.rerotate", false);
  }
  return out;
}

RunPlan load_run_plan(const std::string& path) {
  // Only a regular file of at most kMaxConfigBytes: `ripplekv validate /dev/zero` (or a FIFO, or a folder) is
  // refused at once, naming the path, instead of reading forever.
  const std::string text = read_regular_file(path, "config", kMaxConfigBytes);
  const std::string base = fs::absolute(fs::path(path)).parent_path().string();
  return load_run_plan_from_string(text, path, base);
}

}  // namespace rkv
