// Budget semantics (docs/ARCHITECTURE.md "Budget semantics"): B from a fraction or a token count, and the host's integerization (water-filling at
// T, largest remainder, ties to the lower layer index). Expected values worked out by hand in the comments.
#include <gtest/gtest.h>

#include <numeric>

#include "cache/budget.hpp"
#include "core/errors.hpp"

namespace {

using V = std::vector<int64_t>;

TEST(Budget, TotalFromFraction) {
  EXPECT_EQ(rkv::budget_total_from_fraction(0.1, 1000, 30), 3000);  // 0.1 * 1000 * 30 = 3000
  EXPECT_EQ(rkv::budget_total_from_fraction(0.25, 10, 3), 8);      // 7.5 + 0.5 = 8.0 -> 8
  EXPECT_EQ(rkv::budget_total_from_fraction(0.2, 7, 3), 4);        // 4.2 + 0.5 -> floor 4
  EXPECT_EQ(rkv::budget_total_from_fraction(1.0, 7, 3), 21);
  EXPECT_THROW(rkv::budget_total_from_fraction(0.0, 10, 3), rkv::InputError);
  EXPECT_THROW(rkv::budget_total_from_fraction(1.5, 10, 3), rkv::InputError);
  // T |A| beyond 2^53 is refused rather than overflowing int64 (4e18 x 3 would wrap to a negative B)
  EXPECT_THROW(rkv::budget_total_from_fraction(0.5, 4000000000000000000LL, 3), rkv::InputError);
  EXPECT_THROW(rkv::budget_total_from_tokens(10, int64_t{1} << 52, 3), rkv::InputError);
  EXPECT_EQ(rkv::budget_total_from_tokens(10, int64_t{1} << 52, 2), 20);  // exactly 2^53 positions is fine
}

TEST(Budget, TotalFromTokens) {
  EXPECT_EQ(rkv::budget_total_from_tokens(128, 1000, 30), 128 * 30);
  EXPECT_EQ(rkv::budget_total_from_tokens(2048, 1000, 30), 1000 * 30);  // prompt shorter than the budget
  EXPECT_THROW(rkv::budget_total_from_tokens(0, 1000, 30), rkv::InputError);
}

TEST(Budget, LargestRemainderTiesToLowerLayer) {
  // x = [1, 1, 1], B = 10: 10/3 each = 3.333..; floors 3+3+3 = 9, one more to the lowest index.
  EXPECT_EQ(rkv::integerize_budgets({1, 1, 1}, 10, 100), (V{4, 3, 3}));
  // B = 11: two more, layers 0 and 1.
  EXPECT_EQ(rkv::integerize_budgets({1, 1, 1}, 11, 100), (V{4, 4, 3}));
  // x = [1, 2, 3], B = 10: 10/6 * x = 1.667, 3.333, 5.0; floors 1,3,5 = 9; largest fraction .667 -> layer 0.
  EXPECT_EQ(rkv::integerize_budgets({1, 2, 3}, 10, 100), (V{2, 3, 5}));
}

TEST(Budget, WaterFillingCapsAtTAndGivesTheExcessToOthersInProportion) {
  // x = [1, 1, 8], T = 10, B = 15: layer 2 capped at 10 (lambda >= 1.25), 2 lambda + 10 = 15 -> lambda = 2.5,
  // y = [2.5, 2.5, 10]; floors 2,2,10 = 14; tie .5/.5 -> the lower index: [3, 2, 10].
  EXPECT_EQ(rkv::integerize_budgets({1, 1, 8}, 15, 10), (V{3, 2, 10}));
  // x = [1, 3, 12], T = 10, B = 20: cap layer 2; 4 lambda + 10 = 20 -> lambda = 2.5 -> [2.5, 7.5, 10] -> [3, 7, 10].
  EXPECT_EQ(rkv::integerize_budgets({1, 3, 12}, 20, 10), (V{3, 7, 10}));
}

TEST(Budget, EveryLayerKeepsAtLeastOnePosition) {
  // x = [0, 1, 1], B = 9: layer 0 is clamped up to 1, 2 lambda + 1 = 9 -> lambda = 4 -> [1, 4, 4].
  EXPECT_EQ(rkv::integerize_budgets({0, 1, 1}, 9, 100), (V{1, 4, 4}));
}

TEST(Budget, ZeroLayersTakeTheRestWhenTheOthersAreAllCapped) {
  // x = [0, 1, 0], T = 10, B = 20: layer 1 reaches T = 10 at most; the other 10 go evenly to the zero layers.
  EXPECT_EQ(rkv::integerize_budgets({0, 1, 0}, 20, 10), (V{5, 10, 5}));
}

TEST(Budget, BelowOnePositionPerLayerIsAnErrorThatSaysWhy) {
  try {
    rkv::integerize_budgets({1, 1, 1}, 2, 10);
    FAIL();
  } catch (const rkv::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("B = 2 is below the number of compressible layers |A| = 3"), std::string::npos);
  }
}

