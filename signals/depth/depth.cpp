// Depth signal (docs/ARCHITECTURE.md "depth"): a model-free baseline profile,
//   s_l = l / (L - 1)        (order = "ascending")
//   s_l = 1 - l / (L - 1)    (order = "descending")
// and 0 when L = 1. Every calibration example gets the same row.
#include <ripplekv/sdk.hpp>

namespace {

class Depth final : public rkv::sdk::Signal {
 public:
  static rkv::sdk::Descriptor describe() {
    return rkv::sdk::Descriptor("org.ripplekv.signal.depth", RKV_KIND_SIGNAL, "1.0.0",
                                "Depth baseline: s_l = l / (L - 1), or 1 - l / (L - 1) descending")
        .param(rkv::sdk::Param::Choice("order", "ascending", {"ascending", "descending"},
                                       "ascending: deeper layers more sensitive; descending: the reverse"));
  }
  Depth(const rkv::sdk::Params& p, const rkv::sdk::Host&) : descending_(p.get_string("order") == "descending") {}

  void profile(const rkv_signal_request& r, double* s, double* per_example, rkv::sdk::Diagnostics&) override {
    const int64_t L = r.n_layers;
    for (int64_t l = 0; l < L; ++l) {
      const double x = L == 1 ? 0.0 : static_cast<double>(l) / static_cast<double>(L - 1);
      s[l] = L == 1 ? 0.0 : (descending_ ? 1.0 - x : x);
    }
    for (int64_t i = 0; i < r.n_examples; ++i)
      for (int64_t l = 0; l < L; ++l) per_example[i * L + l] = s[l];
  }

 private:
  bool descending_;
};

}  // namespace

RKV_PLUGIN(Depth)
