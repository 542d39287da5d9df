#include "runner/run/examples.hpp"

#include "runner/compress/chunked_prefill.hpp"
#include "runner/compress/compress_prompt.hpp"

namespace rkv {

void build_examples(RunState& s) {
  for (const Task* task : tasks_of(s.plan))
    for (TaskExample& data : task->build_examples(s.plan, *s.tok, s.config())) s.examples.push_back({task, std::move(data)});
}

PrefilledExample prefill_example(RunState& s, const Example& ex) {
  PrefilledExample p;
  p.example = &ex;
  p.prompt = chunked_prefill_prompt(*s.backend, ex.data.prompt, s.needs, s.plan.prefill.chunk_tokens);
  p.prepared = ex.task->prepare(*s.backend, p.prompt, ex.data);
  const int64_t T = ex.prompt_tokens();
  p.full_kv_bytes = window_bytes(*s.backend, *p.prompt.cache, T);
  // The full cell scores the prompt's own cache, cut back to T after (no copy; a copy on a sliding-window model); a
  // fork (one question each) is a copy of the cache as it was before scoring.
  TaskScore score = with_prompt_cache(*s.backend, p.prompt, 0, [&](BackendCache& full) {
    ScoredCache scored;
    scored.cache = &full;
    scored.start_pos = T;
    scored.fork = [&] { return CacheCopy{copy_prompt_cache(*s.backend, p.prompt, full), nullptr}; };
    TaskScore sc = ex.task->score(*s.backend, *s.tok, p.prompt, ex.data, p.prepared.get(), scored);
    if (sc.bytes_end == 0) sc.bytes_end = full.bytes_in_use();
    return sc;
  });
  p.full_values = std::move(score.values);
  p.full_decode_tps = score.decode_tokens_per_second;
  p.full_kv_bytes_end = score.bytes_end;
  if (s.opt.dumps.count("logits")) p.full_logits = std::move(score.logits);
  return p;
}

}  // namespace rkv
