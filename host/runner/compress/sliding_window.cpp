#include "runner/compress/sliding_window.hpp"

#include <string>

#include "core/errors.hpp"
#include "runner/plan/decode_spec.hpp"
#include "runner/compress/keep_entries.hpp"

namespace rkv {

int64_t window_first_position(const ModelConfig& config, int64_t layer, int64_t T) {
  return T - config.layer_span(layer, T);
}

bool has_sliding_window(const ModelConfig& config) {
  for (int64_t l = 0; l < config.n_layers; ++l)
    if (config.layer_window(l) > 0) return true;
  return false;
}

void check_sliding_window_support(const ModelConfig& config, bool rerotate, const std::string& decode_policy,
                                  const std::string& where) {
  if (!has_sliding_window(config)) return;
  if (rerotate)
    throw InputError(where + ": compression.rerotate = true is not supported on a model with sliding-window layers "
                     "(re-rotated positions would move entries across the window)");
  const DecodePolicyTraits* policy = find_decode_policy(decode_policy);
  if (policy && policy->per_entry_state)
    throw InputError(where + ": compression.decode.policy = \"" + decode_policy + "\" is not supported on a model "
                     "with sliding-window layers (it keeps state per held entry; use " +
                     quoted_decode_policies([](const DecodePolicyTraits& t) { return !t.per_entry_state; }) + ")");
}

bool window_drops_entries(const ModelConfig& config, int64_t T) {
  for (int64_t l = 0; l < config.n_layers; ++l)
    if (window_first_position(config, l, T) > 0) return true;
  return false;
}

namespace {

void check_span(int64_t span, int64_t T, int64_t layer) {
  if (span < 1 || span > T)
    throw InputError("layer " + std::to_string(layer) + ": window span " + std::to_string(span) + " is outside [1, T = " +
                     std::to_string(T) + "]");
}

/// Scores of positions [first, T) of every head: float32 [H_kv, T - first], or empty when `scores` is null.
std::vector<float> window_scores(const float* scores, int64_t Hkv, int64_t T, int64_t first) {
  std::vector<float> sub;
  if (!scores) return sub;
  const int64_t span = T - first;
  sub.reserve(static_cast<size_t>(Hkv * span));
  for (int64_t h = 0; h < Hkv; ++h) sub.insert(sub.end(), scores + h * T + first, scores + (h + 1) * T);
  return sub;
}

/// A selection made over the window's `span` entries, re-expressed over the layer's T entries: indices shifted by
/// first = T - span; an untouched one (every head kept the whole window) keeps [first, T) in every head.
Selection widen(Selection s, int64_t T, int64_t span) {
  const int64_t first = T - span;
  if (s.untouched) {
    s.untouched = false;
    s.kept = span;
    s.head_kept.clear();
    s.positions.clear();
    for (int64_t h = 0; h < s.n_kv_heads; ++h)
      for (int64_t p = first; p < T; ++p) s.positions.push_back(p);
  } else {
    for (int64_t& p : s.positions) p += first;
  }
  s.prefix_tokens = T;
  return s;
}

}  // namespace

Selection select_in_window(const float* scores, int64_t Hkv, int64_t T, int64_t span, int64_t budget,
                           const ProtectedSpec& spec, int64_t layer) {
  check_span(span, T, layer);
  if (span == T) return select_positions(scores, Hkv, T, budget, spec, layer);
  const std::vector<float> sub = budget < span ? window_scores(scores, Hkv, T, T - span) : std::vector<float>{};
  const ProtectedSpec in_window{0, spec.recent};  // the sinks lie before the window: the layer no longer holds them
  return widen(select_positions(sub.empty() ? nullptr : sub.data(), Hkv, span, budget, in_window, layer), T, span);
}

Selection select_in_window_per_head(const float* scores, int64_t Hkv, int64_t T, int64_t span,
                                    const std::vector<int64_t>& head_budgets, const ProtectedSpec& spec,
                                    int64_t layer) {
  check_span(span, T, layer);
  if (span == T) return select_positions_per_head(scores, Hkv, T, head_budgets, spec, layer);
  const std::vector<float> sub = window_scores(scores, Hkv, T, T - span);
  const ProtectedSpec in_window{0, spec.recent};
  return widen(select_positions_per_head(sub.empty() ? nullptr : sub.data(), Hkv, span, head_budgets, in_window, layer),
               T, span);
}

int64_t drop_out_of_window(Backend& backend, BackendCache& cache, int64_t last_position) {
  const ModelConfig& c = backend.model().config;
  int64_t dropped = 0;
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const int64_t W = c.layer_window(l);
    if (W <= 0) continue;
    const std::vector<int32_t> pos = backend.layer_positions(cache, l);
    if (pos.empty()) continue;
    KeepLists keep(static_cast<size_t>(c.n_kv_heads));
    size_t at = 0;
    for (int64_t h = 0; h < c.n_kv_heads; ++h) {
      const int64_t n = cache.head_length(l, h);
      for (int64_t i = 0; i < n; ++i, ++at)
        if (last_position - pos[at] < W) keep[static_cast<size_t>(h)].push_back(i);
        else ++dropped;
    }
    keep_entries(backend, cache, l, keep);
  }
  return dropped;
}

}  // namespace rkv
