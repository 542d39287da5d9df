#include "runner/decode/generate.hpp"

#include <algorithm>
#include <chrono>

#include "core/errors.hpp"
#include "runner/decode/loop.hpp"

namespace rkv {

GenerateResult generate(Backend& backend, const std::vector<int32_t>& prompt, const GenerateOptions& opts,
                        const std::function<bool(int32_t)>& on_token) {
  if (prompt.empty()) throw InputError("generate: the prompt is empty");
  using clock = std::chrono::steady_clock;
  GenerateResult res;
  Sampler sampler(opts.sampling);
  const auto t0 = clock::now();
  PrefillResult pre = backend.prefill(prompt, PrefillRequest{});
  backend.model().check_unchanged("prefilling the prompt");  // weights read in place may have changed meanwhile
  std::vector<float> logits = std::move(pre.logits);
  const auto t1 = clock::now();
  res.prefill_seconds = std::chrono::duration<double>(t1 - t0).count();
  int64_t pos = static_cast<int64_t>(prompt.size());
  const int64_t V = backend.model().config.vocab_size;
  for (int64_t step = 0; step < opts.max_new_tokens; ++step) {
    const int32_t next = sampler.sample(logits.data(), V);
    if (std::find(opts.stop_ids.begin(), opts.stop_ids.end(), next) != opts.stop_ids.end()) {
      res.stopped = true;
      break;
    }
    res.tokens.push_back(next);
    if (on_token && !on_token(next)) break;
    if (step + 1 == opts.max_new_tokens) break;
    logits = extend_cache(backend, *pre.cache, {next}, pos++, LogitsFor::Last);
  }
  res.decode_seconds = std::chrono::duration<double>(clock::now() - t1).count();
  return res;
}

}  // namespace rkv
