// Task lm_fidelity: how much does compressing a prefix change the model's predictions on the text that follows?
//
// Example = a prefix of T tokens (compressed) + a continuation c_0 .. c_{n-1} (teacher-forced, never compressed).
// The continuation is fed on the full cache (reference) and on the compressed cache; logits row r predicts c_{r+1}.
//   kl           = mean_{r=0}^{n-1} KL(P_full,r || P_comp,r)            nats per token, P = softmax of the logits
//   top1         = mean_r [argmax P_full,r == argmax P_comp,r]          agreement with the full cache
//   ppl_full     = exp(mean_{r=0}^{n-2} -log P_full,r(c_{r+1}))         perplexity without compression
//   ppl          = exp(mean_{r=0}^{n-2} -log P_comp,r(c_{r+1}))         perplexity with compression
// Softmax and KL in double from fp32 logits.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "runner/compress/prefill.hpp"
#include "runner/decode/policy.hpp"
#include "runner/tasks/task.hpp"

namespace rkv {

/// The reference of one example: the full cache's continuation logits (float32 [n, V]).
struct LmFidelityReference {
  std::vector<float> logits;
  double ppl_full = 0;
};

/// Runs the continuation on the prompt's full cache itself and cuts the cache back to T after (with_prompt_cache):
/// no copy of the cache, except on a model with sliding-window layers, which scores a copy. The prompt's cache holds
/// the same entries on return.
LmFidelityReference lm_fidelity_reference(Backend& backend, const PrefilledPrompt& prompt,
                                          const std::vector<int32_t>& continuation);

/// Per-example metric values of one cell, and the continuation logits they came from (float32 [n, V]).
struct LmFidelityValues {
  double kl = 0, top1 = 0, ppl = 0, ppl_full = 0;
  std::vector<float> logits;
};

/// Scores the continuation on `compressed` (consumed: the continuation is appended to it) against `ref`.
/// `decode` (may be null) is the decode policy's session applied while the continuation is fed. The continuation
/// starts at position `start_pos` (CompressedPrompt::next_position: T, or the cache length after key re-rotation);
/// nullopt: T.
LmFidelityValues lm_fidelity_score(Backend& backend, const PrefilledPrompt& prompt, BackendCache& compressed,
                                   const std::vector<int32_t>& continuation, const LmFidelityReference& ref,
                                   DecodeSession* decode = nullptr, std::optional<int64_t> start_pos = std::nullopt);

/// The lm_fidelity task (task_table()).
const Task& lm_fidelity_task();

/// KL(P || Q) in nats between softmax(p_logits) and softmax(q_logits) over V entries, computed in double.
double kl_from_logits(const float* p_logits, const float* q_logits, int64_t V);

/// log softmax(logits)[target] in double.
double log_prob(const float* logits, int64_t V, int32_t target);

}  // namespace rkv
