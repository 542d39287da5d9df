#include "cache/attention_stats.hpp"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "core/errors.hpp"
#include "model/rope.hpp"

namespace rkv {

namespace {

std::string str(int64_t v) { return std::to_string(v); }

/// In place: row[0..n) <- softmax(row[0..n)), max-subtracted, fp32.
void softmax_row(float* row, int64_t n) {
  float m = row[0];
  for (int64_t j = 1; j < n; ++j) m = std::max(m, row[j]);
  float sum = 0.0f;
  for (int64_t j = 0; j < n; ++j) {
    row[j] = std::exp(row[j] - m);
    sum += row[j];
  }
  const float inv = 1.0f / sum;
  for (int64_t j = 0; j < n; ++j) row[j] *= inv;
}

}  // namespace

AttentionStatsAccumulator::AttentionStatsAccumulator(int64_t n_heads, int64_t prefix_tokens, int64_t n_queries,
                                                     const AttentionStatsOptions& options)
    : window_(options.window_attention), cumulative_(options.cumulative_attention) {
  if (prefix_tokens < 1) throw InputError("attention statistics: prefix length T must be >= 1, got " + str(prefix_tokens));
  if (n_heads < 1) throw InputError("attention statistics: n_heads must be >= 1, got " + str(n_heads));
  if (n_queries < 1 || n_queries > prefix_tokens)
    throw InputError("attention statistics: n_queries must be in [1, T = " + str(prefix_tokens) + "], got " +
                     str(n_queries));
  if (window_ && options.window < 1)
    throw InputError("attention statistics: window attention needs a window >= 1, got " + str(options.window));
  const int64_t T = prefix_tokens;
  stats_.n_heads = n_heads;
  stats_.prefix_tokens = T;
  stats_.window = window_ ? std::min(options.window, T) : 0;
  const size_t ht = static_cast<size_t>(n_heads * T);
  if (window_) stats_.window_attention.assign(ht, 0.0f);
  if (cumulative_) stats_.cumulative_attention.assign(ht, 0.0f);
  if (options.query_counts) {
    // Queries T - n_queries .. T - 1; those with t >= j number min(n_queries, T - j).
    stats_.query_counts.resize(static_cast<size_t>(T));
    for (int64_t j = 0; j < T; ++j) stats_.query_counts[static_cast<size_t>(j)] = static_cast<float>(std::min(n_queries, T - j));
  }
}

void AttentionStatsAccumulator::add_rows(int64_t head, int64_t t0, int64_t n_rows, const float* probs, int64_t ld) {
  const int64_t T = stats_.prefix_tokens;
  if (head < 0 || head >= stats_.n_heads || t0 < 0 || n_rows < 0 || t0 + n_rows > T || ld < t0 + n_rows)
    throw InputError("attention statistics: add_rows(head " + str(head) + ", t0 " + str(t0) + ", rows " +
                     str(n_rows) + ", ld " + str(ld) + ") is outside H = " + str(stats_.n_heads) + ", T = " + str(T));
  const int64_t window_start = T - stats_.window;
  float* win = window_ ? stats_.window_attention.data() + head * T : nullptr;
  float* cum = cumulative_ ? stats_.cumulative_attention.data() + head * T : nullptr;
  for (int64_t r = 0; r < n_rows; ++r) {
    const int64_t t = t0 + r;
    const float* p = probs + r * ld;
    if (cum)
      for (int64_t j = 0; j <= t; ++j) cum[j] += p[j];
    if (win && t >= window_start)
      for (int64_t j = 0; j <= t; ++j) win[j] += p[j];
  }
}

AttentionStatsAccumulator AttentionStatsAccumulator::zero_copy() const {
  AttentionStatsAccumulator z = *this;
  std::fill(z.stats_.window_attention.begin(), z.stats_.window_attention.end(), 0.0f);
  std::fill(z.stats_.cumulative_attention.begin(), z.stats_.cumulative_attention.end(), 0.0f);
  return z;
}

void AttentionStatsAccumulator::add(const AttentionStatsAccumulator& o) {
  if (o.stats_.n_heads != stats_.n_heads || o.stats_.prefix_tokens != stats_.prefix_tokens ||
      o.window_ != window_ || o.cumulative_ != cumulative_ || o.stats_.window != stats_.window)
    throw InputError("attention statistics: adding accumulators of different shapes or options");
  for (size_t i = 0; i < stats_.window_attention.size(); ++i) stats_.window_attention[i] += o.stats_.window_attention[i];
  for (size_t i = 0; i < stats_.cumulative_attention.size(); ++i)
    stats_.cumulative_attention[i] += o.stats_.cumulative_attention[i];
}

AttentionStats AttentionStatsAccumulator::finish() { return std::move(stats_); }

AttentionStats compute_attention_stats(const QueriesView& q, const KeysView& k, const AttentionStatsOptions& opt) {
  const int64_t T = k.length, H = q.n_heads, Hkv = k.n_kv_heads, d = q.head_dim, nq = q.n_queries;
  if (!q.data || !k.data) throw InputError("attention statistics: queries or keys missing");
  if (d < 1 || k.head_dim != d)
    throw InputError("attention statistics: query head_dim " + str(d) + " differs from key head_dim " + str(k.head_dim));
  if (Hkv < 1 || H < 1 || H % Hkv != 0)
    throw InputError("attention statistics: n_heads " + str(H) + " is not a multiple of n_kv_heads " + str(Hkv));
  if (k.head_stride < T * d)
    throw InputError("attention statistics: key head_stride " + str(k.head_stride) + " is below length * head_dim");
  if (nq < 1 || nq > T)
    throw InputError("attention statistics: n_queries must be in [1, T = " + str(T) + "], got " + str(nq));
  if (opt.cumulative_attention && nq != T)
    throw InputError("attention statistics: cumulative attention needs the queries of all T = " + str(T) +
                     " prompt positions, got " + str(nq));
  const int64_t w = opt.window_attention ? std::min(opt.window, T) : 0;
  if (opt.window_attention && w > nq)
    throw InputError("attention statistics: window " + str(w) + " is larger than the " + str(nq) + " queries given");

  AttentionStatsAccumulator acc(H, T, nq, opt);
  if (!opt.window_attention && !opt.cumulative_attention) return acc.finish();

  const int64_t G = H / Hkv;
  const int64_t first_row = opt.cumulative_attention ? 0 : T - w;  // absolute position of the first query used
  const int64_t q_offset = T - nq;                                  // absolute position of queries row 0
  const int64_t block = std::max<int64_t>(1, opt.query_block);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  std::vector<float> s(static_cast<size_t>(std::min(block, T - first_row) * T));

  for (int64_t h = 0; h < H; ++h) {
    const float* kh = k.data + (h / G) * k.head_stride;
    for (int64_t t0 = first_row; t0 < T; t0 += block) {
      const int64_t rows = std::min(block, T - t0);
      const int64_t cols = t0 + rows;  // keys 0 .. t0 + rows - 1 are visible to the last row of the block
      const float* qh = q.data + (h * nq + (t0 - q_offset)) * d;
      // S[rows, cols] = scale * Q[t0 : t0 + rows] K[0 : cols]^T
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(rows), static_cast<int>(cols),
                  static_cast<int>(d), scale, qh, static_cast<int>(d), kh, static_cast<int>(d), 0.0f, s.data(),
                  static_cast<int>(cols));
      for (int64_t r = 0; r < rows; ++r) softmax_row(s.data() + r * cols, t0 + r + 1);
      acc.add_rows(h, t0, rows, s.data(), cols);
    }
  }
  return acc.finish();
}

