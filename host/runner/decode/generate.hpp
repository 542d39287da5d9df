// Text generation on any backend: prefill the prompt, then decode token by token until an end-of-generation id or the
// token limit, choosing each token with runner/decode/sampling.hpp.
//
// Thread rules: one generation at a time per backend (the backend's rule).
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "backend/backend.hpp"
#include "runner/decode/sampling.hpp"

namespace rkv {

struct GenerateOptions {
  int64_t max_new_tokens = 256;
  SamplingOptions sampling;
  std::vector<int32_t> stop_ids;  ///< any of these ends generation (it is not included in the output)
};

struct GenerateResult {
  std::vector<int32_t> tokens;  ///< generated ids, without the stop id
  bool stopped = false;         ///< true when a stop id ended generation (false: the token limit)
  double prefill_seconds = 0.0;
  double decode_seconds = 0.0;
};

/// Generates after `prompt` (non-empty) on `backend`. `on_token` (optional) sees each generated id as it is produced
/// and may return false to stop early. Throws rkv::InputError for an empty prompt or bad ids/options.
GenerateResult generate(Backend& backend, const std::vector<int32_t>& prompt, const GenerateOptions& opts,
                        const std::function<bool(int32_t)>& on_token = {});

}  // namespace rkv
