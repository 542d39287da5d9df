// PyramidKV allocator (Cai et al., "PyramidKV: Dynamic KV Cache Compression based on Pyramidal Information
// Funneling", 2024; reference: Zefan-Cai/KVCache-Factory, pyramidkv_utils.py), as docs/ARCHITECTURE.md "pyramid" states it:
//
//   C = B / |A|,  lo = (C - w) / beta,  hi = 2 (C - w) - lo
//   if hi > T - w:  hi = T - w,  lo = 2 (C - w) - hi
//   b_l = w + hi - l (hi - lo) / (|A| - 1)        (l = rank in A; uniform when |A| = 1)
//
// computed in floating point (sum exactly B; the reference floors and overspends). When the schedule is infeasible
// (C <= w or lo < 0) the allocator falls back to uniform and reports a warning, never silently.
// w is the scorer's protected count in a run; the `window` param when set explicitly or when there is no scorer.
#include <ripplekv/sdk.hpp>

#include <sstream>

namespace {

class Pyramid final : public rkv::sdk::Allocator {
 public:
  static rkv::sdk::Descriptor describe() {
    return rkv::sdk::Descriptor("org.ripplekv.allocator.pyramid", RKV_KIND_ALLOCATOR, "1.0.0",
                                "PyramidKV: budgets fall linearly with depth (more to lower layers)")
        .param(rkv::sdk::Param::Float("beta", 20.0, "ratio hi/lo control: lo = (C - w) / beta").min(1.0))
        .param(rkv::sdk::Param::Int("window", 32,
                                    "protected window w in positions; default: the scorer's protected count in a run, "
                                    "32 in standalone allocate")
                   .min(0));
  }
  Pyramid(const rkv::sdk::Params& p, const rkv::sdk::Host&)
      : beta_(p.get_float("beta")), window_(p.get_int("window")), window_set_(p.is_set("window")) {}

  void allocate(const rkv::sdk::AllocationRequest& r, double* budgets, rkv::sdk::Diagnostics& diag) override {
    const double n = static_cast<double>(r.n_layers);
    const double C = static_cast<double>(r.budget_total) / n;
    const double T = static_cast<double>(r.prefix_tokens);
    const double w = static_cast<double>((window_set_ || r.protected_count < 0) ? window_ : r.protected_count);

    double lo = (C - w) / beta_;
    double hi = 2.0 * (C - w) - lo;
    if (hi > T - w) {
      hi = T - w;
      lo = 2.0 * (C - w) - hi;
    }
    if (C <= w || lo < 0.0) {
      std::ostringstream os;
      os << "pyramid schedule infeasible (C = B/|A| = " << C << ", w = " << w << ", lo = " << lo
         << "); fell back to uniform";
      diag.warning(os.str());
      for (int64_t l = 0; l < r.n_layers; ++l) budgets[l] = C;
      return;
    }
    if (r.n_layers == 1) {
      budgets[0] = C;
      return;
    }
    for (int64_t l = 0; l < r.n_layers; ++l)
      budgets[l] = w + hi - static_cast<double>(l) * (hi - lo) / (n - 1.0);
  }

 private:
  double beta_;
  int64_t window_;
  bool window_set_;
};

}  // namespace

RKV_PLUGIN(Pyramid)
