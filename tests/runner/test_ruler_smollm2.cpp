// RULER prompts with the real tokenizer and chat template (SmolLM2-135M-Instruct) and the Austen evaluation text
// (runner/task_ruler.hpp): every subtask's prompt reaches its target length in tokens without passing it, holds its
// answers, is the same for the same seed, and splits for query_aware into exactly the unsplit prompt's ids.
#include <gtest/gtest.h>

#include <iostream>

#include "common/assets.hpp"
#include "core/atomic_file.hpp"
#include "model/gguf.hpp"
#include "runner/task_ruler.hpp"
#include "tokenizer/tokenizer.hpp"

namespace {

#define REQUIRE_ASSETS()                                          \
  do {                                                            \
    RKV_REQUIRE_ASSET(rkv_test::smollm2_gguf());                  \
    RKV_REQUIRE_ASSET(rkv_test::austen_dir() / "emma.txt");       \
  } while (0)

rkv::Tokenizer smollm2() { return rkv::Tokenizer::from_gguf(rkv::GgufFile(rkv_test::smollm2_gguf().string())); }

std::string austen() { return rkv::read_file((rkv_test::austen_dir() / "emma.txt").string()); }

// The bisection stops where one more haystack unit would pass the target: the prompt is within one unit (a noise
// sentence is 21 tokens, a distractor needle of niah_multikey_3 with two uuids about 70, an essay word or a listed
// word a few) of the target. Measured at 1024 and 2048: within 3 tokens for the essay and word lists, 73 for
// niah_multikey_3.
constexpr int64_t kSlack = 80;

TEST(RulerPrompts, EverySubtaskFillsItsContextAndHoldsItsAnswers) {
  REQUIRE_ASSETS();
  const rkv::Tokenizer tok = smollm2();
  rkv::RulerConfig cfg;
  cfg.context_tokens = {1024, 2048};
  cfg.examples = 2;
  const std::vector<rkv::RulerPrompt> prompts = rkv::build_ruler_prompts(tok, austen(), cfg, false);
  ASSERT_EQ(prompts.size(), 11u * 2u * 2u);
  for (const auto& p : prompts) {
    SCOPED_TRACE(rkv::ruler_metric(p) + " example " + std::to_string(p.example));
    EXPECT_EQ(p.prompt_tokens, static_cast<int64_t>(p.compressed_part.size()));
    EXPECT_TRUE(p.question_part.empty());
    EXPECT_LE(p.prompt_tokens, p.context_tokens);
    EXPECT_GE(p.prompt_tokens, p.context_tokens - kSlack);
    const std::string text = tok.decode(p.compressed_part, true);
    const size_t assistant = text.rfind("<|im_start|>assistant\n");
    ASSERT_NE(assistant, std::string::npos);
    for (const auto& a : p.answers) EXPECT_NE(text.substr(0, assistant).find(a), std::string::npos) << a;
    EXPECT_EQ(p.max_new_tokens, rkv::find_ruler_subtask(p.subtask)->max_new_tokens);
  }
  std::cout << "[ lengths  ]";
  for (const auto& p : prompts) std::cout << " " << rkv::ruler_metric(p) << ":" << p.prompt_tokens;
  std::cout << "\n";
}

TEST(RulerPrompts, TheSameSeedGivesTheSamePromptsAndQueryAwareSplitsThem) {
  REQUIRE_ASSETS();
  const rkv::Tokenizer tok = smollm2();
  rkv::RulerConfig cfg;
  cfg.examples = 1;
  cfg.max_new_tokens = 20;
  const auto a = rkv::build_ruler_prompts(tok, austen(), cfg, false);
  const auto b = rkv::build_ruler_prompts(tok, austen(), cfg, false);
  const auto q = rkv::build_ruler_prompts(tok, austen(), cfg, true);
  cfg.seed = 43;
  const auto other = rkv::build_ruler_prompts(tok, austen(), cfg, false);
  ASSERT_EQ(a.size(), 11u);
  for (size_t i = 0; i < a.size(); ++i) {
    SCOPED_TRACE(a[i].subtask);
    EXPECT_EQ(a[i].compressed_part, b[i].compressed_part);
    EXPECT_EQ(a[i].answers, b[i].answers);
    EXPECT_NE(a[i].compressed_part, other[i].compressed_part);
    EXPECT_EQ(a[i].max_new_tokens, 20);
    // query_aware: the same tokens, cut where the question starts.
    std::vector<int32_t> joined = q[i].compressed_part;
    joined.insert(joined.end(), q[i].question_part.begin(), q[i].question_part.end());
    EXPECT_EQ(joined, a[i].compressed_part);
    const std::string question = tok.decode(q[i].question_part, true);
    EXPECT_EQ(question.rfind("\n", 0), 0u) << question;
    EXPECT_NE(question.find("<|im_start|>assistant\n"), std::string::npos) << question;
    for (const auto& ans : q[i].answers) EXPECT_EQ(question.find(ans), std::string::npos) << ans;  // not in the question
  }
}

}  // namespace
