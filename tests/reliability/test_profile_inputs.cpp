// Budgets and profiles at the edges: profile files with NaN (null or a string), infinity, a wrong layer
// count or no values are clear errors naming the file and the entry; negative values are legal; one-layer budgets
// for every built-in allocator; B below one position per layer.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <fstream>
#include <functional>

#include "core/errors.hpp"
#include "plugin/allocator_call.hpp"
#include "plugin/instance.hpp"
#include "plugin/registry.hpp"
#include "runner/plan/profile_file.hpp"

namespace fs = std::filesystem;

namespace {

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const rkv::InputError& e) {
    return e.what();
  }
  return "(no error)";
}

std::string write_profile(const std::string& name, const std::string& text) {
  const fs::path p = fs::temp_directory_path() / ("rkv-reliab-profile-" + std::to_string(::getpid()) + "-" + name);
  std::ofstream(p) << text;
  return p.string();
}

TEST(ProfileFile, NaNInfinityAndWrongLengthsAreClearErrors) {
  struct Case {
    const char* name;
    const char* text;
    const char* expected;
  };
  const Case cases[] = {
      {"null", R"({"s": [0.5, null, 1]})", "s[1] is not a finite number"},
      {"nan_string", R"({"s": [0.5, "NaN", 1]})", "s[1] is not a finite number"},
      {"inf_string", R"({"s": ["Infinity", 1]})", "s[0] is not a finite number"},
      {"overflow", R"({"s": [0.5, 1, 1e999]})", "number overflow"},
      {"empty", R"({"s": []})", "\"s\" is empty"},
      {"layers_length", R"({"s": [1, 2, 3], "layers": [0, 1]})", "\"layers\" must be an array as long as \"s\""},
      // "layers" was read and ignored before: these were applied by position without a word.
      {"layers_negative", R"({"s": [1, 2, 3], "layers": [-1, 0, 1]})", "\"layers\"[0] = -1 is outside 0..2"},
      {"layers_too_big", R"({"s": [1, 2, 3], "layers": [0, 1, 3]})", "\"layers\"[2] = 3 is outside 0..2"},
      {"layers_duplicated", R"({"s": [1, 2, 3], "layers": [0, 1, 1]})", "\"layers\"[2] repeats layer 1"},
      {"layers_reversed", R"({"s": [1, 2, 3], "layers": [2, 1, 0]})",
       "\"layers\"[1] = 1 follows layer 2 (layers must be ascending)"},
      {"layers_float", R"({"s": [1, 2, 3], "layers": [0, 1.5, 2]})", "\"layers\"[1] is not an integer (1.5)"},
      {"layers_huge", R"({"s": [1, 2], "layers": [0, 18446744073709551615]})",
       "\"layers\"[1] = 18446744073709551615 is outside 0..1"},
      {"no_s", R"({"per_layer": [1, 2]})", "expected a JSON object with an array \"s\""},
      {"truncated", R"({"s": [1, 2)", "not valid JSON"},
  };
  for (const Case& c : cases) {
    const std::string path = write_profile(c.name, c.text);
    const std::string e = error_of([&] { rkv::read_profile_file(path); });
    EXPECT_NE(e.find("profile file '" + path + "'"), std::string::npos) << c.name << ": " << e;
    EXPECT_NE(e.find(c.expected), std::string::npos) << c.name << ": " << e;
    fs::remove(path);
  }
  // Negative (signed) values are legal.
  const std::string path = write_profile("negative", R"({"s": [-2.5, 0, 1.5], "layers": [0, 1, 2]})");
  EXPECT_EQ(rkv::read_profile_file(path).s, (std::vector<double>{-2.5, 0, 1.5}));
  fs::remove(path);
}

class EdgeBudgets : public ::testing::Test {
 protected:
  rkv::PluginRegistry reg = rkv::PluginRegistry::discover();
  rkv::HostServices host;
  rkv::Allocation run(const std::string& id, const std::vector<double>& profile, int64_t B, int64_t T, int64_t n,
                      int64_t protected_count = -1) {
    const auto& info = reg.resolve(id, RKV_KIND_ALLOCATOR);
    rkv::PluginInstance inst = rkv::PluginInstance::create(info, rkv::ParamSet::validate(*info.descriptor, {}), host);
    return rkv::run_allocator(inst, profile, B, T, n, protected_count);
  }
};

TEST_F(EdgeBudgets, OneLayerGetsTheWholeBudgetFromEveryAllocator) {
  EXPECT_EQ(run("uniform", {}, 7, 10, 1).budgets, (std::vector<int64_t>{7}));
  EXPECT_EQ(run("pyramid", {}, 7, 10, 1, 4).budgets, (std::vector<int64_t>{7}));
  EXPECT_EQ(run("ripplekv", {-3.0}, 7, 10, 1).budgets, (std::vector<int64_t>{7}));  // a constant (negative) profile
  EXPECT_EQ(run("ripplekv", {0.0}, 1, 1, 1).budgets, (std::vector<int64_t>{1}));    // T = 1, B = 1
}

TEST_F(EdgeBudgets, NegativeProfilesAreLegalAndShiftInvariant) {
  // ripplekv normalizes s to [0, 1]: a shifted (negative) profile gives the same budgets as the original.
  const auto a = run("ripplekv", {0.0, 1.0, 3.0}, 30, 100, 3).budgets;
  const auto b = run("ripplekv", {-10.0, -9.0, -7.0}, 30, 100, 3).budgets;
  EXPECT_EQ(a, b);
  int64_t sum = 0;
  for (int64_t x : a) sum += x;
  EXPECT_EQ(sum, 30);
}

TEST_F(EdgeBudgets, ProfilesWithNaNInfinityOrTheWrongLayerCountAreRejectedNamingTheAllocator) {
  const double nan = std::nan(""), inf = std::numeric_limits<double>::infinity();
  for (const auto& c : std::vector<std::pair<std::vector<double>, std::string>>{
           {{0.0, nan, 1.0}, "value 1 is not finite"},
           {{0.0, 1.0, -inf}, "value 2 is not finite"},
           {{0.0, 1.0}, "has 2 values but there are 3 compressible layers"},
           {{0.0, 1.0, 2.0, 3.0}, "has 4 values but there are 3 compressible layers"}}) {
    const std::string e = error_of([&] { run("ripplekv", c.first, 30, 100, 3); });
    EXPECT_NE(e.find("allocator 'org.ripplekv.allocator.ripplekv'"), std::string::npos) << e;
    EXPECT_NE(e.find(c.second), std::string::npos) << e;
  }
}

TEST_F(EdgeBudgets, BudgetBelowOnePositionPerLayerSaysWhy) {
  for (const char* id : {"uniform", "pyramid"}) {
    const std::string e = error_of([&] { run(id, {}, 2, 100, 3, 0); });
    EXPECT_NE(e.find("B = 2 is below the number of compressible layers |A| = 3"), std::string::npos) << id << ": " << e;
  }
  EXPECT_EQ(run("uniform", {}, 3, 100, 3).budgets, (std::vector<int64_t>{1, 1, 1}));  // exactly one each is fine
}

}  // namespace
