// Test fixture: a well-behaved allocator with one parameter of every type. It reports a warning on every call
// (so tests can check warnings reach the caller) and throws when `mode` is "throw".
#include <ripplekv/sdk.hpp>

#include <stdexcept>

namespace {

class Good final : public rkv::sdk::Allocator {
 public:
  static rkv::sdk::Descriptor describe() {
    return rkv::sdk::Descriptor("org.test.good", RKV_KIND_ALLOCATOR, "0.1.0", "test fixture: uniform with a warning")
        .param(rkv::sdk::Param::Bool("flag", false, "a bool"))
        .param(rkv::sdk::Param::Int("count", 3, "an int in [1, 10]").min(1).max(10))
        .param(rkv::sdk::Param::Float("scale", 0.5, "a float in [0, 1]").min(0).max(1))
        .param(rkv::sdk::Param::Choice("mode", "ok", {"ok", "throw", "throw_unknown"}, "behaviour"))
        .param(rkv::sdk::Param::String("label", "x", "a string"));
  }
  Good(const rkv::sdk::Params& p, const rkv::sdk::Host&) : mode_(p.get_string("mode")), count_(p.get_int("count")) {}

  void allocate(const rkv::sdk::AllocationRequest& r, double* budgets, rkv::sdk::Diagnostics& diag) override {
    if (mode_ == "throw") throw std::runtime_error("deliberate failure in allocate");
    if (mode_ == "throw_unknown") throw 42;
    diag.warning("count is " + std::to_string(count_));
    for (int64_t l = 0; l < r.n_layers; ++l) budgets[l] = double(r.budget_total) / double(r.n_layers);
  }

 private:
  std::string mode_;
  int64_t count_;
};

}  // namespace

RKV_PLUGIN(Good)
