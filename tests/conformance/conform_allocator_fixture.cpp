// Test fixture for `plugins check` (never installed): an allocator that breaks one conformance rule, picked by `mode`:
//   ok               b_l = B / |A| (passes every rule)
//   nondeterministic moves 1e-9 B * (call counter) from layer 1 to layer 0 (within the sum tolerance; breaks
//                    deterministic)
//   short_by_one     sum B - 1 when B is above 100 (breaks sums_to_B on large budgets only)
//   negative         layer 0 gets -1 and the last layer the difference, keeping the sum (breaks non_negative when
//                    |A| >= 2)
//   fail_one_layer   returns an error when |A| = 1 (breaks allocate_call)
#include <ripplekv/sdk.hpp>

#include <string>

namespace {

int64_t g_calls = 0;

class ConformAllocator final : public rkv::sdk::Allocator {
 public:
  static rkv::sdk::Descriptor describe() {
    return rkv::sdk::Descriptor("org.ripplekv.test.conform_allocator", RKV_KIND_ALLOCATOR, "0.0.1",
                                "test fixture: an allocator that breaks one conformance rule")
        .param(rkv::sdk::Param::Choice("mode", "ok", {"ok", "nondeterministic", "short_by_one", "negative", "fail_one_layer"},
                                       "which rule to break"));
  }
  ConformAllocator(const rkv::sdk::Params& p, const rkv::sdk::Host&) : mode_(p.get_string("mode")) {}

  void allocate(const rkv::sdk::AllocationRequest& r, double* b, rkv::sdk::Diagnostics&) override {
    if (mode_ == "fail_one_layer" && r.n_layers == 1)
      throw rkv::sdk::Error(RKV_ERROR_INVALID_ARGUMENT, "needs two layers");
    const double B = double(r.budget_total), c = B / double(r.n_layers);
    for (int64_t l = 0; l < r.n_layers; ++l) b[l] = c;
    ++g_calls;
    if (mode_ == "nondeterministic" && r.n_layers >= 2) {
      const double eps = 1e-9 * B * double(g_calls % 7 + 1);
      b[0] += eps, b[1] -= eps;
    }
    if (mode_ == "short_by_one" && r.budget_total > 100) b[0] -= 1.0;
    if (mode_ == "negative" && r.n_layers >= 2) b[r.n_layers - 1] += b[0] + 1.0, b[0] = -1.0;
  }

 private:
  std::string mode_;
};

}  // namespace

RKV_PLUGIN(ConformAllocator)
