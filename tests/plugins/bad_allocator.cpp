// Test fixture: an allocator whose output is wrong in the way `mode` says, so the host's validation can be tested.
//   nan: layer 0 gets NaN; negative: layer 0 gets -1 (the rest keep the sum B); wrong_sum: every layer gets B/|A| + 1;
//   above_t: layer 0 gets B - (|A| - 1), the rest 1 (legal: the host caps it at T and water-fills the excess);
//   error: returns an error status with a message.
#include <ripplekv/sdk.hpp>

#include <cmath>

namespace {

class BadAllocator final : public rkv::sdk::Allocator {
 public:
  static rkv::sdk::Descriptor describe() {
    return rkv::sdk::Descriptor("org.test.bad_allocator", RKV_KIND_ALLOCATOR, "0.1.0", "test fixture: wrong outputs")
        .param(rkv::sdk::Param::Choice("mode", "nan", {"nan", "negative", "wrong_sum", "above_t", "error"}, "fault"));
  }
  BadAllocator(const rkv::sdk::Params& p, const rkv::sdk::Host&) : mode_(p.get_string("mode")) {}

  void allocate(const rkv::sdk::AllocationRequest& r, double* b, rkv::sdk::Diagnostics&) override {
    const double c = double(r.budget_total) / double(r.n_layers);
    for (int64_t l = 0; l < r.n_layers; ++l) b[l] = c;
    if (mode_ == "nan") b[0] = std::nan("");
    if (mode_ == "negative") b[0] = -1.0, b[1] += c + 1.0;
    if (mode_ == "wrong_sum")
      for (int64_t l = 0; l < r.n_layers; ++l) b[l] = c + 1.0;
    if (mode_ == "above_t") {
      b[0] = double(r.budget_total - (r.n_layers - 1));
      for (int64_t l = 1; l < r.n_layers; ++l) b[l] = 1.0;
    }
    if (mode_ == "error") throw rkv::sdk::Error(RKV_ERROR_INVALID_ARGUMENT, "this allocator refuses on purpose");
  }

 private:
  std::string mode_;
};

}  // namespace

RKV_PLUGIN(BadAllocator)
