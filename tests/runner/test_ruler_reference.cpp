// RULER prompts from RULER's own sources (the Paul Graham essays and wonderwords' lists that scripts/fetch-assets
// puts in the asset cache; eval/ruler_assets.hpp) at 4K to 32K tokens with the real SmolLM2 tokenizer and chat
// template (runner/tasks/ruler.hpp), and with Gemma 3 270M's tokenizer, which has no chat template (RULER's base
// template). Only the generator runs at these lengths (SmolLM2's context is 8K): no model is loaded. The expected
// counts and hashes were worked out with Python on the extracted files (noted beside each); the essay and word checks
// read the files with the test's own code, not eval/ruler_assets. tests/runner/test_ruler_long.cpp (label slow) runs
// every subtask at every length.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>

#include "common/assets.hpp"
#include "eval/ruler_assets.hpp"
#include "model/gguf.hpp"
#include "runner/tasks/ruler.hpp"
#include "tokenizer/tokenizer.hpp"

namespace {

namespace fs = std::filesystem;
using Words = std::vector<std::string>;

fs::path essays_dir() { return rkv_test::asset_cache_dir() / "ruler" / "paul_graham_essays"; }
fs::path words_dir() { return rkv_test::asset_cache_dir() / "ruler" / "wonderwords"; }

#define REQUIRE_RULER_ASSETS()                                    \
  do {                                                            \
    RKV_REQUIRE_ASSET(rkv_test::smollm2_gguf());                  \
    RKV_REQUIRE_ASSET(essays_dir() / "addiction.txt");            \
    RKV_REQUIRE_ASSET(words_dir() / "verblist.txt");              \
  } while (0)

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

/// The essays' text, read by the test: every .txt file in name order, concatenated.
std::string essays_text() {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(essays_dir()))
    if (e.path().extension() == ".txt") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  std::string text;
  for (const auto& f : files) text += slurp(f);
  return text;
}

/// The lines of a word list without trailing spaces, read by the test.
std::set<std::string> word_set(const std::string& list) {
  std::set<std::string> words;
  std::istringstream in(slurp(words_dir() / (list + ".txt")));
  for (std::string line; std::getline(in, line);) {
    while (!line.empty() && line.back() == ' ') line.pop_back();
    words.insert(line);
  }
  return words;
}

rkv::RulerSources reference_sources() {
  rkv::RulerSources src;
  rkv::use_ruler_reference_essay(src, rkv::read_ruler_essays(essays_dir().string()).text);
  const rkv::RulerWordLists w = rkv::read_ruler_word_lists(words_dir().string());
  rkv::use_ruler_wonderwords(src, w.nouns, w.adjectives, w.verbs);
  return src;
}

rkv::Tokenizer smollm2() { return rkv::Tokenizer::from_gguf(rkv::GgufFile(rkv_test::smollm2_gguf().string())); }

