#include "runner/compress/codec_step.hpp"

#include <algorithm>
#include <chrono>

#include "cache/layer_bits.hpp"
#include "cache/selection.hpp"
#include "cache/token_bits.hpp"

#include "core/errors.hpp"
#include "runner/compress/sliding_window.hpp"

namespace rkv {

void check_codec_support(const ModelConfig& config, const CodecSpec& codec, const std::string& where) {
  if (codec.none()) return;
  check_codec(codec, config.head_dim, where + ": [compression.codec]");
  if (has_sliding_window(config))
    throw InputError(where + ": [compression.codec] " + codec.label() + " is not supported on a model with "
                     "sliding-window layers (their window cut would evict from a packed cache while decoding)");
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

std::vector<std::vector<uint8_t>> token_classes_of(Backend& backend, const PrefilledPrompt& prompt,
                                                   const CompressedPrompt& comp, const LayerScorers& scorers,
                                                   ScoreMemo& memo, const CodecSpec& codec) {
  if (codec.none() || !codec.mixed()) return {};
  const BackendCache& cache = *comp.cache;
  const int64_t T = static_cast<int64_t>(prompt.tokens.size()), H = backend.model().config.n_kv_heads;
  std::vector<std::vector<uint8_t>> out(static_cast<size_t>(cache.n_layers()));
  for (int64_t l = 0; l < cache.n_layers(); ++l) {
    if (cache.shared_source(l) != l) continue;
    const bool recorded = static_cast<int64_t>(comp.prompt_positions.size()) > l &&
                          !comp.prompt_positions[static_cast<size_t>(l)].empty();
    std::vector<int32_t> positions = recorded ? comp.prompt_positions[static_cast<size_t>(l)]
                                              : backend.layer_positions(cache, l);
    if (positions.empty()) {  // no positions tracked: only an uncompacted layer's cache index is its position
      for (int64_t h = 0; h < H; ++h) {
        if (cache.head_length(l, h) != T)
          throw InputError("per-token bits: layer " + std::to_string(l) + " tracks no positions of its kept entries");
        for (int64_t i = 0; i < T; ++i) positions.push_back(static_cast<int32_t>(i));
      }
    }
    const ScorerUse& scorer = scorers.at(l);
    const std::vector<float>& scores = memo.scores(backend, prompt, scorer, l).scores;
    const std::vector<int64_t> protect = protected_positions(T, scorer.requirements.protected_spec());
    std::vector<uint8_t>& row = out[static_cast<size_t>(l)];
    size_t at = 0;
    for (int64_t h = 0; h < H; ++h) {
      const int64_t n = cache.head_length(l, h), m = std::max<int64_t>(0, n - codec.residual);
      const std::vector<uint8_t> cls = rank_token_classes(scores.data() + h * T, T, positions.data() + at, m, protect,
                                                          codec.token_shares);
      row.insert(row.end(), cls.begin(), cls.end());
      row.insert(row.end(), static_cast<size_t>(n - m), uint8_t{0});
      at += static_cast<size_t>(n);
    }
  }
  return out;
}

std::vector<std::vector<int64_t>> token_class_entries(const std::vector<std::vector<uint8_t>>& entry_classes,
                                                      const CodecSpec& codec) {
  std::vector<std::vector<int64_t>> out;
  for (const auto& row : entry_classes) {
    std::vector<int64_t> counts(codec.token_bits.size() + 1, 0);
    for (uint8_t c : row) ++counts[c == 0 ? counts.size() - 1 : c - 1u];
    out.push_back(row.empty() ? std::vector<int64_t>{} : counts);
  }
  return out;
}

void encode_compressed(Backend& backend, CompressedPrompt& comp, const CodecSpec& codec,
                       const std::vector<int>& layer_bits, const std::vector<std::vector<uint8_t>>& entry_classes) {
  if (codec.none()) return;
  if (!layer_bits.empty() && static_cast<int64_t>(layer_bits.size()) != comp.cache->n_layers())
    throw InputError("encode_compressed: bits for " + std::to_string(layer_bits.size()) + " layers, the cache has " +
                     std::to_string(comp.cache->n_layers()));
  if (codec.mixed() && entry_classes.empty())
    throw InputError("encode_compressed: the codec " + codec.label() + " needs each entry's token class (token_classes_of)");
  if (!entry_classes.empty() && static_cast<int64_t>(entry_classes.size()) != comp.cache->n_layers())
    throw InputError("encode_compressed: token classes for " + std::to_string(entry_classes.size()) +
                     " layers, the cache has " + std::to_string(comp.cache->n_layers()));
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t l = 0; l < comp.cache->n_layers(); ++l) {
    if (comp.cache->shared_source(l) != l) continue;  // a shared layer holds no entries to encode
    CodecSpec c = codec;
    if (!layer_bits.empty()) c.bits = layer_bits[static_cast<size_t>(l)];
    if (entry_classes.empty()) {
      backend.encode_layer(*comp.cache, l, c);
    } else {
      backend.encode_layer_classes(*comp.cache, l, c, entry_classes[static_cast<size_t>(l)]);
    }
  }
  comp.bytes_kept = comp.cache->bytes();
  comp.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace rkv
