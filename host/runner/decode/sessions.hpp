// The decode policies' per-sequence state (runner/decode/policy.hpp), one file per policy:
//   rolling.cpp    StreamingLLM sinks + recent window
//   h2o.cpp        H2O heavy hitters by accumulated attention + recent window
//   periodic.cpp   kvpress DecodingPress: re-score with the cell's scorer every `interval` tokens
// and what they share: keeping a list of entries per head in one compaction (runner/compress/keep_entries.hpp), and
// the accumulated attention that follows the cache through appends and compactions (accumulated_attention.cpp).
//
// Thread rules: as DecodeSession's (one sequence, one thread).
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "runner/compress/keep_entries.hpp"
#include "runner/decode/policy.hpp"

namespace rkv::decode {

/// The accumulated attention a[l][q][j] of every entry j of every query head q (over its KV head's entries): seeded
/// from the prompt's cumulative attention at each entry's original position, grown by every decoded token's
/// attention mass (Backend::extend with ExtendCapture::attention_mass), and compacted with the cache.
class AccumulatedAttention {
 public:
  /// Seeds from `cache` (positions read with Backend::download_layer) and `prompt_cumulative` ([L] of [H, T]; null:
  /// every entry starts at 0). rkv::InputError when the cache does not track positions or a position lies outside
  /// the prompt's statistics.
  /// `prompt_positions`: DecodePolicy::begin's.
  AccumulatedAttention(Backend& backend, const BackendCache& cache, const std::vector<AttentionStats>* prompt_cumulative,
                       const std::vector<std::vector<int32_t>>* prompt_positions);

  /// Adds one token's observed mass (ExtendObservation::attention_mass) after it was appended to `cache`.
  /// rkv::InputError when the observation is missing or its size disagrees with the cache.
  void add(const BackendCache& cache, const ExtendObservation& observed);

  /// a[layer][q], one value per entry of KV head q / G, in cache order.
  const std::vector<double>& query_head(int64_t layer, int64_t q) const {
    return acc_[static_cast<size_t>(layer)][static_cast<size_t>(q)];
  }
  /// sum over the G query heads of KV head g of a[layer][q][j] (H2O's score of entry j of KV head g under GQA).
  std::vector<double> kv_head(int64_t layer, int64_t g) const;

  /// Follows a keep_entries() of `layer`.
  void keep(int64_t layer, const KeepLists& keep);

  int64_t group_size() const { return G_; }

 private:
  int64_t H_ = 0, Hkv_ = 0, G_ = 1;
  std::vector<std::vector<std::vector<double>>> acc_;  ///< [L][H][entries of KV head q / G]
};

std::unique_ptr<DecodeSession> make_rolling_session(const DecodePolicy& policy);
std::unique_ptr<DecodeSession> make_h2o_session(const DecodePolicy& policy, Backend& backend, const BackendCache& cache,
                                                const std::vector<AttentionStats>* prompt_cumulative,
                                                const std::vector<std::vector<int32_t>>* prompt_positions);
std::unique_ptr<DecodeSession> make_periodic_session(const DecodePolicy& policy, const ScorerUse& scorer,
                                                     Backend& backend, const BackendCache& cache,
                                                     const std::vector<AttentionStats>* prompt_cumulative,
                                                     const std::vector<std::vector<int32_t>>* prompt_positions);

}  // namespace rkv::decode
