// `ripplekv plugins check` (host/conformance/conformance.hpp; ctest label unit):
//  - every built-in plugin passes every rule of its kind, and the rule list per kind is the documented one;
//  - fixture plugins (tests/conformance/*_fixture.cpp, tests/plugins/bad_allocator.cpp) that break exactly one rule
//    fail that rule, with a detail naming the input, and pass the rules they keep;
//  - the CLI: table, summary, JSON, exit codes 0 / 1 / 2.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <ostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "conformance/conformance.hpp"
#include "core/atomic_file.hpp"
#include "core/subprocess.hpp"
#include "plugin/params.hpp"
#include "plugin/registry.hpp"

namespace {

const std::string kFixtures = RKV_TEST_BINARY_DIR "/tests/plugins/";

const rkv::PluginRegistry& registry() {
  static const rkv::PluginRegistry r = rkv::PluginRegistry::discover(
      {kFixtures + "conform_scorer", kFixtures + "conform_allocator", kFixtures + "conform_signal",
       kFixtures + "conform_prompt_signal",
       kFixtures + "test_bad_allocator", kFixtures + "test_wov"});
  return r;
}

std::vector<rkv::ConformanceCase> check(const std::string& id, const std::map<std::string, std::string>& params = {}) {
  const rkv::PluginInfo& info = registry().resolve(id);
  std::vector<rkv::UserParam> user;
  for (const auto& [k, v] : params) user.push_back(rkv::UserParam{k, v, true, "test"});
  return rkv::check_plugin(info, rkv::ParamSet::validate(*info.descriptor, user));
}

std::map<std::string, rkv::ConformanceCase> by_name(const std::vector<rkv::ConformanceCase>& cases) {
  std::map<std::string, rkv::ConformanceCase> m;
  for (const auto& c : cases) m[c.name] = c;
  return m;
}

std::vector<std::string> names(const std::vector<rkv::ConformanceCase>& cases) {
  std::vector<std::string> n;
  for (const auto& c : cases) n.push_back(c.name);
  return n;
}

std::string table(const std::vector<rkv::ConformanceCase>& cases) {
  std::string s;
  for (const auto& c : cases) s += c.name + (c.passed ? " PASS " : " FAIL ") + c.detail + "\n";
  return s;
}

/// Only the cases in `failing` fail; each of those has a detail containing the given text.
void expect_only_failures(const std::vector<rkv::ConformanceCase>& cases,
                          const std::map<std::string, std::string>& failing) {
  SCOPED_TRACE(table(cases));
  EXPECT_FALSE(rkv::all_passed(cases));
  for (const auto& c : cases) {
    const auto it = failing.find(c.name);
    if (it == failing.end()) {
      EXPECT_TRUE(c.passed) << c.name;
    } else {
      EXPECT_FALSE(c.passed) << c.name;
      EXPECT_NE(c.detail.find(it->second), std::string::npos) << c.name << ": " << c.detail;
    }
  }
  for (const auto& [name, text] : failing) EXPECT_EQ(by_name(cases).count(name), 1u) << "no case " << name;
}

const std::vector<std::string> kScorerCases = {"create",           "requirements",   "scores_finite",
                                               "deterministic",    "budget_respected", "protected_kept",
                                               "protected_priority", "decode_scores_finite",
                                               "decode_budget_respected", "decode_protected_kept", "short_prompt"};
// A scorer without decode-time scoring: one "not applicable" case instead of the decode matrix.
const std::vector<std::string> kPrefillOnlyScorerCases = {"create",           "requirements",   "scores_finite",
                                                          "deterministic",    "budget_respected", "protected_kept",
                                                          "protected_priority", "decode_time", "short_prompt"};
const std::vector<std::string> kAllocatorCases = {"create",    "allocate_call",   "finite",       "non_negative",
                                                  "sums_to_B", "integer_budgets", "deterministic"};
// A per-head allocator (rkv.allocator/2 only): the per-head matrix instead of the layer one.
const std::vector<std::string> kHeadAllocatorCases = {"create", "allocate_heads_call", "head_integer_budgets",
                                                      "head_deterministic"};
const std::vector<std::string> kSignalCases = {"create", "profile_call",  "profile_length",
                                               "finite", "deterministic", "host_accepts"};
// A per-prompt signal (rkv.prompt_signal/1).
const std::vector<std::string> kPromptSignalCases = {"create", "requirements", "value_finite", "deterministic",
                                                     "varies_with_prompt"};

// ---- built-in plugins ------------------------------------------------------------------------------------------

struct BuiltIn {
  const char* id;
  const std::vector<std::string>* cases;
};

/// gtest prints the id instead of the bytes of the struct.
void PrintTo(const BuiltIn& b, std::ostream* os) { *os << b.id; }

class BuiltInPlugin : public ::testing::TestWithParam<BuiltIn> {};

TEST_P(BuiltInPlugin, PassesEveryRuleOfItsKind) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto cases = check(GetParam().id);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  SCOPED_TRACE(table(cases));
  EXPECT_EQ(names(cases), *GetParam().cases);
  EXPECT_TRUE(rkv::all_passed(cases));
  for (const auto& c : cases) EXPECT_TRUE(c.passed) << c.name << ": " << c.detail;
  std::printf("%s: %.2f s\n", GetParam().id, seconds);
}

