#include "runner/cache_codec.hpp"

#include <algorithm>
#include <chrono>

#include "cache/layer_bits.hpp"

#include "core/errors.hpp"
#include "runner/sliding_window.hpp"

namespace rkv {

void check_codec_support(const ModelConfig& config, const CodecSpec& codec, const std::string& where) {
  if (codec.none()) return;
  check_codec(codec, config.head_dim, where + ": [compression.codec]");
  if (has_sliding_window(config))
    throw InputError(where + ": [compression.codec] " + codec.label() + " is not supported on a model with "
                     "sliding-window layers (their window cut would evict from a packed cache while decoding)");
}

std::optional<double> token_fraction(const CellConfig& cell, int64_t head_dim, int64_t prefix_tokens) {
  if (!cell.budget_bytes_fraction) return cell.budget_fraction;
  const double x = *cell.budget_bytes_fraction, T = static_cast<double>(std::max<int64_t>(prefix_tokens, 1));
  if (cell.codec.none()) return x;
  const double e_f32 = codec_entry_bytes(CodecSpec{}, head_dim), e = codec_entry_bytes(cell.codec, head_dim);
  const double R = static_cast<double>(cell.codec.residual + codec_key_quantum(cell.codec) - 1);
  const double bytes = x * T * e_f32;  // per KV head and layer
  const double b = bytes <= R * e_f32 ? x * T : R + (bytes - R * e_f32) / e;
  return std::min(1.0, b / T);
}

std::vector<int> layer_bits_of(const CompressedPrompt& comp, const CodecSpec& codec, const std::vector<double>& profile,
                               const ModelConfig& config) {
  if (codec.none() || codec.layer_bits != "profile") return {};
  const BackendCache& cache = *comp.cache;
  std::vector<int64_t> entries(static_cast<size_t>(cache.n_layers()), 0);  // sum over KV heads
  for (int64_t l = 0; l < cache.n_layers(); ++l)
    for (int64_t h = 0; h < config.n_kv_heads; ++h) entries[static_cast<size_t>(l)] += cache.head_length(l, h);
  return allocate_layer_bits(profile, entries, codec, config.head_dim, codec.bits_ratio);
}

void encode_compressed(Backend& backend, CompressedPrompt& comp, const CodecSpec& codec,
                       const std::vector<int>& layer_bits) {
  if (codec.none()) return;
  if (!layer_bits.empty() && static_cast<int64_t>(layer_bits.size()) != comp.cache->n_layers())
    throw InputError("encode_compressed: bits for " + std::to_string(layer_bits.size()) + " layers, the cache has " +
                     std::to_string(comp.cache->n_layers()));
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t l = 0; l < comp.cache->n_layers(); ++l) {
    if (comp.cache->shared_source(l) != l) continue;  // a shared layer holds no entries to encode
    CodecSpec c = codec;
    if (!layer_bits.empty()) c.bits = layer_bits[static_cast<size_t>(l)];
    backend.encode_layer(*comp.cache, l, c);
  }
  comp.bytes_kept = comp.cache->bytes();
  comp.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace rkv
