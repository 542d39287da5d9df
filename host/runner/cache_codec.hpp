// The codec step of a cell: after selection and compaction, every layer's kept entries are stored packed
// (Backend::encode_layer; cache/codec.hpp), so the cell's kv_bytes are packed data + scales + positions.
//
//   prefill -> allocate -> compress_prompt (evict) -> encode_compressed (quantize) -> decode / score
//
// Thread rules: as the Backend.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "cache/codec.hpp"
#include "runner/compression.hpp"
#include "runner/config.hpp"

namespace rkv {

/// Refuses, before any work, a codec this model cannot run: the head dim must suit the format (check_codec), and
/// the model must have no sliding-window layer (their window cut evicts from a packed cache during decode). Throws
/// rkv::InputError naming `where` (the config and cell). A no-op for codec "none".
void check_codec_support(const ModelConfig& config, const CodecSpec& codec, const std::string& where);

/// The token fraction a cell keeps: budget.fraction as it is, or for budget.bytes_fraction x the fraction whose kept
/// entries cost x of the full float32 cache's bytes with the cell's codec,
///   f = min(1, x e_f32 / e_codec),   e = codec_entry_bytes (packed key + value + position per entry and KV head)
/// (e.g. SmolLM2, d = 64, int4 asymmetric g32: e = 84, e_f32 = 516, x = 0.1 -> f = 0.614). Entries a codec keeps in
/// float32 (its residual window, KIVI's partial key group) are not in e_codec: kv_bytes then exceeds x a little,
/// and the run reports the bytes it really held. nullopt for budget.tokens.
std::optional<double> token_fraction(const CellConfig& cell, int64_t head_dim);

/// The codec's bits of every model layer for a cell with compression.codec.layer_bits = "profile"
/// (cache/layer_bits.hpp), from the cell's profile `profile` [L] and the entries `comp.cache` holds per layer (over
/// config.n_kv_heads heads); empty for layer_bits = "uniform".
std::vector<int> layer_bits_of(const CompressedPrompt& comp, const CodecSpec& codec, const std::vector<double>& profile,
                               const ModelConfig& config);

/// Encodes every layer of `comp.cache` with `codec` -- at `layer_bits[l]` bits when given (one per model layer) --
/// and sets comp.bytes_kept to the packed cache's bytes; adds the encode time to comp.seconds. A no-op for "none".
void encode_compressed(Backend& backend, CompressedPrompt& comp, const CodecSpec& codec,
                       const std::vector<int>& layer_bits = {});

}  // namespace rkv
