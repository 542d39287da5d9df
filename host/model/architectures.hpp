// The decoder architectures ripplekv runs and what each one's block has: one table, read by the GGUF and Hugging
// Face loaders, the synthetic models and `model info`, so a feature is named in one place.
//
//   architecture  HF model_type    Q/K/V bias  Q/K RMSNorm            norms                  source of the layout
//   llama         llama, mistral   no          none                   before attn and MLP    transformers LlamaDecoderLayer
//   qwen2         qwen2            yes         none                   before attn and MLP    transformers Qwen2DecoderLayer
//   qwen3         qwen3            no          per head [d]           before attn and MLP    transformers Qwen3DecoderLayer
//   olmo2         olmo2            no          whole [H d], [H_kv d]  after attn and MLP     transformers Olmo2DecoderLayer
//   phi3          phi3             no          none                   before attn and MLP    transformers Phi3DecoderLayer
//     (phi3 stores Q/K/V as one matrix and gate/up as one: the loaders split them; every layer slides when the
//     config has a window)
//   gemma2        gemma2           no          none                   before and after both  transformers Gemma2DecoderLayer
//   gemma3        gemma3_text      no          per head [d]           before and after both  transformers Gemma3DecoderLayer
// (llama.cpp src/models/{llama,qwen2,qwen3,olmo2,gemma2,gemma3}.cpp build the same graphs.) Gemma's other features
// (windows, scales, soft-caps, GeGLU) are read by model/gemma.hpp (GGUF) and model/load_hf.cpp.
//
// Thread rules: the table is immutable; every function is thread-safe.
#pragma once
#include <string>

#include "model/model.hpp"

namespace rkv {

/// The block layout of one architecture (see the table above).
struct ArchitectureFeatures {
  const char* name;            ///< ModelConfig::architecture and the GGUF general.architecture
  bool qkv_bias;               ///< the Q/K/V projections have biases
  QkNorm qk_norm;              ///< RMSNorm of q and k before RoPE
  bool pre_norms;              ///< RMSNorm of the residual before attention and before the MLP
  bool post_norms;             ///< RMSNorm of the attention output and of the MLP output before each residual add
  bool gguf_permuted_qk;       ///< llama.cpp's converter permuted the Q/K rows for its adjacent-pair RoPE
};

/// The features of `architecture`, or null when ripplekv does not run it.
const ArchitectureFeatures* find_architecture(const std::string& architecture);

/// "llama, qwen2, qwen3, olmo2, phi3, gemma2, gemma3": the names for an error message.
std::string supported_architectures();

/// The block's features in words, as `model info` prints them: "RMSNorm before attention and before the MLP, Q/K
/// RMSNorm per head before RoPE, SiLU gated MLP (SwiGLU)".
std::string layer_features(const ModelConfig& c);

/// Sets c.qkv_bias, c.qk_norm, c.pre_norms and c.post_norms from c.architecture's row of the table. Throws
/// rkv::InputError naming `source` and the architecture when it is not in the table.
void set_architecture_features(ModelConfig& c, const std::string& source);

}  // namespace rkv
