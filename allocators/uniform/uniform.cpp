// Uniform allocator: every compressible layer keeps the same fraction of what it can hold (docs/ARCHITECTURE.md "uniform"):
//
//   b_l = B span_l / sum_k span_k          (= B / |A| when every span is T, i.e. a model without sliding windows)
//
// span_l = min(T, window_l) for a sliding-window layer (cache/budget.hpp has the Gemma 3 worked example). The host
// integerizes (largest remainder, ties to the lower layer index).
#include <ripplekv/sdk.hpp>

namespace {

class Uniform final : public rkv::sdk::Allocator {
 public:
  static rkv::sdk::Descriptor describe() {
    return rkv::sdk::Descriptor("org.ripplekv.allocator.uniform", RKV_KIND_ALLOCATOR, "1.1.0",
                                "Same fraction of every compressible layer's span: b_l = B span_l / sum span "
                                "(B / |A| without sliding windows)");
  }
  Uniform(const rkv::sdk::Params&, const rkv::sdk::Host&) {}

  void allocate(const rkv::sdk::AllocationRequest& r, double* budgets, rkv::sdk::Diagnostics&) override {
    double span_sum = 0.0;
    for (int64_t l = 0; l < r.n_layers; ++l) span_sum += static_cast<double>(r.span(l));
    for (int64_t l = 0; l < r.n_layers; ++l)
      budgets[l] = static_cast<double>(r.budget_total) * static_cast<double>(r.span(l)) / span_sum;
  }
};

}  // namespace

RKV_PLUGIN(Uniform)
