// Internal helpers shared by the GGUF and Hugging Face loaders (not a public header).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/model.hpp"

namespace rkv::detail {

/// The most layers a configuration may declare (checked before anything is sized by the count).
constexpr int64_t kMaxLayers = 4096;

/// "[a, b]"
std::string shape_str(const std::vector<int64_t>& s);

/// Throws InputError "<source>: tensor '<name>' has shape [..], expected [..] (<what>)" when got != expected.
void check_shape(const std::string& source, const std::string& name, const std::vector<int64_t>& got,
                 const std::vector<int64_t>& expected, const std::string& what);

/// Validates the sizes of a configuration without allocating anything: supported architecture, positive sizes,
/// H divisible by H_kv, even head_dim, positive RMSNorm epsilon, and weight shapes whose element counts (H*d*D,
/// V*D, F*D) fit in int64. Loaders call it before they compute expected tensor shapes, and check that the file holds
/// those tensors before they allocate anything sized by the configuration. Throws InputError naming `source`.
void check_sizes(const ModelConfig& config, const std::string& source);

/// One part of a fused matrix: `rows` rows, into `f32` (when the fused matrix is float32) or `q` (in ggml blocks).
struct RowPart {
  int64_t rows;
  std::vector<float>* f32;
  QuantMatrix* q;
};

/// Splits a fused matrix [sum of the parts' rows, cols] -- float32 in `f32` or ggml blocks in `q`, whichever is not
/// empty -- into `parts`, top rows first (phi3's qkv_proj = [q; k; v] and gate_up_proj = [gate; up]). The float rows
/// are copied out (and `f32` released); a block matrix's parts are views into its bytes, sharing its owner. Nothing
/// happens when both are empty (a check-only pass).
void split_rows(std::vector<float>& f32, const QuantMatrix& q, int64_t cols, const std::vector<RowPart>& parts);

/// check_sizes, then fills model.rope_inv_freq (and rope_inv_freq_swa when the model has sliding-window layers) from the configuration; `freq_factors` (GGUF rope_freqs.weight, [d/2]) divide the frequencies when
/// given. Throws InputError naming `source`.
void finish_config(Model& model, const std::string& source, const std::vector<float>& freq_factors = {});

}  // namespace rkv::detail
