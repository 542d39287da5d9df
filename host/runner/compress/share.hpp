// The sharing step of a cell (Backend::share_layer): depth-wise cache sharing at inference, after selection and
// compaction and before the codec, so the layers that share hold no entries and their bytes are saved.
//
//   prefill -> allocate (over the layers that keep a cache) -> compress_prompt -> share_compressed -> encode -> decode
//
// Which layers share ([compression.share]; README "Depth-wise sharing"):
//   groups = g   CLA@g (Brandon et al. 2024, "Reducing Transformer Key-Value Cache Size with Cross-Layer Attention"):
//                layer l reads the cache of layer floor(l / g) g, the first layer of its group of g consecutive ones;
//   map          explicit [layer, source] pairs (source < layer, itself not shared), e.g. KVSharer's searched maps;
//   count = k    a chooser: the k layers of 1 .. L - 1 with the lowest value of the cell's sensitivity profile (any
//                [signal]: perturbation_kl, damage, depth, ...) share, each reading the nearest earlier layer that
//                keeps its cache (ties: the deeper layer shares first).
// The token budget of a cell is computed over all compressible layers A as without sharing (so cells compare at the
// same budget.fraction / bytes_fraction) and spread over the layers of A that keep a cache, each capped at its span:
// B' = min(B, sum of their spans). CLA@2 at bytes_fraction 0.5 thus keeps every entry of the even layers.
//
// Thread rules: as the Backend.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "runner/compress/compress_prompt.hpp"
#include "runner/plan/share_spec.hpp"

namespace rkv {

/// Refuses, before any work, a share spec this model cannot run: a map layer or source outside [0, L), a source not
/// before its layer or itself shared, a layer named twice, count >= L. rkv::InputError naming `where` and the key.
void check_share_support(const ModelConfig& config, const ShareSpec& share, const std::string& where);

/// The layer each model layer reads, int64 [L] (sources[l] == l: the layer keeps its own cache), for `share` on a
/// model of `n_layers` layers; `profile` [L] (the cell's sensitivity profile) is read only by the chooser (count),
/// and must then hold L values (rkv::InputError otherwise).
std::vector<int64_t> share_sources(const ShareSpec& share, int64_t n_layers, const std::vector<double>& profile);

/// What sharing leaves a cell to allocate over a prompt of T positions.
struct SharePlan {
  std::vector<int64_t> sources;  ///< [L] the layer each model layer reads (itself when it keeps its cache)
  std::vector<int64_t> layers;   ///< the layers of A that keep their own cache, ascending (the allocator's layers)
  int64_t budget_total = 0;      ///< B' = min(B, sum of their spans)
  /// When B' < B: one sentence saying the layers that keep a cache cannot hold the whole budget (so the cell holds
  /// less than its budget.fraction / bytes_fraction); empty otherwise.
  std::string warning;
};

/// The sharing plan of a cell with [compression.share] `share` over the compressible layers `layers_A` (ascending),
/// the cell's budget B = `budget_total` over A and prompt length T (ModelConfig::layer_span); `profile` [L] as
/// share_sources(). Without sharing: every layer its own source, A and B unchanged. rkv::InputError when every layer
/// of A is shared (nothing would hold the budget).
SharePlan plan_sharing(const ShareSpec& share, const ModelConfig& config, const std::vector<int64_t>& layers_A,
                       int64_t budget_total, int64_t prefix_tokens, const std::vector<double>& profile);

/// Shares every layer l with sources[l] != l in `comp.cache` (Backend::share_layer), sets its budget to 0 and its
/// head budgets to none, and sets comp.bytes_kept to the cache's bytes; adds the time to comp.seconds. A no-op when
/// no layer shares.
void share_compressed(Backend& backend, CompressedPrompt& comp, const std::vector<int64_t>& sources);

}  // namespace rkv
