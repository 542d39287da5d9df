#include "runner/compress/budgets.hpp"

#include <algorithm>

#include "cache/budget.hpp"
#include "cache/layer_bits.hpp"
#include "cache/selection.hpp"
#include "cache/token_bits.hpp"
#include "core/errors.hpp"

namespace rkv {

std::vector<int64_t> resolve_compressible_layers(const std::vector<int64_t>& listed, bool global_only,
                                                 const ModelConfig& mc, const std::string& config_path) {
  std::vector<int64_t> layers = listed;
  if (layers.empty())
    for (int64_t l = 0; l < mc.n_layers; ++l)
      if (!global_only || !mc.is_sliding(l)) layers.push_back(l);
  if (global_only && layers.empty())
    throw InputError(config_path + ": budget.layers = \"global\", but every layer of the model has a sliding window");
  for (int64_t l : layers)
    if (l < 0 || l >= mc.n_layers)
      throw InputError(config_path + ": budget.layers names layer " + std::to_string(l) + " but the model has " +
                       std::to_string(mc.n_layers) + " layers");
  return layers;
}

int64_t cell_budget_total(const std::optional<double>& fraction, const std::optional<int64_t>& tokens,
                          const std::vector<int64_t>& spans) {
  return fraction ? budget_total_from_fraction(*fraction, spans) : budget_total_from_tokens(tokens.value_or(0), spans);
}

std::optional<double> token_fraction(const CellConfig& cell, int64_t head_dim, int64_t prefix_tokens) {
  if (!cell.budget_bytes_fraction) return cell.budget_fraction;
  const double x = *cell.budget_bytes_fraction, T = static_cast<double>(std::max<int64_t>(prefix_tokens, 1));
  if (cell.codec.none()) return x;
  const double e_f32 = codec_entry_bytes(CodecSpec{}, head_dim), e = mixed_entry_bytes(cell.codec, head_dim);
  const double R = static_cast<double>(cell.codec.residual + codec_key_quantum(cell.codec) - 1);
  const double bytes = x * T * e_f32;  // per KV head and layer
  const double b = bytes <= R * e_f32 ? x * T : R + (bytes - R * e_f32) / e;
  return std::min(1.0, b / T);
}

int64_t cell_budget_total(const CellConfig& cell, const ModelConfig& config, const std::vector<int64_t>& layers_A,
                          int64_t T) {
  return cell_budget_total(token_fraction(cell, config.head_dim, T), cell.budget_tokens, config.layer_spans(layers_A, T));
}

CellBudgets allocate_cell(Backend& backend, const PrefilledPrompt& prompt, const LayerScorers& scorers, ScoreMemo& memo,
                          const PluginInstance& layer_alloc, const PluginInstance* head_alloc,
                          const std::vector<int64_t>& layers, const std::vector<double>& profile, int64_t B) {
  const int64_t T = static_cast<int64_t>(prompt.tokens.size()), A = static_cast<int64_t>(layers.size());
  const int64_t protected_count = scorers.protected_count(layers, T);
  const std::vector<int64_t> spans = backend.model().config.layer_spans(layers, T);
  CellBudgets out;
  const PluginInstance* per_head = head_alloc;
  if (serves_layer_budgets(layer_alloc)) {
    const Allocation a = run_allocator(layer_alloc, profile, B, T, A, protected_count, spans);
    out.layers = a.budgets;
    out.warnings = a.warnings;
  } else if (serves_head_budgets(layer_alloc) && !head_alloc) {
    per_head = &layer_alloc;  // a per-head allocator alone splits B over layers and heads
  } else {
    throw InputError("allocator '" + layer_alloc.id() + "' does not serve " RKV_INTERFACE_ALLOCATOR_V1 +
                     std::string(serves_head_budgets(layer_alloc) ? " (it is a per-head allocator: give it as "
                                                                    "allocator.heads after a layer allocator, or alone)"
                                                                  : ""));
  }
  if (!per_head) return out;
  if (!serves_head_budgets(*per_head))
    throw InputError("allocator.heads: '" + per_head->id() + "' does not serve " RKV_INTERFACE_ALLOCATOR_V2 +
                     " (per-head budgets)");
  if (!layers.empty() && !scorers.same_protected_spec(layers))
    throw InputError("per-head allocator '" + per_head->id() + "' with a scorer.route whose scorers protect different "
                     "positions (sinks, recent window): it takes one protected mask for every layer");
  const ScorerUse& scorer = scorers.at(layers.empty() ? 0 : layers.front());  // the protected mask's spec
  const int64_t H = backend.model().config.n_kv_heads;
  HeadAllocationInputs in;
  if (per_head->info().descriptor->flags & RKV_FLAG_NEEDS_PROFILE) in.profile = profile;
  std::vector<float> scores;
  if (per_head->info().descriptor->flags & RKV_FLAG_NEEDS_SCORES) {
    scores.reserve(static_cast<size_t>(A * H * T));
    for (size_t a = 0; a < layers.size(); ++a) {
      const int64_t l = layers[a];
      // A scorer budgeted for allocators (RKV_BUDGET_ALLOCATION) gets its layer's budget before the split on every
      // head: b_l from the layer allocator, else the uniform share floor(B / |A|), capped at the layer's span.
      const ScorerUse& su = scorers.at(l);
      const int64_t share = std::min(out.layers.empty() ? B / std::max<int64_t>(A, 1) : out.layers[a], spans[a]);
      const std::vector<int64_t> shares(static_cast<size_t>(H), share);
      const ScoreResult& r = memo.scores(backend, prompt, su, l, su.requirements.budgeted_for_allocators() ? &shares : nullptr);
      scores.insert(scores.end(), r.scores.begin(), r.scores.end());
      for (const auto& w : r.warnings) out.warnings.push_back(w);
    }
    in.scores = &scores;
  }
  in.protected_mask.assign(static_cast<size_t>(T), 0);
  for (int64_t p : protected_positions(T, scorer.requirements.protected_spec())) in.protected_mask[static_cast<size_t>(p)] = 1;
  in.layer_budgets = out.layers.empty() ? nullptr : &out.layers;
  in.budget_total = B;
  in.prefix_tokens = T;
  in.n_layers = A;
  in.n_kv_heads = H;
  in.protected_count = protected_count;
  in.layer_spans = spans;
  HeadAllocation h = run_head_allocator(*per_head, in);
  out.layers = h.layer_budgets;
  out.heads = std::move(h.budgets);
  out.warnings.insert(out.warnings.end(), h.warnings.begin(), h.warnings.end());
  return out;
}

}  // namespace rkv
