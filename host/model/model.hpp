// A decoder-only transformer held in float32: configuration and weights, loaded from a GGUF file or a Hugging Face
// folder (config.json + *.safetensors).
//
// Supported architectures (model/architectures.hpp has the table): `llama` (Llama 2/3/3.1 incl. llama3 rope scaling,
// Mistral, SmolLM), `qwen2` (Q/K/V biases), `qwen3` (per-head Q/K RMSNorm), `olmo2` (norms after attention and after
// the MLP instead of before, Q/K RMSNorm over the whole projection), `gemma2` (sliding-window layers 0, 2, 4, ...,
// attention-score and final-logit soft-capping, norms before and after attention and the MLP, GELU-tanh gated MLP,
// embeddings scaled by sqrt(D)) and `gemma3` (sliding-window and
// global layers with their own RoPE bases, per-head Q/K RMSNorm, norms after attention and after the MLP, GELU-tanh
// gated MLP, embeddings scaled by sqrt(D), optional final logit soft-capping). Anything else is an rkv::InputError
// naming the architecture.
//
// Canonical weight layout (both sources give bit-for-bit the same layout for the same weights):
// - every matrix is row-major [out_features, in_features] (PyTorch nn.Linear layout), so y = x W^T;
// - Q and K rows are in the Hugging Face order, where RoPE pairs dimension i with i + d/2 ("rotate_half").
//   llama.cpp's converter permutes llama Q/K rows for its adjacent-pair RoPE (convert_hf_to_gguf.py `permute`:
//   GGUF row h*d + 2j + s holds HF row h*d + s*d/2 + j, s in {0,1}, j < d/2); the GGUF loader undoes this.
//   qwen2, qwen3, olmo2, gemma2 and gemma3 GGUFs are not permuted (llama.cpp uses NeoX RoPE for them).
// - With WeightStorage::f32 every weight is dequantized to float32 at load. With WeightStorage::quantized the
//   matrices (Q, K, V, O, gate, up, down, embeddings, LM head) are kept in ggml blocks instead
//   (model/quant_matrix.hpp: Q8_0, Q4_0, Q4_1 as stored in a GGUF, other GGUF types and a Hugging Face folder's
//   F16/BF16 tensors requantized to Q8_0); their float vectors are then empty. Norm weights, biases and F32 matrices
//   (a GGUF's F32 tensors, an F32 safetensors folder) are float32 on both paths.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/gguf.hpp"
#include "model/quant_matrix.hpp"
#include "model/rope.hpp"

