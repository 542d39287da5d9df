// The scores of one prompt, memoized per scorer and layer: scores depend only on the scorer (and its params) and the
// prompt, so every cell of a run that ranks a layer with the same scorer calls the plugin once (and the profile of a
// per-prompt signal once per signal). A budget-dependent
// scorer (rkv_scorer_requirements.budget_dependent, e.g. CriticalKV) is memoized per (layer, head budgets) instead,
// and the value-output norms it reads are kept per layer so a second budget does not recompute them. Scorer plugins
// run on the CPU: they get a host copy of the layer (Backend::download_layer) and the host copies of the statistics.
//
// Thread rules: a ScoreMemo belongs to one prompt and one thread at a time; plugin instances are never called
// concurrently (the ABI's rule).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "backend/backend.hpp"
#include "plugin/prompt_signal_call.hpp"
#include "plugin/scorer_call.hpp"
#include "runner/compress/prefill.hpp"
#include "runner/compress/scorers.hpp"

namespace rkv {

/// Statistics and scores of one prompt, memoized per scorer key and layer.
class ScoreMemo {
 public:
  /// Scores [H_kv, T] of `layer` for `scorer` on `prompt`, calling the scorer once. The statistics come from the
  /// prefill; rkv::InputError when the prefill did not compute what the scorer asks for (naming the scorer).
  /// `head_budgets` ([H_kv], positions each KV head keeps) is what the final selection keeps (or, for a scorer
  /// budgeted for allocators, the layer's share before the split): passed to a budget-dependent scorer (and part of
  /// the memo key for it), ignored for any other; null asks for the scorer's budget-free ranking (codec classes, the
  /// joint planner, allocators of a RKV_BUDGET_FINAL scorer).
  const ScoreResult& scores(Backend& backend, const PrefilledPrompt& prompt, const ScorerUse& scorer, int64_t layer,
                            const std::vector<int64_t>* head_budgets = nullptr);

  /// The per-prompt profile s [L] of `signal` (a ScorerUse of a per-prompt signal, rkv.prompt_signal/1) on `prompt`:
  /// layer_value() of every model layer, in layer order, computed once per signal key. The plugin's warnings go to
  /// `warnings` (when not null) on the first call only. rkv::InputError as run_prompt_signal and as scores() for
  /// statistics the prefill lacks.
  const std::vector<double>& prompt_profile(Backend& backend, const PrefilledPrompt& prompt, const ScorerUse& signal,
                                            std::vector<std::string>* warnings = nullptr);

 private:
  using Key = std::tuple<std::string, int64_t, std::vector<int64_t>>;  ///< scorer key, layer, budgets (or empty)
  std::map<Key, ScoreResult> scores_;
  std::map<int64_t, std::vector<float>> norms_;  ///< ||W_o v||_1 [H, T] per layer, for budget-dependent scorers
  std::map<std::string, std::vector<double>> profiles_;  ///< per-prompt profiles [L] per signal key
};

}  // namespace rkv
