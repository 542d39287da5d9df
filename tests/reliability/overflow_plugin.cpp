// Test fixture (sanitizer build only): plugins that fill their output correctly and then write ONE element past its
// end, so AddressSanitizer must report a heap-buffer-overflow inside the plugin's call. org.test.overflow_scorer writes scores[H_kv * T], org.test.overflow_allocator budgets[|A|],
// org.test.overflow_signal s[L].
#include <ripplekv/sdk.hpp>

namespace {

/// Keeps the compiler from proving the write out of bounds and dropping or diagnosing it.
template <typename T>
void write_at(T* base, int64_t index, T value) {
  T* volatile p = base;
  p[index] = value;
}

class OverflowScorer final : public rkv::sdk::Scorer {
 public:
  static rkv::sdk::Descriptor describe() {
    return rkv::sdk::Descriptor("org.test.overflow_scorer", RKV_KIND_SCORER, "0.1.0", "test fixture: writes past scores");
  }
  OverflowScorer(const rkv::sdk::Params&, const rkv::sdk::Host&) {}
  rkv_scorer_requirements requirements(const rkv_attention_shape&) override { return rkv_scorer_requirements{}; }
  void score(const rkv_scorer_inputs&, float* scores, int64_t n_kv_heads, int64_t T, rkv::sdk::Diagnostics&) override {
    for (int64_t i = 0; i < n_kv_heads * T; ++i) scores[i] = 1.0f;
    write_at(scores, n_kv_heads * T, 1.0f);
  }
};

class OverflowAllocator final : public rkv::sdk::Allocator {
 public:
  static rkv::sdk::Descriptor describe() {
    return rkv::sdk::Descriptor("org.test.overflow_allocator", RKV_KIND_ALLOCATOR, "0.1.0",
                                "test fixture: writes past budgets");
  }
  OverflowAllocator(const rkv::sdk::Params&, const rkv::sdk::Host&) {}
  void allocate(const rkv::sdk::AllocationRequest& r, double* b, rkv::sdk::Diagnostics&) override {
    for (int64_t l = 0; l < r.n_layers; ++l) b[l] = double(r.budget_total) / double(r.n_layers);
    write_at(b, r.n_layers, 1.0);
  }
};

class OverflowSignal final : public rkv::sdk::Signal {
 public:
  static rkv::sdk::Descriptor describe() {
    return rkv::sdk::Descriptor("org.test.overflow_signal", RKV_KIND_SIGNAL, "0.1.0", "test fixture: writes past s");
  }
  OverflowSignal(const rkv::sdk::Params&, const rkv::sdk::Host&) {}
  void profile(const rkv_signal_request& r, double* s, double* per_example, rkv::sdk::Diagnostics&) override {
    for (int64_t l = 0; l < r.n_layers; ++l) s[l] = 1.0;
    for (int64_t i = 0; i < r.n_examples * r.n_layers; ++i) per_example[i] = 1.0;
    write_at(s, r.n_layers, 1.0);
  }
};

}  // namespace

RKV_REGISTER_PLUGIN(OverflowScorer)
RKV_REGISTER_PLUGIN(OverflowAllocator)
RKV_REGISTER_PLUGIN(OverflowSignal)
RKV_PLUGIN_LIBRARY("ripplekv test fixture: output overflow")