namespace rkv {

/// Activation of the gated MLP: act(h Wg^T) * (h Wu^T).
enum class FfnActivation {
  silu,       ///< SwiGLU (llama, qwen2): silu(g) = g / (1 + exp(-g))
  gelu_tanh,  ///< GeGLU (gemma): gelu_tanh(g) = g/2 (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3)))
};

/// Where the RMSNorm of q and k before RoPE runs (model/architectures.hpp).
enum class QkNorm {
  none,      ///< no Q/K norm (llama, qwen2)
  per_head,  ///< each head's d values, weights [d] shared by the heads (qwen3, gemma3)
  whole,     ///< the whole projection row: q over H*d values (weights [H*d]), k over H_kv*d (olmo2)
};

/// Hyperparameters of a loaded model.
struct ModelConfig {
  std::string architecture;      ///< "llama", "qwen2", "qwen3", "olmo2", "gemma2" or "gemma3" (model/architectures.hpp)
  int64_t n_layers = 0;          ///< L
  int64_t d_model = 0;           ///< D (hidden size)
  int64_t n_heads = 0;           ///< H (query heads)
  int64_t n_kv_heads = 0;        ///< H_kv (divides H)
  int64_t head_dim = 0;          ///< d
  int64_t d_ff = 0;              ///< F (SwiGLU hidden size)
  int64_t vocab_size = 0;        ///< V
  int64_t context_length = 0;    ///< trained context length (informational; not enforced)
  float rms_eps = 1e-5f;         ///< RMSNorm epsilon
  double rope_theta = 10000.0;   ///< RoPE base
  RopeScaling rope_scaling;      ///< none / linear / llama3
  bool rope_freq_factors = false;  ///< GGUF carried rope_freqs.weight (llama3 factors as divisors)
  bool tied_embeddings = false;  ///< LM head shares token_embd
  bool qkv_bias = false;         ///< Q/K/V projections have biases (qwen2)
  bool pre_norms = true;         ///< RMSNorm of the residual before attention and before the MLP (all but olmo2)
  /// W > 0: the model was trained with a sliding window of W tokens. The layers listed in layer_sliding attend to
  /// a key iff q_pos - k_pos < W; with layer_sliding empty the forward refuses contexts longer than W instead.
  int64_t sliding_window = 0;
  std::vector<uint8_t> layer_sliding;  ///< [L] 1 for a sliding-window layer (gemma2/3, mistral), or empty (every layer global)
  /// RoPE base of the sliding-window layers (gemma3 rope.freq_base_swa, no scaling); 0: they use the global layers'
  /// RoPE (mistral, whose every layer slides).
  double rope_theta_swa = 0.0;
  float attn_scale = 0.0f;             ///< scale of q.k before softmax; 0 means 1/sqrt(head_dim) (attention_scale())
  float embed_scale = 1.0f;            ///< the embeddings are multiplied by this (gemma2/3: sqrt(D), in float32)
  float final_logit_softcap = 0.0f;    ///< c > 0: logits = c tanh(logits / c) (gemma final_logit_softcapping)
  /// c > 0: every attention score s = scale q.k becomes c tanh(s / c) before the masked softmax (gemma2
  /// attn_logit_softcapping), in the forward and in every statistic computed from scores (softcap_score).
  float attn_logit_softcap = 0.0f;
  QkNorm qk_norm = QkNorm::none;       ///< RMSNorm of q and k before RoPE (qwen3, gemma3 per head; olmo2 whole)
  bool post_norms = false;             ///< RMSNorm of the attention and MLP outputs before each residual add (gemma2/3, olmo2)
  FfnActivation ffn_act = FfnActivation::silu;

