// The runner's two tables and their halves: the tasks (runner/plan/task_settings.hpp reads their settings,
// runner/tasks/task_table.cpp drives them) and the decode policies (runner/plan/decode_spec.hpp holds their traits,
// runner/decode/policy.cpp their sessions). Each pair must list the same names in the same order, and the traits
// hold what docs/ARCHITECTURE.md "Decode policies" and "Tasks" say of each entry.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/errors.hpp"
#include "runner/decode/policy.hpp"
#include "runner/plan/config.hpp"
#include "runner/plan/decode_spec.hpp"
#include "runner/plan/task_settings.hpp"
#include "runner/tasks/task.hpp"

namespace {

TEST(TaskTable, TheDriversAreTheTasksThePlanReadsInTheSameOrder) {
  std::vector<std::string> drivers;
  for (const rkv::Task* t : rkv::task_table()) drivers.push_back(t->name());
  EXPECT_EQ(drivers, rkv::task_names());
  EXPECT_EQ(drivers, (std::vector<std::string>{"lm_fidelity", "needle", "ruler", "multi_question", "longbench"}));
  for (const std::string& name : drivers) {
    ASSERT_NE(rkv::find_task(name), nullptr) << name;
    EXPECT_EQ(rkv::find_task(name)->name(), name);
  }
  EXPECT_EQ(rkv::find_task("needles"), nullptr);
}

TEST(TaskTable, OnlyLmFidelityComparesWithTheFullCacheByConstruction) {
  for (const rkv::Task* t : rkv::task_table())
    EXPECT_EQ(t->report_full_cache_column(), t->name() != "lm_fidelity") << t->name();
}

TEST(TaskTable, ManifestSettingsComeFromThePlan) {
  rkv::RunPlan plan;
  plan.eval.prefix_tokens = 300;
  plan.continuation_tokens = 20;
  plan.query_aware = true;
  plan.multi_question.questions = 3;
  plan.ruler.haystack = rkv::RulerHaystackSource::EvalText;  // RULER's own sources would be read from the asset cache
  plan.ruler.word_pool = rkv::RulerWordSource::EvalText;
  const nlohmann::json lm = rkv::find_task("lm_fidelity")->manifest_settings(plan);
  EXPECT_EQ(lm, nlohmann::json({{"prefix_tokens", 300}, {"continuation_tokens", 20}, {"continuation", "teacher-forced"}}));
  const nlohmann::json needle = rkv::find_task("needle")->manifest_settings(plan);
  EXPECT_EQ(needle.at("max_new_tokens"), 16);
  EXPECT_EQ(needle.at("answer_prefix"), "The pass key is");
  EXPECT_EQ(needle.at("query_aware"), true);
  EXPECT_EQ(rkv::find_task("multi_question")->manifest_settings(plan).at("questions"), 3);
  EXPECT_EQ(rkv::find_task("ruler")->manifest_settings(plan).at("max_new_tokens"), "per subtask (RULER)");
  EXPECT_EQ(rkv::find_task("ruler")->manifest_settings(plan).at("sources").at("haystack").at("source"), "eval_text");
}

TEST(TaskTable, EachTaskChecksItsOwnLengthsAgainstTheContext) {
  rkv::RunPlan plan;
  plan.config_path = "c.toml";
  plan.eval.prefix_tokens = 250;
  plan.continuation_tokens = 10;
  EXPECT_NO_THROW(rkv::find_task("lm_fidelity")->check_fits_context(plan, 260));
  try {
    rkv::find_task("lm_fidelity")->check_fits_context(plan, 259);
    FAIL() << "250 + 10 tokens fit a context of 259";
  } catch (const rkv::InputError& e) {
    EXPECT_STREQ(e.what(), "c.toml: data.eval.prefix_tokens + tasks.lm_fidelity.continuation_tokens = 260 tokens is "
                           "longer than the model's context length 259; lower it");
  }
  plan.ruler.subtasks = {"vt"};  // RULER generates up to 30 tokens for variable tracking
  plan.ruler.context_tokens = {230};
  EXPECT_NO_THROW(rkv::find_task("ruler")->check_fits_context(plan, 260));
  EXPECT_THROW(rkv::find_task("ruler")->check_fits_context(plan, 259), rkv::InputError);
  // With the answer inside the length (RULER's max_seq_length), 230 tokens fit a context of 230.
  plan.ruler.length_includes_answer = true;
  EXPECT_NO_THROW(rkv::find_task("ruler")->check_fits_context(plan, 230));
  EXPECT_THROW(rkv::find_task("ruler")->check_fits_context(plan, 229), rkv::InputError);
  EXPECT_NO_THROW(rkv::find_task("longbench")->check_fits_context(plan, 1));  // it truncates its prompts
}

// A RULER length that includes the answer must leave room for a prompt: known from the config alone (validate).
TEST(TaskTable, RulerRefusesALengthTheAnswerFillsBeforeAnyModelIsLoaded) {
  rkv::RunPlan plan;
  plan.config_path = "c.toml";
  plan.tasks = {"ruler"};
  plan.ruler.subtasks = {"niah_single_1", "vt"};  // RULER: niah answers with up to 128 tokens, vt with 30
  plan.ruler.context_tokens = {4096, 128};
  EXPECT_NO_THROW(rkv::check_task_plans(plan));  // the answer comes after the 128 tokens
  plan.ruler.length_includes_answer = true;
  try {
    rkv::check_task_plans(plan);
    FAIL() << "a 128-token length holds a 128-token answer and no prompt";
  } catch (const rkv::InputError& e) {
    EXPECT_STREQ(e.what(), "c.toml: tasks.ruler.context_tokens = 128 with length_includes_answer = true leaves no "
                           "room for the prompt: subtask niah_single_1 answers with up to 128 tokens (RULER's own "
                           "max_new_tokens), which the context length includes");
  }
  plan.ruler.context_tokens = {129};
  EXPECT_NO_THROW(rkv::check_task_plans(plan));  // one prompt token beside the answer
  plan.ruler.max_new_tokens = 200;                 // the config's own answer length, for every subtask
  EXPECT_THROW(rkv::check_task_plans(plan), rkv::InputError);
}

TEST(DecodePolicyTable, TheSessionsAreThePoliciesThePlanReadsInTheSameOrder) {
  EXPECT_EQ(rkv::decode_policy_session_names(), rkv::decode_policy_names());
  EXPECT_EQ(rkv::decode_policy_names(), (std::vector<std::string>{"none", "rolling", "h2o", "periodic"}));
}

// Messages list the policies from the table, so a new row shows up in them without editing a string.
TEST(DecodePolicyTable, MessagesListThePoliciesFromTheTable) {
  EXPECT_EQ(rkv::quoted_decode_policies(), "\"none\", \"rolling\", \"h2o\" or \"periodic\"");
  EXPECT_EQ(rkv::quoted_decode_policies([](const rkv::DecodePolicyTraits& t) { return !t.per_entry_state; }),
            "\"none\" or \"rolling\"");
  EXPECT_EQ(rkv::quoted_decode_policies([](const rkv::DecodePolicyTraits& t) { return t.rescores; }),
            "\"periodic\"");
  rkv::DecodeSpec bad;
  bad.policy = "rollin";
  try {
    (void)bad.traits();
    ADD_FAILURE() << "an unknown policy has no traits";
  } catch (const rkv::InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              "compression.decode.policy must be \"none\", \"rolling\", \"h2o\" or \"periodic\" (got \"rollin\")");
  }
}

