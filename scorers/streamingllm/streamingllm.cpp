// StreamingLLM scorer (Xiao et al., "Efficient Streaming Language Models with Attention Sinks", ICLR 2024), as
// docs/ARCHITECTURE.md "streamingllm" states it: keep the first `sinks` positions and the most recent b_l - sinks.
//
// Implemented as sinks protected (the host keeps them first, in order, up to b_l) plus a score that increases with
// position, s[g, j] = j, so the host's top-k fills the rest of b_l with the most recent positions. With b_l <= sinks
// only the first b_l sinks are kept (the host warns when b_l < sinks). Needs no statistics.
#include <ripplekv/sdk.hpp>

namespace {

using rkv::sdk::Param;

class StreamingLLM final : public rkv::sdk::Scorer {
 public:
  static rkv::sdk::Descriptor describe() {
    return rkv::sdk::Descriptor("org.ripplekv.scorer.streamingllm", RKV_KIND_SCORER, "1.0.0",
                                "StreamingLLM: attention sinks plus the most recent positions")
        .param(Param::Int("sinks", 4, "leading positions always kept (attention sinks), inside the budget")
                   .min(0)
                   .max(1 << 20));
  }

  StreamingLLM(const rkv::sdk::Params& p, const rkv::sdk::Host&) : sinks_(p.get_int("sinks")) {}

  rkv_scorer_requirements requirements(const rkv_attention_shape&) override {
    rkv_scorer_requirements r{};
    r.stats = 0;
    r.window = 0;
    r.sinks = sinks_;
    r.recent = 0;
    r.decode_scoring = 1;  // scores by cache index, which ascends with position while decoding too
    return r;
  }

  void score(const rkv_scorer_inputs&, float* scores, int64_t n_kv_heads, int64_t T,
             rkv::sdk::Diagnostics&) override {
    for (int64_t g = 0; g < n_kv_heads; ++g)
      for (int64_t j = 0; j < T; ++j) scores[g * T + j] = static_cast<float>(j);
  }

 private:
  int64_t sinks_;
};

}  // namespace

RKV_PLUGIN(StreamingLLM)
