// Compression while decoding ([compression.decode] of a run config): what happens to a compressed cache as tokens are
// appended after the prompt (the continuation of lm_fidelity, a needle question and its answer, LongBench answers).
//
//   none     the cache grows by one entry per layer and KV head per token (every entry is kept);
//   rolling  StreamingLLM as published (Xiao et al. 2024, "Efficient Streaming Language Models with Attention Sinks"):
//            layer l holds at most its budget b_l entries: the first `sinks` entries it holds (the attention sinks)
//            and the most recent b_l - sinks; after every appended token the oldest other entry is evicted. With
//            per-head budgets (rkv.allocator/2) each KV head h does the same with its own b_{l,h}.
//
// Example: b_l = 6, sinks = 2, a layer that kept positions [0, 1, 7, 8, 9, 11] of a prompt of T = 12; after the tokens
// at positions 12 and 13 it holds [0, 1, 9, 11, 12, 13].
//
// Eviction is a compaction (Backend::compact_layer, through the cache's positions), so it runs on every backend and
// the cache never exceeds its budget between tokens.
//
// Thread rules: as the backend's.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "backend/backend.hpp"

namespace rkv {

class DecodeEviction {
 public:
  /// `policy` "none" or "rolling", `sinks` >= 0, `budgets` the entries each KV head of a model layer may hold (b_l,
  /// or T for a layer left whole); `head_budgets` ([L][H_kv], or empty; a layer's row may be empty) the per-head
  /// budgets of a per-head allocation, which replace b_l for that layer's heads. Throws rkv::InputError for another
  /// policy, negative numbers or a budget below 1.
  DecodeEviction(const std::string& policy, int64_t sinks, std::vector<int64_t> budgets,
                 std::vector<std::vector<int64_t>> head_budgets = {});

  /// True when tokens must be fed one at a time with apply() after each ("rolling").
  bool active() const { return rolling_; }

  /// Evicts every KV head down to its budget (a no-op for "none" or a layer within its budgets). rkv::InputError when
  /// the cache has another number of layers than there are budgets.
  void apply(Backend& backend, BackendCache& cache) const;

  /// The entries KV head `head` of `layer` may hold.
  int64_t head_budget(int64_t layer, int64_t head) const;

  /// For "rolling" with `sinks` at or above some head's budget (that head keeps its first entries and evicts every
  /// new token at once): a warning naming the first such layer and head and how many there are; else "".
  /// `n_kv_heads`: H_kv of the model.
  std::string frozen_heads_warning(int64_t n_kv_heads) const;

 private:
  bool rolling_ = false;
  int64_t sinks_ = 0;
  std::vector<int64_t> budgets_;
  std::vector<std::vector<int64_t>> head_budgets_;
};

}  // namespace rkv
