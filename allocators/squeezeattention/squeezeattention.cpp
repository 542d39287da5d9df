// SqueezeAttention's layer split: cluster the layers into three groups by their importance (the profile, normally
// `[signal] plugin = "squeezeattention"`), give the least important group a reduced share of the uniform budget and
// the other layers the rest, alike.
//
// Source: Wang et al., "SqueezeAttention" (ICLR 2025); hetailang/SqueezeAttention at a1933d1,
// utils_hh/modify_llama_drop.py (LlamaModel_squeeze.forward): KMeans(n_clusters = 3) over the layers' mean cosines,
// the cluster with the highest centre (attention changes the tokens least) gets `percent` of the prompt per layer,
// every other layer a = (L ini_size - |C3| percent) / (L - |C3|), with ini_size the uniform fraction. Here, with the
// profile s_l (larger = more important: the cluster with the lowest centre is the reduced one), f = B / sum span_l
// the uniform fraction and p = `reduced_share` f (the reference's percent, relative so that a budget sweep keeps the
// split's shape):
//   b_l = p span_l                                         for l in the reduced cluster R
//   b_l = (B - p sum_{k in R} span_k) span_l / sum_{k not in R} span_k   otherwise
// Clusters: the optimal 3-means of the profile values (1-D, exact by dynamic programming over the sorted values; the
// reference's sklearn KMeans is unseeded Lloyd from k-means++, which reaches the same split on well-separated
// profiles); fewer clusters when the profile has fewer distinct values, and every layer alike when it has one.
// The reference truncates each window to an integer (int(a T)); the host integerises (largest remainder).
#include <ripplekv/sdk.hpp>

#include <algorithm>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

namespace {

using rkv::sdk::Param;

/// Cluster index (0 = lowest centre) of each of `v`'s values in the optimal k-means partition of the sorted values
/// into at most `k` contiguous groups (minimum within-cluster sum of squares; among equal costs, the first split found
/// scanning split points upward). Thread rule: pure.
std::vector<int> one_d_kmeans(const std::vector<double>& v, int k) {
  const int64_t n = static_cast<int64_t>(v.size());
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), int64_t{0});
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return v[static_cast<size_t>(a)] < v[static_cast<size_t>(b)]; });
  std::vector<double> sorted(static_cast<size_t>(n)), sum(static_cast<size_t>(n + 1), 0.0), sq(static_cast<size_t>(n + 1), 0.0);
  int distinct = 0;
  for (int64_t i = 0; i < n; ++i) {
    sorted[static_cast<size_t>(i)] = v[static_cast<size_t>(order[static_cast<size_t>(i)])];
    if (i == 0 || sorted[static_cast<size_t>(i)] != sorted[static_cast<size_t>(i - 1)]) ++distinct;
  }
  k = std::max(1, std::min(k, distinct));
  // Prefix sums of (x - x_0): shifting by the first value keeps the sums of squares accurate.
  for (int64_t i = 0; i < n; ++i) {
    const double x = sorted[static_cast<size_t>(i)] - sorted[0];
    sum[static_cast<size_t>(i + 1)] = sum[static_cast<size_t>(i)] + x;
    sq[static_cast<size_t>(i + 1)] = sq[static_cast<size_t>(i)] + x * x;
  }
  auto cost = [&](int64_t a, int64_t b) {  // SSE of sorted[a, b)
    const double s = sum[static_cast<size_t>(b)] - sum[static_cast<size_t>(a)];
    return sq[static_cast<size_t>(b)] - sq[static_cast<size_t>(a)] - s * s / static_cast<double>(b - a);
  };
  const double inf = std::numeric_limits<double>::infinity();
  // best[c][i]: the least cost of the first i values in c + 1 groups; cut[c][i]: where the last group starts.
  std::vector<std::vector<double>> best(static_cast<size_t>(k), std::vector<double>(static_cast<size_t>(n + 1), inf));
  std::vector<std::vector<int64_t>> cut(static_cast<size_t>(k), std::vector<int64_t>(static_cast<size_t>(n + 1), 0));
  for (int64_t i = 1; i <= n; ++i) best[0][static_cast<size_t>(i)] = cost(0, i);
  for (int c = 1; c < k; ++c)
    for (int64_t i = c + 1; i <= n; ++i)
      for (int64_t j = c; j < i; ++j) {
        const double total = best[static_cast<size_t>(c - 1)][static_cast<size_t>(j)] + cost(j, i);
        if (total < best[static_cast<size_t>(c)][static_cast<size_t>(i)]) {
          best[static_cast<size_t>(c)][static_cast<size_t>(i)] = total;
          cut[static_cast<size_t>(c)][static_cast<size_t>(i)] = j;
        }
      }
  std::vector<int> label(static_cast<size_t>(n));
  int64_t end = n;
  for (int c = k - 1; c >= 0; --c) {
    const int64_t start = c > 0 ? cut[static_cast<size_t>(c)][static_cast<size_t>(end)] : 0;
    for (int64_t i = start; i < end; ++i) label[static_cast<size_t>(order[static_cast<size_t>(i)])] = c;
    end = start;
  }
  return label;
}

