// Test fixture for `plugins check` (never installed): a model-free signal that breaks one conformance rule, picked by
// `mode`:
//   ok               s_l = d_{i,l} = l + 1 (passes every rule)
//   nan_last         s_{L-1} = NaN when L > 1 (breaks finite)
//   skip_examples    leaves d unwritten (the host's NaN stays; breaks finite)
//   nondeterministic s_l = l + 1 + (call counter) / 1000 (breaks deterministic)
//   fail_one_layer   returns an error when L = 1 (breaks profile_call)
#include <ripplekv/sdk.hpp>

#include <cmath>
#include <string>

namespace {

int64_t g_calls = 0;

class ConformSignal final : public rkv::sdk::Signal {
 public:
  static rkv::sdk::Descriptor describe() {
    return rkv::sdk::Descriptor("org.ripplekv.test.conform_signal", RKV_KIND_SIGNAL, "0.0.1",
                                "test fixture: a signal that breaks one conformance rule")
        .param(rkv::sdk::Param::Choice("mode", "ok",
                                       {"ok", "nan_last", "skip_examples", "nondeterministic", "fail_one_layer"},
                                       "which rule to break"));
  }
  ConformSignal(const rkv::sdk::Params& p, const rkv::sdk::Host&) : mode_(p.get_string("mode")) {}

  void profile(const rkv_signal_request& r, double* s, double* per_example, rkv::sdk::Diagnostics&) override {
    const int64_t L = r.n_layers;
    if (mode_ == "fail_one_layer" && L == 1) throw rkv::sdk::Error(RKV_ERROR_INVALID_ARGUMENT, "needs two layers");
    ++g_calls;
    for (int64_t l = 0; l < L; ++l) s[l] = double(l + 1) + (mode_ == "nondeterministic" ? double(g_calls) / 1000 : 0);
    if (mode_ != "skip_examples")
      for (int64_t i = 0; i < r.n_examples; ++i)
        for (int64_t l = 0; l < L; ++l) per_example[i * L + l] = s[l];
    if (mode_ == "nan_last" && L > 1) s[L - 1] = std::nan("");
  }

 private:
  std::string mode_;
};

}  // namespace

RKV_PLUGIN(ConformSignal)