std::vector<float> unrotate_queries(const QueriesView& q, const std::vector<double>& inv_freq) {
  return unrotate_queries_from(q, inv_freq, 0);
}

std::vector<float> unrotate_queries_from(const QueriesView& q, const std::vector<double>& inv_freq,
                                         int64_t first_position) {
  const int64_t H = q.n_heads, n = q.n_queries, d = q.head_dim, half = d / 2;
  if (static_cast<int64_t>(inv_freq.size()) * 2 != d)
    throw InputError("query moments: " + str(static_cast<int64_t>(inv_freq.size())) +
                     " RoPE frequencies for head dimension " + str(d));
  if (first_position < 0) throw InputError("query moments: first position " + str(first_position) + " < 0");
  std::vector<int64_t> pos(static_cast<size_t>(n));
  for (int64_t t = 0; t < n; ++t) pos[static_cast<size_t>(t)] = first_position + t;
  std::vector<float> cs, sn;
  rope_tables(inv_freq, pos.data(), n, cs, sn);
  std::vector<float> out(q.data, q.data + H * n * d);
  for (int64_t h = 0; h < H; ++h)
    for (int64_t t = 0; t < n; ++t)
      rope_unrotate_half(out.data() + (h * n + t) * d, half, cs.data() + t * half, sn.data() + t * half);
  return out;
}

