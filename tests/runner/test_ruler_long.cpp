// Every RULER subtask at 4K, 8K, 16K and 32K tokens from RULER's own sources (label slow: about a minute of
// tokenizing with SmolLM2's tokenizer on one core): each prompt fits within one haystack unit of its length and holds
// its answers, building them again with the same seed gives the same prompts, and two examples (two seeds) of a
// (subtask, length) differ. tests/runner/test_ruler_reference.cpp checks the sources
// and a few subtasks in the default run.
#include <gtest/gtest.h>

#include "common/assets.hpp"
#include "eval/ruler_assets.hpp"
#include "model/gguf.hpp"
#include "runner/tasks/ruler.hpp"
#include "tokenizer/tokenizer.hpp"

namespace {

// One haystack unit: a noise sentence is 21 tokens, a distractor needle with two uuids about 70, an essay or listed
// word a few, a vt noise sentence 21 (tests/runner/test_ruler_smollm2.cpp). Measured at 4K-32K: at most 73 short.
constexpr int64_t kSlack = 80;

TEST(RulerLongPrompts, EverySubtaskFitsEachLengthFrom4KTo32K) {
  const auto cache = rkv_test::asset_cache_dir();
  RKV_REQUIRE_ASSET(rkv_test::smollm2_gguf());
  RKV_REQUIRE_ASSET(cache / "ruler" / "paul_graham_essays" / "addiction.txt");
  RKV_REQUIRE_ASSET(cache / "ruler" / "wonderwords" / "verblist.txt");
  const rkv::Tokenizer tok = rkv::Tokenizer::from_gguf(rkv::GgufFile(rkv_test::smollm2_gguf().string()));
  rkv::RulerSources src;
  rkv::use_ruler_reference_essay(src, rkv::read_ruler_essays(rkv::ruler_essays_dir(cache.string())).text);
  const rkv::RulerWordLists w = rkv::read_ruler_word_lists(rkv::ruler_wonderwords_dir(cache.string()));
  rkv::use_ruler_wonderwords(src, w.nouns, w.adjectives, w.verbs);
  rkv::RulerConfig cfg;
  cfg.context_tokens = {4096, 8192, 16384, 32768};
  cfg.examples = 2;
  const std::vector<rkv::RulerPrompt> prompts = rkv::build_ruler_prompts(tok, src, cfg, false);
  ASSERT_EQ(prompts.size(), 11u * 4u * 2u);
  for (size_t i = 0; i < prompts.size(); ++i) {
    const rkv::RulerPrompt& p = prompts[i];
    SCOPED_TRACE(rkv::ruler_metric(p) + " example " + std::to_string(p.example));
    EXPECT_LE(p.prompt_tokens, p.context_tokens);
    EXPECT_GE(p.prompt_tokens, p.context_tokens - kSlack);
    const std::string text = tok.decode(p.compressed_part, true);
    const std::string user = text.substr(0, text.rfind("<|im_start|>assistant\n"));
    for (const auto& a : p.answers) EXPECT_NE(user.find(a), std::string::npos) << a;
    if (p.example == 1) EXPECT_NE(p.compressed_part, prompts[i - 1].compressed_part);  // another seed
  }
  const std::vector<rkv::RulerPrompt> again = rkv::build_ruler_prompts(tok, src, cfg, false);
  ASSERT_EQ(again.size(), prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(again[i].compressed_part, prompts[i].compressed_part) << i;
}

}  // namespace
