// model.weights = "quantized" on synthetic GGUF files and Hugging Face folders (model/quant_matrix.hpp): the matrices
// a file stores in Q4_0, Q4_1 or Q8_0 are kept as stored (Q/K rows unpermuted), other types (and a folder's F16/BF16
// tensors) are requantized to Q8_0, and the forward on them agrees with the float32 load of the same file.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>

#include "backend/cpu/forward.hpp"
#include "backend/cpu/threads.hpp"
#include "model/ggml_types.hpp"
#include "model/model.hpp"
#include "model/synthetic_model.hpp"
#include "model_writers.hpp"

namespace {

namespace fs = std::filesystem;
using rkv::GgmlType;
using rkv::WeightStorage;

/// A llama-shaped synthetic model whose matrices have widths divisible by 32: D 64, F 96, 4 heads of 16, 2 KV heads.
rkv::Model wide_synthetic(const std::string& arch = "llama") {
  rkv::ModelConfig c = rkv::synthetic_config(arch, 4, 2, 16, 2);
  c.d_model = 64;
  c.d_ff = 96;
  return rkv::synthetic_model(c, 42);
}

fs::path write_gguf(const rkv::Model& m, GgmlType type, int64_t down_type, const std::string& name) {
  const fs::path p = fs::path(testing::TempDir()) / name;
  rkv_test::gguf_writer_for(m, static_cast<uint32_t>(type), down_type).write(p.string());
  return p;
}

/// Every row of `q` dequantized equals the same row of the float32 load `f` bit for bit.
void expect_same_rows(const rkv::QuantMatrix& q, const std::vector<float>& f, const std::string& what) {
  ASSERT_FALSE(q.empty()) << what;
  ASSERT_EQ(static_cast<size_t>(q.rows * q.cols), f.size()) << what;
  std::vector<float> row(static_cast<size_t>(q.cols));
  for (int64_t r = 0; r < q.rows; ++r) {
    rkv::dequantize_matrix_row(q, r, row.data());
    for (int64_t j = 0; j < q.cols; ++j) ASSERT_EQ(row[j], f[static_cast<size_t>(r * q.cols + j)]) << what << " [" << r << ", " << j << "]";
  }
}

TEST(QuantizedLoad, KeepsNativeBlocksWithQkRowsInHuggingFaceOrder) {
  for (GgmlType type : {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q8_0}) {
    const fs::path p = write_gguf(wide_synthetic(), type, -1, "rkv_quant_native.gguf");
    const rkv::Model f = rkv::load_model(p.string(), WeightStorage::f32);
    const rkv::Model q = rkv::load_model(p.string(), WeightStorage::quantized);
    EXPECT_EQ(f.weights, WeightStorage::f32);
    EXPECT_EQ(q.weights, WeightStorage::quantized);
    EXPECT_EQ(q.parameter_count(), f.parameter_count());
    EXPECT_TRUE(q.tok_embd.empty());
    EXPECT_EQ(q.tok_embd_q.type, static_cast<uint32_t>(type));
    expect_same_rows(q.tok_embd_q, f.tok_embd, "token_embd");
    for (size_t l = 0; l < f.layers.size(); ++l) {
      const rkv::LayerWeights &a = f.layers[l], &b = q.layers[l];
      EXPECT_TRUE(b.wq.empty() && b.w_down.empty());
      EXPECT_EQ(b.attn_norm, a.attn_norm);  // norms stay float32
      expect_same_rows(b.quant.wq, a.wq, "wq");
      expect_same_rows(b.quant.wk, a.wk, "wk");
      expect_same_rows(b.quant.wv, a.wv, "wv");
      expect_same_rows(b.quant.wo, a.wo, "wo");
      expect_same_rows(b.quant.w_gate, a.w_gate, "w_gate");
      expect_same_rows(b.quant.w_up, a.w_up, "w_up");
      expect_same_rows(b.quant.w_down, a.w_down, "w_down");
      EXPECT_EQ(b.quant.wv.type, static_cast<uint32_t>(type));
    }
  }
}

TEST(QuantizedLoad, RequantizesF16ToQ8_0AndLeavesF32MatricesAlone) {
  // All matrices F16 except w_down in F32: F16 ones become Q8_0, the F32 one stays float32 on the quantized path.
  const fs::path p = write_gguf(wide_synthetic(), GgmlType::F16, 0, "rkv_quant_f16.gguf");
  const rkv::Model f = rkv::load_model(p.string(), WeightStorage::f32);
  const rkv::Model q = rkv::load_model(p.string(), WeightStorage::quantized);
  const rkv::LayerWeights &a = f.layers[0], &b = q.layers[0];
  EXPECT_EQ(b.quant.w_gate.type, static_cast<uint32_t>(GgmlType::Q8_0));
  EXPECT_TRUE(b.quant.w_down.empty());
  EXPECT_EQ(b.w_down, a.w_down);
  std::vector<float> row(64);
  for (int64_t r = 0; r < b.quant.w_gate.rows; ++r) {
    rkv::dequantize_matrix_row(b.quant.w_gate, r, row.data());
    for (int64_t blk = 0; blk < 2; ++blk) {
      float amax = 0;  // Q8_0 round trip: half a step of max|w| / 127, plus the fp16 scale's rounding
      for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(a.w_gate[r * 64 + blk * 32 + j]));
      for (int j = 0; j < 32; ++j)
        EXPECT_LE(std::fabs(row[blk * 32 + j] - a.w_gate[r * 64 + blk * 32 + j]), amax / 254 + amax / 2048);
    }
  }
}

