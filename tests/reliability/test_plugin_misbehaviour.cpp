// Plugins that misbehave: slow plugins are cancelled through the host's cancellation check within a bounded
// time, from another thread; a slow plugin that ignores cancellation finishes its call (the host cannot pre-empt
// it), and no further call starts once cancelled; a plugin calling exit() inside a call ends the process with
// status 3 naming the plugin and the call; a "newer" plugin whose structs are longer than the host's loads and
// works. Fixtures: slow_plugin.cpp and newer_struct.c, real .so files under build/tests/plugins/.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>

#include "cache/kv_cache.hpp"
#include "core/atomic_file.hpp"
#include "core/cancel.hpp"
#include "core/errors.hpp"
#include "plugin/allocator_call.hpp"
#include "plugin/instance.hpp"
#include "plugin/params.hpp"
#include "plugin/registry.hpp"
#include "plugin/scorer_call.hpp"
#include "plugin/signal_call.hpp"

namespace {

using Clock = std::chrono::steady_clock;
const std::string kFixtures = RKV_TEST_BINARY_DIR "/tests/plugins/";

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

const rkv::PluginRegistry& slow_registry() {
  static const rkv::PluginRegistry reg = [] {
    rkv::PluginRegistry r;
    r.load_library(kFixtures + "slow/test_slow.so");
    return r;
  }();
  return reg;
}

rkv::PluginInstance make(const std::string& id, const rkv::HostServices& host, const std::string& mode,
                         double seconds = 0.5) {
  const rkv::PluginInfo& info = slow_registry().resolve(id);
  const auto params = rkv::ParamSet::validate(
      *info.descriptor, {{"mode", mode, false, ""}, {"seconds", seconds, false, ""}, {"limit_seconds", 30.0, false, ""}});
  return rkv::PluginInstance::create(info, params, host);
}

/// A one-layer cache of H_kv = 2 heads, T = 6 positions, d = 4.
rkv::LayerKV small_cache() {
  rkv::LayerKV kv;
  kv.n_kv_heads = 2;
  kv.head_dim = 4;
  kv.capacity = kv.length = 6;
  kv.k.assign(2 * 6 * 4, 0.25f);
  kv.v.assign(2 * 6 * 4, 0.5f);
  return kv;
}

const rkv_attention_shape kShape{sizeof(rkv_attention_shape), 1, 2, 2, 4};

/// The inputs of one score() call on `kv` (H = 2 query heads; no statistics). `kv` must outlive them.
rkv::ScorerCallInputs inputs_for(const rkv::LayerKV& kv) {
  rkv::ScorerCallInputs in;
  in.n_heads = 2;
  in.kv = &kv;
  return in;
}

/// Runs `call` while another thread sets `flag` after `after_ms`; returns the call's wall time and whether it threw
/// rkv::Cancelled.
template <typename F>
std::pair<double, bool> cancelled_after(std::atomic<bool>& flag, int after_ms, F call) {
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(after_ms));
    flag.store(true);
  });
  const auto t0 = Clock::now();
  bool cancelled = false;
  try {
    call();
  } catch (const rkv::Cancelled&) {
    cancelled = true;
  }
  const double s = seconds_since(t0);
  canceller.join();
  return {s, cancelled};
}

TEST(SlowPlugin, ScorerPollingTheHostIsCancelledFromAnotherThread) {
  std::atomic<bool> flag{false};
  rkv::HostServices host;
  host.watch(&flag);  // as run_ablation does with RunOptions::cancel
  const rkv::PluginInstance inst = make("slow_scorer", host, "poll");
  const rkv::ScorerRequirements req = rkv::query_scorer_requirements(inst, kShape);
  const rkv::LayerKV kv = small_cache();
  const rkv::ScorerCallInputs in = inputs_for(kv);
  const auto [s, cancelled] = cancelled_after(flag, 150, [&] { rkv::run_scorer(inst, req, in); });
  EXPECT_TRUE(cancelled);
  EXPECT_GE(s, 0.14);  // it really waited for the cancellation ...
  EXPECT_LT(s, 5.0);   // ... and stopped soon after (it polls every millisecond)
}