INSTANTIATE_TEST_SUITE_P(
    All, BuiltInPlugin,
    ::testing::Values(BuiltIn{"org.ripplekv.scorer.snapkv", &kScorerCases}, BuiltIn{"org.ripplekv.scorer.h2o", &kScorerCases},
                      BuiltIn{"org.ripplekv.scorer.streamingllm", &kScorerCases},
                      BuiltIn{"org.ripplekv.scorer.knorm", &kScorerCases},
                      BuiltIn{"org.ripplekv.scorer.keydiff", &kPrefillOnlyScorerCases},
                      BuiltIn{"org.ripplekv.scorer.lagkv", &kPrefillOnlyScorerCases},
                      BuiltIn{"org.ripplekv.scorer.cur", &kPrefillOnlyScorerCases},
                      BuiltIn{"org.ripplekv.scorer.tova", &kPrefillOnlyScorerCases},
                      BuiltIn{"org.ripplekv.scorer.observed_attention", &kPrefillOnlyScorerCases},
                      BuiltIn{"org.ripplekv.scorer.chunkkv", &kPrefillOnlyScorerCases},
                      BuiltIn{"org.ripplekv.scorer.random", &kPrefillOnlyScorerCases},
                      BuiltIn{"org.ripplekv.scorer.non_causal_attention", &kPrefillOnlyScorerCases},
                      BuiltIn{"org.ripplekv.scorer.expected_attention", &kPrefillOnlyScorerCases},
                      BuiltIn{"org.ripplekv.scorer.leverage", &kPrefillOnlyScorerCases},
                      BuiltIn{"org.ripplekv.scorer.compactor", &kPrefillOnlyScorerCases},
                      BuiltIn{"org.ripplekv.scorer.criticalkv", &kPrefillOnlyScorerCases},
                      BuiltIn{"org.ripplekv.scorer.defensivekv", &kPrefillOnlyScorerCases},
                      BuiltIn{"org.ripplekv.scorer.cake", &kPrefillOnlyScorerCases},
                      BuiltIn{"org.ripplekv.allocator.manual", &kAllocatorCases},
                      BuiltIn{"org.ripplekv.allocator.ripplekv", &kAllocatorCases},
                      BuiltIn{"org.ripplekv.allocator.uniform", &kAllocatorCases},
                      BuiltIn{"org.ripplekv.allocator.pyramid", &kAllocatorCases},
                      BuiltIn{"org.ripplekv.allocator.adakv", &kHeadAllocatorCases},
                      BuiltIn{"org.ripplekv.allocator.global_topk", &kHeadAllocatorCases},
                      BuiltIn{"org.ripplekv.signal.perturbation_kl", &kSignalCases},
                      BuiltIn{"org.ripplekv.signal.layer_local", &kSignalCases},
                      BuiltIn{"org.ripplekv.signal.depth", &kSignalCases},
                      BuiltIn{"org.ripplekv.signal.cake", &kPromptSignalCases},
                      BuiltIn{"org.ripplekv.allocator.cake", &kAllocatorCases},
                      BuiltIn{"org.ripplekv.signal.squeezeattention", &kPromptSignalCases},
                      BuiltIn{"org.ripplekv.allocator.squeezeattention", &kAllocatorCases},
                      BuiltIn{"org.ripplekv.allocator.dynamickv", &kHeadAllocatorCases}),
    [](const ::testing::TestParamInfo<BuiltIn>& i) {
      const std::string id = i.param.id;
      return id.substr(id.rfind('.') + 1) + "_" + std::to_string(i.index);
    });

