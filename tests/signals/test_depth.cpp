// Model-free signals through their real .so plugins: depth against its formula; model signals refuse clearly
// without the host's profiler.
#include <gtest/gtest.h>

#include "core/errors.hpp"
#include "plugin/instance.hpp"
#include "plugin/signal_call.hpp"

namespace {

rkv::SignalOutput depth(const std::string& order, int64_t L, int64_t N) {
  static const rkv::PluginRegistry reg = rkv::PluginRegistry::discover();
  rkv::HostServices host;
  const auto& info = reg.resolve("depth", RKV_KIND_SIGNAL);
  const auto params = rkv::ParamSet::validate(*info.descriptor, {{"order", order, false, ""}});
  const auto inst = rkv::PluginInstance::create(info, params, host);
  return rkv::run_signal(inst, L, N, nullptr);
}

TEST(DepthSignal, MatchesItsFormula) {
  // L = 5: l / 4 = [0, .25, .5, .75, 1]; descending 1 - l / 4.
  EXPECT_EQ(depth("ascending", 5, 2).s, (std::vector<double>{0, 0.25, 0.5, 0.75, 1}));
  EXPECT_EQ(depth("descending", 5, 2).s, (std::vector<double>{1, 0.75, 0.5, 0.25, 0}));
  const auto out = depth("ascending", 5, 3);
  ASSERT_EQ(out.per_example.size(), 3u);
  EXPECT_EQ(out.per_example[2], out.s);
}

TEST(DepthSignal, OneLayerIsZero) { EXPECT_EQ(depth("descending", 1, 1).s, (std::vector<double>{0})); }

TEST(PerturbationKLSignal, RefusesWithoutAProfiler) {
  const rkv::PluginRegistry reg = rkv::PluginRegistry::discover();
  rkv::HostServices host;
  const auto& info = reg.resolve("perturbation_kl", RKV_KIND_SIGNAL);
  const auto inst = rkv::PluginInstance::create(info, rkv::ParamSet::validate(*info.descriptor, {}), host);
  try {
    rkv::run_signal(inst, 4, 2, nullptr);
    FAIL();
  } catch (const rkv::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("needs the host's rkv.profiler/1 service"), std::string::npos) << e.what();
  }
}

}  // namespace
