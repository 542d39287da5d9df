// Test helper: writers that store an in-memory model (e.g. rkv::synthetic_model, model/synthetic_model.hpp) as a GGUF
// file (with llama.cpp's Q/K permutation) or a Hugging Face folder. Not part of the library.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gguf_writer.hpp"
#include "quant_writers.hpp"
#include "model/gemma.hpp"
#include "model/half.hpp"
#include "model/model.hpp"
#include "model/synthetic_model.hpp"

namespace rkv_test {

/// llama.cpp's converter permutation (convert_hf_to_gguf.py `permute`) written in the HF -> GGUF direction:
/// reshape rows to (heads, 2, d/2), swap the last two axes. GGUF row h*d + 2j + s <- HF row h*d + s*d/2 + j.
inline std::vector<float> permute_for_gguf(const std::vector<float>& w, int64_t heads, int64_t d, int64_t cols) {
  std::vector<float> out(w.size());
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t s = 0; s < 2; ++s)
      for (int64_t j = 0; j < d / 2; ++j)
        std::memcpy(out.data() + (h * d + 2 * j + s) * cols, w.data() + (h * d + s * (d / 2) + j) * cols,
                    static_cast<size_t>(cols) * sizeof(float));
  return out;
}

/// gemma3 metadata in llama.cpp's names: window, the sliding pattern as a period (the one that reproduces
/// c.layer_sliding; throws std::invalid_argument when none does), the sliding layers' RoPE base, the attention scale
/// and the final logit soft-cap when set.
inline void add_gemma3_keys(GgufWriter& w, const rkv::ModelConfig& c) {
  const std::string a = "gemma3.";
  w.add_u32(a + "attention.sliding_window", static_cast<uint32_t>(c.sliding_window));
  int64_t period = -1;
  for (int64_t p = 1; p <= c.n_layers + 1 && period < 0; ++p)
    if (rkv::sliding_pattern(c.n_layers, p) == c.layer_sliding) period = p;
  if (period < 0) throw std::invalid_argument("add_gemma3_keys: layer_sliding is not a periodic pattern");
  w.add_u32(a + "attention.sliding_window_pattern", static_cast<uint32_t>(period));
  w.add_f32(a + "rope.freq_base_swa", static_cast<float>(c.rope_theta_swa));
  if (c.attn_scale > 0.0f) w.add_f32(a + "attention.scale", c.attn_scale);
  if (c.final_logit_softcap > 0.0f) w.add_f32(a + "final_logit_softcapping", c.final_logit_softcap);
}