TEST(Conformance, BuiltInsPassWithNonDefaultParams) {
  for (const auto& [id, params] : std::vector<std::pair<std::string, std::map<std::string, std::string>>>{
           {"snapkv", {{"window", "3"}, {"kernel", "5"}, {"pooling", "avg"}, {"gqa", "max"}}},
           {"h2o", {{"recent", "0"}, {"normalize", "true"}}},
           {"streamingllm", {{"sinks", "0"}}},
           {"lagkv", {{"lag_size", "2"}, {"n_sink", "1"}, {"cross_scoring", "true"}}},
           {"cur", {{"leverage_type", "kv_avg"}, {"local_window_size", "3"}, {"num_sinks", "0"}}},
           {"chunkkv", {{"inner", "knorm"}, {"chunk_length", "3"}}},
           {"chunkkv", {{"window", "5"}, {"kernel", "3"}, {"chunk_length", "4"}}},
           {"random", {{"seed", "7"}, {"per_layer", "true"}}},
           {"non_causal_attention", {{"chunk_size", "5"}, {"max_tokens", "400"}}},
           {"expected_attention", {{"n_sink", "0"}, {"use_covariance", "false"}, {"n_future_positions", "3"},
                                   {"epsilon", "0.5"}}},
           {"expected_attention", {{"n_sink", "2"}, {"use_vnorm", "false"}}},
           {"leverage", {{"sketch_dimension", "3"}, {"seed", "5"}, {"per_layer", "true"}}},
           {"compactor", {{"sink_size_start", "0"}, {"sink_size_end", "0"}, {"chunk_size", "5"}, {"blending", "2"},
                          {"sketch_dimension", "1"}, {"max_tokens", "400"}}},
           {"criticalkv", {{"inner", "knorm"}, {"first_stage_ratio", "0"}, {"epsilon", "0"}}},
           {"criticalkv", {{"window", "3"}, {"kernel", "1"}, {"first_stage_ratio", "1"}}},
           {"defensivekv", {{"window", "3"}, {"kernel", "1"}, {"mass", "0.5"}}},
           {"manual", {{"unit", "keep_fraction"}}},
           {"org.ripplekv.allocator.ripplekv", {{"r", "4"}, {"gamma", "1.5"}}},
           {"adakv", {{"alpha_safeguard", "0.9"}}},
           {"depth", {{"order", "descending"}}},
           {"org.ripplekv.signal.cake", {{"window", "3"}, {"tau1", "1"}, {"tau2", "2"}}},
           {"org.ripplekv.signal.cake", {{"tau1", "0.1"}, {"tau2", "0.1"}}},  // the smallest: no overflow
           {"org.ripplekv.scorer.cake", {{"window", "3"}, {"kernel", "1"}, {"gamma", "0"}}},
           {"org.ripplekv.allocator.squeezeattention", {{"reduced_share", "0"}, {"clusters", "2"}}},
           {"org.ripplekv.allocator.dynamickv", {{"interval", "1"}, {"ratio_max", "0.5"}}}}) {
    SCOPED_TRACE(id);
    const auto cases = check(id, params);
    EXPECT_TRUE(rkv::all_passed(cases)) << table(cases);
  }
}

// ---- fixtures that break one rule -----------------------------------------------------------------------------

TEST(Conformance, FixtureScorerInOkModePasses) {
  const auto cases = check("org.ripplekv.test.conform_scorer");
  EXPECT_EQ(names(cases), kScorerCases);
  EXPECT_TRUE(rkv::all_passed(cases)) << table(cases);
  // recent 4: prompts of T >= 5 with b_l = 1..3 exercise the priority rule; the short prompt is T = 3.
  EXPECT_NE(by_name(cases)["short_prompt"].detail.find("T = 3"), std::string::npos);
  EXPECT_EQ(by_name(cases)["protected_priority"].detail.find("not applicable"), std::string::npos);
}

// tests/plugins/wov_scorer.cpp asks for RKV_STAT_VALUE_OUTPUT_NORMS and requires them [H, T]: the kit gives them on
// every path (the direct calls and the one-layer compression), so every rule passes.
TEST(Conformance, ScorerAskingForValueOutputNormsGetsThem) {
  const auto cases = check("org.test.wov");
  EXPECT_EQ(names(cases), kPrefillOnlyScorerCases);
  EXPECT_TRUE(rkv::all_passed(cases)) << table(cases);
  EXPECT_NE(by_name(cases)["requirements"].detail.find("value_output_norms"), std::string::npos) << table(cases);
}

