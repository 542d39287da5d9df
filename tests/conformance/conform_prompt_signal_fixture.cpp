// Test fixture for `plugins check` (never installed): a per-prompt signal (rkv.prompt_signal/1) that breaks one
// conformance rule, picked by `mode`:
//   ok             s_l = the mean of the layer's keys (requests RKV_STAT_KEYS; passes every rule)
//   unrequested    also reads the window attention, which it never requested (the host passes NULL: require_tensor
//                  refuses it; breaks value_finite)
//   constant       s_l = layer + 1 whatever the prompt (breaks varies_with_prompt)
//   nan_long       NaN when T > 64 (breaks value_finite)
//   nondeterministic  s_l + (call counter) / 1000 (breaks deterministic)
#include <ripplekv/sdk.hpp>

#include <cmath>
#include <string>

namespace {

int64_t g_calls = 0;

class ConformPromptSignal final : public rkv::sdk::PromptSignal {
 public:
  static rkv::sdk::Descriptor describe() {
    return rkv::sdk::Descriptor("org.ripplekv.test.conform_prompt_signal", RKV_KIND_SIGNAL, "0.0.1",
                                "test fixture: a per-prompt signal that breaks one conformance rule")
        .param(rkv::sdk::Param::Choice("mode", "ok", {"ok", "unrequested", "constant", "nan_long", "nondeterministic"},
                                       "which rule to break"))
        .flags(RKV_FLAG_PER_PROMPT);
  }
  ConformPromptSignal(const rkv::sdk::Params& p, const rkv::sdk::Host&) : mode_(p.get_string("mode")) {}

  rkv_scorer_requirements requirements(const rkv_attention_shape& shape) override {
    shape_ = shape;
    rkv_scorer_requirements r{};
    r.stats = RKV_STAT_KEYS;
    return r;
  }

  double layer_value(const rkv_scorer_inputs& in, rkv::sdk::Diagnostics&) override {
    const int64_t T = in.prefix_tokens;
    rkv::sdk::require_tensor(in.keys, "keys", kDLFloat, 32, {shape_.n_kv_heads, T, shape_.head_dim});
    if (mode_ == "unrequested") rkv::sdk::require_tensor(in.window_attention, "window_attention", kDLFloat, 32, {shape_.n_heads, T});
    if (mode_ == "constant") return static_cast<double>(in.layer + 1);
    if (mode_ == "nan_long" && T > 64) return std::nan("");
    const float* k = rkv::sdk::tensor_data<const float>(in.keys);
    double sum = 0.0;
    const int64_t n = shape_.n_kv_heads * T * shape_.head_dim;
    for (int64_t i = 0; i < n; ++i) sum += k[i];
    ++g_calls;
    return sum / static_cast<double>(n) + (mode_ == "nondeterministic" ? static_cast<double>(g_calls) / 1000 : 0.0);
  }

 private:
  std::string mode_;
  rkv_attention_shape shape_{};
};

}  // namespace

RKV_PLUGIN(ConformPromptSignal)
