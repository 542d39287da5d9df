// The codec step of a cell: after selection and compaction, every layer's kept entries are stored packed
// (Backend::encode_layer; cache/codec.hpp), so the cell's kv_bytes are packed data + scales + positions.
//
//   prefill -> allocate -> compress_prompt (evict) -> encode_compressed (quantize) -> decode / score
//
// Thread rules: as the Backend.
#pragma once
#include <optional>
#include <string>
#include <cstdint>
#include <vector>

#include "backend/backend.hpp"
#include "cache/codec.hpp"
#include "runner/compress/compress_prompt.hpp"
#include "runner/plan/config.hpp"

namespace rkv {

/// Refuses, before any work, a codec this model cannot run: the head dim must suit the format (check_codec), and
/// the model must have no sliding-window layer (their window cut evicts from a packed cache during decode). Throws
/// rkv::InputError naming `where` (the config and cell). A no-op for codec "none".
void check_codec_support(const ModelConfig& config, const CodecSpec& codec, const std::string& where);

/// The codec's bits of every model layer for a cell with compression.codec.layer_bits = "profile"
/// (cache/layer_bits.hpp), from the cell's profile `profile` [L] and the entries `comp.cache` holds per layer (over
/// config.n_kv_heads heads); empty for layer_bits = "uniform".
std::vector<int> layer_bits_of(const CompressedPrompt& comp, const CodecSpec& codec, const std::vector<double>& profile,
                               const ModelConfig& config);

/// The token precision class of every entry of every layer of `comp.cache` for a mixed codec (codec.token_bits;
/// cache/token_bits.hpp): per layer, per KV head in cache order, the entries the codec packs (all but the newest
/// `residual`) ranked by the layer's scorer (`scorers.at(l)`: its scores in `memo` for `prompt`, its protected
/// positions first), the others class 0; the entries' prompt positions are comp.prompt_positions[l] when recorded
/// (rerotate), else the cache's. [L] rows, empty for a shared layer; {} when the codec is not mixed. rkv::InputError
/// for a cache that tracks no positions in a compacted layer.
std::vector<std::vector<uint8_t>> token_classes_of(Backend& backend, const PrefilledPrompt& prompt,
                                                   const CompressedPrompt& comp, const LayerScorers& scorers,
                                                   ScoreMemo& memo, const CodecSpec& codec);

/// Encodes every layer of `comp.cache` that holds its own entries (not a shared one) with `codec` -- at `layer_bits[l]`
/// bits when given (one per model layer), with the token classes `entry_classes[l]` when given (token_classes_of;
/// Backend::encode_layer_classes) -- and sets comp.bytes_kept to the packed cache's bytes; adds the encode time to
/// comp.seconds. A no-op for "none".
void encode_compressed(Backend& backend, CompressedPrompt& comp, const CodecSpec& codec,
                       const std::vector<int>& layer_bits = {},
                       const std::vector<std::vector<uint8_t>>& entry_classes = {});

/// Entries per token class of every layer of `cache` from `entry_classes` (token_classes_of): [L][C + 1], per layer
/// the entries of each class over the KV heads, top class first, then class 0 (the base codec and the float tail);
/// empty when entry_classes is.
std::vector<std::vector<int64_t>> token_class_entries(const std::vector<std::vector<uint8_t>>& entry_classes,
                                                      const CodecSpec& codec);

}  // namespace rkv
