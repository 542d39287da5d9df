// Test fixture: a scorer that asks for RKV_STAT_VALUE_OUTPUT_NORMS (ABI 1.5) and returns, for KV head g and entry j,
// the mean of the norms n[h, j] over the G query heads of g (kvpress CriticalKVPress.vwl1norm), so a test can read
// back exactly what the host passed.
#include <ripplekv/sdk.hpp>

#include <string>

namespace {

using rkv::sdk::Error;

class WovScorer final : public rkv::sdk::Scorer {
 public:
  static rkv::sdk::Descriptor describe() {
    return rkv::sdk::Descriptor("org.test.wov", RKV_KIND_SCORER, "0.1.0",
                                "test fixture: the group mean of the value-output norms")
        .param(rkv::sdk::Param::Bool("decode", false, "also ask for the norms at decode time (the host refuses)"));
  }
  WovScorer(const rkv::sdk::Params& p, const rkv::sdk::Host&) : decode_(p.get_bool("decode")) {}

  rkv_scorer_requirements requirements(const rkv_attention_shape& shape) override {
    n_heads_ = shape.n_heads;
    rkv_scorer_requirements r{};
    r.stats = RKV_STAT_VALUE_OUTPUT_NORMS;
    r.decode_scoring = decode_ ? 1 : 0;
    r.decode_stats = decode_ ? RKV_STAT_VALUE_OUTPUT_NORMS : 0;
    return r;
  }

  void score(const rkv_scorer_inputs& in, float* scores, int64_t n_kv_heads, int64_t T,
             rkv::sdk::Diagnostics&) override {
    if (!RKV_HAS_FIELD(&in, rkv_scorer_inputs, value_output_norms))
      throw Error(RKV_ERROR_UNSUPPORTED, "wov: this host passes no value-output norms (needs plugin ABI 1.5)");
    rkv::sdk::require_tensor(in.value_output_norms, "value_output_norms", kDLFloat, 32, {n_heads_, T});
    const float* n = rkv::sdk::tensor_data<const float>(in.value_output_norms);
    const int64_t G = n_heads_ / n_kv_heads;
    for (int64_t g = 0; g < n_kv_heads; ++g)
      for (int64_t j = 0; j < T; ++j) {
        double s = 0;
        for (int64_t c = 0; c < G; ++c) s += n[(g * G + c) * T + j];
        scores[g * T + j] = static_cast<float>(s / static_cast<double>(G));
      }
  }

 private:
  bool decode_;
  int64_t n_heads_ = 0;
};

}  // namespace

RKV_PLUGIN(WovScorer)
