// Greedy generation on a compressed prompt cache (see compressed_generate.hpp).
#include "runner/compressed_generate.hpp"

#include <algorithm>
#include <map>
#include <memory>
#include <optional>

#include "cache/budget.hpp"
#include "core/errors.hpp"
#include "runner/compression.hpp"
#include "runner/config.hpp"
#include "runner/cache_codec.hpp"
#include "runner/cache_share.hpp"
#include "runner/decode_policy.hpp"
#include "runner/sliding_window.hpp"
#include "runner/profile_file.hpp"
#include "runner/scorer_route.hpp"

namespace rkv {

namespace {

/// s_l for every layer of `layers`, read from `profile_path` (checked against the model's layer count).
std::vector<double> profile_of_layers(const std::string& profile_path, const std::string& allocator_id,
                                      const std::vector<int64_t>& layers, int64_t n_layers) {
  if (profile_path.empty())
    throw InputError("allocator '" + allocator_id + "' needs a sensitivity profile: give --profile FILE "
                     "(profile_path in the C API), a profile.json of `ripplekv profile` or a run");
  const ProfileFile pf = read_profile_file(profile_path);
  if (static_cast<int64_t>(pf.s.size()) != n_layers)
    throw InputError(profile_path + ": the profile has " + std::to_string(pf.s.size()) + " layers, the model " +
                     std::to_string(n_layers));
  std::vector<double> profile;
  for (int64_t l : layers) profile.push_back(pf.s[static_cast<size_t>(l)]);
  return profile;
}

}  // namespace

CompressedGeneration generate_compressed(Backend& backend, const Tokenizer& tok,
                                         const std::vector<int32_t>& prompt_ids, const std::string& config_path,
                                         const std::string& profile_path, int64_t max_new_tokens) {
  if (prompt_ids.empty()) throw InputError("the prompt encodes to no tokens");
  if (max_new_tokens < 0) throw InputError("max_new_tokens must be >= 0, got " + std::to_string(max_new_tokens));
  const CompressionConfig cfg = load_compression_config(config_path);
  const CellConfig& cc = cfg.cell;
  const ModelConfig& mc = backend.model().config;
  const std::vector<int64_t> layers =
      resolve_compressible_layers(cfg.compressible_layers, cfg.compress_global_only, mc, config_path);
  check_sliding_window_support(mc, cfg.rerotate, cc.decode.policy, config_path);
  check_codec_support(mc, cc.codec, config_path);
  check_share_support(mc, cc.share, config_path);
  if (cc.share.count > 0)
    throw InputError(config_path + ": compression.share.count is a `ripplekv run` setting (its chooser needs the run's "
                     "sensitivity profile); use groups or map with generate --compress");
  if (!cc.joint.none())
    throw InputError(config_path + ": [compression.joint] is a `ripplekv run` setting (its plan needs the damage of "
                     "every option measured on the run's calibration split); remove it for generate --compress");
  if (cc.codec.layer_bits == "profile")
    throw InputError(config_path + ": compression.codec.layer_bits = \"profile\" is a `ripplekv run` setting (it "
                     "needs the run's sensitivity profile); use layer_bits = \"uniform\" with generate --compress");
  const bool needs_profile = (cc.allocator->info->descriptor->flags & RKV_FLAG_NEEDS_PROFILE) != 0;
  const std::vector<double> profile =
      needs_profile ? profile_of_layers(profile_path, cc.allocator->id, layers, mc.n_layers) : std::vector<double>{};

  HostServices host;
  const PluginInstance scorer_inst = PluginInstance::create(*cc.scorer->info, cc.scorer->params, host);
  const PluginInstance alloc_inst = PluginInstance::create(*cc.allocator->info, cc.allocator->params, host);
  std::optional<PluginInstance> heads_inst;
  if (cc.allocator->heads)
    heads_inst.emplace(PluginInstance::create(*cc.allocator->heads->info, cc.allocator->heads->params, host));
  ScorerUse scorer;
  scorer.instance = &scorer_inst;
  scorer.requirements = query_scorer_requirements(
      scorer_inst, rkv_attention_shape{sizeof(rkv_attention_shape), mc.n_layers, mc.n_heads, mc.n_kv_heads, mc.head_dim});
  scorer.key = cc.scorer->id + "{" + cc.scorer->params.to_string() + "}";
  // [[scorer.route]]: one instance per entry (runner/scorer_route.hpp); the prefill computes what every scorer needs.
  check_route_layers(cc.route, mc.n_layers, config_path);
  std::vector<std::unique_ptr<PluginInstance>> route_insts;
  std::vector<ScorerUse> route_uses(cc.route.size());  // sized once: LayerScorers points into it
  std::map<int64_t, const ScorerUse*> routed;
  std::vector<const ScorerUse*> all_scorers = {&scorer};
  for (size_t i = 0; i < cc.route.size(); ++i) {
    const PluginChoice& choice = cc.route[i].scorer;
    route_insts.push_back(std::make_unique<PluginInstance>(PluginInstance::create(*choice.info, choice.params, host)));
    route_uses[i].instance = route_insts.back().get();
    route_uses[i].requirements = query_scorer_requirements(
        *route_insts.back(), rkv_attention_shape{sizeof(rkv_attention_shape), mc.n_layers, mc.n_heads, mc.n_kv_heads,
                                                 mc.head_dim});
    route_uses[i].key = choice.id + "{" + choice.params.to_string() + "}";
    all_scorers.push_back(&route_uses[i]);
    for (int64_t l : cc.route[i].layers) routed[l] = &route_uses[i];
  }
  const LayerScorers layer_scorers(scorer, routed);

  // Prefill once, computing the scorers' statistics on the way.
  const int64_t T = static_cast<int64_t>(prompt_ids.size());
  const PrefilledPrompt prompt = prefill_prompt(
      backend, prompt_ids, prefill_needs(all_scorers, decode_needs_prompt_cumulative(cc.decode, scorer.requirements)));

  // Allocation -> per-layer scoring, top-k and compaction.
  // Shared layers ([compression.share]) hold no cache: the budget over `layers` goes to the layers that keep theirs.
  const SharePlan shared = plan_sharing(
      cc.share, mc, layers,
      cell_budget_total(token_fraction(cc, mc.head_dim, T), cc.budget_tokens, mc.layer_spans(layers, T)), T, {});
  std::vector<double> profile_kept;
  for (size_t i = 0; i < layers.size() && !profile.empty(); ++i)
    if (shared.sources[static_cast<size_t>(layers[i])] == layers[i]) profile_kept.push_back(profile[i]);
  ScoreMemo memo;
  const CellBudgets alloc = allocate_cell(backend, prompt, layer_scorers, memo, alloc_inst,
                                          heads_inst ? &*heads_inst : nullptr, shared.layers, profile_kept,
                                          shared.budget_total);
  CompressedPrompt comp = compress_prompt(backend, prompt, layer_scorers, shared.layers, alloc.layers, memo,
                                          alloc.heads.empty() ? nullptr : &alloc.heads, cfg.rerotate);
  share_compressed(backend, comp, shared.sources);
  encode_compressed(backend, comp, cc.codec, {}, token_classes_of(backend, prompt, comp, layer_scorers, memo, cc.codec));

  // Greedy decode on the compacted cache, under the config's decode policy, from T or (rerotate) the cache length.
  const DecodePolicy policy(cc.decode, comp.budgets, comp.head_budgets, &scorer);
  const std::string frozen = policy.frozen_heads_warning(mc.n_kv_heads);
  const std::unique_ptr<DecodeSession> decode =
      policy.begin(backend, *comp.cache, prompt_cumulative_attention(prompt), &comp.prompt_positions);
  const GreedyResult r = greedy_decode(backend, prompt.last_logits, comp.next_position, *comp.cache, max_new_tokens,
                                       tok.end_of_generation_ids(), decode.get());

  CompressedGeneration g;
  g.tokens = r.tokens;
  g.scorer = cc.scorer->id + (cc.route.empty() ? "" : " + route[" + route_label(cc.route) + "]");
  g.allocator = cc.allocator->id;
  if (cc.allocator->heads) g.heads = cc.allocator->heads->id;
  g.decode = cc.decode.describe();
  g.head_budgets = comp.head_budgets;
  g.prompt_tokens = T;
  g.budget_total = shared.budget_total;
  g.budgets = comp.budgets;
  g.bytes_full = comp.bytes_full;
  g.bytes_kept = comp.bytes_kept;
  g.warnings = alloc.warnings;
  if (!shared.warning.empty()) g.warnings.push_back(shared.warning);
  g.warnings.insert(g.warnings.end(), comp.warnings.begin(), comp.warnings.end());
  if (!frozen.empty()) g.warnings.push_back(frozen);
  g.decode_tokens_per_second = r.tokens_per_second;
  g.bytes_end = comp.cache->bytes_in_use();
  return g;
}

}  // namespace rkv