/// Writes `m` as a GGUF file in llama.cpp's conventions (llama Q/K permuted). Norms and biases are F32; the
/// matrices (embeddings, LM head, Q, K, V, O, gate, up, down) are `matrix_type` (quant_writers.hpp: F32 by default,
/// F16, Q4_0, Q4_1 or Q8_0) and w_down is `down_type` when given (to mix types in one file).
inline GgufWriter gguf_writer_for(const rkv::Model& m, uint32_t matrix_type = 0, int64_t down_type = -1) {
  const rkv::ModelConfig& c = m.config;
  GgufWriter w;
  const std::string a = c.architecture;
  w.add_string("general.architecture", a);
  w.add_u32(a + ".block_count", static_cast<uint32_t>(c.n_layers));
  w.add_u32(a + ".context_length", static_cast<uint32_t>(c.context_length));
  w.add_u32(a + ".embedding_length", static_cast<uint32_t>(c.d_model));
  w.add_u32(a + ".feed_forward_length", static_cast<uint32_t>(c.d_ff));
  w.add_u32(a + ".attention.head_count", static_cast<uint32_t>(c.n_heads));
  w.add_u32(a + ".attention.head_count_kv", static_cast<uint32_t>(c.n_kv_heads));
  w.add_f32(a + ".rope.freq_base", static_cast<float>(c.rope_theta));
  w.add_f32(a + ".attention.layer_norm_rms_epsilon", c.rms_eps);
  w.add_u32(a + ".rope.dimension_count", static_cast<uint32_t>(c.head_dim));
  if (c.head_dim != c.d_model / c.n_heads) w.add_u32(a + ".attention.key_length", static_cast<uint32_t>(c.head_dim));
  const uint64_t D = static_cast<uint64_t>(c.d_model), Hd = static_cast<uint64_t>(c.n_heads * c.head_dim),
                 Kd = static_cast<uint64_t>(c.n_kv_heads * c.head_dim), F = static_cast<uint64_t>(c.d_ff),
                 V = static_cast<uint64_t>(c.vocab_size);
  if (c.architecture == "gemma3") add_gemma3_keys(w, c);
  auto matrix = [&](const std::string& name, const std::vector<uint64_t>& ne, const std::vector<float>& v,
                    uint32_t type) {
    if (type == 0) return w.add_tensor_f32(name, ne, v);
    w.add_tensor(name, ne, type, to_ggml_bytes(v, type));
  };
  const uint32_t down = down_type < 0 ? matrix_type : static_cast<uint32_t>(down_type);
  matrix("token_embd.weight", {D, V}, m.tok_embd, matrix_type);
  w.add_tensor_f32("output_norm.weight", {D}, m.output_norm);
  if (!c.tied_embeddings) matrix("output.weight", {D, V}, m.lm_head, matrix_type);
  const bool perm = c.architecture == "llama";
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const auto& L = m.layers[static_cast<size_t>(l)];
    const std::string p = "blk." + std::to_string(l) + ".";
    if (c.pre_norms) w.add_tensor_f32(p + "attn_norm.weight", {D}, L.attn_norm);
    matrix(p + "attn_q.weight", {D, Hd}, perm ? permute_for_gguf(L.wq, c.n_heads, c.head_dim, c.d_model) : L.wq,
           matrix_type);
    matrix(p + "attn_k.weight", {D, Kd}, perm ? permute_for_gguf(L.wk, c.n_kv_heads, c.head_dim, c.d_model) : L.wk,
           matrix_type);
    matrix(p + "attn_v.weight", {D, Kd}, L.wv, matrix_type);
    if (c.qkv_bias) {
      w.add_tensor_f32(p + "attn_q.bias", {Hd}, L.bq);
      w.add_tensor_f32(p + "attn_k.bias", {Kd}, L.bk);
      w.add_tensor_f32(p + "attn_v.bias", {Kd}, L.bv);
    }
    matrix(p + "attn_output.weight", {Hd, D}, L.wo, matrix_type);
    if (c.pre_norms) w.add_tensor_f32(p + "ffn_norm.weight", {D}, L.ffn_norm);
    matrix(p + "ffn_gate.weight", {D, F}, L.w_gate, matrix_type);
    matrix(p + "ffn_up.weight", {D, F}, L.w_up, matrix_type);
    matrix(p + "ffn_down.weight", {F, D}, L.w_down, down);
    if (c.qk_norm != rkv::QkNorm::none) {
      w.add_tensor_f32(p + "attn_q_norm.weight", {static_cast<uint64_t>(L.q_norm.size())}, L.q_norm);
      w.add_tensor_f32(p + "attn_k_norm.weight", {static_cast<uint64_t>(L.k_norm.size())}, L.k_norm);
    }
    if (c.post_norms) {
      w.add_tensor_f32(p + "post_attention_norm.weight", {D}, L.post_attn_norm);
      w.add_tensor_f32(p + "post_ffw_norm.weight", {D}, L.post_ffn_norm);
    }
  }
  return w;
}

/// A safetensors file under construction: tensors are stored in insertion order, F32 or BF16.
struct SafetensorsWriter {
  nlohmann::json header = nlohmann::json::object();
  std::vector<uint8_t> data;
  void add(const std::string& name, const std::vector<int64_t>& shape, const std::vector<float>& v,
           const std::string& dtype = "F32") {
    const uint64_t begin = data.size();
    for (float x : v) {
      if (dtype == "F32") {
        uint8_t b[4];
        std::memcpy(b, &x, 4);
        data.insert(data.end(), b, b + 4);
      } else {
        const uint16_t h = dtype == "BF16" ? rkv::fp32_to_bf16(x) : rkv::fp32_to_fp16(x);
        data.push_back(static_cast<uint8_t>(h & 0xFF));
        data.push_back(static_cast<uint8_t>(h >> 8));
      }
    }
    header[name] = {{"dtype", dtype}, {"shape", shape}, {"data_offsets", {begin, static_cast<uint64_t>(data.size())}}};
  }
  std::vector<uint8_t> bytes(const std::string& header_text = "") const {
    std::string h = header_text.empty() ? header.dump() : header_text;
    std::vector<uint8_t> out;
    out.reserve(8 + h.size() + data.size());
    const uint64_t n = h.size();
    for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(n >> (8 * i)));
    for (char ch : h) out.push_back(static_cast<uint8_t>(ch));
    out.insert(out.end(), data.begin(), data.end());
    return out;
  }
  void write(const std::string& path) const { GgufWriter::write_file(path, bytes()); }
};