// A Hugging Face folder (safetensors) under weights = "quantized": its BF16 and F16 matrices become Q8_0 blocks whose
// rows are quantize_row_q8_0 (llama.cpp's quantize_row_q8_0_ref) of the half-precision values the f32 load reads,
// norms stay float32, and an F32 folder's matrices stay float32.
TEST(QuantizedLoad, HfFolderHalfMatricesAreRequantizedToQ8_0AndF32OnesKept) {
  const rkv::Model ref = wide_synthetic("qwen2");  // with Q/K/V biases (float32 on both paths)
  for (const std::string dtype : {"BF16", "F16"}) {
    const fs::path dir = fs::path(testing::TempDir()) / ("rkv_quant_hf_" + dtype);
    fs::remove_all(dir);
    rkv_test::write_hf_folder(ref, dir, dtype);
    const rkv::Model f = rkv::load_model(dir.string(), WeightStorage::f32);
    const rkv::Model q = rkv::load_model(dir.string(), WeightStorage::quantized);
    EXPECT_EQ(q.weights, WeightStorage::quantized);
    EXPECT_EQ(q.parameter_count(), f.parameter_count());
    EXPECT_TRUE(q.tok_embd.empty());
    auto expect_q8_0_of = [](const rkv::QuantMatrix& m, const std::vector<float>& halves, const std::string& what) {
      ASSERT_EQ(m.type, static_cast<uint32_t>(GgmlType::Q8_0)) << what;
      ASSERT_EQ(static_cast<size_t>(m.rows * m.cols), halves.size()) << what;
      std::vector<uint8_t> row(static_cast<size_t>(m.row_bytes()));
      for (int64_t r = 0; r < m.rows; ++r) {
        rkv::quantize_row_q8_0(halves.data() + r * m.cols, row.data(), m.cols);
        ASSERT_EQ(0, std::memcmp(row.data(), m.row(r), row.size())) << what << " row " << r;
      }
    };
    expect_q8_0_of(q.tok_embd_q, f.tok_embd, dtype + " token embeddings");
    for (size_t l = 0; l < f.layers.size(); ++l) {
      const rkv::LayerWeights &a = f.layers[l], &b = q.layers[l];
      EXPECT_TRUE(b.wq.empty() && b.wk.empty() && b.wv.empty() && b.wo.empty() && b.w_gate.empty() && b.w_up.empty() &&
                  b.w_down.empty());
      expect_q8_0_of(b.quant.wq, a.wq, dtype + " wq");
      expect_q8_0_of(b.quant.wk, a.wk, dtype + " wk");
      expect_q8_0_of(b.quant.wv, a.wv, dtype + " wv");
      expect_q8_0_of(b.quant.wo, a.wo, dtype + " wo");
      expect_q8_0_of(b.quant.w_gate, a.w_gate, dtype + " w_gate");
      expect_q8_0_of(b.quant.w_up, a.w_up, dtype + " w_up");
      expect_q8_0_of(b.quant.w_down, a.w_down, dtype + " w_down");
      EXPECT_EQ(b.attn_norm, a.attn_norm);
      EXPECT_EQ(b.bq, a.bq);
    }
  }
  const fs::path dir = fs::path(testing::TempDir()) / "rkv_quant_hf_F32";
  fs::remove_all(dir);
  rkv_test::write_hf_folder(ref, dir, "F32");
  const rkv::Model q = rkv::load_model(dir.string(), WeightStorage::quantized);
  EXPECT_TRUE(q.tok_embd_q.empty() && q.layers[0].quant.wq.empty() && q.layers[1].quant.w_down.empty());
  EXPECT_EQ(q.tok_embd, ref.tok_embd);
  EXPECT_EQ(q.layers[1].w_down, ref.layers[1].w_down);
}