TEST(SlowPlugin, AllocatorAndSignalPollingTheHostAreCancelled) {
  {
    std::atomic<bool> flag{false};
    rkv::HostServices host;
    host.watch(&flag);
    const rkv::PluginInstance inst = make("slow_allocator", host, "poll");
    const auto [s, cancelled] = cancelled_after(flag, 100, [&] { rkv::run_allocator(inst, {}, 12, 10, 3, -1); });
    EXPECT_TRUE(cancelled);
    EXPECT_LT(s, 5.0);
  }
  {
    std::atomic<bool> flag{false};
    rkv::HostServices host;
    host.watch(&flag);
    const rkv::PluginInstance inst = make("slow_signal", host, "poll");
    const auto [s, cancelled] = cancelled_after(flag, 100, [&] { rkv::run_signal(inst, 3, 2, nullptr); });
    EXPECT_TRUE(cancelled);
    EXPECT_LT(s, 5.0);
  }
}

TEST(SlowPlugin, HostServicesCancelReachesAPollingPlugin) {
  rkv::HostServices host;  // no watched flag: HostServices::cancel() itself
  const rkv::PluginInstance inst = make("slow_allocator", host, "poll");
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    host.cancel();
  });
  EXPECT_THROW(rkv::run_allocator(inst, {}, 12, 10, 3, -1), rkv::Cancelled);
  canceller.join();
  EXPECT_TRUE(host.cancelled());
}

TEST(SlowPlugin, APluginThatIgnoresCancellationFinishesItsCall) {
  // The host cannot pre-empt a plugin call: one that never polls is_cancelled() runs to its end, and its (valid)
  // result is returned; a run then stops at its next cancellation check (between examples, see test_synthetic_run).
  std::atomic<bool> flag{false};
  rkv::HostServices host;
  host.watch(&flag);
  const rkv::PluginInstance inst = make("slow_allocator", host, "ignore", 0.4);
  rkv::Allocation a;
  const auto [s, cancelled] = cancelled_after(flag, 50, [&] { a = rkv::run_allocator(inst, {}, 12, 10, 3, -1); });
  EXPECT_FALSE(cancelled);
  EXPECT_GE(s, 0.39);
  EXPECT_EQ(a.budgets, (std::vector<int64_t>{4, 4, 4}));
  EXPECT_TRUE(host.cancelled());
}

TEST(SlowPlugin, NoPluginCallStartsOnceTheRunIsCancelled) {
  // The cancellation point between per-layer calls: inside a cancelled scope, the next call is refused before the
  // plugin runs (before: each call still ran, so a run waited for every remaining layer of a slow scorer).
  std::atomic<bool> flag{false};
  rkv::HostServices host;
  host.watch(&flag);
  const rkv::PluginInstance scorer = make("slow_scorer", host, "ignore", 0.3);
  const rkv::PluginInstance allocator = make("slow_allocator", host, "ignore", 0.3);
  const rkv::PluginInstance signal = make("slow_signal", host, "ignore", 0.3);
  const rkv::ScorerRequirements req = rkv::query_scorer_requirements(scorer, kShape);
  const rkv::LayerKV kv = small_cache();
  const rkv::ScorerCallInputs in = inputs_for(kv);
  const rkv::CancelScope scope(&flag);
  EXPECT_NO_THROW(rkv::run_scorer(scorer, req, in));  // not cancelled yet: the call runs
  flag.store(true);
  const auto t0 = Clock::now();
  EXPECT_THROW(rkv::run_scorer(scorer, req, in), rkv::Cancelled);
  EXPECT_THROW(rkv::run_allocator(allocator, {}, 12, 10, 3, -1), rkv::Cancelled);
  EXPECT_THROW(rkv::run_signal(signal, 3, 2, nullptr), rkv::Cancelled);
  EXPECT_LT(seconds_since(t0), 0.25);  // none of the three 0.3 s calls ran
}

/// Runs `body` in a forked child whose stderr goes to a file; returns {exit status (-1: killed by a signal), stderr}.
std::pair<int, std::string> in_child(const std::function<void()>& body) {
  const std::string err = std::filesystem::temp_directory_path() / ("rkv-exit-" + std::to_string(::getpid()) + ".err");
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int fd = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || ::dup2(fd, 2) < 0) ::_exit(90);
    body();
    ::_exit(91);  // body is expected to end the process itself
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  const std::string text = rkv::read_file(err);
  std::filesystem::remove(err);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, text};
}