void add_query_moments(const QueriesView& q, int64_t skip, AttentionStats& stats) {
  const int64_t H = q.n_heads, T = q.n_queries, d = q.head_dim;
  if (!q.data || H < 1 || T < 1 || d < 1) throw InputError("query moments: no queries given");
  if (skip < 0) throw InputError("query moments: query_skip must be >= 0, got " + str(skip));
  stats.query_mean.assign(static_cast<size_t>(H * d), 0.0f);
  stats.query_covariance.assign(static_cast<size_t>(H * d * d), 0.0f);
  const int64_t n = T - std::min(skip, T);
  if (n == 0) return;
  std::vector<double> mu(static_cast<size_t>(d)), centred(static_cast<size_t>(n * d)), cov(static_cast<size_t>(d * d));
  for (int64_t h = 0; h < H; ++h) {
    const float* rows = q.data + (h * T + (T - n)) * d;  // positions skip .. T - 1
    std::fill(mu.begin(), mu.end(), 0.0);
    for (int64_t t = 0; t < n; ++t)
      for (int64_t i = 0; i < d; ++i) mu[static_cast<size_t>(i)] += rows[t * d + i];
    for (double& m : mu) m /= static_cast<double>(n);
    for (int64_t t = 0; t < n; ++t)
      for (int64_t i = 0; i < d; ++i) centred[static_cast<size_t>(t * d + i)] = rows[t * d + i] - mu[static_cast<size_t>(i)];
    // S = X^T X / n over the centred rows X [n, d] (upper triangle, then mirrored).
    cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, static_cast<int>(d), static_cast<int>(n),
                1.0 / static_cast<double>(n), centred.data(), static_cast<int>(d), 0.0, cov.data(), static_cast<int>(d));
    for (int64_t i = 0; i < d; ++i) {
      stats.query_mean[static_cast<size_t>(h * d + i)] = static_cast<float>(mu[static_cast<size_t>(i)]);
      for (int64_t j = 0; j < d; ++j) {
        const double c = i <= j ? cov[static_cast<size_t>(i * d + j)] : cov[static_cast<size_t>(j * d + i)];
        stats.query_covariance[static_cast<size_t>((h * d + i) * d + j)] = static_cast<float>(c);
      }
    }
  }
}

QueryMomentsAccumulator::QueryMomentsAccumulator(int64_t n_heads, int64_t head_dim, int64_t skip)
    : H_(n_heads), d_(head_dim), skip_(skip) {
  if (H_ < 1 || d_ < 1) throw InputError("query moments: " + str(H_) + " heads of dimension " + str(d_));
  if (skip_ < 0) throw InputError("query moments: query_skip must be >= 0, got " + str(skip_));
  mean_.assign(static_cast<size_t>(H_ * d_), 0.0);
  m2_.assign(static_cast<size_t>(H_ * d_ * d_), 0.0);
}

