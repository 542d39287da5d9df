#include "runner/profile/compression_damage.hpp"

#include <cmath>
#include <limits>
#include <string>
#include <utility>

#include "core/cancel.hpp"
#include "core/errors.hpp"
#include "core/format.hpp"
#include "runner/decode/loop.hpp"
#include "runner/tasks/lm_fidelity.hpp"

namespace rkv {

namespace {

/// floor(f * span_l + 0.5) for every layer; throws when one of them is zero.
std::vector<int64_t> layer_budgets(const ModelConfig& mc, int64_t T, double f) {
  if (!(f > 0.0 && f <= 1.0))
    throw InputError("compression damage: fraction " + fmt(f, 6) + " is outside (0, 1]");
  std::vector<int64_t> b(static_cast<size_t>(mc.n_layers));
  for (int64_t l = 0; l < mc.n_layers; ++l) {
    const int64_t span = mc.layer_span(l, T);
    b[static_cast<size_t>(l)] = static_cast<int64_t>(std::floor(f * static_cast<double>(span) + 0.5));
    if (b[static_cast<size_t>(l)] < 1)
      throw InputError("compression damage: fraction " + std::to_string(f) + " keeps no position of layer " +
                       std::to_string(l) + "'s span of " + std::to_string(span));
  }
  return b;
}

/// Example i's window split into its T prefix tokens and its continuation; `what` names the measurement in the error
/// for a window of at most T tokens.
std::pair<std::vector<int32_t>, std::vector<int32_t>> split_window(const std::vector<int32_t>& w, int64_t T, int64_t i,
                                                                   const std::string& what) {
  if (static_cast<int64_t>(w.size()) <= T)
    throw InputError(what + ": example " + std::to_string(i) + " has " + std::to_string(w.size()) +
                     " tokens, not more than the " + std::to_string(T) + " prefix tokens");
  return {std::vector<int32_t>(w.begin(), w.begin() + T), std::vector<int32_t>(w.begin() + T, w.end())};
}

/// Mean over the continuation rows of KL(reference row || row), nats per token; both float32 [n, V].
double mean_kl(const std::vector<float>& reference, const std::vector<float>& logits, size_t n, int64_t V) {
  double kl = 0;
  for (size_t r = 0; r < n; ++r) kl += kl_from_logits(reference.data() + r * V, logits.data() + r * V, V);
  return kl / static_cast<double>(n);
}

}  // namespace

std::vector<std::vector<std::vector<std::vector<double>>>> compression_damage(
    Backend& backend, const std::vector<const ScorerUse*>& scorers, const std::vector<std::vector<int32_t>>& windows,
    int64_t T, const std::vector<double>& fractions, const std::function<void(int64_t)>& on_example,
    const CodecSpec& codec) {
  const ModelConfig& mc = backend.model().config;
  const int64_t L = mc.n_layers, V = mc.vocab_size, N = static_cast<int64_t>(windows.size());
  std::vector<std::vector<int64_t>> budgets;
  for (double f : fractions) budgets.push_back(layer_budgets(mc, T, f));
  const PrefillNeeds needs = prefill_needs(scorers);
  std::vector<std::vector<std::vector<std::vector<double>>>> d(
      scorers.size(), std::vector<std::vector<std::vector<double>>>(
                          fractions.size(), std::vector<std::vector<double>>(static_cast<size_t>(N),
                                                                             std::vector<double>(static_cast<size_t>(L)))));
  for (int64_t i = 0; i < N; ++i) {
    throw_if_cancelled();
    const auto [prefix, cont] = split_window(windows[static_cast<size_t>(i)], T, i, "compression damage");
    const PrefilledPrompt prompt = prefill_prompt(backend, prefix, needs);
    const LmFidelityReference ref = lm_fidelity_reference(backend, prompt, cont);
    ScoreMemo memo;
    for (size_t s = 0; s < scorers.size(); ++s)
      for (size_t fi = 0; fi < fractions.size(); ++fi)
        for (int64_t l = 0; l < L; ++l) {
          CompressedPrompt comp =
              compress_prompt(backend, prompt, *scorers[s], {l}, {budgets[fi][static_cast<size_t>(l)]}, memo);
          if (!codec.none()) backend.encode_layer(*comp.cache, l, codec);
          d[s][fi][static_cast<size_t>(i)][static_cast<size_t>(l)] =
              mean_kl(ref.logits, continuation_logits(backend, cont, T, *comp.cache), cont.size(), V);
        }
    if (on_example) on_example(i);
  }
  return d;
}

std::vector<std::vector<double>> sharing_damage(Backend& backend, const std::vector<std::vector<int32_t>>& windows,
                                                int64_t T, const std::function<void(int64_t)>& on_example) {
  const ModelConfig& mc = backend.model().config;
  const int64_t L = mc.n_layers, V = mc.vocab_size, N = static_cast<int64_t>(windows.size());
  std::vector<std::vector<double>> d(static_cast<size_t>(N),
                                     std::vector<double>(static_cast<size_t>(L), std::numeric_limits<double>::quiet_NaN()));
  for (int64_t i = 0; i < N; ++i) {
    throw_if_cancelled();
    const auto [prefix, cont] = split_window(windows[static_cast<size_t>(i)], T, i, "sharing damage");
    const PrefilledPrompt prompt = prefill_prompt(backend, prefix, {});
    const LmFidelityReference ref = lm_fidelity_reference(backend, prompt, cont);
    for (int64_t l = 1; l < L; ++l) {
      const std::unique_ptr<BackendCache> cache = backend.clone(*prompt.cache);
      backend.share_layer(*cache, l, l - 1);
      d[static_cast<size_t>(i)][static_cast<size_t>(l)] =
          mean_kl(ref.logits, continuation_logits(backend, cont, T, *cache), cont.size(), V);
    }
    if (on_example) on_example(i);
  }
  return d;
}

}  // namespace rkv
