// The decode policies' per-sequence state (runner/decode/policy.hpp), one file per policy:
//   rolling.cpp    StreamingLLM sinks + recent window
//   h2o.cpp        H2O heavy hitters by accumulated attention + recent window
//   periodic.cpp   kvpress DecodingPress: re-score with the cell's scorer every `interval` tokens
// and what they share: keeping a list of entries per head in one compaction (runner/compress/keep_entries.hpp), and
// the accumulated attention that follows the cache through appends and compactions
// (runner/compress/accumulated_attention.hpp).
//
// Thread rules: as DecodeSession's (one sequence, one thread).
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "runner/compress/accumulated_attention.hpp"
#include "runner/compress/keep_entries.hpp"
#include "runner/decode/policy.hpp"

namespace rkv::decode {

std::unique_ptr<DecodeSession> make_rolling_session(const DecodePolicy& policy);
std::unique_ptr<DecodeSession> make_h2o_session(const DecodePolicy& policy, Backend& backend, const BackendCache& cache,
                                                const std::vector<AttentionStats>* prompt_cumulative,
                                                const std::vector<std::vector<int32_t>>* prompt_positions);
std::unique_ptr<DecodeSession> make_periodic_session(const DecodePolicy& policy, const ScorerUse& scorer,
                                                     Backend& backend, const BackendCache& cache,
                                                     const std::vector<AttentionStats>* prompt_cumulative,
                                                     const std::vector<std::vector<int32_t>>* prompt_positions);

}  // namespace rkv::decode