/// HF config.json for `c`.
inline nlohmann::json hf_config(const rkv::ModelConfig& c) {
  return {{"model_type", c.architecture},
          {"architectures", {c.architecture == "llama" ? "LlamaForCausalLM" : "Qwen2ForCausalLM"}},
          {"num_hidden_layers", c.n_layers},
          {"hidden_size", c.d_model},
          {"intermediate_size", c.d_ff},
          {"num_attention_heads", c.n_heads},
          {"num_key_value_heads", c.n_kv_heads},
          {"head_dim", c.head_dim},
          {"vocab_size", c.vocab_size},
          {"max_position_embeddings", c.context_length},
          {"rms_norm_eps", c.rms_eps},
          {"rope_theta", c.rope_theta},
          {"hidden_act", "silu"},
          {"tie_word_embeddings", c.tied_embeddings}};
}

/// Adds `m`'s tensors with HF names to `w`.
inline void add_hf_tensors(SafetensorsWriter& w, const rkv::Model& m, const std::string& dtype, int64_t first_layer,
                           int64_t end_layer, bool globals) {
  const rkv::ModelConfig& c = m.config;
  const int64_t D = c.d_model, Hd = c.n_heads * c.head_dim, Kd = c.n_kv_heads * c.head_dim, F = c.d_ff,
                V = c.vocab_size;
  if (globals) {
    w.add("model.embed_tokens.weight", {V, D}, m.tok_embd, dtype);
    w.add("model.norm.weight", {D}, m.output_norm, dtype);
    if (!c.tied_embeddings) w.add("lm_head.weight", {V, D}, m.lm_head, dtype);
  }
  for (int64_t l = first_layer; l < end_layer; ++l) {
    const auto& L = m.layers[static_cast<size_t>(l)];
    const std::string p = "model.layers." + std::to_string(l) + ".";
    w.add(p + "input_layernorm.weight", {D}, L.attn_norm, dtype);
    w.add(p + "self_attn.q_proj.weight", {Hd, D}, L.wq, dtype);
    w.add(p + "self_attn.k_proj.weight", {Kd, D}, L.wk, dtype);
    w.add(p + "self_attn.v_proj.weight", {Kd, D}, L.wv, dtype);
    if (c.qkv_bias) {
      w.add(p + "self_attn.q_proj.bias", {Hd}, L.bq, dtype);
      w.add(p + "self_attn.k_proj.bias", {Kd}, L.bk, dtype);
      w.add(p + "self_attn.v_proj.bias", {Kd}, L.bv, dtype);
    }
    w.add(p + "self_attn.o_proj.weight", {D, Hd}, L.wo, dtype);
    w.add(p + "post_attention_layernorm.weight", {D}, L.ffn_norm, dtype);
    w.add(p + "mlp.gate_proj.weight", {F, D}, L.w_gate, dtype);
    w.add(p + "mlp.up_proj.weight", {F, D}, L.w_up, dtype);
    w.add(p + "mlp.down_proj.weight", {D, F}, L.w_down, dtype);
  }
}

/// Writes `m` as an HF folder with one model.safetensors.
inline void write_hf_folder(const rkv::Model& m, const std::filesystem::path& dir, const std::string& dtype = "F32") {
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "config.json") << hf_config(m.config).dump(2);
  SafetensorsWriter w;
  add_hf_tensors(w, m, dtype, 0, m.config.n_layers, true);
  w.write((dir / "model.safetensors").string());
}

}  // namespace rkv_test
