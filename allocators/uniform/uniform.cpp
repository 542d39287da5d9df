// Uniform allocator: every compressible layer gets the same budget, b_l = B / |A| (DESIGN.md "uniform").
// The host integerizes (largest remainder, ties to the lower layer index).
#include <ripplekv/sdk.hpp>

namespace {

class Uniform final : public rkv::sdk::Allocator {
 public:
  static rkv::sdk::Descriptor describe() {
    return rkv::sdk::Descriptor("org.ripplekv.allocator.uniform", RKV_KIND_ALLOCATOR, "1.0.0",
                                "Same budget for every compressible layer: b_l = B / |A|");
  }
  Uniform(const rkv::sdk::Params&, const rkv::sdk::Host&) {}

  void allocate(const rkv::sdk::AllocationRequest& r, double* budgets, rkv::sdk::Diagnostics&) override {
    const double per_layer = static_cast<double>(r.budget_total) / static_cast<double>(r.n_layers);
    for (int64_t l = 0; l < r.n_layers; ++l) budgets[l] = per_layer;
  }
};

}  // namespace

RKV_PLUGIN(Uniform)
