// select_positions and protected_positions: priority order, top-k, ties, budgets at and beyond the edges. Expected
// positions are worked out by hand in the comments.
#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "cache/selection.hpp"
#include "core/errors.hpp"

namespace {

using Pos = std::vector<int64_t>;

Pos head(const rkv::Selection& s, int64_t h) { return Pos(s.head_positions(h), s.head_positions(h) + s.kept); }

TEST(ProtectedPositions, PriorityOrderSinksThenMostRecent) {
  EXPECT_EQ(rkv::protected_positions(10, {2, 3}), (Pos{0, 1, 9, 8, 7}));
  EXPECT_EQ(rkv::protected_positions(10, {0, 0}), Pos{});
  // Overlap (sinks 4 + recent 8 > T 10): 0..3, then 9 down to 4; each position once.
  EXPECT_EQ(rkv::protected_positions(10, {4, 8}), (Pos{0, 1, 2, 3, 9, 8, 7, 6, 5, 4}));
  // Clamped to T.
  EXPECT_EQ(rkv::protected_positions(3, {5, 0}), (Pos{0, 1, 2}));
  EXPECT_EQ(rkv::protected_positions(3, {0, 32}), (Pos{2, 1, 0}));
  EXPECT_THROW(rkv::protected_positions(3, {-1, 0}), rkv::InputError);
}

TEST(SelectPositions, ProtectedThenTopScoresSortedPerHead) {
  // T = 8, sinks 1, recent 2 -> protected {0, 7, 6}; b_l 5 leaves 2 top slots among 1..5.
  // head 0 scores 1..5: [.1 .9 .3 .8 .2] -> 2 (.9), 4 (.8)  -> {0, 2, 4, 6, 7}
  // head 1 scores 1..5: [.5 .1 .1 .1 .7] -> 5 (.7), 1 (.5)  -> {0, 1, 5, 6, 7}
  const std::vector<float> s = {100, .1f, .9f, .3f, .8f, .2f, -5, -5,
                                -100, .5f, .1f, .1f, .1f, .7f, -5, -5};
  const rkv::Selection sel = rkv::select_positions(s.data(), 2, 8, 5, {1, 2}, 3);
  EXPECT_FALSE(sel.untouched);
  EXPECT_EQ(sel.kept, 5);
  EXPECT_EQ(head(sel, 0), (Pos{0, 2, 4, 6, 7}));
  EXPECT_EQ(head(sel, 1), (Pos{0, 1, 5, 6, 7}));
  EXPECT_TRUE(sel.warnings.empty());
}

TEST(SelectPositions, TiesGoToTheEarlierPosition) {
  // All unprotected scores equal: the earliest win. T 6, recent 1, b_l 3 -> {0, 1, 5}.
  const std::vector<float> s(6, 0.25f);
  EXPECT_EQ(head(rkv::select_positions(s.data(), 1, 6, 3, {0, 1}, 0), 0), (Pos{0, 1, 5}));
  // Equal top pair at 4 and 2: both in; the tie for the third slot between 1 and 3 (.5) goes to 1.
  const std::vector<float> t = {0, .5f, .9f, .5f, .9f, 0};
  EXPECT_EQ(head(rkv::select_positions(t.data(), 1, 6, 3, {0, 0}, 0), 0), (Pos{1, 2, 4}));
  // Including -0.0 == +0.0: position 0 before 3.
  const std::vector<float> z = {-0.0f, -1, -1, 0.0f, -1};
  EXPECT_EQ(head(rkv::select_positions(z.data(), 1, 5, 1, {0, 0}, 0), 0), (Pos{0}));
}

TEST(SelectPositions, BudgetBelowProtectedCountWarnsAndKeepsPriorityOrder) {
  // sinks 2, recent 3, T 10 -> priority 0, 1, 9, 8, 7; b_l 3 keeps {0, 1, 9} whatever the scores say.
  std::vector<float> s(10, 0.0f);
  s[5] = 1000;
  const rkv::Selection sel = rkv::select_positions(s.data(), 1, 10, 3, {2, 3}, 7);
  EXPECT_EQ(head(sel, 0), (Pos{0, 1, 9}));
  ASSERT_EQ(sel.warnings.size(), 1u);
  EXPECT_NE(sel.warnings[0].find("layer 7"), std::string::npos);
  EXPECT_NE(sel.warnings[0].find("below the scorer's protected count 5"), std::string::npos);
  // b_l equal to the protected count: no warning, exactly the protected set.
  const rkv::Selection eq = rkv::select_positions(s.data(), 1, 10, 5, {2, 3}, 7);
  EXPECT_EQ(head(eq, 0), (Pos{0, 1, 7, 8, 9}));
  EXPECT_TRUE(eq.warnings.empty());
}

TEST(SelectPositions, BudgetAtLeastTLeavesLayerUntouched) {
  for (int64_t b : {10, 11, 1000}) {
    const rkv::Selection sel = rkv::select_positions(nullptr, 3, 10, b, {4, 32}, 0);
    EXPECT_TRUE(sel.untouched);
    EXPECT_EQ(sel.kept, 10);
    EXPECT_TRUE(sel.positions.empty());
    EXPECT_TRUE(sel.warnings.empty());
  }
}

TEST(SelectPositions, RejectsBadInput) {
  const std::vector<float> s = {0, 1, std::numeric_limits<float>::quiet_NaN(), 3};
  EXPECT_THROW(rkv::select_positions(s.data(), 1, 4, 2, {0, 0}, 0), rkv::InputError);  // NaN among candidates
  // The NaN sits on a protected position: its score is never used, so no error.
  EXPECT_NO_THROW(rkv::select_positions(s.data(), 1, 4, 2, {3, 0}, 0));
  EXPECT_THROW(rkv::select_positions(s.data(), 1, 4, 0, {0, 0}, 0), rkv::InputError);  // b_l < 1
  EXPECT_THROW(rkv::select_positions(nullptr, 1, 4, 2, {0, 0}, 0), rkv::InputError);   // scores missing
}

}  // namespace
