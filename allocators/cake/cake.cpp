// CAKE's layer split: every layer keeps its protected positions (the scorer's window), and the rest of the budget
// goes to the layers in proportion to their preference s_l, the profile (a per-prompt signal's, normally
// `[signal] plugin = "cake"`: signals/cake).
//
// Source: Qin et al., "CAKE" (ICLR 2025, antgroup/cakekv), as FFY0/DefensiveKV at
// 9251b95e7e282a6c18dd98ef6318dd489e639a58 ports it, kvpress/presses/cake_global_press.py (CakeGlobalPress.compress):
//   n_kept = (T (1 - ratio) - w) L,   b_l = w + P_l / sum_k P_k n_kept
// i.e. with B = the host's budget (the window counted) and p = protected_count per layer (min(p, span_l)):
//   b_l = p_l + s_l / sum_k s_k (B - sum_k p_k)
// The host integerises (water-filling at each layer's span, then largest remainder); the reference truncates each
// share and spreads the excess over the layers below their cap evenly (CakeScorerPress.adjust_budgets), so a layer
// may differ by one entry, and a layer past its span hands its excess on proportionally here, evenly there.
// Falls back (with a warning) to the same fraction of every span beyond the protected positions when every s_l is 0,
// and to a split by protected counts when B does not cover them (the host then keeps protected positions in order).
// CAKE's preference is non-negative; another signal's negative s_l (a profile may be negative) counts as 0, with a
// warning.
#include <ripplekv/sdk.hpp>

#include <algorithm>
#include <string>
#include <vector>

namespace {

class CakeAllocator final : public rkv::sdk::Allocator {
 public:
  static rkv::sdk::Descriptor describe() {
    return rkv::sdk::Descriptor("org.ripplekv.allocator.cake", RKV_KIND_ALLOCATOR, "1.0.0",
                                "CAKE layer split: each layer's window, the rest in proportion to the profile")
        .flags(RKV_FLAG_NEEDS_PROFILE);
  }
  CakeAllocator(const rkv::sdk::Params&, const rkv::sdk::Host&) {}

  void allocate(const rkv::sdk::AllocationRequest& req, double* budgets, rkv::sdk::Diagnostics& diag) override {
    const int64_t L = req.n_layers;
    const double B = static_cast<double>(req.budget_total);
    std::vector<double> kept(static_cast<size_t>(L));  // p_l: the protected positions the layer keeps anyway
    double protected_sum = 0.0, pref_sum = 0.0, free_span = 0.0;
    int64_t negative = 0;
    std::vector<double> pref(static_cast<size_t>(L));
    for (int64_t l = 0; l < L; ++l) {
      negative += req.profile[l] < 0.0 ? 1 : 0;
      pref[static_cast<size_t>(l)] = std::max(req.profile[l], 0.0);
      kept[static_cast<size_t>(l)] = static_cast<double>(std::min(std::max<int64_t>(req.protected_count, 0), req.span(l)));
      protected_sum += kept[static_cast<size_t>(l)];
      pref_sum += pref[static_cast<size_t>(l)];
      free_span += static_cast<double>(req.span(l)) - kept[static_cast<size_t>(l)];
    }
    if (negative > 0)
      diag.warning("cake: " + std::to_string(negative) + " layer preference(s) < 0 counted as 0 (CAKE's preference "
                   "is a product of non-negative terms)");
    if (B <= protected_sum) {  // not even the windows fit: split B as they are
      diag.warning("cake: the budget " + std::to_string(req.budget_total) + " does not cover every layer's " +
                   std::to_string(req.protected_count) + " protected positions; split in proportion to them");
      for (int64_t l = 0; l < L; ++l)
        budgets[l] = protected_sum > 0.0 ? B * kept[static_cast<size_t>(l)] / protected_sum
                                         : B * static_cast<double>(req.span(l)) / free_span;
      return;
    }
    const double rest = B - protected_sum;
    if (pref_sum <= 0.0)
      diag.warning("cake: every layer preference is 0; the rest of the budget goes to every layer alike");
    for (int64_t l = 0; l < L; ++l) {
      const double share = pref_sum > 0.0 ? pref[static_cast<size_t>(l)] / pref_sum
                                          : (static_cast<double>(req.span(l)) - kept[static_cast<size_t>(l)]) / free_span;
      budgets[l] = kept[static_cast<size_t>(l)] + share * rest;
    }
  }
};

}  // namespace

RKV_PLUGIN(CakeAllocator)
