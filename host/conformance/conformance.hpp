// The plugin conformance kit behind `ripplekv plugins check ID`: the rules every plugin of a kind must follow,
// checked on seeded synthetic inputs through the host's own call paths, so a plugin that passes behaves in a real run
// as the host expects.
//
//   scorer     (conformance_scorer.cpp)     seeded random queries/keys/values of a few shapes and lengths T, through
//              query_scorer_requirements -> compute_attention_stats / window_queries -> call_scorer, and
//              compress_layer (run_scorer -> select_positions -> compact_layer) for the budget rules
//   allocator  (conformance_allocator.cpp)  requests of several (|A|, T, B, profile, protected count) through
//              call_allocator and run_allocator (validation + integerize_budgets)
//   signal     (conformance_signal.cpp)     seeded synthetic models (model/synthetic_model.hpp) and token windows,
//              through the profiler service (runner/profile/profiler.hpp) and call_signal exactly as compute_profile() calls a
//              signal, then compute_profile() itself (cache off); a per-prompt signal (conformance_prompt_signal.cpp)
//              on the scorer kit's seeded layers (conformance_inputs.hpp) through call_prompt_signal
//
// Only what holds for every plugin of the kind is checked (no ordering or value assumptions). Each case is one rule;
// its detail says what was covered, or the first input that broke the rule and how.
//
// Thread rules: the checks create their own plugin instances and call them from the calling thread. The signal check
// sets the CPU backend's process-wide thread count to 1 while it runs (bit-reproducibility is promised at a fixed
// thread count) and restores it afterwards, so it must not run concurrently with other forward passes.
#pragma once
#include <string>
#include <vector>

#include "plugin/params.hpp"
#include "plugin/instance.hpp"
#include "plugin/registry.hpp"

namespace rkv {

/// One rule's outcome.
struct ConformanceCase {
  std::string name;    ///< short rule name, e.g. "scores_finite", "sums_to_B"
  bool passed = false;
  std::string detail;  ///< what was covered (pass) or the first violation (fail)
};

/// Scorer rules (names in the order returned):
///   create              the plugin creates an instance with `params`
///   requirements        requirements() succeeds for every test shape with valid declarations, the same twice
///   scores_finite       score() succeeds and fills all of [H_kv, T] with finite float32 values, for every input
///                       (shapes (H, H_kv, d) = (4, 2, 8), (3, 1, 16), (2, 2, 4); T in {1, 7, 64, 300}; random, tied
///                       (all keys equal) and peaked (large logits) inputs)
///   deterministic       a second call and a fresh instance give bitwise identical scores
///   budget_respected    after selection and compaction each KV head keeps exactly min(b_l, T) distinct positions in
///                       [0, T), ascending, and the layer is untouched exactly when b_l >= T (b_l from 1 to above T)
///   protected_kept      when b_l >= the protected count, every protected position is kept by every head
///   protected_priority  when b_l < the protected count, the first b_l protected positions (sinks, then the most
///                       recent) are kept and a warning is recorded
///   decode_scores_finite, decode_budget_respected, decode_protected_kept
///                       for a scorer that declares decode-time scoring (rkv_scorer_requirements.decode_scoring):
///                       the same rules on decode-time inputs (T in {2, 9, 64} entries held, statistics of
///                       decode_stats over 1 or `window` decoded queries); a prefill-only scorer gets one passing
///                       "decode_time" case saying it is not applicable
///   short_prompt        scores_finite and the selection rules on a prompt shorter than the scorer's window /
///                       protected span (T = span - 1; not applicable when the span is at most 1)
/// Inputs whose scores were rejected count under scores_finite only; the selection rules skip them (and fail when no
/// input is left). Throws nothing for a misbehaving plugin; `info` must be a scorer.
std::vector<ConformanceCase> check_scorer(const PluginInfo& info, const ParamSet& params);

/// Allocator rules, over requests with one layer, B = |A|, B = |A| T - 1, B = |A| T, T = 1, SmolLM2's 30 layers,
/// negative, constant, wide-range and random profiles, and protected counts from -1 (standalone) to above B / |A|:
///   create, finite (every x_l finite), non_negative (every x_l >= 0), sums_to_B (|sum x - B| <= 1e-6 B, the host's
///   tolerance), integer_budgets (run_allocator accepts the answer; the integer budgets sum to exactly B with
///   1 <= b_l <= T), deterministic (a second call and a fresh instance give bitwise identical x).
std::vector<ConformanceCase> check_allocator(const PluginInfo& info, const ParamSet& params);

/// The "rkv.allocator/2" matrix (per-head budgets), run by check_allocator on its instance `inst` of the plugin when
/// it serves that interface: allocate_heads_call, head_integer_budgets, head_deterministic
/// (conformance_head_allocator.cpp).
std::vector<ConformanceCase> check_head_allocator(const PluginInfo& info, const ParamSet& params,
                                                  const PluginInstance& inst);

/// Signal rules, on tiny seeded synthetic models (4 layers with GQA, 1 layer, 3 layers qwen2) with a few random
/// token windows each, at one CPU thread:
///   create, profile_call (profile() succeeds through the profiler service), profile_length (s has L values and d has
///   N x L), finite (every value of s and d finite, i.e. written and not NaN/inf), deterministic (a second run with
///   a fresh profiler and instance is bitwise identical), host_accepts (compute_profile(), the run's path with the
///   cache off, accepts the profile and gives the same s).
std::vector<ConformanceCase> check_signal(const PluginInfo& info, const ParamSet& params);

/// Per-prompt signal rules (rkv.prompt_signal/1, RKV_FLAG_PER_PROMPT; check_signal hands them over), on the scorer
/// kit's seeded layers (shapes (4, 2, 8), (3, 1, 16), (2, 2, 4); T in {1, 7, 64, 300}; random, tied, peaked) with
/// only the statistics the signal requested (every other tensor NULL, as in a run):
///   create, requirements (valid prefill requirements, no decode or budget fields, the same from two instances),
///   value_finite (layer_value() succeeds with a finite value on every input: a signal that reads a statistic it did
///   not request is refused here), deterministic (a second call and a fresh instance give the same bits),
///   varies_with_prompt (on each shape, two random prompts of T = 64 give different values on some layer: a
///   per-prompt signal that ignores its prompt is a calibration constant).
std::vector<ConformanceCase> check_prompt_signal(const PluginInfo& info, const ParamSet& params);

/// Dispatches on the plugin's kind. Throws rkv::InputError for an unknown kind.
std::vector<ConformanceCase> check_plugin(const PluginInfo& info, const ParamSet& params);

/// True when every case passed (and there is at least one).
bool all_passed(const std::vector<ConformanceCase>& cases);

}  // namespace rkv
