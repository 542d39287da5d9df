// The manual allocator (kvpress PerLayerCompressionPress) through its real .so, budgets worked out by hand.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/errors.hpp"
#include "plugin/allocator_call.hpp"
#include "plugin/instance.hpp"
#include "plugin/registry.hpp"

namespace {

using V = std::vector<int64_t>;

class Manual : public ::testing::Test {
 protected:
  rkv::PluginRegistry reg = rkv::PluginRegistry::discover();
  rkv::HostServices host;

  rkv::Allocation run(const std::string& values, const std::string& unit, int64_t B, int64_t T, int64_t n) {
    const auto& info = reg.resolve("manual", RKV_KIND_ALLOCATOR);
    const auto set = rkv::ParamSet::validate(
        *info.descriptor, {{"values", std::string(values), false, ""}, {"unit", std::string(unit), false, ""}});
    rkv::PluginInstance inst = rkv::PluginInstance::create(info, set, host);
    return rkv::run_allocator(inst, {}, B, T, n, -1);
  }
  std::string error(const std::function<void()>& fn) {
    try {
      fn();
    } catch (const rkv::InputError& e) {
      return e.what();
    }
    return "(no error)";
  }
  static bool warned(const rkv::Allocation& a) {
    return std::any_of(a.warnings.begin(), a.warnings.end(),
                       [](const std::string& w) { return w.find("scaled by") != std::string::npos; });
  }
};

TEST_F(Manual, KvpressRatiosWithTheirOwnTotalAreExact) {
  // T = 100, ratios [0.5, 0.8, 0.2, 0.9]: kvpress keeps int(100 (1 - r)) = [50, 20, 80, 10], sum 160 = B.
  const rkv::Allocation a = run("0.5, 0.8,0.2 ,0.9", "compression_ratio", 160, 100, 4);
  EXPECT_EQ(a.budgets, (V{50, 20, 80, 10}));
  EXPECT_FALSE(warned(a));
}

TEST_F(Manual, ScaledToTheRunsBudgetWithAWarning) {
  // keep fractions [0.1, 0.3] at T = 200 give x = [20, 60] (sum 80); B = 40 scales by 1/2: [10, 30].
  const rkv::Allocation a = run("0.1,0.3", "keep_fraction", 40, 200, 2);
  EXPECT_EQ(a.budgets, (V{10, 30}));
  EXPECT_TRUE(warned(a));
}

TEST_F(Manual, TokensAreCappedAtT) {
  // tokens [500, 50, 50] at T = 100: x = [100, 50, 50] (sum 200 = B): exact.
  const rkv::Allocation a = run("500,50,50", "tokens", 200, 100, 3);
  EXPECT_EQ(a.budgets, (V{100, 50, 50}));
  EXPECT_FALSE(warned(a));
}

TEST_F(Manual, EmptyIsUniform) { EXPECT_EQ(run("", "compression_ratio", 10, 100, 4).budgets, (V{3, 3, 2, 2})); }

TEST_F(Manual, RefusesAWrongLengthAndBadValues) {
  EXPECT_NE(error([&] { run("0.5,0.5", "compression_ratio", 10, 100, 3); }).find("lists 2 layers, the run compresses 3"),
            std::string::npos);
  EXPECT_NE(error([&] { run("0.5,1.0", "compression_ratio", 10, 100, 2); }).find("outside [0, 1)"), std::string::npos);
  EXPECT_NE(error([&] { run("0.5,x", "keep_fraction", 10, 100, 2); }).find("'x'"), std::string::npos);
  EXPECT_NE(error([&] { run("0,0", "tokens", 10, 100, 2); }).find("sum to 0"), std::string::npos);
}

}  // namespace
