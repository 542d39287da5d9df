// Signal conformance (conformance/conformance.hpp, check_signal): on tiny seeded synthetic models, a signal is called
// through the profiler service exactly as compute_profile() (runner/profile/profile.cpp) calls it — one CPU thread, a Profiler
// over the calibration windows offered as RKV_SERVICE_PROFILER_V1, a fresh instance, call_signal — and then through
// compute_profile() itself with the cache off.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <filesystem>
#include <sstream>

#include "backend/cpu/threads.hpp"
#include "model/synthetic_model.hpp"
#include "conformance/conformance.hpp"
#include "conformance/conformance_rule.hpp"
#include "plugin/instance.hpp"
#include "plugin/signal_call.hpp"
#include "runner/profile/profile.hpp"
#include "runner/profile/profiler.hpp"

namespace rkv {

namespace {

using conformance::RuleTally;

struct TinySetup {
  std::string label;
  ModelConfig config;
  uint64_t seed;
  int64_t n_examples, prefix_tokens, window_tokens;
  ProtectedSpec protect;
};

std::vector<TinySetup> setups() {
  return {
      {"4 layers, H 4 / H_kv 2, d 8", synthetic_config("llama", 4, 2, 8, 4), 11, 3, 24, 6, {2, 4}},
      {"1 layer, H 2 / H_kv 1, d 8", synthetic_config("llama", 2, 1, 8, 1), 12, 2, 16, 4, {1, 2}},
      {"3 layers qwen2, H 2 / H_kv 2, d 4", synthetic_config("qwen2", 2, 2, 4, 3), 13, 2, 12, 3, {0, 0}},
  };
}

/// N windows of P + n_w token ids, uniform over the vocabulary.
std::vector<std::vector<int32_t>> token_windows(const TinySetup& s) {
  SyntheticRng rng(s.seed + 100);
  std::vector<std::vector<int32_t>> ex(static_cast<size_t>(s.n_examples));
  const int64_t V = s.config.vocab_size;
  for (auto& e : ex)
    for (int64_t t = 0; t < s.prefix_tokens + s.window_tokens; ++t)
      e.push_back(static_cast<int32_t>(std::min<int64_t>(
          V - 1, static_cast<int64_t>((rng.next() + 1.0f) * 0.5f * static_cast<float>(V)))));
  return ex;
}

/// One run as compute_profile() makes it (without its statistics and cache).
SignalOutput run_once(const PluginInfo& info, const ParamSet& params, const Model& model, const TinySetup& s) {
  Profiler profiler(model, token_windows(s), s.prefix_tokens, s.window_tokens, s.protect);
  HostServices host;
  host.set_service(RKV_SERVICE_PROFILER_V1, profiler.abi());
  const PluginInstance inst = PluginInstance::create(info, params, host);
  return call_signal(inst, model.config.n_layers, s.n_examples, profiler.abi());
}

/// Empty when the two outputs are bitwise equal (s and d), else where they first differ.
std::string first_difference(const SignalOutput& a, const SignalOutput& b) {
  auto same = [](double x, double y) { return std::memcmp(&x, &y, sizeof(double)) == 0; };
  std::ostringstream os;
  os.precision(17);
  for (size_t l = 0; l < a.s.size(); ++l)
    if (!same(a.s[l], b.s[l])) {
      os << "s[" << l << "]: " << a.s[l] << " then " << b.s[l];
      return os.str();
    }
  for (size_t i = 0; i < a.per_example.size(); ++i)
    for (size_t l = 0; l < a.per_example[i].size(); ++l)
      if (!same(a.per_example[i][l], b.per_example[i][l])) {
        os << "d[" << i << "][" << l << "]: " << a.per_example[i][l] << " then " << b.per_example[i][l];
        return os.str();
      }
  return "";
}

/// Restores the CPU backend's thread count on scope exit.
struct ThreadCountGuard {
  int saved = cpu::num_threads();
  ~ThreadCountGuard() { cpu::set_num_threads(saved); }
};

}  // namespace

std::vector<ConformanceCase> check_signal(const PluginInfo& info, const ParamSet& params) {
  if (info.descriptor->flags & RKV_FLAG_PER_PROMPT) return check_prompt_signal(info, params);
  const ThreadCountGuard guard;
  cpu::set_num_threads(1);
  RuleTally create("create"), call("profile_call"), length("profile_length"), finite("finite"),
      deterministic("deterministic"), accepts("host_accepts");
  const std::vector<TinySetup> all = setups();
  for (const TinySetup& s : all) {
    const std::string where = s.label;
    Model model = synthetic_model(s.config, s.seed);
    model.sha256 = "conformance-synthetic-" + std::to_string(s.seed);
    const int64_t L = s.config.n_layers, N = s.n_examples;

    // create: an instance with the profiler service, as the run makes it.
    try {
      Profiler profiler(model, token_windows(s), s.prefix_tokens, s.window_tokens, s.protect);
      HostServices host;
      host.set_service(RKV_SERVICE_PROFILER_V1, profiler.abi());
      const PluginInstance inst = PluginInstance::create(info, params, host);
      create.pass();
    } catch (const std::exception& e) {
      create.fail(where + ": " + e.what());
      call.skip(), length.skip(), finite.skip(), deterministic.skip(), accepts.skip();
      continue;
    }

    SignalOutput first;
    try {
      first = run_once(info, params, model, s);
      call.pass();
    } catch (const std::exception& e) {
      call.fail(where + ": " + e.what());
      length.skip(), finite.skip(), deterministic.skip(), accepts.skip();
      continue;
    }

    bool ok = static_cast<int64_t>(first.s.size()) == L && static_cast<int64_t>(first.per_example.size()) == N;
    for (const auto& row : first.per_example) ok = ok && static_cast<int64_t>(row.size()) == L;
    if (!ok) {
      length.fail(where + ": s has " + std::to_string(first.s.size()) + " values and d " +
                  std::to_string(first.per_example.size()) + " rows, expected L = " + std::to_string(L) + ", N = " +
                  std::to_string(N));
      finite.skip(), deterministic.skip(), accepts.skip();
      continue;
    }
    length.pass();

    std::string bad;
    for (int64_t l = 0; l < L && bad.empty(); ++l)
      if (!std::isfinite(first.s[static_cast<size_t>(l)]))
        bad = "s[" + std::to_string(l) + "] = " + std::to_string(first.s[static_cast<size_t>(l)]);
    for (int64_t i = 0; i < N && bad.empty(); ++i)
      for (int64_t l = 0; l < L && bad.empty(); ++l)
        if (!std::isfinite(first.per_example[static_cast<size_t>(i)][static_cast<size_t>(l)]))
          bad = "d[" + std::to_string(i) + "][" + std::to_string(l) +
                "] = " + std::to_string(first.per_example[static_cast<size_t>(i)][static_cast<size_t>(l)]);
    if (bad.empty())
      finite.pass();
    else
      finite.fail(where + ": " + bad + " (NaN also means never written)");

    bool same_bits = false;
    try {
      const SignalOutput second = run_once(info, params, model, s);
      const std::string diff = first_difference(first, second);
      same_bits = diff.empty();
      if (same_bits)
        deterministic.pass();
      else
        deterministic.fail(where + ": a second run with a fresh profiler and instance differs at " + diff);
    } catch (const std::exception& e) {
      deterministic.fail(where + ": the second run failed: " + e.what());
    }

    if (!bad.empty()) {
      accepts.skip();
      continue;
    }
    try {
      ProfileRequest r;
      r.model = &model;
      r.signal = PluginChoice{info.id(), &info, params, nullptr};
      for (auto& tokens : token_windows(s)) r.examples.push_back(TextWindow{std::move(tokens), "synthetic", 0});
      r.prefix_tokens = s.prefix_tokens;
      r.window_tokens = s.window_tokens;
      r.protect = s.protect;
      r.threads = 1;
      r.read_cache = r.write_cache = false;
      r.cache_dir = std::filesystem::temp_directory_path().string();
      r.bootstrap_resamples = 100;
      const SensitivityProfile p = compute_profile(r);
      SignalOutput as_run;
      as_run.s = p.s;
      as_run.per_example = p.per_example;
      const std::string diff = same_bits ? first_difference(first, as_run) : "";
      if (diff.empty())
        accepts.pass();
      else
        accepts.fail(where + ": compute_profile gave a different profile at " + diff);
    } catch (const std::exception& e) {
      accepts.fail(where + ": compute_profile: " + e.what());
    }
  }
  const std::string over = std::to_string(all.size()) +
                           " tiny synthetic models (4 layers GQA, 1 layer, 3 layers qwen2), 2-3 windows each, 1 thread";
  return {create.result("an instance with the profiler service on " + over),
          call.result("profile() succeeds on " + over),
          length.result("s has L values, d has N x L, on " + over),
          finite.result("every s_l and d_{i,l} finite on " + over),
          deterministic.result("a second run (fresh profiler and instance) is bitwise equal, on " + over),
          accepts.result("compute_profile (the run's path, cache off) accepts it and gives the same bits, on " + over)};
}

}  // namespace rkv