void QueryMomentsAccumulator::add(const QueriesView& q, int64_t first_position) {
  if (q.n_heads != H_ || q.head_dim != d_)
    throw InputError("query moments: a chunk of " + str(q.n_heads) + " heads of dimension " + str(q.head_dim) +
                     ", expected " + str(H_) + " of " + str(d_));
  const int64_t from = std::max<int64_t>(0, skip_ - first_position);  // the chunk's first row at or after skip
  const int64_t nb = q.n_queries - std::min(from, q.n_queries);
  if (nb == 0) return;
  const int64_t d = d_, na = n_, n = na + nb;
  std::vector<double> mu(static_cast<size_t>(d)), centred(static_cast<size_t>(nb * d)), m2b(static_cast<size_t>(d * d));
  for (int64_t h = 0; h < H_; ++h) {
    const float* rows = q.data + (h * q.n_queries + from) * d;
    std::fill(mu.begin(), mu.end(), 0.0);
    for (int64_t t = 0; t < nb; ++t)
      for (int64_t i = 0; i < d; ++i) mu[static_cast<size_t>(i)] += rows[t * d + i];
    for (double& m : mu) m /= static_cast<double>(nb);
    for (int64_t t = 0; t < nb; ++t)
      for (int64_t i = 0; i < d; ++i) centred[static_cast<size_t>(t * d + i)] = rows[t * d + i] - mu[static_cast<size_t>(i)];
    cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, static_cast<int>(d), static_cast<int>(nb), 1.0,
                centred.data(), static_cast<int>(d), 0.0, m2b.data(), static_cast<int>(d));
    double* mean = mean_.data() + h * d;
    double* m2 = m2_.data() + h * d * d;
    const double w = static_cast<double>(na) * static_cast<double>(nb) / static_cast<double>(n);
    for (int64_t i = 0; i < d; ++i)
      for (int64_t j = i; j < d; ++j) {
        const double di = mu[static_cast<size_t>(i)] - mean[i], dj = mu[static_cast<size_t>(j)] - mean[j];
        m2[i * d + j] += m2b[static_cast<size_t>(i * d + j)] + di * dj * w;
      }
    for (int64_t i = 0; i < d; ++i)
      mean[i] += (mu[static_cast<size_t>(i)] - mean[i]) * static_cast<double>(nb) / static_cast<double>(n);
  }
  n_ = n;
}

void QueryMomentsAccumulator::finish(AttentionStats& stats) const {
  const int64_t d = d_;
  stats.query_mean.assign(static_cast<size_t>(H_ * d), 0.0f);
  stats.query_covariance.assign(static_cast<size_t>(H_ * d * d), 0.0f);
  if (n_ == 0) return;
  for (int64_t h = 0; h < H_; ++h)
    for (int64_t i = 0; i < d; ++i) {
      stats.query_mean[static_cast<size_t>(h * d + i)] = static_cast<float>(mean_[static_cast<size_t>(h * d + i)]);
      for (int64_t j = 0; j < d; ++j) {
        const double m = i <= j ? m2_[static_cast<size_t>((h * d + i) * d + j)] : m2_[static_cast<size_t>((h * d + j) * d + i)];
        stats.query_covariance[static_cast<size_t>((h * d + i) * d + j)] = static_cast<float>(m / static_cast<double>(n_));
      }
    }
}

std::vector<float> window_queries(const QueriesView& q, int64_t window) {
  if (window < 1) throw InputError("window queries: window must be >= 1, got " + str(window));
  const int64_t w = std::min(window, q.n_queries), d = q.head_dim;
  std::vector<float> out(static_cast<size_t>(q.n_heads * w * d));
  for (int64_t h = 0; h < q.n_heads; ++h)
    std::memcpy(out.data() + h * w * d, q.data + (h * q.n_queries + (q.n_queries - w)) * d,
                static_cast<size_t>(w * d) * sizeof(float));
  return out;
}

std::vector<float> residual_cosines(const float* x, const float* o, int64_t n, int64_t D) {
  std::vector<float> c(static_cast<size_t>(n));
  for (int64_t t = 0; t < n; ++t) {
    double dot = 0.0, xx = 0.0, yy = 0.0;
    for (int64_t i = 0; i < D; ++i) {
      const double a = x[t * D + i], b = static_cast<double>(x[t * D + i]) + o[t * D + i];
      dot += a * b;
      xx += a * a;
      yy += b * b;
    }
    c[static_cast<size_t>(t)] = static_cast<float>(dot / (std::max(std::sqrt(xx), 1e-8) * std::max(std::sqrt(yy), 1e-8)));
  }
  return c;
}

}  // namespace rkv