TEST(PluginExit, ExitInsideACallEndsTheProcessWithStatus3NamingThePluginAndTheCall) {
  // Before: the plugin's exit(0) ended the process with status 0 and no message.
  const auto scorer = in_child([] {
    rkv::HostServices host;
    const rkv::PluginInstance inst = make("slow_scorer", host, "exit");
    const rkv::ScorerRequirements req = rkv::query_scorer_requirements(inst, kShape);
    const rkv::LayerKV kv = small_cache();
    rkv::run_scorer(inst, req, inputs_for(kv));
  });
  EXPECT_EQ(scorer.first, 3) << scorer.second;
  EXPECT_EQ(scorer.second, "ripplekv: plugin org.test.slow_scorer called exit() inside score\n");
  const auto allocator = in_child([] {
    rkv::HostServices host;
    rkv::run_allocator(make("slow_allocator", host, "exit"), {}, 12, 10, 3, -1);
  });
  EXPECT_EQ(allocator.first, 3) << allocator.second;
  EXPECT_EQ(allocator.second, "ripplekv: plugin org.test.slow_allocator called exit() inside allocate\n");
  const auto signal = in_child([] {
    rkv::HostServices host;
    rkv::run_signal(make("slow_signal", host, "exit"), 3, 2, nullptr);
  });
  EXPECT_EQ(signal.first, 3) << signal.second;
  EXPECT_EQ(signal.second, "ripplekv: plugin org.test.slow_signal called exit() inside profile\n");
}

TEST(PluginExit, TheHostsOwnExitKeepsItsStatus) {
  // After plugin calls have installed the guard, exit() with no call in flight is the host's: status 7, no message.
  const auto host_exit = in_child([] {
    rkv::HostServices host;
    const rkv::Allocation a = rkv::run_allocator(make("slow_allocator", host, "ignore", 0.0), {}, 12, 10, 3, -1);
    std::exit(a.budgets == std::vector<int64_t>{4, 4, 4} ? 7 : 8);
  });
  EXPECT_EQ(host_exit.first, 7) << host_exit.second;
  EXPECT_EQ(host_exit.second, "");
}

TEST(MisbehavingSignal, NonFiniteProfilesAreRejectedNamingThePlugin) {
  rkv::HostServices host;
  try {
    rkv::run_signal(make("slow_signal", host, "nan"), 3, 2, nullptr);
    ADD_FAILURE() << "expected an InputError";
  } catch (const rkv::InputError& e) {
    EXPECT_STREQ(e.what(), "signal 'org.test.slow_signal' returned a non-finite sensitivity for layer 1");
  }
  try {
    rkv::run_signal(make("slow_signal", host, "inf"), 3, 2, nullptr);
    ADD_FAILURE() << "expected an InputError";
  } catch (const rkv::InputError& e) {
    EXPECT_STREQ(e.what(), "signal 'org.test.slow_signal' returned a non-finite value for example 1, layer 0");
  }
}

TEST(NewerPlugin, LongerStructsLoadAndWork) {
  rkv::PluginRegistry reg;
  reg.load_library(kFixtures + "newer_struct/test_newer_struct.so");
  const rkv::PluginInfo& info = reg.resolve("newer_struct");
  EXPECT_EQ(info.id(), "org.test.newer_struct");
  EXPECT_STREQ(info.descriptor->version, "0.2.0");
  // The host copied only the fields it knows: its own struct sizes, the plugin's values.
  EXPECT_EQ(info.descriptor->struct_size, sizeof(rkv_plugin_descriptor));
  EXPECT_EQ(info.descriptor->flags, 0u);
  ASSERT_NE(info.descriptor->params[0], nullptr);
  EXPECT_EQ(info.descriptor->params[0]->struct_size, sizeof(rkv_param_spec));
  EXPECT_STREQ(info.descriptor->params[0]->name, "count");
  EXPECT_EQ(info.descriptor->params[0]->default_int, 2);
  EXPECT_EQ(info.descriptor->params[1], nullptr);
  // Its param validates against its (long) spec, bounds included.
  EXPECT_THROW(rkv::ParamSet::validate(*info.descriptor, {{"count", int64_t{5}, false, ""}}), rkv::InputError);
  rkv::HostServices host;
  const rkv::PluginInstance inst =
      rkv::PluginInstance::create(info, rkv::ParamSet::validate(*info.descriptor, {{"count", int64_t{3}, false, ""}}), host);
  // x = [2c, c, c] with c = B / 4 = 3: budgets [6, 3, 3]; no warning (the plugin saw no field beyond the host's
  // struct_size).
  const rkv::Allocation a = rkv::run_allocator(inst, {}, 12, 10, 3, -1);
  EXPECT_EQ(a.budgets, (std::vector<int64_t>{6, 3, 3}));
  EXPECT_TRUE(a.warnings.empty()) << a.warnings[0];
}

}  // namespace
