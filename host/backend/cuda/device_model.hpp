// A decoder model's weights on the device (rkv::Model uploaded), in one of two precisions:
//  - BF16 (default for speed): matrices and token embeddings in bfloat16 (rounded to nearest even from the float32
//    weights the loader dequantized), RMSNorm weights and biases in float32; activations between GEMMs in bfloat16,
//    the residual stream, norms, softmax, logits and KL in float32, every GEMM and reduction accumulating in float32;
//  - FP32 (validation mode): the same float32 weights the CPU backend uses, float32 activations, no TF32.
// Layout: Q, K, V projections fused into one [(H + 2 H_kv) d, D] matrix (rows of wq, then wk, then wv; HF order, so
// RoPE is rotate_half), gate and up fused into [2F, D] (gate rows first), every matrix row-major [out, in].
//
// Thread rules: immutable after construction; used with its Context's rules (context.hpp).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "backend/cuda/context.hpp"
#include "backend/cuda/kernels/kernels.hpp"
#include "model/model.hpp"

namespace rkv::RKV_CUDA_NS {

using kernels::DType;

enum class Precision { FP32, BF16 };

/// "fp32" or "bf16".
const char* precision_name(Precision p);
/// Precision from "fp32" / "bf16"; throws rkv::InputError naming the accepted values otherwise.
Precision parse_precision(const std::string& name);

struct DeviceLayerWeights {
  DeviceBuffer attn_norm;  ///< float32 [D]; empty without pre-norms (olmo2)
  DeviceBuffer wqkv;       ///< dtype [(H + 2 H_kv) d, D]
  DeviceBuffer bqkv;       ///< float32 [(H + 2 H_kv) d]; empty without Q/K/V biases
  DeviceBuffer wo;         ///< dtype [D, H d]
  DeviceBuffer ffn_norm;   ///< float32 [D]
  DeviceBuffer w_gate_up;  ///< dtype [2F, D]
  DeviceBuffer w_down;     ///< dtype [D, F]
  DeviceBuffer q_norm, k_norm;                 ///< float32 [d] each (gemma3's per-head Q/K RMSNorm); else empty
  DeviceBuffer post_attn_norm, post_ffn_norm;  ///< float32 [D] each (gemma3's and olmo2's post norms); else empty
};

class DeviceModel {
 public:
  /// Uploads `model` (float32 weights) in `precision`, gemma3's extra norms and its sliding layers' RoPE frequencies
  /// included. Throws rkv::InputError when the geometry is outside what the kernels support (head_dim not 64, 128 or 256,
  /// G = H / H_kv above 8), CudaError when the device runs out of memory.
  DeviceModel(Context& ctx, const Model& model, Precision precision);

  /// A model of `config` with random weights generated on the device (no host copy; for benchmarks at Llama-3.1-8B
  /// size): uniform in +-1 for embeddings, 1 +- 0.2 for norms, +-2/sqrt(in) for wq, wk, gate and up, +-1/sqrt(in) for
  /// wv, wo and down (as rkv::synthetic_model, model/synthetic_model.hpp). RoPE frequencies from the config.
  /// Deterministic in `seed`. Llama-style layers only (rkv::InputError for a config with gemma3's features).
  static DeviceModel random(Context& ctx, const ModelConfig& config, Precision precision, uint64_t seed);

  DeviceModel(DeviceModel&&) = default;
  DeviceModel& operator=(DeviceModel&&) = default;

  Context& context() const { return *ctx_; }
  const ModelConfig& config() const { return config_; }
  Precision precision() const { return precision_; }
  /// Storage type of weights and activations: F32 or BF16.
  DType dtype() const { return precision_ == Precision::FP32 ? DType::F32 : DType::BF16; }
  const DeviceLayerWeights& layer(int64_t l) const { return layers_[static_cast<size_t>(l)]; }
  const void* tok_embd() const { return tok_embd_.data(); }  ///< dtype [V, D]
  const void* lm_head() const { return lm_head_.empty() ? tok_embd_.data() : lm_head_.data(); }  ///< dtype [V, D]
  const float* output_norm() const { return output_norm_.as<float>(); }  ///< float32 [D]
  const double* rope_inv_freq() const { return rope_inv_freq_.as<double>(); }  ///< double [d / 2]
  /// RoPE frequencies of layer l, double [d / 2] (rkv::Model::layer_inv_freq: the sliding layers' own, if any).
  const double* layer_inv_freq(int64_t l) const {
    return config_.is_sliding(l) && !rope_inv_freq_swa_.empty() ? rope_inv_freq_swa_.as<double>() : rope_inv_freq();
  }
  int64_t qkv_dim() const { return (config_.n_heads + 2 * config_.n_kv_heads) * config_.head_dim; }
  /// Bytes of weights held on the device.
  size_t weight_bytes() const { return weight_bytes_; }

 private:
  DeviceModel() = default;
  static void check_geometry(const ModelConfig& c);
  Context* ctx_ = nullptr;
  ModelConfig config_;
  Precision precision_ = Precision::BF16;
  std::vector<DeviceLayerWeights> layers_;
  DeviceBuffer tok_embd_, lm_head_, output_norm_, rope_inv_freq_, rope_inv_freq_swa_;
  size_t weight_bytes_ = 0;
};

}  // namespace rkv::RKV_CUDA_NS
