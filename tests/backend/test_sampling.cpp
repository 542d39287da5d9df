// Greedy and temperature/top-p sampling.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "runner/decode/sampling.hpp"
#include "core/errors.hpp"

namespace {

using rkv::Sampler;
using rkv::SamplingOptions;

TEST(Sampling, GreedyIsArgmaxLowestIdOnTies) {
  const float l[5] = {0.1f, 2.0f, -1.0f, 2.0f, 1.9f};
  Sampler s(SamplingOptions{});
  EXPECT_EQ(s.sample(l, 5), 1);
  EXPECT_EQ(rkv::argmax(l, 5), 1);
}

// Corrupt weights give NaN logits; greedy decoding and sampling refuse them instead of emitting a token.
TEST(Sampling, NaNLogitsAreRefusedNamingTheId) {
  const float l[4] = {0.5f, 1.0f, NAN, 0.2f};
  try {
    rkv::argmax(l, 4);
    FAIL() << "a NaN logit was ignored";
  } catch (const rkv::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("NaN at vocabulary id 2"), std::string::npos) << e.what();
  }
  const float first[3] = {NAN, 1.0f, 2.0f};
  EXPECT_THROW(rkv::argmax(first, 3), rkv::InputError);
  SamplingOptions o;
  o.temperature = 0.8f;
  Sampler s(o);
  EXPECT_THROW(s.sample(l, 4), rkv::InputError);
  const float inf[3] = {1.0f, INFINITY, 2.0f};
  EXPECT_EQ(rkv::argmax(inf, 3), 1);  // +inf is ordered: the largest
}

TEST(Sampling, TemperatureFollowsSoftmax) {
  // logits {0, ln 3} at T = 1 -> p = {1/4, 3/4}; at T = 0.5 -> logits {0, 2 ln 3} -> p = {1/10, 9/10}.
  const float l[2] = {0.0f, std::log(3.0f)};
  for (auto [temp, p1] : {std::pair{1.0f, 0.75}, std::pair{0.5f, 0.9}}) {
    Sampler s(SamplingOptions{temp, 1.0f, 123});
    int ones = 0;
    const int n = 20000;
    for (int i = 0; i < n; ++i) ones += s.sample(l, 2);
    EXPECT_NEAR(static_cast<double>(ones) / n, p1, 0.015) << "T=" << temp;
  }
}

TEST(Sampling, TopPKeepsTheNucleus) {
  // p = softmax{ln 6, ln 3, ln 1} = {0.6, 0.3, 0.1}; top_p 0.5 keeps {0}; 0.85 keeps {0, 1} (renormalised 2/3, 1/3).
  const float l[3] = {std::log(6.0f), std::log(3.0f), 0.0f};
  Sampler a(SamplingOptions{1.0f, 0.5f, 1});
  for (int i = 0; i < 200; ++i) EXPECT_EQ(a.sample(l, 3), 0);
  Sampler b(SamplingOptions{1.0f, 0.85f, 2});
  int counts[3] = {0, 0, 0};
  for (int i = 0; i < 20000; ++i) ++counts[b.sample(l, 3)];
  EXPECT_EQ(counts[2], 0);
  EXPECT_NEAR(counts[1] / 20000.0, 1.0 / 3.0, 0.015);
}

TEST(Sampling, SameSeedSameSequence) {
  float l[50];
  for (int i = 0; i < 50; ++i) l[i] = std::sin(static_cast<float>(i));
  Sampler a(SamplingOptions{0.8f, 0.9f, 77}), b(SamplingOptions{0.8f, 0.9f, 77}), c(SamplingOptions{0.8f, 0.9f, 78});
  int differ = 0;
  for (int i = 0; i < 100; ++i) {
    const int x = a.sample(l, 50);
    EXPECT_EQ(x, b.sample(l, 50));
    differ += x != c.sample(l, 50);
  }
  EXPECT_GT(differ, 0);
}

TEST(Sampling, RejectsBadOptions) {
  EXPECT_THROW(Sampler(SamplingOptions{1.0f, 0.0f, 0}), rkv::InputError);
  EXPECT_THROW(Sampler(SamplingOptions{1.0f, 1.5f, 0}), rkv::InputError);
  EXPECT_THROW(Sampler(SamplingOptions{NAN, 1.0f, 0}), rkv::InputError);
}

}  // namespace
