#include "runner/decode_policy.hpp"

#include <algorithm>

#include "cache/selection.hpp"
#include "core/errors.hpp"

namespace rkv {

DecodeEviction::DecodeEviction(const std::string& policy, int64_t sinks, std::vector<int64_t> budgets)
    : sinks_(sinks), budgets_(std::move(budgets)) {
  if (policy != "none" && policy != "rolling")
    throw InputError("compression.decode.policy must be \"none\" or \"rolling\" (got \"" + policy + "\")");
  if (sinks < 0) throw InputError("compression.decode.sinks must be >= 0 (got " + std::to_string(sinks) + ")");
  for (int64_t b : budgets_)
    if (b < 1) throw InputError("decode eviction: a layer budget of " + std::to_string(b) + " entries (must be >= 1)");
  rolling_ = policy == "rolling";
}

void DecodeEviction::apply(Backend& backend, BackendCache& cache) const {
  if (!rolling_) return;
  if (cache.n_layers() != static_cast<int64_t>(budgets_.size()))
    throw InputError("decode eviction: the cache has " + std::to_string(cache.n_layers()) + " layers but " +
                     std::to_string(budgets_.size()) + " budgets were given");
  const int64_t Hkv = backend.model().config.n_kv_heads;
  for (int64_t l = 0; l < cache.n_layers(); ++l) {
    const int64_t held = cache.length(l), b = budgets_[static_cast<size_t>(l)];
    if (held <= b) continue;
    // Sinks and the most recent entries are exactly b protected entries: the selection keeps them and nothing else,
    // so the scores do not matter.
    const int64_t sinks = std::min(sinks_, b);
    const std::vector<float> scores(static_cast<size_t>(Hkv * held), 0.0f);
    backend.compact_layer(cache, l, select_positions(scores.data(), Hkv, held, b, ProtectedSpec{sinks, b - sinks}, l));
  }
}

}  // namespace rkv
