// attention_stats against a naive full-matrix computation in double precision on random data: the whole
// [H, T, T] causal softmax is built, then summed over the window queries and over all queries.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "cache/attention_stats.hpp"
#include "core/errors.hpp"

namespace {

struct Naive {
  std::vector<double> window, cumulative;  // [H, T]
};

/// Naive reference: A[h,t,j] = softmax_j<=t(q_{h,t} . k_{h/G,j} / sqrt(d)) in double, then the two column sums.
/// q: [H, T, d] for all T positions; k: [Hkv, T, d] contiguous.
Naive naive_stats(const std::vector<float>& q, const std::vector<float>& k, int64_t H, int64_t Hkv, int64_t T,
                  int64_t d, int64_t w) {
  Naive n;
  n.window.assign(static_cast<size_t>(H * T), 0.0);
  n.cumulative.assign(static_cast<size_t>(H * T), 0.0);
  std::vector<double> A(static_cast<size_t>(H * T * T), 0.0);
  const int64_t G = H / Hkv;
  for (int64_t h = 0; h < H; ++h)
    for (int64_t t = 0; t < T; ++t) {
      std::vector<double> s(static_cast<size_t>(t + 1));
      double m = -1e300;
      for (int64_t j = 0; j <= t; ++j) {
        double dot = 0;
        for (int64_t x = 0; x < d; ++x)
          dot += double(q[static_cast<size_t>((h * T + t) * d + x)]) * double(k[static_cast<size_t>(((h / G) * T + j) * d + x)]);
        s[static_cast<size_t>(j)] = dot / std::sqrt(double(d));
        m = std::max(m, s[static_cast<size_t>(j)]);
      }
      double z = 0;
      for (auto& v : s) z += (v = std::exp(v - m));
      for (int64_t j = 0; j <= t; ++j) A[static_cast<size_t>((h * T + t) * T + j)] = s[static_cast<size_t>(j)] / z;
    }
  for (int64_t h = 0; h < H; ++h)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t j = 0; j <= t; ++j) {
        const double a = A[static_cast<size_t>((h * T + t) * T + j)];
        n.cumulative[static_cast<size_t>(h * T + j)] += a;
        if (t >= T - w) n.window[static_cast<size_t>(h * T + j)] += a;
      }
  return n;
}

std::vector<float> random_vec(size_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

void expect_close(const std::vector<float>& got, const std::vector<double>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 2e-5 * std::max(1.0, std::fabs(want[i]))) << what << " at " << i;
}

struct Shape {
  int64_t H, Hkv, T, d, w, block, stride_extra;
};

class AttentionStatsVsNaive : public ::testing::TestWithParam<Shape> {};

