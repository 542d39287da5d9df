// Calibration/evaluation windows drawn from tokenized files (runner/tasks/text_windows.hpp), ctest label unit.
#include <gtest/gtest.h>

#include "core/errors.hpp"
#include "runner/tasks/text_windows.hpp"

namespace {

/// A file whose token at index j is base + j, so a window's tokens tell where it came from.
rkv::TokenizedFile file(const std::string& name, int32_t base, int64_t n) {
  rkv::TokenizedFile f{name, {}};
  for (int64_t j = 0; j < n; ++j) f.tokens.push_back(base + static_cast<int32_t>(j));
  return f;
}

TEST(TextWindows, AllSlotsWhenTheFilesHoldExactlyNWindows) {
  // 40 + 20 tokens, windows of 10: the grid phase is 0 (no spare tokens) and n = K = 6 takes every slot in order.
  const std::vector<rkv::TokenizedFile> files = {file("a", 0, 40), file("b", 1000, 20)};
  const auto w = rkv::draw_windows(files, 6, 10, 123);
  ASSERT_EQ(w.size(), 6u);
  const std::vector<std::pair<std::string, int64_t>> expect = {{"a", 0}, {"a", 10}, {"a", 20}, {"a", 30}, {"b", 0}, {"b", 10}};
  for (size_t j = 0; j < 6; ++j) {
    EXPECT_EQ(w[j].file, expect[j].first);
    EXPECT_EQ(w[j].offset, expect[j].second);
    EXPECT_EQ(w[j].tokens.front(), (w[j].file == "a" ? 0 : 1000) + w[j].offset);
  }
}

TEST(TextWindows, DeterministicNonOverlappingAndInsideOneFile) {
  const std::vector<rkv::TokenizedFile> files = {file("a", 0, 1003), file("b", 100000, 517), file("c", 200000, 9)};
  for (uint64_t seed : {0ull, 1ull, 99ull}) {
    const auto w = rkv::draw_windows(files, 7, 64, seed), again = rkv::draw_windows(files, 7, 64, seed);
    ASSERT_EQ(w.size(), 7u);
    for (size_t j = 0; j < w.size(); ++j) {
      EXPECT_EQ(w[j].tokens, again[j].tokens);
      ASSERT_EQ(w[j].tokens.size(), 64u);
      // Consecutive ids of one file: never spans two files.
      for (size_t k = 1; k < 64; ++k) EXPECT_EQ(w[j].tokens[k], w[j].tokens[0] + static_cast<int32_t>(k));
      const int32_t base = w[j].file == "a" ? 0 : w[j].file == "b" ? 100000 : 200000;
      EXPECT_EQ(w[j].tokens[0], base + w[j].offset);
      EXPECT_NE(w[j].file, "c");  // 9 tokens hold no window
      for (size_t k = 0; k < j; ++k)
        if (w[k].file == w[j].file)  // increasing and disjoint within a file
          EXPECT_GE(w[j].offset, w[k].offset + 64) << "seed " << seed;
    }
  }
  auto offsets = [&](uint64_t seed) {
    std::vector<int64_t> o;
    for (const auto& w : rkv::draw_windows(files, 7, 64, seed)) o.push_back(w.offset);
    return o;
  };
  EXPECT_NE(offsets(0), offsets(1));
}

TEST(TextWindows, TooFewTokensIsAClearError) {
  const std::vector<rkv::TokenizedFile> files = {file("short.txt", 0, 100), file("tiny.txt", 0, 30)};
  try {
    rkv::draw_windows(files, 4, 40, 0);  // only 2 windows of 40 fit
    FAIL();
  } catch (const rkv::InputError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("too few tokens for 4 non-overlapping windows of 40 tokens (only 2 fit)"), std::string::npos) << m;
    EXPECT_NE(m.find("'short.txt' has 100 tokens"), std::string::npos) << m;
    EXPECT_NE(m.find("'tiny.txt' has 30 tokens"), std::string::npos) << m;
  }
  EXPECT_THROW(rkv::draw_windows(files, 0, 10, 0), rkv::InputError);
  EXPECT_THROW(rkv::draw_windows(files, 1, 0, 0), rkv::InputError);
  EXPECT_THROW(rkv::draw_windows({}, 1, 10, 0), rkv::InputError);
}

}  // namespace
