// Decode policy "h2o": H2O (Zhang et al. 2023, "H2O: Heavy-Hitter Oracle for Efficient Generative Inference of Large
// Language Models", Algorithm 1; the reference's H2OKVCache keeps `recent_size` recent entries and the heavy hitters
// by accumulated attention). After every token, a KV head holding more than its budget b keeps
//   its r = min(recent, b) most recent entries (recent = -1: r = floor(b / 2), the paper's equal split), and
//   among the others the b - r with the largest accumulated attention summed over its GQA group (ties: earlier entry).
// The accumulated attention starts at the prompt's cumulative attention and grows by each decoded token's attention
// (AccumulatedAttention). Worked example in runner/decode/policy.hpp.
#include <algorithm>
#include <numeric>

#include "runner/decode/sessions.hpp"

namespace rkv::decode {

namespace {

/// The entries a head keeps: the last r of `held`, and the b - r largest of `score` among the others, ascending.
std::vector<int64_t> heavy_hitters_and_recent(const std::vector<double>& score, int64_t b, int64_t r) {
  const int64_t held = static_cast<int64_t>(score.size());
  std::vector<int64_t> older(static_cast<size_t>(held - r));
  std::iota(older.begin(), older.end(), 0);
  std::stable_sort(older.begin(), older.end(), [&](int64_t x, int64_t y) {
    return score[static_cast<size_t>(x)] > score[static_cast<size_t>(y)];
  });
  older.resize(static_cast<size_t>(b - r));
  for (int64_t i = held - r; i < held; ++i) older.push_back(i);
  std::sort(older.begin(), older.end());
  return older;
}

class H2oSession final : public DecodeSession {
 public:
  H2oSession(const DecodePolicy& policy, Backend& backend, const BackendCache& cache,
             const std::vector<AttentionStats>* prompt_cumulative,
             const std::vector<std::vector<int32_t>>* prompt_positions)
      : policy_(policy), acc_(backend, cache, prompt_cumulative, prompt_positions) {}
  ExtendCapture capture() const override { return policy_.capture(); }

  void after_token(Backend& backend, BackendCache& cache, const ExtendObservation& observed, int64_t) override {
    acc_.add(cache, observed);
    const int64_t Hkv = backend.model().config.n_kv_heads;
    for (int64_t l = 0; l < cache.n_layers(); ++l) {
      KeepLists keep(static_cast<size_t>(Hkv));
      bool over = false;
      for (int64_t g = 0; g < Hkv; ++g) {
        const int64_t held = cache.head_length(l, g), b = policy_.head_budget(l, g);
        auto& k = keep[static_cast<size_t>(g)];
        if (held <= b) {
          k.resize(static_cast<size_t>(held));
          std::iota(k.begin(), k.end(), 0);
          continue;
        }
        over = true;
        const int64_t recent = policy_.spec().recent < 0 ? b / 2 : std::min(policy_.spec().recent, b);
        k = heavy_hitters_and_recent(acc_.kv_head(l, g), b, recent);
      }
      if (!over) continue;
      keep_entries(backend, cache, l, keep);
      acc_.keep(l, keep);
    }
  }

 private:
  const DecodePolicy& policy_;
  AccumulatedAttention acc_;
};

}  // namespace

std::unique_ptr<DecodeSession> make_h2o_session(const DecodePolicy& policy, Backend& backend, const BackendCache& cache,
                                                const std::vector<AttentionStats>* prompt_cumulative,
                                                const std::vector<std::vector<int32_t>>* prompt_positions) {
  return std::make_unique<H2oSession>(policy, backend, cache, prompt_cumulative, prompt_positions);
}

}  // namespace rkv::decode
