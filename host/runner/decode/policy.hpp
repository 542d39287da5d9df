// Compression while decoding ([compression.decode] of a run config; a cell setting, sweepable as
// "compression.decode.policy" and its parameters): what happens to a compressed cache as tokens are appended after
// the prompt (the continuation of lm_fidelity, a needle question and its answer, LongBench answers, `generate`).
//
//   none      the cache grows by one entry per layer and KV head per token (every entry is kept);
//   rolling   StreamingLLM as published (Xiao et al. 2024, "Efficient Streaming Language Models with Attention
//             Sinks"): KV head h of layer l holds at most its budget b (b_l, or b_{l,h} under per-head budgets): the
//             first `sinks` entries it holds (the attention sinks) and the most recent b - sinks; after every
//             appended token the oldest other entry is evicted;
//   h2o       H2O as published (Zhang et al. 2023, "H2O: Heavy-Hitter Oracle", Algorithm 1 with the recent window of
//             its experiments): every entry carries its accumulated attention a[q, j] per query head q (the prompt's
//             cumulative attention when the entry came from the prompt, plus the attention of every decoded token);
//             when a head holds more than b entries, it keeps its `recent` most recent entries and, among the others,
//             the b - recent with the largest sum over its GQA group of a[q, j] (ties to the earlier entry);
//   periodic  kvpress DecodingPress: every `interval` decoded tokens each head is re-scored by the cell's scorer on
//             what it holds (with decode-time statistics: the window attention of the queries decoded since the last
//             compression, the accumulated attention, keys and values) and compressed back to `target` entries
//             (0: its budget b), protected entries first as after prefill. Between compressions it grows, so a head
//             holds at most target + interval - 1 entries after a token.
//
// Worked example (rolling): b = 6, sinks = 2, a head that kept positions [0, 1, 7, 8, 9, 11] of a prompt of T = 12;
// after the tokens at positions 12 and 13 it holds [0, 1, 9, 11, 12, 13].
// Worked example (h2o): b = 4, recent = 2, a head holding positions [0, 3, 5, 7] with accumulated attention
// [2.0, 0.1, 0.5, 0.3]; the token at position 8 attends [0.5, 0.1, 0.1, 0.2, 0.1]: a = [2.5, 0.2, 0.6, 0.5, 0.1].
// The recent two (7, 8) stay; among [0, 3, 5] the two largest (0: 2.5, 5: 0.6) stay: it holds [0, 5, 7, 8].
//
// The policies are a table: their traits (evicts, per-entry state, re-scoring, accumulated attention) are
// runner/plan/decode_spec.hpp's, read by the plan and the checks before a run; their machinery (how far a head may
// grow, the session of one sequence, budget warnings) is policy.cpp's, one session file per policy (sessions.hpp).
// docs/ARCHITECTURE.md "Decode policies" says how to add one.
//
// Every eviction is a compaction (Backend::compact_layer, through the cache's per-head indices), so it runs on every
// backend, storage is freed, and the cache never exceeds head_limit() between tokens.
//
// Thread rules: a DecodePolicy is immutable and may be shared; a DecodeSession belongs to one sequence and one thread.
// Both use the backend's thread rules for the calls that take one.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "cache/attention_stats.hpp"
#include "plugin/scorer_call.hpp"
#include "runner/plan/decode_spec.hpp"