TEST(Conformance, ScorerWithNaNOnLongPromptsFailsScoresFinite) {
  // NaN at KV head 0, position 1 for T >= 64: the first such input is the first shape at T 64.
  const auto cases = check("org.ripplekv.test.conform_scorer", {{"mode", "nan_long"}});
  expect_only_failures(cases, {{"scores_finite", "H 4 / H_kv 2 / d 8, T 64, random, layer 2: score nan at KV head 0, "
                                                 "position 1"},
                                {"decode_scores_finite", "decode time, H 4 / H_kv 2 / d 8, T 64, random"}});
  // The rejected inputs are skipped (not failed) by the selection rules, which still ran on the short prompts.
  EXPECT_NE(by_name(cases)["budget_respected"].detail.find("skipped"), std::string::npos);
}

TEST(Conformance, NondeterministicScorerFailsDeterministic) {
  const auto cases = check("org.ripplekv.test.conform_scorer", {{"mode", "nondeterministic"}});
  expect_only_failures(cases, {{"deterministic", "a second call differs at KV head 0, position 0"}});
}

TEST(Conformance, ScorerFailingOnShortPromptsFailsScoresFiniteAndShortPrompt) {
  const auto cases = check("org.ripplekv.test.conform_scorer", {{"mode", "fail_short"}});
  expect_only_failures(cases, {{"scores_finite", "T 1, random"},
                               {"decode_scores_finite", "decode time, H 4 / H_kv 2 / d 8, T 2, random"},
                               {"short_prompt", "prompt too short"}});
}

TEST(Conformance, ScorerRefusingAShortDecodeWindowFailsDecodeScoresFinite) {
  // The prefill rules pass (the window is min(4, T) there, and T >= 4 in all but the T = 1 prompt, which asks no
  // window statistics of a keys-only prefill); at decode time one decoded query is refused.
  const auto cases = check("org.ripplekv.test.conform_scorer", {{"mode", "decode_window"}});
  expect_only_failures(cases, {{"decode_scores_finite", "1 decoded queries: scorer 'org.ripplekv.test.conform_scorer'"}});
}

TEST(Conformance, PrefillOnlyScorerHasNoDecodeMatrix) {
  const auto cases = check("org.ripplekv.test.conform_scorer", {{"mode", "prefill_only"}});
  EXPECT_EQ(names(cases), kPrefillOnlyScorerCases);
  EXPECT_TRUE(rkv::all_passed(cases)) << table(cases);
  EXPECT_NE(by_name(cases)["decode_time"].detail.find("not applicable"), std::string::npos);
}

TEST(Conformance, FixtureAllocatorInOkModePasses) {
  const auto cases = check("org.ripplekv.test.conform_allocator");
  EXPECT_EQ(names(cases), kAllocatorCases);
  EXPECT_TRUE(rkv::all_passed(cases)) << table(cases);
}

TEST(Conformance, AllocatorShortOfBFailsSumsToB) {
  // The first request with B > 100 is "B = |A| T - 1" (B 255): sum 254.
  const auto cases = check("org.ripplekv.test.conform_allocator", {{"mode", "short_by_one"}});
  expect_only_failures(cases, {{"sums_to_B", "B = |A| T - 1 (|A| 4, T 64, B 255, protected 32): sum 254, off by -1"}});
}

TEST(Conformance, NondeterministicAllocatorFailsDeterministic) {
  const auto cases = check("org.ripplekv.test.conform_allocator", {{"mode", "nondeterministic"}});
  expect_only_failures(cases, {{"deterministic", "differs at layer 0"}});
}

TEST(Conformance, AllocatorRefusingOneLayerFailsAllocateCall) {
  const auto cases = check("org.ripplekv.test.conform_allocator", {{"mode", "fail_one_layer"}});
  expect_only_failures(cases, {{"allocate_call", "one layer (|A| 1, T 100, B 37, protected 32)"}});
}

TEST(Conformance, NegativeAllocatorFailsNonNegative) {
  // The one-layer request stays valid; every other one is rejected by non_negative, so integer_budgets (which needs
  // an answer the host accepts) is left with a single request.
  const auto cases = check("org.ripplekv.test.conform_allocator", {{"mode", "negative"}});
  expect_only_failures(cases, {{"non_negative", "B = |A| (one position per layer) (|A| 4, T 64, B 4, protected 32): "
                                                "layer 0 got -1"}});
  EXPECT_NE(by_name(cases)["integer_budgets"].detail.find("on 1 requests"), std::string::npos);
}

