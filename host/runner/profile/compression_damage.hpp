// Compression damage D_l(f): how much the model's next-token distributions move when ONLY layer l is compressed
// (docs/ARCHITECTURE.md "Compression damage"). Shared by `ripplekv analyze` (on the evaluation split) and the builtin `damage`
// signal (runner/profile/damage_signal.hpp, on the calibration split), so both measure the same quantity with one loop.
//
// For example i (a token window of T prefix tokens followed by its continuation c_i), budget fraction f and layer l:
// prefill the prefix, compress only layer l with the scorer to b = floor(f * span_l + 0.5) positions (span_l =
// min(T, window) for a sliding-window layer, T otherwise; cache/budget.hpp), all other layers intact, and
//   d_{f,i,l} = (1 / |c_i|) sum_t KL(P_{i,t} || P^comp_{i,l,t})
// over the teacher-forced continuation tokens t (the lm_fidelity set-up, task_lm_fidelity.hpp), in nats per token.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "backend/backend.hpp"
#include "cache/codec.hpp"
#include "runner/compress/compress_prompt.hpp"

namespace rkv {

/// d[s][f][i][l] (nats/token) for every scorer s of `scorers` (each picks the kept positions; its instance must outlive
/// the call), fraction f of `fractions` (each in (0, 1]), example i of `windows` (each prefix_tokens + at least one
/// continuation token ids) and layer l of the backend's model. One prefill per example serves every scorer
/// (prefill_needs of all of them). `on_example(i)` (may be empty) is called after example i. With a `codec` (not
/// none), layer l's kept entries are also stored with it (Backend::encode_layer) before the continuation runs: the
/// damage of eviction and quantization together in that layer alone.
/// Throws rkv::InputError when a window is too short, a fraction is outside (0, 1], or a fraction keeps no position
/// of a layer's span (naming both). Runs on `backend`; must not run concurrently with other work on it. Polls
/// throw_if_cancelled() between examples.
std::vector<std::vector<std::vector<std::vector<double>>>> compression_damage(
    Backend& backend, const std::vector<const ScorerUse*>& scorers, const std::vector<std::vector<int32_t>>& windows,
    int64_t prefix_tokens, const std::vector<double>& fractions, const std::function<void(int64_t)>& on_example = {},
    const CodecSpec& codec = {});

/// Sharing damage d^share_{i,l} (nats/token) [N][L]: the compression damage's set-up with layer l's cache dropped and
/// its attention reading layer l - 1's instead (Backend::share_layer(l, l - 1); every other layer intact), i.e. the
/// damage of sharing only layer l with its predecessor, the per-layer quantity KVSharer-style choices rank. Layer 0
/// has no predecessor: its entries are NaN. Errors, cancellation and `on_example` as compression_damage().
std::vector<std::vector<double>> sharing_damage(Backend& backend, const std::vector<std::vector<int32_t>>& windows,
                                                int64_t prefix_tokens,
                                                const std::function<void(int64_t)>& on_example = {});

}  // namespace rkv
