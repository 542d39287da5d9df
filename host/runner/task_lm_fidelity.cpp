#include "runner/task_lm_fidelity.hpp"

#include <algorithm>
#include <cmath>

#include "runner/sampling.hpp"

namespace rkv {

namespace {
double log_sum_exp(const float* x, int64_t V) {
  double m = x[0];
  for (int64_t i = 1; i < V; ++i) m = std::max(m, static_cast<double>(x[i]));
  double s = 0;
  for (int64_t i = 0; i < V; ++i) s += std::exp(static_cast<double>(x[i]) - m);
  return m + std::log(s);
}

double perplexity(const std::vector<float>& logits, const std::vector<int32_t>& cont, int64_t V) {
  const int64_t n = static_cast<int64_t>(cont.size());
  if (n < 2) return std::nan("");
  double nll = 0;
  for (int64_t r = 0; r + 1 < n; ++r) nll -= log_prob(logits.data() + r * V, V, cont[static_cast<size_t>(r + 1)]);
  return std::exp(nll / static_cast<double>(n - 1));
}
}  // namespace

double kl_from_logits(const float* p, const float* q, int64_t V) {
  const double lp = log_sum_exp(p, V), lq = log_sum_exp(q, V);
  double kl = 0;
  for (int64_t i = 0; i < V; ++i) {
    const double a = static_cast<double>(p[i]) - lp, b = static_cast<double>(q[i]) - lq;
    kl += std::exp(a) * (a - b);
  }
  return std::max(kl, 0.0);
}

double log_prob(const float* logits, int64_t V, int32_t target) {
  return static_cast<double>(logits[target]) - log_sum_exp(logits, V);
}

LmFidelityReference lm_fidelity_reference(Backend& backend, const PrefilledPrompt& prompt,
                                          const std::vector<int32_t>& continuation) {
  const std::unique_ptr<BackendCache> cache = backend.clone(*prompt.cache);
  LmFidelityReference ref;
  ref.logits = continuation_logits(backend, continuation, static_cast<int64_t>(prompt.tokens.size()), *cache);
  ref.ppl_full = perplexity(ref.logits, continuation, backend.model().config.vocab_size);
  return ref;
}

LmFidelityValues lm_fidelity_score(Backend& backend, const PrefilledPrompt& prompt, BackendCache& compressed,
                                   const std::vector<int32_t>& continuation, const LmFidelityReference& ref,
                                   DecodeSession* decode, std::optional<int64_t> start_pos) {
  const int64_t V = backend.model().config.vocab_size, n = static_cast<int64_t>(continuation.size());
  const int64_t first = start_pos.value_or(static_cast<int64_t>(prompt.tokens.size()));
  const std::vector<float> logits = continuation_logits(backend, continuation, first, compressed, decode);
  LmFidelityValues v;
  for (int64_t r = 0; r < n; ++r) {
    const float* p = ref.logits.data() + r * V;
    const float* q = logits.data() + r * V;
    v.kl += kl_from_logits(p, q, V);
    v.top1 += argmax(p, V) == argmax(q, V) ? 1.0 : 0.0;
  }
  v.kl /= static_cast<double>(n);
  v.top1 /= static_cast<double>(n);
  v.ppl = perplexity(logits, continuation, V);
  v.ppl_full = ref.ppl_full;
  v.logits = logits;
  return v;
}

}  // namespace rkv