TEST(Budget, SumIsExactlyBOnIrregularInputs) {
  const std::vector<double> x = {0.3, 7.1, 2.2, 9.9, 0.0, 4.4, 1e-9, 3.3};
  for (int64_t B : {8, 9, 17, 33, 100, 157, 200, 399, 400}) {
    const V b = rkv::integerize_budgets(x, B, 50);
    EXPECT_EQ(std::accumulate(b.begin(), b.end(), int64_t{0}), B) << "B = " << B;
    for (int64_t v : b) EXPECT_TRUE(v >= 1 && v <= 50);
  }
}

// Layers with different spans (Gemma 3: sliding layers hold at most their window). Worked by hand.
TEST(BudgetSpans, TotalIsTheFractionOfTheSumOfSpans) {
  // spans [512, 512, 1024]: sum 2048; f = 0.25 -> 512; f = 0.75 -> 1536.
  EXPECT_EQ(rkv::budget_total_from_fraction(0.25, V{512, 512, 1024}), 512);
  EXPECT_EQ(rkv::budget_total_from_fraction(0.75, V{512, 512, 1024}), 1536);
  // Gemma 3 270M at T = 2048: 15 sliding layers of 512 and 3 global of 2048 -> 13,824; f = 0.25 -> 3,456.
  V gemma(18, 512);
  for (int64_t l : {5, 11, 17}) gemma[static_cast<size_t>(l)] = 2048;
  EXPECT_EQ(rkv::budget_total_from_fraction(0.25, gemma), 3456);
  // Equal spans reproduce the f T |A| rule.
  EXPECT_EQ(rkv::budget_total_from_fraction(0.3, V{100, 100, 100}), rkv::budget_total_from_fraction(0.3, 100, 3));
  // Tokens: min(600, span) per layer = 512 + 512 + 600.
  EXPECT_EQ(rkv::budget_total_from_tokens(600, V{512, 512, 1024}), 1624);
  EXPECT_THROW(rkv::budget_total_from_fraction(0.5, V{}), rkv::InputError);
  EXPECT_THROW(rkv::budget_total_from_fraction(0.5, V{512, 0}), rkv::InputError);
  EXPECT_THROW(rkv::budget_total_from_tokens(0, V{512}), rkv::InputError);
}

TEST(BudgetSpans, UniformShareOfSpansKeepsTheSameFractionOfEveryLayer) {
  // x proportional to the spans, B = 512: lambda = 0.25, b = [128, 128, 256].
  EXPECT_EQ(rkv::integerize_budgets({512, 512, 1024}, 512, V{512, 512, 1024}), (V{128, 128, 256}));
  // Equal x, B = 512: 170.67 each, none capped; remainders .67 x 3 -> floors 170, +1 to layers 0 and 1.
  EXPECT_EQ(rkv::integerize_budgets({1, 1, 1}, 512, V{512, 512, 1024}), (V{171, 171, 170}));
}

TEST(BudgetSpans, WaterFillingCapsEachLayerAtItsOwnSpan) {
  // B = 1536, x = [0.5, 0.4, 0.1]: the proportional split [768, 614.4, 153.6] exceeds both sliding caps (512), so
  // both sit at 512 and the global layer takes the remaining 512.
  EXPECT_EQ(rkv::integerize_budgets({0.5, 0.4, 0.1}, 1536, V{512, 512, 1024}), (V{512, 512, 512}));
  // B = 1200, x = [0.6, 0.2, 0.2]: 720 > 512 caps layer 0; the other 688 split 1:1 -> [512, 344, 344].
  EXPECT_EQ(rkv::integerize_budgets({0.6, 0.2, 0.2}, 1200, V{512, 512, 1024}), (V{512, 344, 344}));
  // Above the sum of spans there is nothing to give.
  EXPECT_THROW(rkv::integerize_budgets({1, 1, 1}, 2049, V{512, 512, 1024}), rkv::InputError);
  EXPECT_THROW(rkv::integerize_capped({1, 1}, 10, 1, V{5}), rkv::InputError);
}

}  // namespace