double mean_kl(const std::vector<float>& p_logits, const std::vector<float>& q_logits, int64_t V) {
  double total = 0;
  const int64_t rows = static_cast<int64_t>(p_logits.size()) / V;
  for (int64_t r = 0; r < rows; ++r) {
    const float* a = p_logits.data() + r * V;
    const float* b = q_logits.data() + r * V;
    double ma = -1e300, mb = -1e300, sa = 0, sb = 0;
    for (int64_t v = 0; v < V; ++v) ma = std::max(ma, double(a[v])), mb = std::max(mb, double(b[v]));
    for (int64_t v = 0; v < V; ++v) sa += std::exp(a[v] - ma), sb += std::exp(b[v] - mb);
    for (int64_t v = 0; v < V; ++v) {
      const double la = a[v] - ma - std::log(sa), lb = b[v] - mb - std::log(sb);
      total += std::exp(la) * (la - lb);
    }
  }
  return total / static_cast<double>(rows);
}

TEST(QuantizedLoad, ForwardAgreesWithTheFloat32LoadOfTheSameFile) {
  // Prefill of 12 tokens (dequantized tiles: the same weights as the f32 load, so equal to float rounding) and the
  // same tokens decoded one by one (int8 activations: KL from the f32 logits small, same argmax).
  rkv::cpu::set_num_threads(2);
  for (const std::string arch : {"llama", "qwen2"}) {
    const fs::path p = write_gguf(wide_synthetic(arch), GgmlType::Q4_1, -1, "rkv_quant_fwd.gguf");
    const rkv::Model f = rkv::load_model(p.string(), WeightStorage::f32);
    const rkv::Model q = rkv::load_model(p.string(), WeightStorage::quantized);
    const std::vector<int32_t> ids = {1, 5, 9, 2, 33, 7, 7, 12, 39, 0, 4, 21};
    const int64_t V = f.config.vocab_size, T = static_cast<int64_t>(ids.size());
    rkv::cpu::Workspace ws;
    rkv::KVCache cf = rkv::cpu::make_cache(f, T), cq = rkv::cpu::make_cache(q, T), cd = rkv::cpu::make_cache(q, T);
    const std::vector<float> lf = rkv::cpu::prefill(f, ids, 0, cf, ws, rkv::cpu::LogitsFor::All);
    const std::vector<float> lq = rkv::cpu::prefill(q, ids, 0, cq, ws, rkv::cpu::LogitsFor::All);
    ASSERT_EQ(lf.size(), lq.size());
    for (size_t i = 0; i < lf.size(); ++i) ASSERT_NEAR(lq[i], lf[i], 1e-4 * (1 + std::fabs(lf[i]))) << arch << " " << i;
    std::vector<float> ld;
    for (int64_t t = 0; t < T; ++t) {
      const std::vector<float> step = rkv::cpu::decode_step(q, ids[static_cast<size_t>(t)], t, cd, ws);
      ld.insert(ld.end(), step.begin(), step.end());
    }
    const double kl = mean_kl(lf, ld, V);
    std::printf("%s Q4_1 synthetic: decode (int8 activations) vs f32 prefill: mean KL %.3g\n", arch.c_str(), kl);
    EXPECT_LT(kl, 1e-3) << arch;
    EXPECT_GT(kl, 0.0) << arch << ": the decode path should carry activation rounding";
  }
}

}  // namespace
