#include "runner/plan/cell_config.hpp"

#include <sstream>

#include "core/format.hpp"
#include "plugin/allocator_call.hpp"
#include "plugin/instance.hpp"
#include "runner/plan/compression_sections.hpp"
#include "runner/plan/damage_signal_spec.hpp"
#include "runner/plan/scorer_route.hpp"

namespace rkv {

namespace {

/// [allocator]: `plugin` must serve rkv.allocator/1 (layer budgets), or rkv.allocator/2 alone when there is no
/// `heads`; `heads` must serve rkv.allocator/2 (per-head budgets). Checked on an instance of each (cheap: the
/// allocators hold no state), so that `validate` catches what would otherwise fail in the middle of a run.
void check_allocator_interfaces(const TomlContext& c, const toml::table& t, const PluginChoice& choice) {
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

/// A joint cell (runner/plan/joint_spec.hpp) decides b_l, bits and sharing itself under budget.bytes_fraction: it needs
/// that budget, no decode policy, no [compression.share] and no route; the allocator and [compression.codec] do not
/// apply (so a sweep crossing them with compression.joint.plan computes the joint cell once), nor does the signal.
void check_joint_cell(const TomlContext& c, CellConfig& cell) {
  const std::string what = c.origin + ": [compression.joint] plan = \"" + cell.joint.plan + "\"";
  if (!cell.budget_bytes_fraction)
    throw InputError(what + " splits a byte budget: set [budget] bytes_fraction = x (not fraction or tokens)");
  if (cell.decode.traits().evicts)
    throw InputError(what + " with compression.decode.policy = \"" + cell.decode.policy +
                     "\": the plan packs and shares layers, which decode policies cannot evict from; use policy \"none\"");
  if (!cell.share.none())
    throw InputError(what + " with [compression.share] " + cell.share.label() +
                     ": the joint plan chooses the shared layers itself (set compression.joint.share = true)");
  if (!cell.route.empty())
    throw InputError(what + " with a scorer.route: the plan's damages are measured with the one [scorer]");
  cell.codec = CodecSpec{};  // the plan picks each layer's bits
  cell.uses_profile = false;  // its damages are its own profiles (runner/compress/joint.hpp), not the [signal]'s
}

/// [budget] of a cell: exactly one of fraction (in (0, 1]), tokens (in [1, 2^24]) or bytes_fraction (in (0, 1]); its
/// other keys are checked here, budget.layers is a run setting (compressible_layers).
void read_budget_section(const TomlContext& c, const toml::table& root, CellConfig& cell) {
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
      throw InputError(where(c, *bf, "budget.bytes_fraction") + " must be in (0, 1] (got " + fmt(v, 6) + ")");
    cell.budget_bytes_fraction = v;
  } else if (f) {
    const double v = get_float(c, *f, "budget.fraction");
    if (!(v > 0.0 && v <= 1.0))
      throw InputError(where(c, *f, "budget.fraction") + " must be in (0, 1] (got " + fmt(v, 6) + ")");
    cell.budget_fraction = v;
  } else {
    cell.budget_tokens = get_int(c, *b, "tokens", "budget.tokens", 0, 1, kMaxTokens);
  }
}

}  // namespace

/// [signal] / [scorer] / [allocator]: resolves `plugin`, validates the params in [kind.<short id>].
std::optional<PluginChoice> parse_plugin_section(const TomlContext& c, const toml::table& root, const std::string& kind_name,
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
    if (key == "route" && kind == RKV_KIND_SCORER) continue;  // [[scorer.route]]: parse_cell (runner/plan/scorer_route.hpp)
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
      user.push_back(UserParam{pkey, to_param_value(c.origin, pv, full + "." + pkey), false, origin.str()});
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

CellConfig parse_cell(const TomlContext& c, const toml::table& root, const PluginRegistry& reg, bool require_signal) {
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

  read_budget_section(c, root, cell);
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
  cell.per_prompt_signal =
      cell.uses_profile && cell.signal && (cell.signal->info->descriptor->flags & RKV_FLAG_PER_PROMPT) != 0;
  // A joint cell's own errors first: its plan replaces the codec and sharing the checks below are about.
  cell.joint = parse_joint_section(c, root);
  if (!cell.joint.none()) check_joint_cell(c, cell);
  if (!cell.share.none() && cell.decode.traits().evicts)
    throw InputError(c.origin + ": [compression.share] " + cell.share.label() + " with compression.decode.policy = \"" +
                     cell.decode.policy + "\": decode policies evict per layer and a shared layer holds no entries; "
                     "use policy \"none\" with sharing");
  if (!cell.codec.none() && cell.decode.traits().evicts)
    throw InputError(c.origin + ": [compression.codec] " + cell.codec.label() + " with compression.decode.policy = \"" +
                     cell.decode.policy + "\": a decode policy evicts from a packed cache, which is not supported; "
                     "use policy \"none\" with a codec");
  if (!cell.route.empty() && cell.decode.traits().rescores)
    throw InputError(c.origin + ": 'scorer.route' with compression.decode.policy = \"periodic\": the periodic policy "
                     "re-scores every layer with the one [scorer] while decoding; use a route with another policy");
  return cell;
}

}  // namespace rkv
