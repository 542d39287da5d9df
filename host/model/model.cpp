#include "model/model.hpp"

#include <cmath>
#include <filesystem>

#include "core/errors.hpp"
#include "core/regular_file.hpp"
#include "core/sha256.hpp"
#include "model/gguf.hpp"

namespace rkv {

void Model::check_unchanged(const std::string& during) const {
  if (weights == WeightStorage::quantized && gguf) gguf->check_unchanged(during);
}

int64_t Model::parameter_count() const { return source_parameters >= 0 ? source_parameters : held_parameter_count(); }

int64_t Model::held_parameter_count() const {
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

namespace {

/// True when `path` is a Hugging Face folder, false for a (GGUF) regular file; throws the InputError load_model
/// documents for anything else (missing, unreadable, a FIFO or device: refused without opening it).
bool is_model_folder(const std::string& path) {
  std::string why;
  switch (path_kind(path, &why)) {
    case PathKind::missing:
      throw InputError(path + ": no such file or folder (expected a .gguf file or a Hugging Face model folder)");
    case PathKind::error: throw InputError(path + ": cannot be read: " + why);
    case PathKind::other:  // a FIFO would block the open until someone writes to it; a device never ends
      throw InputError(path + " is " + describe_special_file(path) +
                       "; expected a .gguf file or a Hugging Face model folder");
    case PathKind::directory: return true;
    case PathKind::regular: break;
  }
  return false;
}

}  // namespace

Model load_model(const std::string& path, WeightStorage weights) {
  return is_model_folder(path) ? load_hf_model(path, weights) : load_gguf_model(path, weights);
}

Model describe_model(const std::string& path) {
  return is_model_folder(path) ? describe_hf_model(path) : describe_gguf_model(std::make_shared<const GgufFile>(path, GgufFile::Strings::skip_arrays));
}

std::string model_sha256(const std::string& path) {
  return is_model_folder(path) ? hf_model_sha256(path) : sha256_file(path);
}

}  // namespace rkv