TEST_P(AttentionStatsVsNaive, WindowAndCumulativeMatch) {
  const Shape s = GetParam();
  const auto q = random_vec(static_cast<size_t>(s.H * s.T * s.d), 1, 1.5f);
  const auto k = random_vec(static_cast<size_t>(s.Hkv * s.T * s.d), 2, 1.5f);
  const int64_t w_eff = std::min(s.w, s.T);
  const Naive ref = naive_stats(q, k, s.H, s.Hkv, s.T, s.d, w_eff);

  // Keys stored with spare capacity per head, as a LayerKV holds them.
  const int64_t stride = (s.T + s.stride_extra) * s.d;
  std::vector<float> kstore(static_cast<size_t>(s.Hkv * stride), 7.0f);
  for (int64_t g = 0; g < s.Hkv; ++g)
    std::copy(k.begin() + g * s.T * s.d, k.begin() + (g + 1) * s.T * s.d, kstore.begin() + g * stride);
  const rkv::KeysView kv{kstore.data(), s.Hkv, s.T, s.d, stride};

  rkv::AttentionStatsOptions opt;
  opt.window_attention = true;
  opt.cumulative_attention = true;
  opt.query_counts = true;
  opt.window = s.w;
  opt.query_block = s.block;
  const rkv::AttentionStats st = rkv::compute_attention_stats(rkv::QueriesView{q.data(), s.H, s.T, s.d}, kv, opt);
  EXPECT_EQ(st.window, w_eff);
  expect_close(st.window_attention, ref.window, "window");
  expect_close(st.cumulative_attention, ref.cumulative, "cumulative");
  ASSERT_EQ(st.query_counts.size(), static_cast<size_t>(s.T));
  for (int64_t j = 0; j < s.T; ++j) EXPECT_EQ(st.query_counts[static_cast<size_t>(j)], float(s.T - j));

  // Window only, from just the last w queries (what a forward keeps for SnapKV).
  rkv::AttentionStatsOptions wopt;
  wopt.window_attention = true;
  wopt.window = s.w;
  wopt.query_block = s.block;
  wopt.query_counts = true;
  const float* q_last = q.data();  // rebuild [H, w, d] of the last w positions
  std::vector<float> qw(static_cast<size_t>(s.H * w_eff * s.d));
  for (int64_t h = 0; h < s.H; ++h)
    std::copy(q_last + (h * s.T + s.T - w_eff) * s.d, q_last + (h * s.T + s.T) * s.d, qw.begin() + h * w_eff * s.d);
  const rkv::AttentionStats sw = rkv::compute_attention_stats(rkv::QueriesView{qw.data(), s.H, w_eff, s.d}, kv, wopt);
  expect_close(sw.window_attention, ref.window, "window from last w queries");
  EXPECT_TRUE(sw.cumulative_attention.empty());
  for (int64_t j = 0; j < s.T; ++j) EXPECT_EQ(sw.query_counts[static_cast<size_t>(j)], float(std::min(w_eff, s.T - j)));
  EXPECT_EQ(rkv::window_queries(rkv::QueriesView{q.data(), s.H, s.T, s.d}, s.w), qw);

  // Every query row sums to 1, so the cumulative sums over all keys add up to T per head.
  for (int64_t h = 0; h < s.H; ++h) {
    double sum = 0;
    for (int64_t j = 0; j < s.T; ++j) sum += st.cumulative_attention[static_cast<size_t>(h * s.T + j)];
    EXPECT_NEAR(sum, double(s.T), 1e-4 * s.T);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, AttentionStatsVsNaive,
                         ::testing::Values(Shape{4, 2, 37, 8, 5, 8, 0},     // GQA, T not a multiple of the block
                                           Shape{6, 2, 50, 16, 50, 64, 3},  // window = T, one block, strided keys
                                           Shape{2, 2, 23, 4, 40, 1, 5},    // window > T (clamped), 1-row blocks
                                           Shape{3, 1, 64, 32, 7, 16, 0},   // G = 3, blocks divide T
                                           Shape{1, 1, 1, 4, 1, 64, 0}));   // T = 1

TEST(AttentionStatsAccumulator, FusedRowsEqualComputed) {
  // A forward that adds its own softmax rows gets exactly what compute_attention_stats computes from Q and K.
  const int64_t H = 2, Hkv = 1, T = 19, d = 8, w = 4;
  const auto q = random_vec(static_cast<size_t>(H * T * d), 3, 1.0f);
  const auto k = random_vec(static_cast<size_t>(Hkv * T * d), 4, 1.0f);
  const Naive ref = naive_stats(q, k, H, Hkv, T, d, w);
  rkv::AttentionStatsOptions opt;
  opt.window_attention = opt.cumulative_attention = true;
  opt.window = w;
  rkv::AttentionStatsAccumulator acc(H, T, T, opt);
  // Rows from the naive double softmax, rounded to float, added in blocks of 5 rows (ld = T).
  for (int64_t h = 0; h < H; ++h)
    for (int64_t t0 = 0; t0 < T; t0 += 5) {
      const int64_t rows = std::min<int64_t>(5, T - t0);
      std::vector<float> p(static_cast<size_t>(rows * T), 0.0f);
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t t = t0 + r;
        std::vector<double> s(static_cast<size_t>(t + 1));
        double m = -1e300, z = 0;
        for (int64_t j = 0; j <= t; ++j) {
          double dot = 0;
          for (int64_t x = 0; x < d; ++x) dot += double(q[static_cast<size_t>((h * T + t) * d + x)]) * k[static_cast<size_t>(j * d + x)];
          m = std::max(m, s[static_cast<size_t>(j)] = dot / std::sqrt(double(d)));
        }
        for (auto& v : s) z += (v = std::exp(v - m));
        for (int64_t j = 0; j <= t; ++j) p[static_cast<size_t>(r * T + j)] = float(s[static_cast<size_t>(j)] / z);
      }
      acc.add_rows(h, t0, rows, p.data(), T);
    }
  const rkv::AttentionStats st = acc.finish();
  expect_close(st.window_attention, ref.window, "window");
  expect_close(st.cumulative_attention, ref.cumulative, "cumulative");
  EXPECT_THROW(rkv::AttentionStatsAccumulator(H, T, T, opt).add_rows(2, 0, 1, nullptr, T), rkv::InputError);
  EXPECT_THROW(rkv::AttentionStatsAccumulator(H, T, T, opt).add_rows(0, 15, 5, nullptr, T), rkv::InputError);
}

