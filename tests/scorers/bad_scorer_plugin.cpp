// A deliberately misbehaving scorer for tests of the host's validation (never installed). Its `mode` param picks
// the fault: nan / inf (one bad score at KV head 1, position 2), unwritten (leaves scores untouched), fail (returns
// an error), negative_window (declares recent = -1), unknown_stat (asks for an undefined statistics bit),
// ok (scores = position, asks for keys and values and checks they arrive contiguous with the right rows),
// negative_skip (declares query_skip = -1), decode_moments (asks for the query moments at decode time), pre_rope
// (asks for the keys before RoPE only; scores = k0[h, j, 0] + 10 k0[h, j, 1] + 100 rope_inv_freq[0]),
// budget (declares budget_dependent; score of KV head g at position p = +-head_budgets[g], + at even p, - at odd p,
// with -1 for head_budgets[g] when the host passes none),
// budget_undeclared (the same scores without declaring budget_dependent: the host must pass none), budget_bad
// (declares budget_dependent = 3, an undefined value).
#include <ripplekv/sdk.hpp>

#include <cmath>
#include <limits>
#include <string>

namespace {

class BadScorer final : public rkv::sdk::Scorer {
 public:
  static rkv::sdk::Descriptor describe() {
    return rkv::sdk::Descriptor("org.ripplekv.test.bad_scorer", RKV_KIND_SCORER, "0.0.1", "test-only faulty scorer")
        .param(rkv::sdk::Param::Choice("mode", "ok",
                                       {"ok", "nan", "inf", "unwritten", "fail", "negative_window", "unknown_stat",
                                        "negative_skip", "decode_moments", "pre_rope", "budget", "budget_undeclared", "budget_bad"},
                                       "which fault to produce"));
  }
  BadScorer(const rkv::sdk::Params& p, const rkv::sdk::Host&) : mode_(p.get_string("mode")) {}

  rkv_scorer_requirements requirements(const rkv_attention_shape& shape) override {
    head_dim_ = shape.head_dim;
    rkv_scorer_requirements r{};
    r.stats = RKV_STAT_KEYS | RKV_STAT_VALUES;
    if (mode_ == "negative_window") r.recent = -1;
    if (mode_ == "unknown_stat") r.stats |= uint64_t(1) << 40;
    if (mode_ == "negative_skip") r.query_skip = -1;
    if (mode_ == "decode_moments") r.decode_scoring = 1, r.decode_stats = RKV_STAT_QUERY_MOMENTS;
    if (mode_ == "pre_rope") r.stats = RKV_STAT_PRE_ROPE_KEYS;
    if (mode_ == "budget") r.budget_dependent = RKV_BUDGET_FINAL;
    if (mode_ == "budget_bad") r.budget_dependent = 3;
    return r;
  }

  void score(const rkv_scorer_inputs& in, float* scores, int64_t n_kv_heads, int64_t T,
             rkv::sdk::Diagnostics& diag) override {
    if (mode_ == "fail") throw rkv::sdk::Error(RKV_ERROR_INVALID_ARGUMENT, "deliberate failure");
    if (mode_ == "unwritten") return;
    if (mode_ == "budget" || mode_ == "budget_undeclared") {
      const DLTensor* b = RKV_HAS_FIELD(&in, rkv_scorer_inputs, head_budgets) ? in.head_budgets : nullptr;
      if (b) rkv::sdk::require_tensor(b, "head_budgets", kDLInt, 64, {n_kv_heads});
      for (int64_t h = 0; h < n_kv_heads; ++h)
        for (int64_t p = 0; p < T; ++p)
          scores[h * T + p] = (b ? static_cast<float>(rkv::sdk::tensor_data<const int64_t>(b)[h]) : -1.0f) *
                              (p % 2 == 0 ? 1.0f : -1.0f);
      return;
    }
    if (mode_ == "pre_rope") {
      rkv::sdk::require_tensor(in.pre_rope_keys, "pre_rope_keys", kDLFloat, 32, {n_kv_heads, T, head_dim_});
      rkv::sdk::require_tensor(in.rope_inv_freq, "rope_inv_freq", kDLFloat, 64, {head_dim_ / 2});
      if (in.keys) throw rkv::sdk::Error(RKV_ERROR_INVALID_ARGUMENT, "keys after RoPE were not asked for");
      const float* k0 = rkv::sdk::tensor_data<const float>(in.pre_rope_keys);
      const double f = rkv::sdk::tensor_data<const double>(in.rope_inv_freq)[0];
      for (int64_t i = 0; i < n_kv_heads * T; ++i)
        scores[i] = static_cast<float>(k0[i * head_dim_] + 10.0 * k0[i * head_dim_ + 1] + 100.0 * f);
      return;
    }
    rkv::sdk::require_tensor(in.keys, "keys", kDLFloat, 32, {n_kv_heads, T, head_dim_});
    rkv::sdk::require_tensor(in.values, "values", kDLFloat, 32, {n_kv_heads, T, head_dim_});
    // The test's cache has k[h, p, 0] = 100 h + p: check every row arrived in place.
    const float* k = rkv::sdk::tensor_data<const float>(in.keys);
    for (int64_t h = 0; h < n_kv_heads; ++h)
      for (int64_t p = 0; p < T; ++p)
        if (k[(h * T + p) * head_dim_] != float(100 * h + p))
          throw rkv::sdk::Error(RKV_ERROR_INVALID_ARGUMENT, "keys are not the cache rows");
    for (int64_t h = 0; h < n_kv_heads; ++h)
      for (int64_t p = 0; p < T; ++p) scores[h * T + p] = float(p);
    if (mode_ == "nan") scores[1 * T + 2] = std::numeric_limits<float>::quiet_NaN();
    if (mode_ == "inf") scores[1 * T + 2] = std::numeric_limits<float>::infinity();
    diag.warning("bad_scorer says hello");
  }

 private:
  std::string mode_;
  int64_t head_dim_ = 0;
};

}  // namespace

RKV_PLUGIN(BadScorer)