TEST(Conformance, BadAllocatorFixtureFailsTheRuleItBreaks) {
  // tests/plugins/bad_allocator.cpp: nan puts NaN in layer 0 (every request fails, so the rules after it have nothing
  // left to check); wrong_sum gives every layer B / |A| + 1.
  expect_only_failures(check("org.test.bad_allocator", {{"mode", "nan"}}),
                       {{"finite", "layer 0 got nan"},
                        {"non_negative", "no input could be checked"},
                        {"sums_to_B", "no input could be checked"},
                        {"integer_budgets", "no input could be checked"},
                        {"deterministic", "no input could be checked"}});
  expect_only_failures(check("org.test.bad_allocator", {{"mode", "wrong_sum"}}),
                       {{"sums_to_B", "one layer (|A| 1, T 100, B 37, protected 32): sum 38, off by 1"},
                        {"integer_budgets", "no input could be checked"}});
}

TEST(Conformance, FixtureSignalInOkModePasses) {
  const auto cases = check("org.ripplekv.test.conform_signal");
  EXPECT_EQ(names(cases), kSignalCases);
  EXPECT_TRUE(rkv::all_passed(cases)) << table(cases);
}

TEST(Conformance, SignalWithNaNFailsFinite) {
  expect_only_failures(check("org.ripplekv.test.conform_signal", {{"mode", "nan_last"}}),
                       {{"finite", "4 layers, H 4 / H_kv 2, d 8: s[3] = nan"}});
  // Every model's d is unwritten, so compute_profile (which rejects NaN) has nothing left to check.
  expect_only_failures(check("org.ripplekv.test.conform_signal", {{"mode", "skip_examples"}}),
                       {{"finite", "d[0][0] = nan"}, {"host_accepts", "no input could be checked"}});
}

TEST(Conformance, NondeterministicSignalFailsDeterministic) {
  expect_only_failures(check("org.ripplekv.test.conform_signal", {{"mode", "nondeterministic"}}),
                       {{"deterministic", "a second run with a fresh profiler and instance differs at s[0]"}});
}

TEST(Conformance, FixturePromptSignalInOkModePasses) {
  const auto cases = check("org.ripplekv.test.conform_prompt_signal");
  EXPECT_EQ(names(cases), kPromptSignalCases);
  EXPECT_TRUE(rkv::all_passed(cases)) << table(cases);
}

TEST(Conformance, PromptSignalReadingAStatisticItDidNotRequestIsRefused) {
  // The host passes only what the signal requested; reading the window attention (NULL) fails every call.
  expect_only_failures(check("org.ripplekv.test.conform_prompt_signal", {{"mode", "unrequested"}}),
                       {{"value_finite", "tensor 'window_attention': missing"},
                        {"deterministic", "no input could be checked"},
                        {"varies_with_prompt", "tensor 'window_attention': missing"}});
}

TEST(Conformance, PromptSignalIgnoringItsPromptFailsVariesWithPrompt) {
  expect_only_failures(check("org.ripplekv.test.conform_prompt_signal", {{"mode", "constant"}}),
                       {{"varies_with_prompt", "two random prompts of 64 positions give the same value on every layer"}});
}

TEST(Conformance, PromptSignalWithNaNOrDriftFailsItsRule) {
  expect_only_failures(check("org.ripplekv.test.conform_prompt_signal", {{"mode", "nan_long"}}),
                       {{"value_finite", "T 300"}});
  expect_only_failures(check("org.ripplekv.test.conform_prompt_signal", {{"mode", "nondeterministic"}}),
                       {{"deterministic", "from a fresh instance"}});
}

TEST(Conformance, SignalRefusingOneLayerFailsProfileCall) {
  expect_only_failures(check("org.ripplekv.test.conform_signal", {{"mode", "fail_one_layer"}}),
                       {{"profile_call", "1 layer, H 2 / H_kv 1, d 8: signal 'org.ripplekv.test.conform_signal' "
                                         "failed"}});
}

// ---- the CLI ---------------------------------------------------------------------------------------------------

struct CliResult {
  int code;
  std::string out;
};

