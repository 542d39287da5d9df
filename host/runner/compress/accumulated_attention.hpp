// The accumulated attention of every held entry (H2O's "accumulated attention scores", Zhang et al. 2023): what the
// decode policies h2o and periodic (runner/decode/) and chunked prefill with compression between chunks
// (runner/compress/chunked_prefill.hpp) keep per entry while the cache grows and is compacted.
//
// Thread rules: one sequence, one thread.
#pragma once
#include <cstdint>
#include <vector>

#include "backend/backend.hpp"
#include "runner/compress/keep_entries.hpp"

namespace rkv {

/// The accumulated attention a[l][q][j] of every entry j of every query head q (over its KV head's entries): seeded
/// from the prompt's cumulative attention at each entry's original position, grown by every appended row's
/// attention mass (Backend::extend with ExtendCapture::attention_mass), and compacted with the cache.
class AccumulatedAttention {
 public:
  /// Seeds from `cache` (positions read with Backend::download_layer) and `prompt_cumulative` ([L] of [H, T]; null:
  /// every entry starts at 0). rkv::InputError when the cache does not track positions or a position lies outside
  /// the prompt's statistics.
  /// `prompt_positions`: DecodePolicy::begin's (null or empty rows: the stored positions are the prompt's).
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

}  // namespace rkv
