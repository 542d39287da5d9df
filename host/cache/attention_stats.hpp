// Attention statistics that scorers ask for (abi/ripplekv/plugin.h, RKV_STAT_*; docs/ARCHITECTURE.md "Algorithms").
//
// Notation: H query heads, H_kv KV heads, G = H / H_kv (query head h reads KV head h / G), head dim d, T prompt
// positions. A[h, t, j] = softmax_j(q_{h,t} . k_{h/G,j} / sqrt(d)) over the causal keys j <= t, in fp32.
//
//   window attention      W[h, j] = sum_{t = T-w}^{T-1} A[h, t, j]         (SnapKV's observation-window vote)
//   cumulative attention  C[h, j] = sum_{t = j}^{T-1}   A[h, t, j]         (H2O's accumulated attention)
//   query counts          n[j]    = #{queries t summed above with t >= j}   (T - j for all prompt queries; H2O's
//                                                                         normalizer)
//   query moments         mu[h]   = (1/n) sum_{t=s}^{T-1} q0[h, t],   S[h] = (1/n) sum_t (q0[h,t] - mu[h])(q0[h,t] - mu[h])^T
//                         over the n = T - s prompt queries before RoPE (q0 = R(-t) q), s = query_skip
//                         (kvpress ExpectedAttentionPress.get_query_statistics; zero when n = 0)
//
// Both sums are computed blockwise over queries: a block of rows of Q K^T comes from one OpenBLAS sgemm, is turned
// into causal softmax rows, and added into the column sums, so no [H, T, T] array is ever materialized (the largest
// temporary is [query_block, T] floats).
//
// Two ways in:
//  - compute_attention_stats(): from queries after RoPE and keys after RoPE (when the forward did not keep them);
//  - AttentionStatsAccumulator: a forward that already has the softmax rows of its attention adds them with
//    add_rows() and pays only for the column sums.
//
// Thread rules: functions are reentrant; an AttentionStatsAccumulator is used from one thread at a time. OpenBLAS
// may use its own threads inside sgemm.
#pragma once
#include <cstdint>
#include <vector>

namespace rkv {

/// Queries after RoPE of the last `n_queries` prompt positions (T - n_queries .. T - 1), float32
/// [n_heads, n_queries, head_dim] row-major and contiguous. Borrowed.
struct QueriesView {
  const float* data = nullptr;
  int64_t n_heads = 0;
  int64_t n_queries = 0;
  int64_t head_dim = 0;
};

/// Keys after RoPE of positions 0 .. length - 1, float32 [n_kv_heads, length, head_dim] with `head_stride` floats
/// between heads (length * head_dim when contiguous; capacity * head_dim for a LayerKV). Rows of one head are
/// contiguous. Borrowed.
struct KeysView {
  const float* data = nullptr;
  int64_t n_kv_heads = 0;
  int64_t length = 0;
  int64_t head_dim = 0;
  int64_t head_stride = 0;
};

/// Which statistics to compute.
struct AttentionStatsOptions {
  bool window_attention = false;      ///< W [H, T] over the last `window` queries
  bool cumulative_attention = false;  ///< C [H, T] over all T prompt queries (needs n_queries == T)
  bool query_counts = false;          ///< n [T]
  int64_t window = 0;                 ///< w, clamped to T; must be >= 1 when window_attention is set
  int64_t query_block = 64;           ///< query rows per sgemm block (memory: query_block * T floats)
  bool query_moments = false;         ///< mean [H, d] and covariance [H, d, d] of the pre-RoPE prompt queries
  int64_t query_skip = 0;             ///< leading prompt positions left out of the query moments (>= 0)
  /// c [T]: the cosine between each position's residual stream before and after the attention block
  /// (residual_cosines; RKV_STAT_RESIDUAL_COSINE), filled by the backend's one-shot prefill
  bool residual_cosine = false;
};

/// The statistics of one layer of one example. Vectors are empty unless requested.
struct AttentionStats {
  int64_t n_heads = 0;                     ///< H
  int64_t prefix_tokens = 0;               ///< T
  int64_t window = 0;                      ///< effective w = min(requested w, T); 0 when no window sum
  std::vector<float> window_attention;     ///< float32 [H, T]; zero for keys no window query sees (none: j < T)
  std::vector<float> cumulative_attention; ///< float32 [H, T]
  std::vector<float> query_counts;         ///< float32 [T], n[j] = min(n_queries, T - j)
  std::vector<float> query_mean;           ///< float32 [H, d] (query_moments)
  std::vector<float> query_covariance;     ///< float32 [H, d, d] (query_moments)
  std::vector<float> residual_cosine;      ///< float32 [T] (residual_cosine)
};

/// Adds causal softmax rows into window and cumulative column sums (the fused path of a forward pass).
class AttentionStatsAccumulator {
 public:
  /// Prepares zeroed sums for H = n_heads heads over T = prefix_tokens keys. `options.window` is clamped to T.
  /// `n_queries` is the number of prompt queries the caller will add per head (for query_counts; T normally).
  /// Throws rkv::InputError when T < 1, n_heads < 1, n_queries outside [1, T], or window_attention is set with a
  /// window < 1.
  AttentionStatsAccumulator(int64_t n_heads, int64_t prefix_tokens, int64_t n_queries,
                            const AttentionStatsOptions& options);

