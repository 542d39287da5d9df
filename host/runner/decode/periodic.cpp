// Decode policy "periodic": kvpress DecodingPress (kvpress/presses/decoding_press.py: every compression_interval
// decoding steps the base press re-scores the cache with the hidden states buffered since the last compression and
// keeps target_size entries; the buffer is cleared after each compression). Here: every `interval` decoded tokens,
// each layer whose heads hold more than their target (compression.decode.target, 0: the head's budget b) is scored by
// the cell's scorer with decode-time statistics (abi/ripplekv/plugin.h, rkv_scorer_requirements "Decode-time
// scoring"), and each such head keeps its protected entries, then its top scores, up to the target
// (select_positions, the prefill's rule). The scoring of held entries (decode-time window attention over the
// queries decoded since the last compression, padding of short heads) is runner/compress/held_scoring.hpp's,
// shared with chunked prefill.
#include <deque>

#include "core/errors.hpp"
#include "runner/compress/held_scoring.hpp"
#include "runner/decode/sessions.hpp"

namespace rkv::decode {

namespace {

class PeriodicSession final : public DecodeSession {
 public:
  PeriodicSession(const DecodePolicy& policy, const ScorerUse& scorer, Backend& backend, const BackendCache& cache,
                  const std::vector<AttentionStats>* prompt_cumulative,
                  const std::vector<std::vector<int32_t>>* prompt_positions)
      : policy_(policy), scorer_(scorer), req_(scorer.requirements.for_decode()) {
    if (req_.wants(RKV_STAT_CUMULATIVE_ATTENTION))
      acc_ = std::make_unique<AccumulatedAttention>(backend, cache, prompt_cumulative, prompt_positions);
    window_.resize(static_cast<size_t>(cache.n_layers()));
  }

  ExtendCapture capture() const override { return policy_.capture(); }

  void after_token(Backend& backend, BackendCache& cache, const ExtendObservation& observed,
                   int64_t position) override {
    if (acc_) acc_->add(cache, observed);
    if (req_.wants(RKV_STAT_WINDOW_ATTENTION) || req_.wants(RKV_STAT_WINDOW_QUERIES)) buffer_queries(observed, position);
    if (++steps_ < policy_.spec().interval) return;
    steps_ = 0;
    for (int64_t l = 0; l < cache.n_layers(); ++l) compress_layer(backend, cache, l);
    for (auto& w : window_) w.clear();  // as DecodingPress: the buffer restarts after a compression
  }

 private:
  void buffer_queries(const ExtendObservation& observed, int64_t position) {
    if (observed.queries.size() != window_.size())
      throw InputError("decode policy periodic: the decode step observed no queries");
    for (size_t l = 0; l < window_.size(); ++l) {
      window_[l].push_back(HeldQuery{position, observed.queries[l]});
      while (static_cast<int64_t>(window_[l].size()) > req_.window) window_[l].pop_front();
    }
  }

  int64_t target(int64_t l, int64_t h) const {
    return policy_.spec().target > 0 ? policy_.spec().target : policy_.head_budget(l, h);
  }

  void compress_layer(Backend& backend, BackendCache& cache, int64_t l) {
    bool over = false;
    for (int64_t h = 0; h < backend.model().config.n_kv_heads; ++h)
      over = over || cache.head_length(l, h) > target(l, h);
    if (!over) return;
    evict_held_layer(backend, cache, l, scorer_, req_, window_[static_cast<size_t>(l)], acc_.get(),
                     [&](int64_t h) { return target(l, h); });
  }

  const DecodePolicy& policy_;
  const ScorerUse& scorer_;
  ScorerRequirements req_;
  std::unique_ptr<AccumulatedAttention> acc_;
  std::vector<std::deque<HeldQuery>> window_;  ///< [L] the queries decoded since the last compression (<= w)
  int64_t steps_ = 0;
};

}  // namespace

std::unique_ptr<DecodeSession> make_periodic_session(const DecodePolicy& policy, const ScorerUse& scorer,
                                                     Backend& backend, const BackendCache& cache,
                                                     const std::vector<AttentionStats>* prompt_cumulative,
                                                     const std::vector<std::vector<int32_t>>* prompt_positions) {
  return std::make_unique<PeriodicSession>(policy, scorer, backend, cache, prompt_cumulative, prompt_positions);
}

}  // namespace rkv::decode
