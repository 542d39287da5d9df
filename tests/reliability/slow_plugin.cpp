// Test fixture: slow plugins of every kind, for the host's cancellation.
//   mode = "poll":   the call loops until the host's is_cancelled() says stop, then returns RKV_ERROR_CANCELLED
//                    (through the SDK's Host::throw_if_cancelled); a safety limit of `limit_seconds` (default 60)
//                    makes it fail with an internal error instead, so a host that never cancels cannot hang a test.
//   mode = "ignore": the call sleeps `seconds` without polling, then returns a valid result (scores = position,
//                    budgets = B / |A|, s = layer index): what a plugin that ignores cancellation does.
//   mode = "nan" / "inf" (signal only, no wait): s[1] = NaN, or d[1][0] = +infinity, for the host's validation.
//   mode = "exit":   the call (score, allocate, profile) calls std::exit(0): the host must turn that into a non-zero
//                    exit naming the plugin and the call (plugin/call_guard.hpp).
// Three plugins in one library: org.test.slow_scorer, org.test.slow_allocator, org.test.slow_signal.
#include <ripplekv/sdk.hpp>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <string>
#include <thread>

namespace {

using Clock = std::chrono::steady_clock;

rkv::sdk::Descriptor with_params(rkv::sdk::Descriptor d) {
  return d.param(rkv::sdk::Param::Choice("mode", "poll", {"poll", "ignore", "nan", "inf", "exit"},
                                    "poll the host's cancellation or not (nan, inf: signal faults)"))
      .param(rkv::sdk::Param::Float("seconds", 0.5, "ignore mode: seconds to sleep per call").min(0).max(600))
      .param(rkv::sdk::Param::Float("limit_seconds", 60, "poll mode: give up (internal error) after this long")
                 .min(0)
                 .max(3600));
}

/// What every slow call does before producing its (valid) result.
class Slowness {
 public:
  Slowness(const rkv::sdk::Params& p, const rkv::sdk::Host& host)
      : host_(host), mode_(p.get_string("mode")), poll_(mode_ == "poll"), seconds_(p.get_float("seconds")),
        limit_(p.get_float("limit_seconds")) {}
  const std::string& mode() const { return mode_; }
  void wait() const {
    if (mode_ == "exit") std::exit(0);  // what a misbehaving plugin does; status 0 must not reach the caller
    if (mode_ == "nan" || mode_ == "inf") return;
    const auto t0 = Clock::now();
    auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
    if (!poll_) {
      std::this_thread::sleep_for(std::chrono::duration<double>(seconds_));
      return;
    }
    while (true) {
      host_.throw_if_cancelled();  // RKV_ERROR_CANCELLED once the host says stop
      if (elapsed() > limit_)
        throw rkv::sdk::Error(RKV_ERROR_INTERNAL, "slow fixture: not cancelled within " + std::to_string(limit_) + " s");
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

 private:
  rkv::sdk::Host host_;
  std::string mode_;
  bool poll_;
  double seconds_, limit_;
};

class SlowScorer final : public rkv::sdk::Scorer {
 public:
  static rkv::sdk::Descriptor describe() {
    return with_params(rkv::sdk::Descriptor("org.test.slow_scorer", RKV_KIND_SCORER, "0.1.0", "test fixture: slow"));
  }
  SlowScorer(const rkv::sdk::Params& p, const rkv::sdk::Host& h) : slow_(p, h) {}
  rkv_scorer_requirements requirements(const rkv_attention_shape&) override {
    rkv_scorer_requirements r{};
    return r;  // no statistics, nothing protected
  }
  void score(const rkv_scorer_inputs&, float* scores, int64_t n_kv_heads, int64_t T, rkv::sdk::Diagnostics&) override {
    slow_.wait();
    for (int64_t h = 0; h < n_kv_heads; ++h)
      for (int64_t j = 0; j < T; ++j) scores[h * T + j] = float(j);
  }

 private:
  Slowness slow_;
};

class SlowAllocator final : public rkv::sdk::Allocator {
 public:
  static rkv::sdk::Descriptor describe() {
    return with_params(rkv::sdk::Descriptor("org.test.slow_allocator", RKV_KIND_ALLOCATOR, "0.1.0", "test fixture: slow"));
  }
  SlowAllocator(const rkv::sdk::Params& p, const rkv::sdk::Host& h) : slow_(p, h) {}
  void allocate(const rkv::sdk::AllocationRequest& r, double* b, rkv::sdk::Diagnostics&) override {
    slow_.wait();
    for (int64_t l = 0; l < r.n_layers; ++l) b[l] = double(r.budget_total) / double(r.n_layers);
  }

 private:
  Slowness slow_;
};

class SlowSignal final : public rkv::sdk::Signal {
 public:
  static rkv::sdk::Descriptor describe() {
    return with_params(rkv::sdk::Descriptor("org.test.slow_signal", RKV_KIND_SIGNAL, "0.1.0", "test fixture: slow"));
  }
  SlowSignal(const rkv::sdk::Params& p, const rkv::sdk::Host& h) : slow_(p, h) {}
  void profile(const rkv_signal_request& r, double* s, double* per_example, rkv::sdk::Diagnostics&) override {
    slow_.wait();
    for (int64_t l = 0; l < r.n_layers; ++l) s[l] = double(l);
    for (int64_t i = 0; i < r.n_examples; ++i)
      for (int64_t l = 0; l < r.n_layers; ++l) per_example[i * r.n_layers + l] = double(l);
    if (slow_.mode() == "nan") s[1] = std::nan("");
    if (slow_.mode() == "inf") per_example[1 * r.n_layers + 0] = HUGE_VAL;
  }

 private:
  Slowness slow_;
};

}  // namespace

RKV_REGISTER_PLUGIN(SlowScorer)
RKV_REGISTER_PLUGIN(SlowAllocator)
RKV_REGISTER_PLUGIN(SlowSignal)
RKV_PLUGIN_LIBRARY("ripplekv test fixture: slow plugins")