  /// Adds `n_rows` softmax rows of head `head` for the absolute query positions t0 .. t0 + n_rows - 1.
  /// probs: float32 [n_rows, ld] row-major; row r holds A[head, t0 + r, j] for j = 0 .. t0 + r (entries past the
  /// diagonal are ignored). Each row adds to the window sums when t >= T - w and to the cumulative sums always.
  /// Throws rkv::InputError for a head or row range outside [0, H) x [0, T) or ld < t0 + n_rows.
  void add_rows(int64_t head, int64_t t0, int64_t n_rows, const float* probs, int64_t ld);

  /// Adds one row: scale * row[j] for j = 0 .. t to head `head`'s sums (window sums only when t >= T - w). The fused
  /// path of a forward whose softmax rows are unnormalized (row = exp(s - max), scale = 1 / sum). No range checks:
  /// head in [0, H) and t in [0, T) are the caller's duty (the forward's own loop indices).
  void add_row(int64_t head, int64_t t, const float* __restrict row, float scale) {
    const int64_t T = stats_.prefix_tokens;
    if (cumulative_) add_scaled(stats_.cumulative_attention.data() + head * T, row, scale, t + 1);
    if (window_ && t >= T - stats_.window) add_scaled(stats_.window_attention.data() + head * T, row, scale, t + 1);
  }

  /// An accumulator of the same shape and options with zero sums (a per-thread partial).
  AttentionStatsAccumulator zero_copy() const;

  /// Adds the sums of `other` (same shape and options) into this one, element by element.
  /// Throws rkv::InputError when the shapes or options differ.
  void add(const AttentionStatsAccumulator& other);

  /// The sums so far (moves them out; the accumulator is empty afterwards).
  AttentionStats finish();

 private:
  /// sum[j] += row[j] * scale for j < n (no aliasing: the compiler vectorizes it).
  static void add_scaled(float* __restrict sum, const float* __restrict row, float scale, int64_t n) {
    for (int64_t j = 0; j < n; ++j) sum[j] += row[j] * scale;
  }