namespace rkv {

struct ScorerUse;  // runner/compress/scorers.hpp

/// True when a cell decoding under `spec` with a scorer that declared `scorer` seeds accumulated attention from the
/// prefill's cumulative attention (h2o; periodic with a scorer that reads cumulative attention at decode time): the
/// prefill must then compute it (prefill_needs' cumulative_for_decode).
bool decode_needs_prompt_cumulative(const DecodeSpec& spec, const ScorerRequirements& scorer);

/// The policies that have sessions here, in table order: the same names as runner/plan/decode_spec.hpp's table (a
/// unit test checks it).
std::vector<std::string> decode_policy_session_names();

/// The decode-time work of one sequence: after_token() follows every appended token.
class DecodeSession {
 public:
  virtual ~DecodeSession() = default;
  /// What Backend::extend must observe for after_token() (DecodePolicy::capture()).
  virtual ExtendCapture capture() const = 0;
  /// Called after the token at position `position` was appended to `cache` by Backend::extend with the policy's
  /// capture(); `observed` holds what that capture asked for. Evicts or compresses so that every head is within the
  /// policy's head_limit(). rkv::InputError when `observed` lacks what the policy needs (naming it).
  virtual void after_token(Backend& backend, BackendCache& cache, const ExtendObservation& observed,
                           int64_t position) = 0;
};

/// A cell's decode policy over a compressed cache: the spec, the budgets compression left, and (periodic) the scorer.
class DecodePolicy {
 public:
  /// `budgets`: entries each KV head of a model layer may hold (b_l, or T for a layer left whole); `head_budgets`
  /// ([L][H_kv], or empty; a layer's row may be empty) the per-head budgets of a per-head allocation, which replace
  /// b_l for that layer's heads; `scorer` the cell's scorer (borrowed; must outlive the policy; needed by "periodic",
  /// which needs a scorer that supports decode-time scoring). Throws rkv::InputError for an unknown policy, a negative
  /// parameter, a budget below 1, or periodic without a decode-capable scorer (naming the scorer).
  DecodePolicy(DecodeSpec spec, std::vector<int64_t> budgets, std::vector<std::vector<int64_t>> head_budgets = {},
               const ScorerUse* scorer = nullptr);

  /// False for a policy that never evicts ("none"): tokens may then be fed all at once; otherwise one at a time with
  /// a session.
  bool active() const;
  const DecodeSpec& spec() const { return spec_; }
  /// What Backend::extend must observe for after_token() (attention mass for h2o and for a periodic scorer that
  /// reads accumulated attention; queries for a periodic scorer that reads window attention or window queries).
  ExtendCapture capture() const;
  /// The budget b of KV head `head` of `layer`.
  int64_t head_budget(int64_t layer, int64_t head) const;
  /// The layers the budgets cover (the model's).
  int64_t n_layers() const { return static_cast<int64_t>(budgets_.size()); }
  /// The most entries KV head `head` of `layer` holds after any token under this policy, given `held` entries
  /// when decoding started: max(held, b) for rolling and h2o (a head below its budget grows up to it; never
  /// evicted below it), max(held, target + interval - 1) for periodic, unbounded (INT64_MAX) for none.
  int64_t head_limit(int64_t layer, int64_t head, int64_t held) const;
  /// A warning about budgets the policy cannot serve as asked, else "", naming the first such (layer, KV head) and
  /// how many there are: "rolling" with `sinks` at or above some head's budget (that head keeps its first entries and
  /// evicts every new token at once); "h2o" with `recent` at or above some head's budget (that head keeps only its
  /// most recent entries: pure recency under an h2o label); "periodic" with a `target` above some head's budget (that
  /// head is not compressed before it holds more than the target, so a continuation shorter than target - b + 1
  /// tokens never evicts). Recorded in the cell's warnings (and printed by `generate --compress`).
  std::string frozen_heads_warning(int64_t n_kv_heads) const;

  /// Starts the decode-time state of one sequence on `cache` (a compressed prompt cache, before the first decoded
  /// token). `prompt_cumulative` ([L] per layer [H, T], the prefill's cumulative attention of the whole prompt, or
  /// null) seeds the accumulated attention of h2o and periodic: each entry starts at its prompt position's value
  /// (0 without it). `prompt_positions` (CompressedPrompt::prompt_positions, or null) gives the entries' prompt
  /// positions where the cache no longer stores them (after key re-rotation). Returns null for "none".
  /// rkv::InputError when the cache has another number of layers than there are budgets, or h2o is asked without
  /// `prompt_cumulative`.
  std::unique_ptr<DecodeSession> begin(Backend& backend, const BackendCache& cache,
                                       const std::vector<AttentionStats>* prompt_cumulative,
                                       const std::vector<std::vector<int32_t>>* prompt_positions = nullptr) const;


 private:
  DecodeSpec spec_;
  std::vector<int64_t> budgets_;
  std::vector<std::vector<int64_t>> head_budgets_;
  const ScorerUse* scorer_ = nullptr;
};

}  // namespace rkv
