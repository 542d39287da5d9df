// Greedy generation on a compressed prompt cache: what `ripplekv generate --compress` and rkv_generate with a
// compression config do (docs/ARCHITECTURE.md "Data flow": prefill once -> the cell sequence -> decode).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "model/model.hpp"
#include "tokenizer/tokenizer.hpp"

namespace rkv {

/// What one compressed generation did.
struct CompressedGeneration {
  std::vector<int32_t> tokens;        ///< generated ids, without the end-of-generation id
  std::string scorer;                 ///< scorer plugin id
  std::string allocator;              ///< allocator plugin id
  std::string heads;                  ///< per-head allocator plugin id ([allocator] heads), empty when none
  std::string decode;                 ///< the decode policy with its parameters (DecodeSpec::describe)
  std::vector<std::vector<int64_t>> head_budgets;  ///< per model layer b[l, h] with a per-head allocator; else empty
  int64_t prompt_tokens = 0;          ///< T
  int64_t budget_total = 0;           ///< B, positions over the compressible layers
  std::vector<int64_t> budgets;       ///< per model layer: b_l (T for a layer left whole; 0 for a shared layer)
  /// per model layer: the codec's bits when they follow the profile (codec layer_bits = "profile"); else empty
  std::vector<int64_t> layer_bits;
  /// per model layer: the per-prompt signal's s_l on this prompt (a [signal] with RKV_FLAG_PER_PROMPT); else empty
  std::vector<double> prompt_profile;
  std::string signal;                 ///< that per-prompt signal's plugin id; empty without one
  /// per model layer: the layer whose cache it reads ([compression.share]; itself when it keeps its own); else empty
  std::vector<int64_t> share_sources;
  size_t bytes_full = 0;              ///< KV cache bytes of the prompt before compression
  size_t bytes_kept = 0;              ///< after compression
  size_t bytes_end = 0;               ///< bytes of the entries held after decoding (BackendCache::bytes_in_use)
  std::vector<std::string> warnings;  ///< allocator, scorer and selection warnings
  double decode_tokens_per_second = 0;
};

/// Prefills `prompt_ids` (T >= 1) on `backend`, compresses the cache with the one cell of the compression config at
/// `config_path` (load_compression_config) through the cell sequence every run cell takes (runner/compress/cell.hpp:
/// sharing, allocation, eviction, codec), then decodes greedily on the compressed cache under its decode policy, from
/// position T (or the cache length when rerotate re-rotated the kept keys), for at most `max_new_tokens` (>= 0)
/// tokens, stopping at an end-of-generation id of `tok`. A cell that reads a sensitivity profile (an allocator that
/// declares RKV_FLAG_NEEDS_PROFILE, codec layer_bits = "profile", share count = k) reads s[L] from `profile_path` (a
/// profile.json of `ripplekv profile` or a run; one value per model layer). [compression.joint] is refused: its plan
/// needs damage tables measured on a run's calibration split.
/// Errors (rkv::InputError): a bad config (file, key and line named), a setting the model rules out, budget.layers
/// outside the model, a needed profile missing or with the wrong number of layers, a plugin that fails (named).
/// Plugins are created for this call and released before it returns. Thread rules: the backend's (one call at a time
/// per backend).
CompressedGeneration generate_compressed(Backend& backend, const Tokenizer& tok,
                                         const std::vector<int32_t>& prompt_ids, const std::string& config_path,
                                         const std::string& profile_path, int64_t max_new_tokens);

}  // namespace rkv