/// Runs the CLI with an argument vector (no shell: core/subprocess.hpp); returns its exit status and stdout + stderr.
CliResult cli(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {RKV_CLI_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  const std::string log = (std::filesystem::temp_directory_path() /
                           ("rkv_conformance_cli_" + std::to_string(::getpid()) + ".log")).string();
  const int code = rkv::run_program(argv, "", log);
  std::string out;
  try {
    out = rkv::read_file(log);
  } catch (const std::exception&) {
  }
  std::remove(log.c_str());
  return {code, out};
}

/// The table row of `name` (the line starting with it), or "".
std::string row(const std::string& out, const std::string& name) {
  size_t pos = 0;
  while (pos < out.size()) {
    const size_t end = out.find('\n', pos);
    const std::string line = out.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
    if (line.compare(0, name.size() + 1, name + " ") == 0) return line;
    if (end == std::string::npos) break;
    pos = end + 1;
  }
  return "";
}

TEST(ConformanceCli, PassingPluginPrintsTableAndExitsZero) {
  const CliResult r = cli({"plugins", "check", "snapkv"});
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("check org.ripplekv.scorer.snapkv (scorer"), std::string::npos) << r.out;
  EXPECT_NE(row(r.out, "CASE").find("RESULT"), std::string::npos) << r.out;
  for (const auto& name : kScorerCases) EXPECT_NE(row(r.out, name).find(" PASS "), std::string::npos) << name;
  EXPECT_NE(r.out.find("PASS: 11 of 11 cases passed (org.ripplekv.scorer.snapkv)"), std::string::npos) << r.out;
}

TEST(ConformanceCli, FailingPluginExitsOneAndNamesTheCase) {
  const CliResult r = cli({"plugins", "check", "conform_scorer", "--plugin-path", kFixtures + "conform_scorer", "--param",
                           "mode=nan_long"});
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(row(r.out, "scores_finite").find(" FAIL "), std::string::npos) << r.out;
  EXPECT_NE(row(r.out, "deterministic").find(" PASS "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("FAIL: 9 of 11 cases passed"), std::string::npos) << r.out;
}

TEST(ConformanceCli, JsonHasTheSameCases) {
  const CliResult r = cli({"plugins", "check", "org.ripplekv.test.conform_allocator", "--plugin-path",
                           kFixtures + "conform_allocator", "--param", "mode=short_by_one", "--json"});
  EXPECT_EQ(r.code, 1) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["id"], "org.ripplekv.test.conform_allocator");
  EXPECT_EQ(j["kind"], "allocator");
  EXPECT_EQ(j["params"], "mode=\"short_by_one\"");
  ASSERT_EQ(j["cases"].size(), kAllocatorCases.size());
  for (size_t i = 0; i < kAllocatorCases.size(); ++i) {
    EXPECT_EQ(j["cases"][i]["case"], kAllocatorCases[i]);
    const bool should_pass = kAllocatorCases[i] != "sums_to_B";
    EXPECT_EQ(j["cases"][i]["passed"], should_pass) << kAllocatorCases[i];
    EXPECT_EQ(j["cases"][i]["result"], should_pass ? "PASS" : "FAIL");
  }
  EXPECT_EQ(j["summary"]["total"], 7);
  EXPECT_EQ(j["summary"]["passed"], 6);
  EXPECT_EQ(j["summary"]["failed"], 1);
  EXPECT_EQ(j["summary"]["ok"], false);

  const CliResult ok = cli({"plugins", "check", "depth", "--json"});
  EXPECT_EQ(ok.code, 0) << ok.out;
  EXPECT_EQ(nlohmann::json::parse(ok.out)["summary"]["ok"], true);
}

TEST(ConformanceCli, UsageAndLoadErrorsExitTwo) {
  EXPECT_EQ(cli({"plugins", "check", "no_such_plugin"}).code, 2);
  EXPECT_EQ(cli({"plugins", "check"}).code, 2);
  EXPECT_EQ(cli({"plugins", "check", "snapkv", "--param", "window"}).code, 2);       // not KEY=VALUE
  EXPECT_EQ(cli({"plugins", "check", "snapkv", "--param", "no_such_key=1"}).code, 2);  // unknown param
  EXPECT_EQ(cli({"plugins", "check", "snapkv", "--param", "window=0"}).code, 2);      // below the spec's minimum
  EXPECT_EQ(cli({"plugins", "list", "--param", "window=3"}).code, 2);              // --param belongs to check
  EXPECT_EQ(cli({"plugins", "check", "snapkv", "--plugin-path", kFixtures + "wrong_abi"}).code, 2);  // a library that fails to load
  const CliResult help = cli({"plugins", "check", "--help"});
  EXPECT_EQ(help.code, 0);
  EXPECT_NE(help.out.find("ripplekv plugins check ID [--param KEY=VALUE]..."), std::string::npos) << help.out;
}

}  // namespace