/// Non-overlapping occurrences of `what` in `text`.
int64_t count_of(const std::string& text, const std::string& what) {
  int64_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

/// The keys of the needles "One of the special magic <values> for <key> is: <value>." in `text`.
Words needle_keys(const std::string& text) {
  Words keys;
  for (size_t at = text.find("One of the special magic "); at != std::string::npos;
       at = text.find("One of the special magic ", at + 1)) {
    const size_t k = text.find(" for ", at) + 5;
    keys.push_back(text.substr(k, text.find(" is: ", k) - k));
  }
  return keys;
}

// The bisection stops where one more haystack unit would pass the target, so a prompt is within one unit of it: an
// essay word is 1 to 3 tokens, a cwe word at >= 4096 tokens is three list entries ("123. word") of about 5 tokens.
// RULER's own fit has the same granularity (it bisects over the same units). Measured with SmolLM2 at 4K-32K: 0 to 1
// tokens short for niah_multikey_1, 0 to 6 for cwe.
constexpr int64_t kTolerance = 16;

TEST(RulerReferenceSources, TheAssetsAreRulersEssaysAndWordLists) {
  REQUIRE_RULER_ASSETS();
  const rkv::RulerEssayTexts e = rkv::read_ruler_essays(essays_dir().string());
  ASSERT_EQ(e.files.size(), 49u);  // the 49 essays RULER downloads from gkamradt/LLMTest_NeedleInAHaystack
  EXPECT_EQ(e.files.front(), "addiction.txt");
  EXPECT_EQ(e.files.back(), "worked.txt");
  // The pin of scripts/fetch-assets: sha256 of the files' text in name order (644,051 bytes, 643,830 characters).
  EXPECT_EQ(e.sha256, "b3a70ebc054f2eab5057baf3c4b7e857711472be8086240a516fd29b648ad857");
  EXPECT_EQ(e.text.size(), 644051u);
  const rkv::RulerSources src = reference_sources();
  // Python: len(re.sub(r"\s+", " ", text).split(" ")) = 111,877 (4 no-break spaces split words too).
  EXPECT_EQ(src.essay_words.size(), 111877u);
  EXPECT_EQ(Words(src.essay_words.begin(), src.essay_words.begin() + 3), (Words{"July", "2010What", "hard"}));
  EXPECT_TRUE(src.essay_from_start);
  // wc -l: 6,782 nouns, 912 adjectives, 1,042 verbs; Python: len(set(nouns + adjs + verbs)) = 8,166, "ATM" first.
  EXPECT_EQ(src.key_nouns.size(), 6782u);
  EXPECT_EQ(src.key_adjectives.size(), 912u);
  EXPECT_EQ(src.vocabulary.size(), 8166u);
  EXPECT_EQ(src.vocabulary.front(), "ATM");
  EXPECT_EQ(src.vocabulary.back(), "zucchini");
}

TEST(RulerReferencePrompts, From4KTo32KTheyFillTheLengthWithRulersTextAndHoldTheAnswers) {
  REQUIRE_RULER_ASSETS();
  const rkv::Tokenizer tok = smollm2();
  const rkv::RulerSources src = reference_sources();
  const std::set<std::string> adjectives = word_set("adjectivelist"), nouns = word_set("nounlist");
  std::set<std::string> pool = nouns;
  pool.insert(adjectives.begin(), adjectives.end());
  for (const std::string& w : word_set("verblist")) pool.insert(w);
  // The essay as the test reads it: words at ASCII whitespace (the first no-break space is after word 2,424).
  Words essay;
  {
    std::istringstream in(essays_text());
    for (std::string w; essay.size() < 2000 && in >> w;) essay.push_back(w);
  }
  rkv::RulerConfig cfg;
  cfg.subtasks = {"niah_multikey_1", "cwe"};
  cfg.context_tokens = {4096, 8192, 16384, 32768};
  cfg.examples = 1;
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<rkv::RulerPrompt> prompts = rkv::build_ruler_prompts(tok, src, cfg, false);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(prompts.size(), 8u);
  for (const auto& p : prompts) {
    SCOPED_TRACE(rkv::ruler_metric(p));
    EXPECT_LE(p.prompt_tokens, p.context_tokens);
    EXPECT_GE(p.prompt_tokens, p.context_tokens - kTolerance);
    const std::string text = tok.decode(p.compressed_part, true);
    const size_t assistant = text.rfind("<|im_start|>assistant\n");
    ASSERT_NE(assistant, std::string::npos);
    const std::string user = text.substr(0, assistant);
    for (const auto& a : p.answers) EXPECT_NE(user.find(a), std::string::npos) << a;
    if (p.subtask == "cwe") {
      ASSERT_EQ(p.answers.size(), 10u);
      for (const auto& a : p.answers) EXPECT_EQ(pool.count(a), 1u) << a;  // wonderwords' nouns, adjectives, verbs
      continue;
    }
    // Every needle's key is an adjective and a noun of wonderwords' lists (niah_multikey_1: 4 keys, 1 asked).
    const Words keys = needle_keys(user);
    EXPECT_EQ(keys.size(), 4u);  // 4 keys, 1 asked
    for (const std::string& key : keys) {
      bool split = false;  // an adjective may hold a hyphen itself ("high-pitched"): try every cut
      for (size_t d = key.find('-'); d != std::string::npos && !split; d = key.find('-', d + 1))
        split = adjectives.count(key.substr(0, d)) && nouns.count(key.substr(d + 1));
      EXPECT_TRUE(split) << key;
    }
    // The haystack is the essays from their first word: without the needles, its first 2,000 words are theirs.
    std::string context = user.substr(user.find("afterwards.\n") + 12);
    for (size_t at; (at = context.find("One of the special magic ")) != std::string::npos;)
      context.erase(at, context.find('.', context.find(" is: ", at)) + 1 - at);
    std::istringstream in(context);
    Words words;
    for (std::string w; words.size() < essay.size() && in >> w;) words.push_back(w);
    EXPECT_EQ(words, essay);
  }
  std::cout << "[ lengths  ]";
  for (const auto& p : prompts) std::cout << " " << rkv::ruler_metric(p) << ":" << p.prompt_tokens;
  std::cout << "\n[ time     ] 2 subtasks x 4 lengths: " << seconds << " s\n";
  // The same seed gives the same prompt at 32K; another seed another (other words, other common ones).
  // (test_ruler_long, label slow, checks this for every subtask and length.)
  cfg.subtasks = {"cwe"};
  cfg.context_tokens = {32768};
  const auto again = rkv::build_ruler_prompts(tok, src, cfg, false);
  EXPECT_EQ(again[0].compressed_part, prompts[7].compressed_part);
  cfg.seed = 43;
  const auto other = rkv::build_ruler_prompts(tok, src, cfg, false);
  EXPECT_NE(other[0].compressed_part, prompts[7].compressed_part);
  EXPECT_NE(other[0].answers, prompts[7].answers);
}

// Gemma 3 270M (32K context) has no chat template: RULER's base template, BOS + text + " " + answer prefix. With
// length_includes_answer the prompt leaves room for niah's 128 new tokens, so 32768 fits the model's context.
TEST(RulerReferencePrompts, WithoutAChatTemplateThePromptIsRulersBaseTemplate) {
  REQUIRE_RULER_ASSETS();
  const fs::path gemma = rkv_test::asset_cache_dir() / "models" / "gemma-3-270m-q4_k_m.gguf";
  RKV_REQUIRE_ASSET(gemma);
  const rkv::Tokenizer tok = rkv::Tokenizer::from_gguf(rkv::GgufFile(gemma.string()));
  ASSERT_TRUE(tok.chat_template().empty());
  rkv::RulerConfig cfg;
  cfg.subtasks = {"niah_single_2"};
  cfg.context_tokens = {4096};
  cfg.examples = 1;
  cfg.length_includes_answer = true;
  const auto p = rkv::build_ruler_prompts(tok, reference_sources(), cfg, false);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_LE(p[0].prompt_tokens, 4096 - 128);
  EXPECT_GE(p[0].prompt_tokens, 4096 - 128 - kTolerance);
  EXPECT_EQ(p[0].compressed_part.front(), tok.bos());
  const std::string text = tok.decode(p[0].compressed_part, true);
  EXPECT_EQ(text.rfind("<bos>A special magic number is hidden within the following text.", 0), 0u) << text.substr(0, 80);
  // The question, one space, the answer prefix (RULER's " The special magic ..."), and nothing after it.
  EXPECT_NE(text.find(" mentioned in the provided text? The special magic number for "), std::string::npos);
  const std::string end = " mentioned in the provided text is";
  EXPECT_EQ(text.substr(text.size() - end.size()), end);
}

}  // namespace