TEST(AttentionStats, RejectsBadShapes) {
  const std::vector<float> q(3 * 10 * 4, 0.0f), k(2 * 10 * 4, 0.0f);
  rkv::AttentionStatsOptions cum;
  cum.cumulative_attention = true;
  // H = 3 is not a multiple of H_kv = 2.
  EXPECT_THROW(rkv::compute_attention_stats({q.data(), 3, 10, 4}, {k.data(), 2, 10, 4, 40}, cum), rkv::InputError);
  // Cumulative attention needs all T queries.
  EXPECT_THROW(rkv::compute_attention_stats({q.data(), 2, 9, 4}, {k.data(), 2, 10, 4, 40}, cum), rkv::InputError);
  // Head dims differ.
  EXPECT_THROW(rkv::compute_attention_stats({q.data(), 2, 10, 4}, {k.data(), 2, 10, 3, 40}, cum), rkv::InputError);
  // Window larger than the queries given.
  rkv::AttentionStatsOptions win;
  win.window_attention = true;
  win.window = 5;
  EXPECT_THROW(rkv::compute_attention_stats({q.data(), 2, 4, 4}, {k.data(), 2, 10, 4, 40}, win), rkv::InputError);
  win.window = 0;
  EXPECT_THROW(rkv::compute_attention_stats({q.data(), 2, 10, 4}, {k.data(), 2, 10, 4, 40}, win), rkv::InputError);
  // Key head stride below T * d.
  EXPECT_THROW(rkv::compute_attention_stats({q.data(), 2, 10, 4}, {k.data(), 2, 10, 4, 39}, cum), rkv::InputError);
}

TEST(QueryMoments, MeanAndBiasedCovarianceByHand) {
  // H = 1, d = 2, T = 3, skip 1: the queries t = 1, 2 are (1, 2) and (3, 6); mean (2, 4); centred (-1, -2), (1, 2);
  // S = ((1, 2)^T (1, 2) + (1, 2)^T (1, 2)) / 2 = [[1, 2], [2, 4]] (the 1/n of kvpress, not 1/(n - 1)).
  const std::vector<float> q = {100, -50, 1, 2, 3, 6};
  rkv::AttentionStats st;
  rkv::add_query_moments(rkv::QueriesView{q.data(), 1, 3, 2}, 1, st);
  EXPECT_EQ(st.query_mean, (std::vector<float>{2, 4}));
  EXPECT_EQ(st.query_covariance, (std::vector<float>{1, 2, 2, 4}));
  rkv::add_query_moments(rkv::QueriesView{q.data(), 1, 3, 2}, 3, st);  // no query left: both zero
  EXPECT_EQ(st.query_mean, (std::vector<float>{0, 0}));
  EXPECT_EQ(st.query_covariance, (std::vector<float>(4, 0.0f)));
  EXPECT_THROW(rkv::add_query_moments(rkv::QueriesView{q.data(), 1, 3, 2}, -1, st), rkv::InputError);
}

TEST(QueryMoments, UnrotateTurnsEachQueryBackByItsPosition) {
  // d = 2, inv_freq 0.5: the query at t = 2 was turned by 1 rad, (1, 0) -> (cos 1, sin 1); t = 0 is not turned.
  const std::vector<float> q = {0.25f, -4.0f, 0.0f, 0.0f, std::cos(1.0f), std::sin(1.0f)};
  const std::vector<float> q0 = rkv::unrotate_queries(rkv::QueriesView{q.data(), 1, 3, 2}, {0.5});
  EXPECT_FLOAT_EQ(q0[0], 0.25f);
  EXPECT_FLOAT_EQ(q0[1], -4.0f);
  EXPECT_NEAR(q0[4], 1.0f, 1e-6);
  EXPECT_NEAR(q0[5], 0.0f, 1e-6);
  EXPECT_THROW(rkv::unrotate_queries(rkv::QueriesView{q.data(), 1, 3, 2}, {0.5, 0.25}), rkv::InputError);
}

}  // namespace
