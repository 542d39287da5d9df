#include "model/architectures.hpp"

#include "core/errors.hpp"

namespace rkv {

namespace {

constexpr ArchitectureFeatures kArchitectures[] = {
    // name     bias   Q/K norm            pre    post   permuted
    {"llama", false, QkNorm::none, true, false, true},
    {"qwen2", true, QkNorm::none, true, false, false},
    {"qwen3", false, QkNorm::per_head, true, false, false},
    {"olmo2", false, QkNorm::whole, false, true, false},
    {"phi3", false, QkNorm::none, true, false, false},
    {"gemma2", false, QkNorm::none, true, true, false},
    {"gemma3", false, QkNorm::per_head, true, true, false},
};

}  // namespace

const ArchitectureFeatures* find_architecture(const std::string& architecture) {
  for (const auto& a : kArchitectures)
    if (architecture == a.name) return &a;
  return nullptr;
}

std::string supported_architectures() {
  std::string s;
  for (const auto& a : kArchitectures) s += (s.empty() ? "" : ", ") + std::string(a.name);
  return s;
}

std::string layer_features(const ModelConfig& c) {
  std::string s = c.pre_norms && c.post_norms ? "RMSNorm before and after attention and the MLP"
                  : c.post_norms              ? "RMSNorm after attention and after the MLP (none before)"
                                              : "RMSNorm before attention and before the MLP";
  if (c.qk_norm == QkNorm::per_head) s += ", Q/K RMSNorm per head before RoPE";
  if (c.qk_norm == QkNorm::whole) s += ", Q/K RMSNorm over the whole projection before RoPE";
  if (c.qkv_bias) s += ", Q/K/V biases";
  s += c.ffn_act == FfnActivation::gelu_tanh ? ", GELU-tanh gated MLP" : ", SiLU gated MLP (SwiGLU)";
  return s;
}

void set_architecture_features(ModelConfig& c, const std::string& source) {
  const ArchitectureFeatures* a = find_architecture(c.architecture);
  if (!a) {
    throw InputError(source + ": unsupported architecture '" + c.architecture + "' (supported: " +
                     supported_architectures() + ")");
  }
  c.qkv_bias = a->qkv_bias;
  c.qk_norm = a->qk_norm;
  c.pre_norms = a->pre_norms;
  c.post_norms = a->post_norms;
}

}  // namespace rkv
