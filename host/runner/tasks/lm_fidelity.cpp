#include "runner/tasks/lm_fidelity.hpp"

#include <algorithm>
#include <cmath>

#include "core/errors.hpp"
#include "runner/decode/loop.hpp"
#include "runner/decode/sampling.hpp"
#include "runner/tasks/text_windows.hpp"

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
  LmFidelityReference ref;
  const int64_t T = static_cast<int64_t>(prompt.tokens.size()), n = static_cast<int64_t>(continuation.size());
  ref.logits = with_prompt_cache(backend, prompt, n, [&](BackendCache& cache) {
    return continuation_logits(backend, continuation, T, cache);
  });
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

// ---- the task's driver ----------------------------------------------------------------------------------------------

namespace {

/// An lm_fidelity example: its continuation.
struct LmFidelityExample : TaskPayload {
  std::vector<int32_t> continuation;
};

/// What its prefill gives every cell: the full cache's continuation logits.
struct LmFidelityPrepared : TaskPayload {
  LmFidelityReference reference;
};

class LmFidelityTask : public Task {
 public:
  std::string name() const override { return "lm_fidelity"; }

  void check_fits_context(const RunPlan& plan, int64_t context_length) const override {
    check_sequence_fits(plan, plan.eval.prefix_tokens + plan.continuation_tokens,
                        "data.eval.prefix_tokens + tasks.lm_fidelity.continuation_tokens", context_length);
  }

  /// data.eval.examples windows of prefix_tokens + continuation_tokens from the evaluation files (text_windows.hpp).
  std::vector<TaskExample> build_examples(const RunPlan& plan, const Tokenizer& tok, const ModelConfig&) const override {
    const auto windows = draw_text_windows(tok, plan.eval.files, plan.eval.examples,
                                           plan.eval.prefix_tokens + plan.continuation_tokens, plan.eval.seed);
    std::vector<TaskExample> out;
    for (size_t i = 0; i < windows.size(); ++i) {
      const auto& w = windows[i].tokens;
      TaskExample ex;
      ex.task = name();
      ex.index = static_cast<int64_t>(i);
      ex.prompt.assign(w.begin(), w.begin() + plan.eval.prefix_tokens);
      auto data = std::make_shared<LmFidelityExample>();
      data->continuation.assign(w.begin() + plan.eval.prefix_tokens, w.end());
      ex.payload = data;
      ex.input = {windows[i].file, windows[i].offset, static_cast<int64_t>(w.size()), plan.eval.prefix_tokens, "",
                  token_ids_sha256(w)};
      out.push_back(std::move(ex));
    }
    return out;
  }

  std::shared_ptr<const TaskPayload> prepare(Backend& backend, const PrefilledPrompt& prompt,
                                             const TaskExample& example) const override {
    auto prepared = std::make_shared<LmFidelityPrepared>();
    prepared->reference =
        lm_fidelity_reference(backend, prompt, static_cast<const LmFidelityExample&>(*example.payload).continuation);
    return prepared;
  }

  TaskScore score(Backend& backend, const Tokenizer&, const PrefilledPrompt& prompt, const TaskExample& example,
                  const TaskPayload* prepared, ScoredCache& cache) const override {
    const auto& data = static_cast<const LmFidelityExample&>(*example.payload);
    const LmFidelityReference& reference = static_cast<const LmFidelityPrepared&>(*prepared).reference;
    LmFidelityValues f =
        lm_fidelity_score(backend, prompt, *cache.cache, data.continuation, reference, cache.decode, cache.start_pos);
    TaskScore s;
    s.values = {{"kl", f.kl}, {"top1_agreement", f.top1}, {"ppl", f.ppl}, {"ppl_full", f.ppl_full}};
    s.logits = std::move(f.logits);
    return s;
  }

  nlohmann::json manifest_settings(const RunPlan& plan) const override {
    return {{"prefix_tokens", plan.eval.prefix_tokens},
            {"continuation_tokens", plan.continuation_tokens},
            {"continuation", "teacher-forced"}};
  }

  bool report_full_cache_column() const override { return false; }
  /// KL and perplexities: lower is better; top-1 agreement: higher.
  bool lower_is_better(const std::string& metric) const override {
    return metric == "kl" || metric == "ppl" || metric == "ppl_full";
  }
  /// KL(full || compressed) per continuation token: the fidelity the task measures.
  std::string primary_metric(const std::vector<std::string>& metrics) const override {
    return metric_or_first(metrics, "kl");
  }
};

}  // namespace

const Task& lm_fidelity_task() {
  static const LmFidelityTask task;
  return task;
}

}  // namespace rkv
