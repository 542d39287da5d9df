#include "model/model.hpp"

#include <cmath>
#include <filesystem>

#include "core/errors.hpp"
#include "core/regular_file.hpp"
#include "model/gguf.hpp"

namespace rkv {

void Model::check_unchanged(const std::string& during) const {
  if (weights == WeightStorage::quantized && gguf) gguf->check_unchanged(during);
}

int64_t Model::parameter_count() const {
  int64_t n = static_cast<int64_t>(tok_embd.size() + output_norm.size() + lm_head.size());
  n += tok_embd_q.rows * tok_embd_q.cols + lm_head_q.rows * lm_head_q.cols;
  for (const auto& l : layers) {
    for (const QuantMatrix* q : {&l.quant.wq, &l.quant.wk, &l.quant.wv, &l.quant.wo, &l.quant.w_gate, &l.quant.w_up,
                                 &l.quant.w_down})
      n += q->rows * q->cols;
    n += static_cast<int64_t>(l.attn_norm.size() + l.wq.size() + l.wk.size() + l.wv.size() + l.bq.size() +
                              l.bk.size() + l.bv.size() + l.wo.size() + l.ffn_norm.size() + l.w_gate.size() +
                              l.w_up.size() + l.w_down.size() + l.q_norm.size() + l.k_norm.size() +
                              l.post_attn_norm.size() + l.post_ffn_norm.size());
  }
  return n;
}

float ModelConfig::attention_scale() const {
  return attn_scale > 0.0f ? attn_scale : 1.0f / std::sqrt(static_cast<float>(head_dim));
}

void unpermute_qk_rows(std::vector<float>& w, int64_t n_heads, int64_t head_dim, int64_t cols) {
  const int64_t half = head_dim / 2;
  std::vector<float> out(w.size());
  for (int64_t h = 0; h < n_heads; ++h) {
    for (int64_t j = 0; j < half; ++j) {
      for (int64_t s = 0; s < 2; ++s) {
        const float* src = w.data() + (h * head_dim + 2 * j + s) * cols;  // GGUF (permuted) row
        float* dst = out.data() + (h * head_dim + s * half + j) * cols;   // HF row
        std::copy(src, src + cols, dst);
      }
    }
  }
  w.swap(out);
}

Model load_model(const std::string& path, WeightStorage weights) {
  std::string why;
  switch (path_kind(path, &why)) {
    case PathKind::missing:
      throw InputError(path + ": no such file or folder (expected a .gguf file or a Hugging Face model folder)");
    case PathKind::error: throw InputError(path + ": cannot be read: " + why);
    case PathKind::other:  // a FIFO would block the open until someone writes to it; a device never ends
      throw InputError(path + " is " + describe_special_file(path) +
                       "; expected a .gguf file or a Hugging Face model folder");
    case PathKind::directory: return load_hf_model(path, weights);
    case PathKind::regular: break;
  }
  return load_gguf_model(path, weights);
}

}  // namespace rkv