TEST(DecodePolicyTable, TraitsAsTheArchitectureStatesThem) {
  struct Expected {
    std::string name;
    bool evicts, per_entry_state, rescores, accumulates_attention;
  };
  const std::vector<Expected> expected = {{"none", false, false, false, false},
                                          {"rolling", true, false, false, false},
                                          {"h2o", true, true, false, true},
                                          {"periodic", true, true, true, false}};
  ASSERT_EQ(rkv::decode_policies().size(), expected.size());
  for (const Expected& e : expected) {
    const rkv::DecodePolicyTraits* t = rkv::find_decode_policy(e.name);
    ASSERT_NE(t, nullptr) << e.name;
    EXPECT_EQ(t->evicts, e.evicts) << e.name;
    EXPECT_EQ(t->per_entry_state, e.per_entry_state) << e.name;
    EXPECT_EQ(t->rescores, e.rescores) << e.name;
    EXPECT_EQ(t->accumulates_attention, e.accumulates_attention) << e.name;
  }
  EXPECT_EQ(rkv::find_decode_policy("streaming"), nullptr);
  rkv::DecodeSpec spec;
  spec.policy = "streaming";
  EXPECT_THROW(spec.traits(), rkv::InputError);
}

TEST(DecodePolicyTable, DescriptionsNameTheParametersEachPolicyReads) {
  rkv::DecodeSpec s;
  s.sinks = 2, s.recent = 8, s.interval = 4, s.target = 0;
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"none", "none"}, {"rolling", "rolling(sinks=2)"}, {"h2o", "h2o(recent=8)"},
      {"periodic", "periodic(interval=4,target=budget)"}};
  for (const auto& [policy, text] : expected) {
    s.policy = policy;
    EXPECT_EQ(s.describe(), text);
  }
  s.policy = "h2o", s.recent = -1;
  EXPECT_EQ(s.describe(), "h2o(recent=half)");
}

TEST(DecodePolicyTable, CaptureFollowsTheTraitsAndTheScorer) {
  rkv::ScorerRequirements reads_cumulative;
  reads_cumulative.decode_scoring = true;
  reads_cumulative.decode_stats = RKV_STAT_CUMULATIVE_ATTENTION;
  rkv::ScorerRequirements reads_window = reads_cumulative;
  reads_window.decode_stats = RKV_STAT_WINDOW_ATTENTION;
  rkv::DecodeSpec spec;
  for (const std::string& p : {"none", "rolling"}) {
    spec.policy = p;
    EXPECT_FALSE(rkv::decode_needs_prompt_cumulative(spec, reads_cumulative)) << p;
  }
  spec.policy = "h2o";
  EXPECT_TRUE(rkv::decode_needs_prompt_cumulative(spec, reads_window));
  spec.policy = "periodic";
  EXPECT_TRUE(rkv::decode_needs_prompt_cumulative(spec, reads_cumulative));
  EXPECT_FALSE(rkv::decode_needs_prompt_cumulative(spec, reads_window));
}

}  // namespace
