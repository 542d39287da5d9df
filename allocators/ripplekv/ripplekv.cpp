// RippleKV allocator: more budget to layers whose cache perturbation moves the output more (docs/ARCHITECTURE.md "ripplekv
// allocator"; the paper's equations are not in its text, this is the project's reading):
//
//   s^_l = (s_l - min s) / (max s - min s)      (all zeros when the profile is constant)
//   m_l  = r ^ s^_l                             (r >= 1; multipliers before clipping span exactly [1, r])
//   m_l  = clip(m_l, 1/gamma, gamma)            (gamma >= 1)
//   b_l  = B span_l m_l / sum_k span_k m_k      (the host integerizes)
//
// span_l is what layer l can hold (min(T, window) for a sliding-window layer, else T), so without sliding windows
// b_l = (B / |A|) m_l / mean(m). r = 1 is exactly uniform (the same fraction of every span). Budgets are invariant to a positive affine change of the profile; profiles may be
// negative (only NaN, infinity or a wrong length are rejected, by the host).
#include <ripplekv/sdk.hpp>

#include <algorithm>
#include <cmath>

namespace {

class RippleKV final : public rkv::sdk::Allocator {
 public:
  static rkv::sdk::Descriptor describe() {
    return rkv::sdk::Descriptor("org.ripplekv.allocator.ripplekv", RKV_KIND_ALLOCATOR, "1.1.0",
                                "RippleKV: budget multipliers r^(normalized sensitivity), clipped to [1/gamma, gamma]")
        .param(rkv::sdk::Param::Float("r", 1.5, "multiplier ratio between the most and least sensitive layer").min(1.0))
        .param(rkv::sdk::Param::Float("gamma", 2.0, "clip multipliers to [1/gamma, gamma]").min(1.0))
        .flags(RKV_FLAG_NEEDS_PROFILE);
  }
  RippleKV(const rkv::sdk::Params& p, const rkv::sdk::Host&) : r_(p.get_float("r")), gamma_(p.get_float("gamma")) {}

  void allocate(const rkv::sdk::AllocationRequest& req, double* budgets, rkv::sdk::Diagnostics&) override {
    const int64_t n = req.n_layers;
    const double* s = req.profile;
    const double s_min = *std::min_element(s, s + n);
    const double s_max = *std::max_element(s, s + n);
    // Halves first: s_max - s_min overflows to inf for a finite profile spanning more than DBL_MAX (e.g. +-1e308);
    // the ratio below is the same.
    const double range = s_max / 2 - s_min / 2;

    double weight_sum = 0.0;  // sum_k span_k m_k
    for (int64_t l = 0; l < n; ++l) {
      const double s_hat = range > 0.0 ? (s[l] / 2 - s_min / 2) / range : 0.0;
      const double m = std::clamp(std::pow(r_, s_hat), 1.0 / gamma_, gamma_);
      budgets[l] = static_cast<double>(req.span(l)) * m;
      weight_sum += budgets[l];
    }
    for (int64_t l = 0; l < n; ++l) budgets[l] = static_cast<double>(req.budget_total) * budgets[l] / weight_sum;
  }

 private:
  double r_, gamma_;
};

}  // namespace

RKV_PLUGIN(RippleKV)
