// CriticalKV scorer: an inner scorer's ranking reweighted by how much each entry can move the layer's output, in two
// stages that split the layer's budget (a budget-dependent scorer, ABI minor 6).
//
// Source: Feng et al., "Identify Critical KV Cache in LLM Inference from an Output Perturbation Perspective" (2025,
// arXiv 2502.03805); reference code kvpress 0.5.5, kvpress/presses/criticalkv_press.py (CriticalKVPress.score and
// vwl1norm). With inner scores e[g, j] (inner_scores.hpp: kvpress SnapKV or Knorm), the host's value-output norms
// n[h, j] = ||W_o,h v_j||_1 (RKV_STAT_VALUE_OUTPUT_NORMS) and b_g the number of positions KV head g keeps
// (rkv_scorer_inputs.head_budgets):
//   m[g, j]  = (1 / G) sum_{h in group g} n[h, j]                       (kvpress vwl1norm: the group mean)
//   stage 1: S1_g = the top s1_g positions of e[g, .],  s1_g = max(1, floor(b_g first_stage_ratio)) when
//            first_stage_ratio > 0 and b_g > 0, else 0                 (kvpress: int((1 - ratio) T first_stage_ratio),
//                                                                        floored at 1, 0 at compression_ratio 1)
//   s[g, j]  = FLT_MAX                       for j in S1_g
//   s[g, j]  = (e[g, j] + epsilon) m[g, j]   otherwise                  (stage 2)
// The host then keeps the top b_g of s per head: S1_g, then the best of stage 2. Without head budgets (an allocator
// reading scores before budgets exist, e.g. AdaKV's head split; codec classes; the joint planner) the scorer returns
// e itself, its budget-free ranking: what kvpress's CriticalAdaKVPress splits a layer's budget over heads by. So
// `[allocator] heads = "adakv"` with this scorer is CriticalAdaKV: AdaKV's head budgets from the inner scores, then
// both stages within each head's budget (kvpress CriticalAdaKVPress.compress).
//
// Conventions (checked against kvpress on tests/fixtures/kvpress):
//  - b_g is an integer count; kvpress computes the stage-1 count from the float (1 - compression_ratio) T. The two
//    agree when (1 - ratio) T is kvpress's own kept count int((1 - ratio) T) up to float rounding (as at the fixture's
//    ratios); they can differ by one where (1 - ratio) T first_stage_ratio crosses an integer.
//  - inner snapkv: the host protects the observation window (recent = window). kvpress scores the window max + 1, so
//    it is in stage 1 whenever s1_g >= window; below that kvpress keeps a torch.topk tie-break subset of it in stage 1
//    and ranks the rest by stage 2, where ripplekv keeps the whole window.
//  - stage-1 ties go to the earlier position (kvpress: torch.topk's order); they occur only among equal inner scores.
#include <ripplekv/sdk.hpp>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "../chunkkv/inner_scores.hpp"

namespace {

using rkv::sdk::Error;
using rkv::sdk::Param;

class CriticalKV final : public rkv::sdk::Scorer {
 public:
  static rkv::sdk::Descriptor describe() {
    return rkv::sdk::Descriptor("org.ripplekv.scorer.criticalkv", RKV_KIND_SCORER, "1.0.0",
                                "CriticalKV: the inner scorer's top share of the budget, then (score + eps) ||W_o v||_1")
        .param(Param::Choice("inner", "snapkv", {"snapkv", "knorm"},
                             "inner scorer: kvpress SnapKV (window mean, avg pooling, GQA mean) or knorm"))
        .param(Param::Int("window", 64, "inner snapkv: observation window w in positions (protected)").min(1).max(1 << 20))
        .param(Param::Int("kernel", 5, "inner snapkv: avg-pooling kernel in positions (odd)").min(1).max(1025))
        .param(Param::Float("epsilon", 1e-4, "added to the inner score before the norm weighting (kvpress epsilon)")
                   .min(0.0)
                   .max(1e6))
        .param(Param::Float("first_stage_ratio", 0.5,
                            "share of each head's budget chosen by the inner score alone (stage 1)")
                   .min(0.0)
                   .max(1.0));
  }

  CriticalKV(const rkv::sdk::Params& p, const rkv::sdk::Host&)
      : snap_(p.get_string("inner") == "snapkv"),
        window_(p.get_int("window")),
        kernel_(p.get_int("kernel")),
        epsilon_(p.get_float("epsilon")),
        ratio_(p.get_float("first_stage_ratio")) {
    if (kernel_ % 2 == 0)
      throw Error(RKV_ERROR_INVALID_ARGUMENT, "criticalkv: kernel must be odd, got " + std::to_string(kernel_));
  }