  AttentionStats stats_;
  bool window_ = false, cumulative_ = false;
};

/// Computes the requested statistics of one layer from queries and keys after RoPE (see the file comment for the
/// formulas; softmax scale 1/sqrt(d), fp32, max-subtracted).
/// Cost: O(rows * T * d) for the sgemm plus O(rows * T) exponentials, rows = T with cumulative attention, else w.
/// Throws rkv::InputError when shapes disagree (head_dim, H % H_kv != 0, n_queries > T), when cumulative attention
/// is asked with n_queries < T, or when the window is larger than n_queries.
AttentionStats compute_attention_stats(const QueriesView& queries, const KeysView& keys,
                                       const AttentionStatsOptions& options);

/// The queries before RoPE of positions 0 .. n - 1 from `rotated`, their queries after RoPE (QueriesView with
/// n_queries = n, the whole prompt): q0[h, t] = R(-t inv_freq) q[h, t] in the rotate_half layout (model/rope.hpp),
/// with the layer's frequencies `inv_freq` [d/2] (cos/sin of t inv_freq in double, rounded to float, as the forward
/// rotated them; rope_unrotate_half). float32 [H, n, d], a copy. Throws rkv::InputError when d != 2 inv_freq.size().
std::vector<float> unrotate_queries(const QueriesView& rotated, const std::vector<double>& inv_freq);

/// unrotate_queries for queries of positions first_position .. first_position + n - 1 (a chunk of a prompt):
/// q0[h, i] = R(-(first_position + i) inv_freq) q[h, i]. float32 [H, n, d], a copy. Errors as unrotate_queries, and
/// for first_position < 0.
std::vector<float> unrotate_queries_from(const QueriesView& rotated, const std::vector<double>& inv_freq,
                                         int64_t first_position);

/// RKV_STAT_QUERY_MOMENTS streamed chunk by chunk (chunked prefill): the mean and covariance add_query_moments gives
/// over positions skip .. T - 1, from chunks of pre-RoPE queries added in position order. Each chunk's mean and
/// centred scatter (one dsyrk per head, double) are merged into the running ones by the pairwise update of Chan,
/// Golub & LeVeque (1979): with counts n_a, n_b, n = n_a + n_b and delta = mean_b - mean_a,
///   mean = mean_a + delta n_b / n,   M2 = M2_a + M2_b + delta delta^T n_a n_b / n,   covariance = M2 / n.
/// Memory: [H, d, d] doubles. Thread rules: one thread at a time.
class QueryMomentsAccumulator {
 public:
  /// Empty moments of H = n_heads heads of dimension d over the positions >= skip. rkv::InputError for H < 1, d < 1
  /// or skip < 0.
  QueryMomentsAccumulator(int64_t n_heads, int64_t head_dim, int64_t skip);
  /// Adds the pre-RoPE queries `pre_rope` [H, n, d] of positions first_position .. first_position + n - 1 (those
  /// below skip are left out). rkv::InputError for another H or d.
  void add(const QueriesView& pre_rope, int64_t first_position);
  /// query_mean [H, d] and query_covariance [H, d, d] (float32, rounded once) into `stats`; zero when no position
  /// was added.
  void finish(AttentionStats& stats) const;

 private:
  int64_t H_, d_, skip_, n_ = 0;
  std::vector<double> mean_, m2_;  ///< [H, d], [H, d, d] (upper triangle filled)
};

/// RKV_STAT_QUERY_MOMENTS of one layer into `stats` (query_mean [H, d], query_covariance [H, d, d], float32) from the
/// pre-RoPE queries of all T prompt positions `pre_rope` (n_queries = T): over t = skip .. T - 1 (see the file
/// comment). Mean in double; covariance of the centred rows by one dsyrk per head (double), rounded once to float.
/// Both zero when skip >= T. Throws rkv::InputError for skip < 0 or an empty view.
void add_query_moments(const QueriesView& pre_rope, int64_t skip, AttentionStats& stats);

/// The queries of the last `window` positions (clamped to n_queries): float32 [H, w, d], a copy
/// (RKV_STAT_WINDOW_QUERIES). Throws rkv::InputError when window < 1.
std::vector<float> window_queries(const QueriesView& queries, int64_t window);

/// RKV_STAT_RESIDUAL_COSINE of n rows: c[t] = x_t . (x_t + o_t) / (max(||x_t||, 1e-8) max(||x_t + o_t||, 1e-8)),
/// float32 [n], with x [n, D] the residual stream entering a layer and o [n, D] what its attention block adds to it
/// (after o_proj and, for Gemma, the post-attention norm); sums in double. The eps is torch.nn.functional
/// .cosine_similarity's, which SqueezeAttention (Wang et al., ICLR 2025, hetailang/SqueezeAttention
/// utils_hh/modify_llama_drop.py) applies to the same two vectors. Pure; any thread.
std::vector<float> residual_cosines(const float* x, const float* o, int64_t n, int64_t D);

}  // namespace rkv
