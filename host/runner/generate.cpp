#include "backend/cpu/generate.hpp"

#include <algorithm>
#include <chrono>

#include "backend/cpu/forward.hpp"
#include "core/errors.hpp"

namespace rkv::cpu {

GenerateResult generate(const Model& model, const std::vector<int32_t>& prompt, const GenerateOptions& opts,
                        const std::function<bool(int32_t)>& on_token) {
  if (prompt.empty()) throw InputError("generate: the prompt is empty");
  using clock = std::chrono::steady_clock;
  GenerateResult res;
  Sampler sampler(opts.sampling);
  KVCache cache = make_cache(model, static_cast<int64_t>(prompt.size()) + std::max<int64_t>(opts.max_new_tokens, 0));
  Workspace ws;
  const auto t0 = clock::now();
  std::vector<float> logits = prefill(model, prompt, 0, cache, ws, LogitsFor::Last);
  const auto t1 = clock::now();
  res.prefill_seconds = std::chrono::duration<double>(t1 - t0).count();
  int64_t pos = static_cast<int64_t>(prompt.size());
  for (int64_t step = 0; step < opts.max_new_tokens; ++step) {
    const int32_t next = sampler.sample(logits.data(), model.config.vocab_size);
    if (std::find(opts.stop_ids.begin(), opts.stop_ids.end(), next) != opts.stop_ids.end()) {
      res.stopped = true;
      break;
    }
    res.tokens.push_back(next);
    if (on_token && !on_token(next)) break;
    if (step + 1 == opts.max_new_tokens) break;
    logits = decode_step(model, next, pos++, cache, ws);
  }
  res.decode_seconds = std::chrono::duration<double>(clock::now() - t1).count();
  return res;
}

}  // namespace rkv::cpu
