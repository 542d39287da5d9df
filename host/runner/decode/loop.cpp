#include "runner/decode/loop.hpp"

#include <algorithm>

#include "core/cancel.hpp"
#include "core/timing.hpp"
#include "runner/compress/sliding_window.hpp"
#include "runner/decode/sampling.hpp"

namespace rkv {

std::vector<float> extend_cache(Backend& backend, BackendCache& cache, const std::vector<int32_t>& tokens,
                                int64_t start_pos, LogitsFor which) {
  std::vector<float> logits = backend.extend(cache, tokens, start_pos, which);
  backend.model().check_unchanged("extending the cache");  // weights read in place may have changed meanwhile
  drop_out_of_window(backend, cache, start_pos + static_cast<int64_t>(tokens.size()) - 1);
  return logits;
}

std::vector<float> decode_token(Backend& backend, BackendCache& cache, int32_t token, int64_t position,
                                DecodeSession* decode) {
  throw_if_cancelled();  // a run's SIGTERM stops a long continuation between two tokens (core/cancel.hpp)
  if (!decode) return extend_cache(backend, cache, {token}, position, LogitsFor::Last);
  ExtendObservation observed;
  std::vector<float> logits = backend.extend(cache, {token}, position, LogitsFor::Last, decode->capture(), &observed);
  backend.model().check_unchanged("decoding");  // weights read in place may have changed meanwhile
  decode->after_token(backend, cache, observed, position);
  drop_out_of_window(backend, cache, position);
  return logits;
}

std::vector<float> continuation_logits(Backend& backend, const std::vector<int32_t>& tokens, int64_t start_pos,
                                       BackendCache& cache, DecodeSession* decode) {
  if (tokens.empty()) return {};
  if (!decode) return extend_cache(backend, cache, tokens, start_pos, LogitsFor::All);
  std::vector<float> logits;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const std::vector<float> row = decode_token(backend, cache, tokens[i], start_pos + static_cast<int64_t>(i), decode);
    logits.insert(logits.end(), row.begin(), row.end());
  }
  return logits;
}

GreedyResult greedy_decode(Backend& backend, const std::vector<float>& first_logits, int64_t start_pos,
                           BackendCache& cache, int64_t max_new_tokens, const std::vector<int32_t>& stop_ids,
                           DecodeSession* decode) {
  GreedyResult r;
  const int64_t V = backend.model().config.vocab_size;
  int32_t next = argmax(first_logits.data(), V);
  const auto t0 = SteadyClock::now();
  int64_t decoded = 0;
  for (int64_t i = 0; i < max_new_tokens; ++i) {
    if (std::find(stop_ids.begin(), stop_ids.end(), next) != stop_ids.end()) break;
    r.tokens.push_back(next);
    if (i + 1 == max_new_tokens) break;
    const std::vector<float> logits = decode_token(backend, cache, next, start_pos + i, decode);
    ++decoded;
    next = argmax(logits.data(), V);
  }
  const double s = seconds_since(t0);
  r.tokens_per_second = decoded > 0 && s > 0 ? static_cast<double>(decoded) / s : 0.0;
  return r;
}

GreedyResult answer_greedily(Backend& backend, const std::vector<float>& prompt_logits, BackendCache& cache,
                             int64_t start_pos, const std::vector<int32_t>& question, int64_t max_new,
                             const std::vector<int32_t>& stop, DecodeSession* decode) {
  if (question.empty()) return greedy_decode(backend, prompt_logits, start_pos, cache, max_new, stop, decode);
  const int64_t V = backend.model().config.vocab_size, n = static_cast<int64_t>(question.size());
  std::vector<float> last;
  if (decode) {  // token by token, the policy after each
    const std::vector<float> logits = continuation_logits(backend, question, start_pos, cache, decode);
    last.assign(logits.end() - V, logits.end());
  } else {
    last = extend_cache(backend, cache, question, start_pos, LogitsFor::Last);
  }
  return greedy_decode(backend, last, start_pos + n, cache, max_new, stop, decode);
}

}  // namespace rkv