  int64_t group_size() const { return n_heads / n_kv_heads; }  ///< G = H / H_kv
  /// True when layer l is a sliding-window layer (l in [0, L)).
  bool is_sliding(int64_t l) const { return !layer_sliding.empty() && layer_sliding[static_cast<size_t>(l)] != 0; }
  /// Window of layer l in tokens: sliding_window for a sliding-window layer, 0 (unbounded) for a global one.
  int64_t layer_window(int64_t l) const { return is_sliding(l) ? sliding_window : 0; }
  /// What layer l can attend to after a prompt of T tokens: min(T, window) for a sliding-window layer, T otherwise.
  int64_t layer_span(int64_t l, int64_t T) const { return is_sliding(l) ? std::min(T, sliding_window) : T; }
  /// layer_span(l, T) for each l of `layers` (the compressible layers A, in order): what budgets are fractions of
  /// (cache/budget.hpp).
  std::vector<int64_t> layer_spans(const std::vector<int64_t>& layers, int64_t T) const {
    std::vector<int64_t> spans;
    for (int64_t l : layers) spans.push_back(layer_span(l, T));
    return spans;
  }
  /// The softmax scale of q.k: attn_scale when set, else 1/sqrt(head_dim) (float32).
  float attention_scale() const;
  /// Bytes the K and V cache of one token takes across all layers in float32: 2 * L * H_kv * d * 4.
  int64_t kv_bytes_per_token() const { return 2 * n_layers * n_kv_heads * head_dim * 4; }
};

/// An attention score after the model's soft-cap: c tanh(s / c) for c > 0 (gemma2), s itself for c = 0.
inline float softcap_score(float s, float c) { return c > 0.0f ? c * std::tanh(s / c) : s; }

/// Weights of one transformer block, float32, row-major [out, in].
struct LayerWeights {
  std::vector<float> attn_norm;  ///< [D]; empty without pre-norms (olmo2)
  std::vector<float> wq;         ///< [H*d, D]
  std::vector<float> wk;         ///< [H_kv*d, D]
  std::vector<float> wv;         ///< [H_kv*d, D]
  std::vector<float> bq;         ///< [H*d] or empty
  std::vector<float> bk;         ///< [H_kv*d] or empty
  std::vector<float> bv;         ///< [H_kv*d] or empty
  std::vector<float> wo;         ///< [D, H*d]
  std::vector<float> ffn_norm;   ///< [D]; empty without pre-norms (olmo2)
  std::vector<float> w_gate;     ///< [F, D]
  std::vector<float> w_up;       ///< [F, D]
  std::vector<float> w_down;     ///< [D, F]
  std::vector<float> q_norm;     ///< query RMSNorm weight: [d] per head, [H*d] whole (ModelConfig::qk_norm), or empty
  std::vector<float> k_norm;     ///< key RMSNorm weight: [d] per head, [H_kv*d] whole, or empty
  std::vector<float> post_attn_norm;  ///< [D] RMSNorm of the attention output, or empty (gemma2/3, olmo2)
  std::vector<float> post_ffn_norm;   ///< [D] RMSNorm of the MLP output, or empty (gemma2/3, olmo2)
  /// The same matrices in ggml blocks (Model::weights == quantized; same shapes and row order, Q/K rows unpermuted).
  /// A matrix is either here or in its float vector above, never both.
  struct Quant {
    QuantMatrix wq, wk, wv, wo, w_gate, w_up, w_down;
  } quant;
};

/// Name, storage type and shape (PyTorch order) of a tensor as stored in the source file (for `model info`).
struct SourceTensor {
  std::string name;
  std::string type;             ///< ggml type name ("q4_1") or safetensors dtype ("BF16")
  std::vector<int64_t> shape;   ///< [rows, cols] for matrices
};

/// A loaded model. Immutable after load_model; const access is thread-safe. Move-only (large).
struct Model {
  ModelConfig config;
  std::vector<float> tok_embd;     ///< [V, D]
  std::vector<LayerWeights> layers;
  std::vector<float> output_norm;  ///< [D]
  std::vector<float> lm_head;      ///< [V, D]; empty when config.tied_embeddings (then tok_embd is used)
  /// Which weights the matrices are held in (see the top of this file).
  WeightStorage weights = WeightStorage::f32;
  QuantMatrix tok_embd_q;  ///< [V, D] in ggml blocks when quantized (then tok_embd is empty)
  QuantMatrix lm_head_q;   ///< [V, D] in ggml blocks when quantized and untied (then lm_head is empty)
  std::vector<double> rope_inv_freq;  ///< [d/2], scaling and GGUF freq factors applied (global layers)
  std::vector<double> rope_inv_freq_swa;  ///< [d/2] of the sliding-window layers (base rope_theta_swa); empty if none
                                          ///< or rope_theta_swa is 0

  std::string path;    ///< the GGUF file or the HF folder given to load_model
  std::string format;  ///< "gguf" or "safetensors"
  /// SHA-256 (hex) identifying the weights: of the GGUF file itself; for an HF folder, of the text
  /// "<file name> <sha256 of file>\n" for config.json and every *.safetensors file, sorted by name.
  std::string sha256;
  std::vector<SourceTensor> source_tensors;  ///< every tensor of the source, in file order
  /// The GGUF file (metadata for the tokenizer: tokenizer.ggml.*, chat template); null for HF folders.
  std::shared_ptr<const GgufFile> gguf;

  /// The LM head matrix [V, D]: lm_head, or tok_embd when tied.
  const float* lm_head_weights() const { return lm_head.empty() ? tok_embd.data() : lm_head.data(); }
  /// RoPE frequencies [d/2] of layer l: rope_inv_freq_swa for a sliding-window layer that has its own, else
  /// rope_inv_freq.
  const std::vector<double>& layer_inv_freq(int64_t l) const {
    return config.is_sliding(l) && !rope_inv_freq_swa.empty() ? rope_inv_freq_swa : rope_inv_freq;
  }
  /// Parameters of the weights the loader reads (tied embeddings counted once), summed from the tensor shapes in the
  /// source's headers by load_model and describe_model; -1 for a model built in memory (synthetic_model).
  int64_t source_parameters = -1;

  /// Number of parameters of the model (tied embeddings counted once): source_parameters for a model read from a
  /// file (a described model holds no weights), else held_parameter_count().
  int64_t parameter_count() const;
  /// Number of parameters in the weights held (float vectors and ggml-block matrices); 0 for a described model.
  int64_t held_parameter_count() const;

