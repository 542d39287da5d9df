#include "runner/run/examples.hpp"

#include "core/cancel.hpp"
#include "runner/compress/compress_prompt.hpp"

namespace rkv {

void prefill_examples(RunState& s) {
  for (const Task* task : tasks_of(s.plan)) {
    for (TaskExample& data : task->build_examples(s.plan, *s.tok, s.config())) {
      Example& ex = s.examples.emplace_back();
      ex.task = task;
      ex.data = std::move(data);
      ex.prompt = prefill_prompt(*s.backend, ex.data.prompt, s.needs);
      task->prepare(*s.backend, ex.prompt, ex.data);
      throw_if_cancelled();
    }
  }
}

void score_full_cache(RunState& s) {
  const bool keep_logits = s.opt.dumps.count("logits") > 0;
  for (Example& ex : s.examples) {
    const auto T = static_cast<int64_t>(ex.prompt.tokens.size());
    const std::unique_ptr<BackendCache> full = s.backend->clone(*ex.prompt.cache);
    ex.full_kv_bytes = window_bytes(*s.backend, *ex.prompt.cache, T);
    ScoredCache scored;
    scored.cache = full.get();
    scored.start_pos = T;
    scored.fork = [&] { return CacheCopy{s.backend->clone(*ex.prompt.cache), nullptr}; };
    TaskScore score = ex.task->score(*s.backend, *s.tok, ex.prompt, ex.data, scored);
    ex.full_values = std::move(score.values);
    ex.full_decode_tps = score.decode_tokens_per_second;
    ex.full_kv_bytes_end = score.bytes_end > 0 ? score.bytes_end : full->bytes_in_use();
    if (keep_logits) ex.full_logits = std::move(score.logits);
  }
}

}  // namespace rkv
