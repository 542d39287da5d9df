// Shared pieces of the CUDA backend tests: the fixture that skips without a device, the synthetic model with
// SmolLM2-135M's shapes (D 576, H 9, H_kv 3, d 64, d_ff 1536; fewer layers and a smaller vocabulary), comparison
// helpers. The same sources build the real suite (test_gpu, rkv::cuda) and the CPU-emulated one (test_gpu_emu,
// rkv::cuda_emu, smaller sizes): see CMakeLists.txt.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/check.hpp"
#include "backend/cuda/context.hpp"
#include "model/half.hpp"
#include "model/synthetic_model.hpp"

namespace rc = rkv::RKV_CUDA_NS;

namespace rkv_gpu_test {

#if RKV_CUDA_EMU
constexpr bool kEmulated = true;
#else
constexpr bool kEmulated = false;
#endif

/// Sizes of the forward tests: full depth on a GPU, a cut-down model under the emulator. The environment variables
/// RKV_GPU_TEST_LAYERS, RKV_GPU_TEST_VOCAB and RKV_GPU_TEST_PROMPT override them (positive integers).
struct Sizes {
  int64_t layers, vocab, prompt, decode_steps;
};
inline int64_t env_size(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  const long long n = std::atoll(v);
  return n > 0 ? n : fallback;
}
inline Sizes sizes() {
  const Sizes d = kEmulated ? Sizes{2, 512, 100, 16} : Sizes{30, 49152, 300, 16};
  return Sizes{env_size("RKV_GPU_TEST_LAYERS", d.layers), env_size("RKV_GPU_TEST_VOCAB", d.vocab),
               env_size("RKV_GPU_TEST_PROMPT", d.prompt), d.decode_steps};
}

/// SmolLM2-135M's shapes with `layers` layers and `vocab` tokens (RoPE theta 100000, tied embeddings, eps 1e-5).
inline rkv::ModelConfig smollm2_shapes(int64_t layers, int64_t vocab) {
  rkv::ModelConfig c = rkv::synthetic_config("llama", 9, 3, 64, layers);
  c.d_model = 576;
  c.d_ff = 1536;
  c.vocab_size = vocab;
  c.context_length = 8192;
  c.rope_theta = 100000.0;
  return c;
}

/// Deterministic token ids in [0, vocab).
inline std::vector<int32_t> random_tokens(size_t n, int64_t vocab, uint64_t seed) {
  rkv::SyntheticRng r(seed);
  std::vector<int32_t> t(n);
  for (auto& x : t) x = static_cast<int32_t>((r.next() * 0.5f + 0.5f) * static_cast<float>(vocab - 1));
  return t;
}

/// max_i |a_i - b_i|.
inline double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double m = 0.0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    m = std::max(m, std::fabs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
  return m;
}

inline double max_abs(const std::vector<float>& a) {
  double m = 0.0;
  for (float x : a) m = std::max(m, std::fabs(static_cast<double>(x)));
  return m;
}

inline int64_t argmax(const float* v, int64_t n) { return std::max_element(v, v + n) - v; }

/// Gap between the largest and second-largest value of v[0..n).
inline double top2_margin(const float* v, int64_t n) {
  float a = -INFINITY, b = -INFINITY;
  for (int64_t i = 0; i < n; ++i) {
    if (v[i] > a) {
      b = a;
      a = v[i];
    } else if (v[i] > b) {
      b = v[i];
    }
  }
  return static_cast<double>(a) - static_cast<double>(b);
}

/// bfloat16 rounding of a float (round to nearest even), as the device stores it.
inline float bf16_round(float x) { return rkv::bf16_to_fp32(rkv::fp32_to_bf16(x)); }

/// Fixture: a Context on device 0, or a skip with the reason when there is none.
class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (rc::device_count() == 0)
      GTEST_SKIP() << "no CUDA device: " << rc::device_unavailable_reason() << " (the gpu tests need one)";
    ctx = std::make_unique<rc::Context>();
  }
  std::unique_ptr<rc::Context> ctx;
};

}  // namespace rkv_gpu_test
