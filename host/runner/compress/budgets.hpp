// How many positions each compressible layer (and KV head) of a cell keeps (docs/ARCHITECTURE.md "Budget semantics",
// "Per-head budgets"): the compressible layers A, the global budget B from budget.fraction, budget.tokens or
// budget.bytes_fraction, and the cell's allocators turning B into b_l (and b[l, h]).
//
// Thread rules: pure functions, except allocate_cell, which calls plugins (never concurrently) and the backend.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "plugin/allocator_call.hpp"
#include "runner/compress/prefill.hpp"
#include "runner/compress/score_memo.hpp"
#include "runner/compress/scorers.hpp"
#include "runner/plan/run_plan.hpp"

namespace rkv {

/// The compressible layers A of a model: `listed` (budget.layers; each must be below the model's layer count), every
/// layer when it is empty, or with `global_only` (budget.layers = "global") the layers without a sliding window.
/// Throws rkv::InputError naming `config_path` and budget.layers for a layer beyond the model, and for "global" on a
/// model whose every layer slides.
std::vector<int64_t> resolve_compressible_layers(const std::vector<int64_t>& listed, bool global_only,
                                                 const ModelConfig& model, const std::string& config_path);

/// The global budget B of a cell over a prompt of T positions: from budget.fraction (B = round(f sum span_l)) or
/// budget.tokens (sum min(tokens, span_l)) over the spans of A (ModelConfig::layer_spans; cache/budget.hpp). Exactly
/// one of the two is set. rkv::InputError as budget_total_from_fraction / _from_tokens.
int64_t cell_budget_total(const std::optional<double>& fraction, const std::optional<int64_t>& tokens,
                          const std::vector<int64_t>& spans);

/// The token fraction a cell keeps of a prompt of T = `prefix_tokens` positions: budget.fraction as it is, or for
/// budget.bytes_fraction x the fraction whose kept entries cost at most x of the full float32 cache's bytes with the
/// cell's codec (for a mixed codec, e_codec is the mix's mean entry bytes, cache/token_bits.hpp mixed_entry_bytes).
/// Per KV head and layer the budget is x T e_f32 bytes; up to R = residual + quantum - 1 entries may stay float32
/// (the codec's residual window and at most one partial key unit), the rest cost e_codec each:
///   b = x T                                  when x T e_f32 <= R e_f32 (everything fits in the float32 part)
///   b = R + (x T e_f32 - R e_f32) / e_codec  otherwise,              f = min(1, b / T)
/// with e = codec_entry_bytes (packed key + value + position per entry and KV head). E.g. SmolLM2 (d = 64,
/// e_f32 = 516), x = 0.1: int4 asymmetric g32 (e = 84, R = 0) f = 0.614; KIVI 2-bit g32 residual 0 (e = 52,
/// R = 31) at T = 1024: f = 0.722. Under uniform budgets the kept bytes stay within x and within one key unit of
/// it; an allocator that moves tokens between layers moves bytes with them. nullopt for budget.tokens.
std::optional<double> token_fraction(const CellConfig& cell, int64_t head_dim, int64_t prefix_tokens);

/// B of `cell` over a prompt of T positions on the layers `layers_A`: cell_budget_total at token_fraction.
int64_t cell_budget_total(const CellConfig& cell, const ModelConfig& config, const std::vector<int64_t>& layers_A,
                          int64_t prefix_tokens);

/// The budgets of one cell over the compressible layers A: b_l per layer and, with a per-head allocator, b[l, h].
struct CellBudgets {
  std::vector<int64_t> layers;              ///< [|A|] b_l, summing to B
  std::vector<std::vector<int64_t>> heads;  ///< [|A|][H_kv] entries per head (row l sums to H_kv b_l); empty: none
  std::vector<std::string> warnings;        ///< the allocators' warnings
};

/// Runs a cell's allocators (docs/ARCHITECTURE.md "Per-head budgets"): `layer_alloc` serves rkv.allocator/1 (b_l), optionally
/// followed by `head_alloc` (rkv.allocator/2 with those b_l as layer budgets); or `layer_alloc` serves only
/// rkv.allocator/2 and splits B over layers and heads itself. A per-head allocator that sets RKV_FLAG_NEEDS_SCORES is
/// given each layer's scorer's scores of every layer of A (memoized in `memo`) and the protected mask; a scorer
/// budgeted for allocators (RKV_BUDGET_ALLOCATION) scores each layer with its budget before the split on every head
/// (b_l, or floor(B / |A|) without a layer allocator, capped at the span). `profile` is
/// over A. The allocators are told the largest protected count of the layers' scorers (LayerScorers). Throws
/// rkv::InputError naming the plugin when it serves neither interface, as the allocator calls do, and for a per-head
/// allocator over a route whose scorers protect different positions (one protected mask serves every layer).
CellBudgets allocate_cell(Backend& backend, const PrefilledPrompt& prompt, const LayerScorers& scorers, ScoreMemo& memo,
                          const PluginInstance& layer_alloc, const PluginInstance* head_alloc,
                          const std::vector<int64_t>& layers, const std::vector<double>& profile, int64_t budget_total);

}  // namespace rkv
