// The plugin host: loading real .so fixtures through Boost.DLL, ABI negotiation, id resolution, parameter
// validation, error statuses and warnings crossing the boundary.
#include <fstream>
#include <filesystem>
#include <unistd.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "core/errors.hpp"
#include "plugin/allocator_call.hpp"
#include "plugin/instance.hpp"
#include "plugin/params.hpp"
#include "plugin/registry.hpp"

namespace {

const std::string kFixtures = RKV_TEST_BINARY_DIR "/tests/plugins/";

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const rkv::InputError& e) {
    return e.what();
  }
  return "(no error)";
}

rkv::PluginRegistry load(const std::string& fixture) {
  rkv::PluginRegistry reg;
  reg.load_library(kFixtures + fixture);
  return reg;
}

TEST(PluginRegistry, GoodPluginLoadsDescribesAndRuns) {
  rkv::PluginRegistry reg = load("test_good/test_good.so");
  ASSERT_EQ(reg.plugins().size(), 1u);
  const rkv::PluginInfo& p = reg.resolve("good");  // short id
  EXPECT_EQ(p.id(), "org.test.good");
  EXPECT_EQ(p.descriptor->kind, RKV_KIND_ALLOCATOR);
  EXPECT_STREQ(p.descriptor->version, "0.1.0");
  int n_params = 0;
  for (auto* s = p.descriptor->params; *s; ++s) ++n_params;
  EXPECT_EQ(n_params, 5);

  rkv::HostServices host;
  const rkv::ParamSet params = rkv::ParamSet::validate(*p.descriptor, {{"count", int64_t{7}, false, "test"}});
  rkv::PluginInstance inst = rkv::PluginInstance::create(p, params, host);
  const rkv::Allocation a = rkv::run_allocator(inst, {}, 12, 10, 4, -1);
  EXPECT_EQ(a.budgets, (std::vector<int64_t>{3, 3, 3, 3}));
  // The plugin's warning reaches the caller, prefixed with the plugin id.
  ASSERT_EQ(a.warnings.size(), 1u);
  EXPECT_EQ(a.warnings[0], "allocator 'org.test.good': count is 7");
}

TEST(PluginRegistry, BuiltinsAreDiscoveredBesideTheLibrary) {
  const rkv::PluginRegistry reg = rkv::PluginRegistry::discover();
  for (const char* id : {"org.ripplekv.allocator.uniform", "org.ripplekv.allocator.pyramid",
                         "org.ripplekv.allocator.ripplekv"})
    EXPECT_EQ(reg.resolve(id, RKV_KIND_ALLOCATOR).id(), id);
}

TEST(PluginRegistry, WrongAbiMajorNamesBothVersions) {
  const std::string e = error_of([] { load("wrong_abi/test_wrong_abi.so"); });
  EXPECT_NE(e.find("built for plugin ABI 99.3"), std::string::npos) << e;
  EXPECT_NE(e.find("this host speaks ABI 1.7"), std::string::npos) << e;
}

TEST(PluginRegistry, LibraryWithoutEntrySymbol) {
  const std::string e = error_of([] { load("no_entry/test_no_entry.so"); });
  EXPECT_NE(e.find("has no entry symbol 'rkv_plugin_library_get'"), std::string::npos) << e;
  EXPECT_NE(e.find("test_no_entry.so"), std::string::npos) << e;
}

TEST(PluginRegistry, EntryReturningNull) {
  const std::string e = error_of([] { load("null_entry/test_null_entry.so"); });
  EXPECT_NE(e.find("rkv_plugin_library_get returned NULL"), std::string::npos) << e;
}

TEST(PluginRegistry, MissingFileIsAClearError) {
  const std::string e = error_of([] { load("nowhere/none.so"); });
  EXPECT_NE(e.find("cannot be loaded"), std::string::npos) << e;
}

TEST(PluginRegistry, NonLibrarySaysWhyTheLoaderRefusedIt) {
  // A text file named like a plugin: the dynamic loader's reason, not Boost.DLL's errno ("Bad file descriptor").
  const std::filesystem::path junk =
      std::filesystem::temp_directory_path() / ("rkv-junk-" + std::to_string(::getpid()) + ".so");
  std::ofstream(junk) << "this is not an ELF file, but it is long enough to have a header to read.\n";
  const std::string e = error_of([&] { rkv::PluginRegistry::discover({junk.string()}); });
  std::filesystem::remove(junk);
  EXPECT_NE(e.find("cannot be loaded"), std::string::npos) << e;
  EXPECT_NE(e.find("invalid ELF header"), std::string::npos) << e;
  EXPECT_EQ(e.find("Bad file descriptor"), std::string::npos) << e;
}