class SqueezeAllocator final : public rkv::sdk::Allocator {
 public:
  static rkv::sdk::Descriptor describe() {
    return rkv::sdk::Descriptor("org.ripplekv.allocator.squeezeattention", RKV_KIND_ALLOCATOR, "1.0.0",
                                "SqueezeAttention: 3-means of the profile; the least important cluster keeps a reduced "
                                "share, the other layers the rest")
        .param(Param::Float("reduced_share", 0.5,
                            "the least important cluster's budget as a share of the uniform one (the reference's "
                            "percent / ini_size)")
                   .min(0.0)
                   .max(1.0))
        .param(Param::Int("clusters", 3, "k-means clusters of the layers (the reference: 3)").min(2).max(16))
        .flags(RKV_FLAG_NEEDS_PROFILE);
  }
  SqueezeAllocator(const rkv::sdk::Params& p, const rkv::sdk::Host&)
      : share_(p.get_float("reduced_share")), clusters_(static_cast<int>(p.get_int("clusters"))) {}

  void allocate(const rkv::sdk::AllocationRequest& req, double* budgets, rkv::sdk::Diagnostics& diag) override {
    const int64_t L = req.n_layers;
    const double B = static_cast<double>(req.budget_total);
    // k-means is invariant to a positive affine map: cluster (s - min) / (max - min), computed by halves so a profile
    // spanning more than DBL_MAX stays finite.
    const double lo = *std::min_element(req.profile, req.profile + L), hi = *std::max_element(req.profile, req.profile + L);
    std::vector<double> scaled(static_cast<size_t>(L), 0.0);
    for (int64_t l = 0; l < L; ++l)
      if (hi > lo) scaled[static_cast<size_t>(l)] = (req.profile[l] / 2 - lo / 2) / (hi / 2 - lo / 2);
    const std::vector<int> label = one_d_kmeans(scaled, clusters_);
    double span_all = 0.0, span_reduced = 0.0;
    for (int64_t l = 0; l < L; ++l) {
      span_all += static_cast<double>(req.span(l));
      if (label[static_cast<size_t>(l)] == 0) span_reduced += static_cast<double>(req.span(l));
    }
    if (span_reduced == span_all) {  // one distinct profile value: nothing to squeeze
      diag.warning("squeezeattention: every layer has the same importance; every layer keeps the same fraction");
      for (int64_t l = 0; l < L; ++l) budgets[l] = B * static_cast<double>(req.span(l)) / span_all;
      return;
    }
    const double p = share_ * B / span_all, rest = B - p * span_reduced;
    for (int64_t l = 0; l < L; ++l)
      budgets[l] = label[static_cast<size_t>(l)] == 0
                       ? p * static_cast<double>(req.span(l))
                       : rest * static_cast<double>(req.span(l)) / (span_all - span_reduced);
  }

 private:
  double share_;
  int clusters_;
};

}  // namespace

RKV_PLUGIN(SqueezeAllocator)