  rkv_scorer_requirements requirements(const rkv_attention_shape& shape) override {
    if (shape.n_heads < 1 || shape.n_kv_heads < 1 || shape.n_heads % shape.n_kv_heads != 0)
      throw Error(RKV_ERROR_INVALID_ARGUMENT, "criticalkv: n_heads must be a positive multiple of n_kv_heads");
    n_heads_ = shape.n_heads;
    head_dim_ = shape.head_dim;
    rkv_scorer_requirements r{};
    r.stats = (snap_ ? RKV_STAT_WINDOW_ATTENTION : RKV_STAT_KEYS) | RKV_STAT_VALUE_OUTPUT_NORMS;
    r.window = snap_ ? window_ : 0;
    r.recent = snap_ ? window_ : 0;
    r.budget_dependent = RKV_BUDGET_FINAL;  // kvpress CriticalAdaKV splits heads by the inner scores
    return r;
  }

  /// scores [H_kv, T] float32 (FLT_MAX on stage 1). Reads window_attention float32 [H, T] (inner snapkv) or keys
  /// float32 [H_kv, T, d] (inner knorm), value_output_norms float32 [H, T] and, when given, head_budgets int64 [H_kv]
  /// (each in [0, T]); all CPU, borrowed for the call. Throws Error(INVALID_ARGUMENT) for a missing or misshaped input
  /// or a non-finite stage-2 score. Thread rule: never called concurrently on one instance.
  void score(const rkv_scorer_inputs& in, float* scores, int64_t n_kv_heads, int64_t T,
             rkv::sdk::Diagnostics&) override {
    if (n_heads_ < 1) throw Error(RKV_ERROR_INVALID_ARGUMENT, "criticalkv: score() before requirements()");
    if (snap_) rkv_inner::kvpress_snapkv(in, scores, n_heads_, n_kv_heads, T, window_, kernel_, "criticalkv");
    else rkv_inner::knorm(in, scores, n_kv_heads, T, head_dim_);
    const int64_t* budgets = rkv::sdk::head_budgets(in, n_kv_heads);
    if (!budgets) return;  // the budget-free ranking: the inner scores
    rkv::sdk::require_tensor(in.value_output_norms, "value_output_norms", kDLFloat, 32, {n_heads_, T});
    const float* norms = rkv::sdk::tensor_data<const float>(in.value_output_norms);
    const int64_t G = n_heads_ / n_kv_heads;
    std::vector<int64_t> order(static_cast<size_t>(T));
    for (int64_t g = 0; g < n_kv_heads; ++g) {
      float* s = scores + g * T;
      const int64_t b = budgets[g];
      if (b < 0 || b > T)
        throw Error(RKV_ERROR_INVALID_ARGUMENT, "criticalkv: KV head " + std::to_string(g) + " budget " +
                                                    std::to_string(b) + " outside [0, T = " + std::to_string(T) + "]");
      const int64_t s1 = ratio_ > 0.0 && b > 0
                             ? std::max<int64_t>(1, static_cast<int64_t>(std::floor(static_cast<double>(b) * ratio_)))
                             : 0;
      std::iota(order.begin(), order.end(), int64_t{0});  // stage 1 by the inner score, ties to the earlier position
      std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t c) { return s[a] > s[c]; });
      for (int64_t j = 0; j < T; ++j) {  // stage 2: (e + epsilon) * the group mean of ||W_o v||_1
        float m = 0.0f;
        for (int64_t c = 0; c < G; ++c) m += norms[(g * G + c) * T + j];
        m /= static_cast<float>(G);
        s[j] = (s[j] + static_cast<float>(epsilon_)) * m;
        if (!std::isfinite(s[j]))
          throw Error(RKV_ERROR_INVALID_ARGUMENT, "criticalkv: non-finite stage-2 score at KV head " +
                                                      std::to_string(g) + ", position " + std::to_string(j));
      }
      for (int64_t k = 0; k < s1; ++k) s[order[static_cast<size_t>(k)]] = FLT_MAX;
    }
  }

 private:
  bool snap_;
  int64_t window_, kernel_;
  double epsilon_, ratio_;
  int64_t n_heads_ = 0, head_dim_ = 0;
};

}  // namespace

RKV_PLUGIN(CriticalKV)
