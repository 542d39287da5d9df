// The scores of one prompt, memoized per scorer and layer: scores depend only on the scorer (and its params) and the
// prompt, so every cell of a run that ranks a layer with the same scorer calls the plugin once. Scorer plugins run on
// the CPU: they get a host copy of the layer (Backend::download_layer) and the host copies of the statistics.
//
// Thread rules: a ScoreMemo belongs to one prompt and one thread at a time; plugin instances are never called
// concurrently (the ABI's rule).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "backend/backend.hpp"
#include "plugin/scorer_call.hpp"
#include "runner/compress/prefill.hpp"
#include "runner/compress/scorers.hpp"

namespace rkv {

/// Statistics and scores of one prompt, memoized per scorer key and layer.
class ScoreMemo {
 public:
  /// Scores [H_kv, T] of `layer` for `scorer` on `prompt`, calling the scorer once. The statistics come from the
  /// prefill; rkv::InputError when the prefill did not compute what the scorer asks for (naming the scorer).
  const ScoreResult& scores(Backend& backend, const PrefilledPrompt& prompt, const ScorerUse& scorer, int64_t layer);

 private:
  std::map<std::pair<std::string, int64_t>, ScoreResult> scores_;
};

}  // namespace rkv
