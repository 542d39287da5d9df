// The model families on the CUDA backend against transformers (tests/fixtures/families; the CPU side is
// tests/model/test_families.cpp): each family's random model from its Hugging Face folder and from its f32 GGUF,
// prefilled and decoded 8 greedy steps on the device. FP32: every prompt position's and step's logits within 1e-4
// relative (max |delta| / max |logit|) of transformers' float64 ones and the same greedy ids; BF16: within 5e-2
// (bfloat16 weights, activations and KV cache) with the same greedy ids wherever transformers' top-2 margin exceeds
// twice that. Runs on a device and under the CPU emulator (test_gpu_emu), where the models are small enough.
#include "backend/cuda/forward.hpp"
#include "common/family_fixtures.hpp"
#include "gpu_test.hpp"
#include "model/model.hpp"

using namespace rkv_gpu_test;

namespace {

class FamiliesOnDevice : public GpuTest {};

/// float32 [T + steps, V] on the device: every prompt position's logits, then one row per decode step fed `steps`.
std::vector<float> device_logits(const rc::DeviceModel& m, const std::vector<int32_t>& ids,
                                 const std::vector<int32_t>& steps) {
  rc::DeviceWorkspace ws(m.context());
  const int64_t T = static_cast<int64_t>(ids.size());
  rc::DeviceKVCache cache = rc::make_cache(m, T + static_cast<int64_t>(steps.size()));
  std::vector<float> out = rc::prefill(m, ids, 0, cache, ws, rkv::LogitsFor::All);
  for (size_t s = 0; s < steps.size(); ++s) {
    const std::vector<float> row = rc::decode_step(m, steps[s], T + static_cast<int64_t>(s), cache, ws);
    out.insert(out.end(), row.begin(), row.end());
  }
  return out;
}

TEST_F(FamiliesOnDevice, SafetensorsAndF32GgufMatchTransformersInBothPrecisions) {
  const auto families = rkv_test::family_fixtures();
  ASSERT_EQ(families.size(), 7u);
  for (const auto& f : families) {
    const struct {
      std::filesystem::path path;
      std::string logits;
      std::vector<int32_t> greedy;
    } files[] = {{f.hf(), f.hf_logits, f.greedy}, {f.gguf_f32(), f.gguf_logits, f.greedy_gguf}};
    for (const auto& file : files) {
      const rkv::Model model = rkv::load_model(file.path.string(), rkv::WeightStorage::f32);
      const std::vector<float> want = f.logits(file.logits);
      ASSERT_FALSE(want.empty()) << f.name;
      const int64_t T = static_cast<int64_t>(f.ids.size()), V = f.vocab, S = static_cast<int64_t>(file.greedy.size());
      for (rc::Precision p : {rc::Precision::FP32, rc::Precision::BF16}) {
        SCOPED_TRACE(f.name + " " + file.path.filename().string() + " " + rc::precision_name(p));
        const double tol = p == rc::Precision::FP32 ? 1e-4 : 5e-2;
        const rc::DeviceModel dm(*ctx, model, p);
        const std::vector<float> got = device_logits(dm, f.ids, file.greedy);
        ASSERT_EQ(got.size(), want.size());
        const double rel = rkv_test::max_relative_error(got, want, V, 0, T + S);
        EXPECT_LE(rel, tol);
        const std::vector<int32_t> greedy = rkv_test::greedy_of(got, T, S, V);
        const double scale = max_abs(want);
        for (int64_t s = 0; s < S; ++s) {
          if (p == rc::Precision::FP32 || top2_margin(want.data() + (T - 1 + s) * V, V) / scale > 2 * tol)
            EXPECT_EQ(greedy[static_cast<size_t>(s)], file.greedy[static_cast<size_t>(s)]) << "step " << s;
        }
        std::printf("[ %-8s %-15s %s ] max rel error %.2e\n", f.name.c_str(), file.path.filename().c_str(),
                    rc::precision_name(p), rel);
      }
    }
  }
}

}  // namespace
