// Test fixture for `plugins check` (never installed): a scorer that breaks one conformance rule, picked by `mode`:
//   ok               scores = key norms (a valid scorer: passes every rule)
//   nan_long         as ok, but NaN at KV head 0, position 1 when T >= 64 (breaks scores_finite on long prompts only)
//   nondeterministic as ok, plus a per-process call counter (breaks deterministic)
//   fail_short       returns an error when T < 8 (breaks scores_finite and, through T < window, short_prompt)
//   decode_window    reads decode-time window attention (window 4) but refuses a window other than 4, as a scorer
//                    written for the prefill only would (breaks decode_scores_finite: while decoding, the window is
//                    the 1 .. 4 tokens decoded since the last compression)
//   prefill_only     as ok, without decode-time scoring (the decode matrix is not applicable)
// It protects the last `recent` positions (default 4), asks for keys only and (but in prefill_only) declares
// decode-time scoring on keys.
#include <ripplekv/sdk.hpp>

#include <cmath>
#include <limits>
#include <string>

namespace {

int64_t g_calls = 0;

class ConformScorer final : public rkv::sdk::Scorer {
 public:
  static rkv::sdk::Descriptor describe() {
    return rkv::sdk::Descriptor("org.ripplekv.test.conform_scorer", RKV_KIND_SCORER, "0.0.1",
                                "test fixture: a scorer that breaks one conformance rule")
        .param(rkv::sdk::Param::Choice("mode", "ok", {"ok", "nan_long", "nondeterministic", "fail_short", "decode_window", "prefill_only"},
                                       "which rule to break"))
        .param(rkv::sdk::Param::Int("recent", 4, "protected most recent positions").min(0));
  }
  ConformScorer(const rkv::sdk::Params& p, const rkv::sdk::Host&)
      : mode_(p.get_string("mode")), recent_(p.get_int("recent")) {}

  rkv_scorer_requirements requirements(const rkv_attention_shape& shape) override {
    head_dim_ = shape.head_dim;
    rkv_scorer_requirements r{};
    r.stats = RKV_STAT_KEYS;
    r.recent = recent_;
    r.decode_scoring = mode_ == "prefill_only" ? 0 : 1;
    r.decode_stats = RKV_STAT_KEYS;
    if (mode_ == "decode_window") {
      r.window = 4;
      r.decode_stats |= RKV_STAT_WINDOW_ATTENTION;
    }
    return r;
  }

  void score(const rkv_scorer_inputs& in, float* scores, int64_t n_kv_heads, int64_t T,
             rkv::sdk::Diagnostics&) override {
    if (mode_ == "fail_short" && T < 8) throw rkv::sdk::Error(RKV_ERROR_INVALID_ARGUMENT, "prompt too short");
    if (mode_ == "decode_window" && in.window_attention && in.window != 4)
      throw rkv::sdk::Error(RKV_ERROR_INVALID_ARGUMENT, "window attention over " + std::to_string(in.window) +
                                                            " queries, expected 4");
    rkv::sdk::require_tensor(in.keys, "keys", kDLFloat, 32, {n_kv_heads, T, head_dim_});
    const float* k = rkv::sdk::tensor_data<const float>(in.keys);
    ++g_calls;
    for (int64_t h = 0; h < n_kv_heads; ++h)
      for (int64_t j = 0; j < T; ++j) {
        double s = 0;
        for (int64_t e = 0; e < head_dim_; ++e) s += double(k[(h * T + j) * head_dim_ + e]) * k[(h * T + j) * head_dim_ + e];
        scores[h * T + j] = float(std::sqrt(s)) + (mode_ == "nondeterministic" ? float(g_calls) * 1e-3f : 0.0f);
      }
    if (mode_ == "nan_long" && T >= 64) scores[1] = std::numeric_limits<float>::quiet_NaN();
  }

 private:
  std::string mode_;
  int64_t recent_;
  int64_t head_dim_ = 0;
};

}  // namespace

RKV_PLUGIN(ConformScorer)