TEST(PluginRegistry, DuplicateIdNamesBothPaths) {
  const std::string e = error_of([] { rkv::PluginRegistry::discover({kFixtures + "dup"}); });
  EXPECT_NE(e.find("plugin id 'org.test.dup' is claimed by two libraries"), std::string::npos) << e;
  EXPECT_NE(e.find("dup/test_dup_a.so"), std::string::npos) << e;
  EXPECT_NE(e.find("dup/test_dup_b.so"), std::string::npos) << e;
}

TEST(PluginRegistry, ThrowingPluginBecomesAStatusWithItsMessage) {
  rkv::PluginRegistry reg = load("test_good/test_good.so");
  rkv::HostServices host;
  for (const char* mode : {"throw", "throw_unknown"}) {
    const auto params = rkv::ParamSet::validate(*reg.resolve("good").descriptor, {{"mode", std::string(mode), false, ""}});
    rkv::PluginInstance inst = rkv::PluginInstance::create(reg.resolve("good"), params, host);
    const std::string e = error_of([&] { rkv::run_allocator(inst, {}, 12, 10, 4, -1); });
    EXPECT_NE(e.find("allocator 'org.test.good' failed (internal error)"), std::string::npos) << e;
    if (std::string(mode) == "throw") EXPECT_NE(e.find("deliberate failure in allocate"), std::string::npos) << e;
    else EXPECT_NE(e.find("unknown exception"), std::string::npos) << e;
  }
}

TEST(PluginRegistry, ErrorStatusIsReportedWithPluginIdAndMessage) {
  rkv::PluginRegistry reg = load("test_bad_allocator/test_bad_allocator.so");
  rkv::HostServices host;
  const auto& info = reg.resolve("bad_allocator");
  const auto params = rkv::ParamSet::validate(*info.descriptor, {{"mode", std::string("error"), false, ""}});
  rkv::PluginInstance inst = rkv::PluginInstance::create(info, params, host);
  const std::string e = error_of([&] { rkv::run_allocator(inst, {}, 12, 10, 4, -1); });
  EXPECT_EQ(e, "allocator 'org.test.bad_allocator' failed (invalid argument): this allocator refuses on purpose");
}

TEST(PluginRegistry, OlderStructSizesAreReadOnlyWithinStructSize) {
  rkv::PluginRegistry reg = load("old_struct/test_old_struct.so");
  const auto& info = reg.resolve("org.test.old_struct");
  EXPECT_EQ(info.descriptor->flags, 0u);  // beyond its struct_size: read as zero
  EXPECT_EQ(info.descriptor->params[0]->choices, nullptr);
  rkv::HostServices host;
  const auto params = rkv::ParamSet::validate(*info.descriptor, {{"count", int64_t{2}, false, ""}});
  rkv::PluginInstance inst = rkv::PluginInstance::create(info, params, host);
  EXPECT_EQ(rkv::run_allocator(inst, {}, 9, 10, 3, -1).budgets, (std::vector<int64_t>{3, 3, 3}));
  EXPECT_NE(error_of([&] { rkv::ParamSet::validate(*info.descriptor, {{"count", int64_t{0}, false, ""}}); })
                .find("out of range"),
            std::string::npos);
}

TEST(PluginRegistry, UnknownIdListsKnownIdsAndClosestMatch) {
  const rkv::PluginRegistry reg = rkv::PluginRegistry::discover();
  const std::string e = error_of([&] { reg.resolve("piramid", RKV_KIND_ALLOCATOR); });
  EXPECT_NE(e.find("no allocator plugin 'piramid'"), std::string::npos) << e;
  EXPECT_NE(e.find("org.ripplekv.allocator.uniform"), std::string::npos) << e;
  EXPECT_NE(e.find("did you mean 'pyramid'?"), std::string::npos) << e;
  // Right id, wrong kind.
  EXPECT_NE(error_of([&] { reg.resolve("uniform", RKV_KIND_SCORER); }).find("no scorer plugin 'uniform'"),
            std::string::npos);
}

class ParamValidation : public ::testing::Test {
 protected:
  rkv::PluginRegistry reg = load("test_good/test_good.so");
  const rkv_plugin_descriptor& desc = *reg.resolve("good").descriptor;
  std::string check(const std::string& key, rkv::ParamValue v, bool text = false) {
    return error_of([&] { rkv::ParamSet::validate(desc, {{key, v, text, "cfg.toml:3"}}); });
  }
};

TEST_F(ParamValidation, UnknownKeyNamesPluginKeyValidKeysAndClosestMatch) {
  EXPECT_EQ(check("cout", int64_t{1}),
            "plugin 'org.test.good' has no parameter 'cout' (cfg.toml:3); valid keys: flag, count, scale, mode, label; "
            "did you mean 'count'?");
}