  /// Throws rkv::InputError naming the file when weights this model reads in place from its mapped GGUF (`weights`
  /// = quantized: ggml blocks used from the mapping, never copied) may have changed since loading: the file was
  /// truncated, written in place or replaced (model/mapped_file.hpp MappedFile::change). Weights held as float32
  /// copies cannot change and are not checked (the memory-for-safety choice; README "Decisions"). Two system calls;
  /// the runner calls it at every example, cell and decode-step boundary and before writing a result. `during`
  /// names the step in the message. Thread-safe.
  void check_unchanged(const std::string& during) const;
};

/// Loads a model from `path`: a .gguf file, or a folder with config.json and model.safetensors (or sharded
/// model-*.safetensors with model.safetensors.index.json). Weights are laid out as described at the top of this
/// file: all float32 with `weights` = f32 (the default here: the exact oracle), matrices in ggml blocks with
/// `quantized` (a Hugging Face folder's F16/BF16 matrices requantized to Q8_0; its F32 ones stay float32). The SHA-256 of the source is computed.
/// Throws rkv::InputError for a missing/unreadable path, an unsupported architecture (named), a missing required
/// tensor or metadata key (named), a tensor of the wrong shape (named, with the expected shape), an unsupported
/// tensor type, or an inconsistent configuration; for a path that is neither a regular file nor a folder (a FIFO, a
/// device: refused without blocking) or a symbolic-link loop; and for a file truncated while it is read
/// (model/mapped_file.hpp: no SIGBUS). rkv::Cancelled between tensors when the thread's CancelScope
/// (core/cancel.hpp) is cancelled.
Model load_model(const std::string& path, WeightStorage weights = WeightStorage::f32);

/// What `ripplekv model info` needs of the model at `path` (as load_model takes it), without its weights: a GGUF's
/// metadata and tensor infos, or a Hugging Face folder's config.json and each *.safetensors JSON header (no tokenizer
/// file). Fills config, format, path, gguf, source_tensors, source_parameters (so parameter_count()) and the RoPE
/// frequencies, and runs every check load_model runs before it reads weights, throwing the same rkv::InputError
/// (unsupported architecture, missing key or tensor, wrong shape, unreadable tensor type, bad hyperparameters, and
/// the path errors). Reads no tensor data except a GGUF's rope_freqs.weight (d/2 floats): memory and time follow the
/// header's size, not the weights'. The weights stay empty and `sha256` is empty (it reads every byte:
/// model_sha256), so the result is for inspection, never for a forward. Thread-safe (no shared state).
Model describe_model(const std::string& path);

/// The Model::sha256 load_model computes for `path` (see there), by streaming reads of every byte of the GGUF file,
/// or of config.json and every shard of a folder; memory stays small. Throws rkv::InputError for a path load_model
/// refuses or a file that cannot be read, rkv::Cancelled when the thread's CancelScope (core/cancel.hpp) is
/// cancelled meanwhile. Thread-safe.
std::string model_sha256(const std::string& path);

/// Loaders for one source format (load_model and describe_model dispatch on the path). The GgufFile overloads read
/// an already opened file (shared with the Model's `gguf`).
Model load_gguf_model(const std::string& path, WeightStorage weights = WeightStorage::f32);
Model load_gguf_model(const std::shared_ptr<const GgufFile>& file, WeightStorage weights = WeightStorage::f32);
Model describe_gguf_model(const std::shared_ptr<const GgufFile>& file);
Model load_hf_model(const std::string& folder, WeightStorage weights = WeightStorage::f32);
Model describe_hf_model(const std::string& folder);
/// model_sha256 of a Hugging Face folder.
std::string hf_model_sha256(const std::string& folder);

/// Reorders the rows of a llama GGUF Q or K matrix [n_heads*head_dim, cols] from llama.cpp's permuted order back
/// to the Hugging Face order (see the top of this file). In place. Also used for a [n_heads*head_dim] bias (cols = 1).
void unpermute_qk_rows(std::vector<float>& w, int64_t n_heads, int64_t head_dim, int64_t cols);

}  // namespace rkv
