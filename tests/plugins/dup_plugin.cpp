// Test fixture: built twice (dup_a.so, dup_b.so), both claiming the id "org.test.dup".
#include <ripplekv/sdk.hpp>

namespace {

class Dup final : public rkv::sdk::Allocator {
 public:
  static rkv::sdk::Descriptor describe() {
    return rkv::sdk::Descriptor("org.test.dup", RKV_KIND_ALLOCATOR, "0.1.0", "test fixture: duplicate id");
  }
  Dup(const rkv::sdk::Params&, const rkv::sdk::Host&) {}
  void allocate(const rkv::sdk::AllocationRequest& r, double* b, rkv::sdk::Diagnostics&) override {
    for (int64_t l = 0; l < r.n_layers; ++l) b[l] = double(r.budget_total) / double(r.n_layers);
  }
};

}  // namespace

RKV_REGISTER_PLUGIN(Dup)
RKV_PLUGIN_LIBRARY(RKV_DUP_LIBRARY_NAME)
