// Decode policy "rolling": StreamingLLM (Xiao et al. 2024) as published. After every token each KV head keeps its
// first min(sinks, b) entries and its most recent b - min(sinks, b) (runner/decode/policy.hpp, worked example there).
#include <algorithm>

#include "runner/decode/sessions.hpp"

namespace rkv::decode {

namespace {

class RollingSession final : public DecodeSession {
 public:
  explicit RollingSession(const DecodePolicy& policy) : policy_(policy) {}
  ExtendCapture capture() const override { return {}; }

  void after_token(Backend& backend, BackendCache& cache, const ExtendObservation&, int64_t) override {
    const int64_t Hkv = backend.model().config.n_kv_heads, sinks = policy_.spec().sinks;
    for (int64_t l = 0; l < cache.n_layers(); ++l) {
      KeepLists keep(static_cast<size_t>(Hkv));
      for (int64_t h = 0; h < Hkv; ++h) {
        const int64_t held = cache.head_length(l, h), b = std::min(policy_.head_budget(l, h), held);
        const int64_t s = std::min(sinks, b);
        auto& k = keep[static_cast<size_t>(h)];
        for (int64_t i = 0; i < s; ++i) k.push_back(i);
        for (int64_t i = held - (b - s); i < held; ++i) k.push_back(i);
      }
      keep_entries(backend, cache, l, keep);
    }
  }

 private:
  const DecodePolicy& policy_;
};

}  // namespace

std::unique_ptr<DecodeSession> make_rolling_session(const DecodePolicy& policy) {
  return std::make_unique<RollingSession>(policy);
}

}  // namespace rkv::decode
