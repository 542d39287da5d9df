#include "runner/decode/sampling.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/errors.hpp"

namespace rkv {

namespace {

[[noreturn]] void throw_nan_logit(int64_t i) {
  throw InputError("the model's logits are not numbers (NaN at vocabulary id " + std::to_string(i) +
                   "): its weights are corrupt or overflow (check the file, e.g. `ripplekv model info --sha256`)");
}

}  // namespace

int32_t argmax(const float* logits, int64_t V) {
  int64_t best = 0;
  if (std::isnan(logits[0])) throw_nan_logit(0);
  for (int64_t i = 1; i < V; ++i) {
    if (logits[i] > logits[best]) best = i;
    else if (std::isnan(logits[i])) throw_nan_logit(i);  // NaN compares false: it would never be chosen, silently
  }
  return static_cast<int32_t>(best);
}

Sampler::Sampler(const SamplingOptions& opts) : opts_(opts), rng_(opts.seed) {
  if (!(opts.top_p > 0.0f && opts.top_p <= 1.0f)) {
    throw InputError("top-p must be in (0, 1], got " + std::to_string(opts.top_p));
  }
  if (!std::isfinite(opts.temperature)) throw InputError("temperature must be finite");
}

int32_t Sampler::sample(const float* logits, int64_t V) {
  if (opts_.temperature <= 0.0f) return argmax(logits, V);
  const double inv_t = 1.0 / static_cast<double>(opts_.temperature);
  double mx = -INFINITY;
  for (int64_t i = 0; i < V; ++i) {
    if (std::isnan(logits[i])) throw_nan_logit(i);
    mx = std::max(mx, static_cast<double>(logits[i]) * inv_t);
  }
  buf_.resize(static_cast<size_t>(V));
  double sum = 0.0;
  for (int64_t i = 0; i < V; ++i) {
    const double p = std::exp(static_cast<double>(logits[i]) * inv_t - mx);
    buf_[static_cast<size_t>(i)] = {p, static_cast<int32_t>(i)};
    sum += p;
  }
  size_t keep = buf_.size();
  if (opts_.top_p < 1.0f) {
    std::sort(buf_.begin(), buf_.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first > b.first : a.second < b.second;
    });
    double cum = 0.0;
    keep = 0;
    while (keep < buf_.size()) {
      cum += buf_[keep].first / sum;
      ++keep;
      if (cum >= static_cast<double>(opts_.top_p)) break;
    }
  }
  double kept = 0.0;
  for (size_t i = 0; i < keep; ++i) kept += buf_[i].first;
  const double u = static_cast<double>(rng_() >> 11) * (1.0 / 9007199254740992.0) * kept;
  double acc = 0.0;
  for (size_t i = 0; i < keep; ++i) {
    acc += buf_[i].first;
    if (u < acc) return buf_[i].second;
  }
  return buf_[keep - 1].second;
}

}  // namespace rkv
