// Gemma 2 and Gemma 3 specifics of the GGUF loader: which layers use the sliding window, the RoPE bases, the attention
// and embedding scales and the soft-caps (llama.cpp src/models/gemma2.cpp and gemma3.cpp, transformers
// Gemma2Config / Gemma3TextConfig). The block layout (norms before and after attention and the MLP; gemma3's per-head
// Q/K RMSNorm) is model/architectures.hpp's.
//
// Thread rules: pure functions.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/gguf.hpp"
#include "model/model.hpp"

namespace rkv {

/// Sliding-window flags [n_layers] for a period P: layer l slides iff l % P < P - 1 (every P-th layer is global;
/// P = 6 gives global layers 5, 11, 17 in an 18-layer model, P = 2 the odd layers). P = 1 makes every layer global,
/// P = 0 every layer sliding (llama.cpp llama_hparams::set_swa_pattern). Throws rkv::InputError for P < 0.
std::vector<uint8_t> sliding_pattern(int64_t n_layers, int64_t period);

/// Fills the gemma3 fields of `c` (c.architecture, c.n_layers, c.d_model, c.n_heads and c.head_dim already read) from
/// the GGUF metadata under "gemma3.":
/// - attention.sliding_window (required, > 0) -> sliding_window;
/// - attention.sliding_window_pattern: an array of L bools/ints (1 = sliding) or an integer period; absent: period 6
///   (the fixed Gemma 3 pattern llama.cpp uses) -> layer_sliding;
/// - rope.freq_base_swa (default 10000) -> rope_theta_swa (rope.freq_base stays the global layers' base, and linear
///   RoPE scaling, if any, applies to the global layers only, as in llama.cpp);
/// - attention.scale when present, else llama.cpp's rule: 1/sqrt(D/H) for the 62-layer (27B) model, 1/sqrt(d)
///   otherwise (transformers: query_pre_attn_scalar^-1/2) -> attn_scale;
/// - final_logit_softcapping (default none) -> final_logit_softcap;
/// - embed_scale = sqrt(D) in float32, gelu_tanh MLP.
/// Throws rkv::InputError naming `src` and the key for a missing or invalid value.
void read_gemma3_config(const GgufFile& f, const std::string& src, ModelConfig& c);

/// The same for gemma2 (keys under "gemma2."): period 2 (layers 0, 2, 4, ... slide), one RoPE base for every layer
/// (rope.freq_base_swa when given), 1/sqrt(D/H) for the 46-layer (27B) model, attn_logit_softcapping ->
/// attn_logit_softcap (scores <- c tanh(scores / c) before the softmax), final_logit_softcapping; absent caps take
/// llama.cpp's defaults (50 and 30, llama_hparams), 0 turns one off.
void read_gemma2_config(const GgufFile& f, const std::string& src, ModelConfig& c);

}  // namespace rkv