TEST_F(ParamValidation, WrongTypeNamesTheExpectedType) {
  EXPECT_EQ(check("count", std::string("three")),
            "plugin 'org.test.good', parameter 'count' (cfg.toml:3): expected int, got \"three\"");
  EXPECT_EQ(check("flag", int64_t{1}), "plugin 'org.test.good', parameter 'flag' (cfg.toml:3): expected bool, got 1");
  EXPECT_EQ(check("count", std::string("2.5"), true),
            "plugin 'org.test.good', parameter 'count' (cfg.toml:3): expected int, got \"2.5\"");
  EXPECT_EQ(check("count", 2.0), "plugin 'org.test.good', parameter 'count' (cfg.toml:3): expected int, got 2");
}

TEST_F(ParamValidation, OutOfRangeGivesTheBounds) {
  EXPECT_EQ(check("count", int64_t{11}),
            "plugin 'org.test.good', parameter 'count' (cfg.toml:3): 11 is out of range; allowed: between 1 and 10");
  EXPECT_EQ(check("scale", -0.25),
            "plugin 'org.test.good', parameter 'scale' (cfg.toml:3): -0.25 is out of range; allowed: between 0 and 1");
}

TEST_F(ParamValidation, NotAmongChoicesListsThem) {
  EXPECT_EQ(check("mode", std::string("fast")),
            "plugin 'org.test.good', parameter 'mode' (cfg.toml:3): \"fast\" is not one of: ok, throw, throw_unknown");
}

TEST_F(ParamValidation, DefaultsFilledAndTextParsedByType) {
  const auto set = rkv::ParamSet::validate(desc, {{"scale", std::string("0.75"), true, ""},
                                                  {"flag", std::string("true"), true, ""}});
  EXPECT_EQ(std::get<double>(set.values().at("scale")), 0.75);
  EXPECT_EQ(std::get<bool>(set.values().at("flag")), true);
  EXPECT_EQ(std::get<int64_t>(set.values().at("count")), 3);
  EXPECT_TRUE(set.is_set("scale"));
  EXPECT_FALSE(set.is_set("count"));
  // An int given where a float is expected is accepted as that float.
  EXPECT_EQ(std::get<double>(rkv::ParamSet::validate(desc, {{"scale", int64_t{1}, false, ""}}).values().at("scale")), 1.0);
}

}  // namespace

namespace {

/// The load error of tests/plugins/raw_bad_spec.c built for `fault`.
std::string bad_spec_error(const std::string& fault) {
  return error_of([&] { load("bad_spec_" + fault + "/test_bad_spec_" + fault + ".so"); });
}

}  // namespace

TEST(PluginRegistry, BrokenParamSpecsAreRefusedAtLoadNamingPluginAndField) {
  // Each library declares one spec that could never validate (before: they all loaded and passed `plugins check`).
  const std::string head = "plugin library '" + kFixtures;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"nan_default", "plugin 'org.test.bad_spec', parameter 'ratio': default_float is NaN"},
      {"min_above_max", "plugin 'org.test.bad_spec', parameter 'ratio': min (2) is greater than max (1)"},
      {"default_outside",
       "plugin 'org.test.bad_spec', parameter 'count': default_int 9 is outside its range (between 1 and 4)"},
      {"bad_name",
       "plugin 'org.test.bad_spec', parameter '2 bad-name': name is not an identifier ([a-z_][a-z0-9_]*, a TOML key)"},
      {"choice_default",
       "plugin 'org.test.bad_spec', parameter 'mode': default_string \"c\" is not one of its choices: a, b"},
      {"duplicate_name", "plugin 'org.test.bad_spec', parameter 'ratio': name is declared twice"},
      {"nan_min", "plugin 'org.test.bad_spec', parameter 'ratio': min is NaN"},
      {"empty_id", "descriptor 0 has an empty id"},
  };
  for (const auto& [fault, tail] : cases) {
    const std::string lib = "bad_spec_" + fault + "/test_bad_spec_" + fault + ".so";
    EXPECT_EQ(bad_spec_error(fault), head + lib + "': " + tail) << fault;
  }
}

TEST(PluginRegistry, ParamSpecProblemAcceptsSoundSpecs) {
  rkv_param_spec s{};
  s.struct_size = sizeof s;
  s.name = "window_2";
  s.type = RKV_PARAM_FLOAT;
  s.default_float = 1.0;
  s.has_min = s.has_max = 1;
  s.min = s.max = 1.0;  // a single-point range holding its default
  EXPECT_EQ(rkv::param_spec_problem(s), "");
  s.default_float = 1.0000001;
  EXPECT_EQ(rkv::param_spec_problem(s), "parameter 'window_2': default_float 1 is outside its range (between 1 and 1)");
  s.has_max = 0;
  s.default_float = INFINITY;
  EXPECT_EQ(rkv::param_spec_problem(s), "parameter 'window_2': default_float is infinite");
  s.name = "Upper";
  EXPECT_NE(rkv::param_spec_problem(s).find("not an identifier"), std::string::npos);
}
