#include "backend/cpu/attention.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "backend/cpu/blas.hpp"
#include "backend/cpu/ops.hpp"
#include "backend/cpu/threads.hpp"
#include "core/errors.hpp"

namespace rkv::cpu {

namespace {

/// Queries per attention block: the scores of one block are [G * kQueryBlock, keys].
constexpr int64_t kQueryBlock = 64;

template <typename T>
T* grow(std::vector<T>& v, size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}

/// Entries of the KV heads before head g (g's offset in an attention-mass vector).
int64_t head_offset(const AttendedKV& kv, int64_t g) {
  int64_t at = 0;
  for (int64_t h = 0; h < g; ++h) at += kv.head_length(h);
  return at;
}

}  // namespace

std::vector<int64_t> window_starts(const ModelConfig& c, int64_t layer, const AttendedKV& kv, const int64_t* positions,
                                   int64_t n) {
  const int64_t W = c.layer_window(layer);
  if (W <= 0) return {};
  if (!kv.has_positions()) {
    throw InputError("layer " + std::to_string(layer) + ": a sliding-window layer needs a KV cache that stores "
                     "positions (this one has none)");
  }
  std::vector<int64_t> first(static_cast<size_t>(kv.n_kv_heads() * n));
  for (int64_t g = 0; g < kv.n_kv_heads(); ++g) {
    const int64_t len_before = kv.head_length(g) - n;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t own = len_before + i;  // the row's own entry, always visible
      const int64_t oldest = positions[i] - W + 1;
      int64_t lo = 0, hi = own;  // the first entry in [0, own) whose position is >= oldest (positions ascend)
      while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (kv.position(g, mid) < oldest) {
          lo = mid + 1;
        } else {
          hi = mid;
        }
      }
      first[static_cast<size_t>(g * n + i)] = lo;
    }
  }
  return first;
}

namespace {

/// Gemma 2's soft-cap of the scores S[r, 0..cols) of `rows` rows, `ld` apart: s <- c tanh(s / c) with c =
/// config.attn_logit_softcap (nothing when 0).
void softcap_scores(const ModelConfig& c, float* S, int64_t rows, int64_t cols, int64_t ld) {
  const float cap = c.attn_logit_softcap;
  if (cap <= 0.0f) return;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < cols; ++j) S[r * ld + j] = softcap_score(S[r * ld + j], cap);
}

/// One attention block: query rows [i0, i1) of KV head g against the head's cache entries [first_i, len_before + i]
/// for row i, len_before = (entries head g held before the n new ones), first_i = first[g * n + i] (0 when `first`
/// is empty: a global layer). Scores are scaled by c.attention_scale().
/// S: scratch for the scores [M, N], O: scratch [M, d]; writes the block's rows of out [n, H*d]. When nothing reads
/// the probability rows (no hook, statistics or attention mass), the block's columns start at the smallest first_i,
/// so a sliding-window layer costs O(window) per query; otherwise rows span [0, len) with zeros outside the window.
/// When `row_parallel`, softmax rows are spread over the pool (the sgemm calls use OpenBLAS's threads).
void attention_block(const ModelConfig& c, const float* qg, int64_t n, const AttendedKV& kv, int64_t g, int64_t i0,
                     const std::vector<int64_t>& first, float* S, float* O, float* out, bool row_parallel,
                     const LayerHooks* hooks, const std::vector<AttentionStatsAccumulator*>& stats) {
  const int64_t G = c.group_size(), d = c.head_dim, H = c.n_heads;
  const int64_t len_before = kv.head_length(g) - n;
  const int64_t i1 = std::min(n, i0 + kQueryBlock);
  const int64_t* lo = first.empty() ? nullptr : first.data() + g * n;
  const bool probs_needed = hooks && hooks->on_attention_probs;
  const bool full_rows = probs_needed || (hooks && hooks->attention_mass) || !stats.empty();
  const int64_t kw = lo ? *std::min_element(lo + i0, lo + i1) : 0;  // the block's first visible key
  const int64_t k0 = full_rows ? 0 : kw;   // first key column of S's rows
  const int64_t M = (i1 - i0) * G;         // rows: (query i, head j) -> (i - i0) * G + j
  const int64_t N = len_before + i1 - k0;  // key columns k0 .. len_before + i1 - 1
  const float* Q = qg + (g * n + i0) * G * d;
  // Scores and P V run over the visible columns kw .. only, in full rows as without them: the same products in the same
  // order, so observing the probabilities leaves a sliding-window layer's output bit for bit unchanged (the columns
  // before kw are zeroed by softmax_rows).
  kv.scores(g, kw, N - (kw - k0), Q, M, c.attention_scale(), S + (kw - k0), N);
  softcap_scores(c, S + (kw - k0), M, N - (kw - k0), N);
  // Without the hook the rows stay unnormalized; the output rows are divided by their sums after P V instead.
  std::vector<float> inv_sum(static_cast<size_t>(M), 1.0f);
  auto softmax_rows = [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t i = i0 + r / G;
      const int64_t from = lo ? lo[i] - k0 : 0;  // window: columns before `from` are older than the window
      const int64_t len = len_before + i + 1 - k0;  // causal: entries up to len_before + i
      float* row = S + r * N;
      std::fill(row, row + from, 0.0f);
      if (probs_needed) {
        softmax_row(row + from, len - from);
      } else {
        inv_sum[static_cast<size_t>(r)] = 1.0f / softmax_unnormalized(row + from, len - from);
      }
      std::fill(row + len, row + N, 0.0f);
    }
  };
  if (row_parallel) {
    parallel_for(M, 8, softmax_rows);
  } else {
    softmax_rows(0, M);
  }
  if (probs_needed) {
    for (int64_t r = 0; r < M; ++r) {
      hooks->on_attention_probs(g * G + r % G, i0 + r / G, S + r * N, len_before + i0 + r / G + 1);
    }
  }
  if (hooks && hooks->attention_mass) {  // KV head g's block: one query block per KV head at a time (see attention())
    const int64_t len = kv.head_length(g);
    float* block = hooks->attention_mass->data() + G * head_offset(kv, g);
    for (int64_t r = 0; r < M; ++r) {
      const float* row = S + r * N;
      const float s = inv_sum[static_cast<size_t>(r)];
      float* mass = block + (r % G) * len;  // query head gG + r % G
      for (int64_t j = 0; j < len_before + i0 + r / G + 1; ++j) mass[j] += row[j] * s;
    }
  }
  // Fused scorer statistics: probability row = S row * inv_sum (1 when the rows were normalized above).
  for (AttentionStatsAccumulator* acc : stats)
    for (int64_t r = 0; r < M; ++r)
      acc->add_row(g * G + r % G, len_before + i0 + r / G, S + r * N, inv_sum[static_cast<size_t>(r)]);
  kv.mix_values(g, kw, N - (kw - k0), S + (kw - k0), M, N, O);
  for (int64_t r = 0; r < M; ++r) {
    const int64_t i = i0 + r / G, h = g * G + r % G;
    const float s = inv_sum[static_cast<size_t>(r)];
    float* dst = out + i * H * d + h * d;
    for (int64_t e = 0; e < d; ++e) dst[e] = O[r * d + e] * s;
  }
}

/// Entries per piece of a decode step's attention (attention_one_row): 2048 entries make 4 pieces per KV head.
constexpr int64_t kKeyPiece = 512;

/// One piece of attention_one_row: the G query heads of KV head g (q: [G, d]) over its entries [k0, k1), into
/// o [G, d] (unnormalized: sum_j exp(s_j - m) V[j]), m [G] (the largest score s_j) and l [G] (sum_j exp(s_j - m)).
/// S: scratch [G, k1 - k0].
void attention_piece(const ModelConfig& c, const float* q, const AttendedKV& kv, int64_t g, int64_t k0, int64_t k1,
                     float* S, float* o, float* m, float* l) {
  const int64_t G = c.group_size(), N = k1 - k0;
  kv.scores(g, k0, N, q, G, c.attention_scale(), S, N);
  softcap_scores(c, S, G, N, N);
  for (int64_t r = 0; r < G; ++r) {
    m[r] = *std::max_element(S + r * N, S + (r + 1) * N);
    l[r] = softmax_unnormalized(S + r * N, N);  // exp(s - m): the same maximum
  }
  kv.mix_values(g, k0, N, S, G, N, o);
}

/// attention() for one new row (a decode step) when nothing observes the probabilities: each KV head's visible
/// entries are cut into pieces of kKeyPiece, the pieces of all heads spread over the pool, and each head's pieces
/// merged with the log-sum-exp rule (flash-decoding, Dao et al. 2023): for pieces b with (o_b, m_b, l_b) as in
/// attention_piece and M = max_b m_b, a = sum_b exp(m_b - M) o_b / sum_b exp(m_b - M) l_b. Splitting by entries as
/// well as by head keeps every thread busy when the KV heads (3 in SmolLM2) do not divide among the threads. The
/// pieces do not depend on the thread count, so neither does the result.
void attention_one_row(const ModelConfig& c, const float* qg, const AttendedKV& kv, const std::vector<int64_t>& first,
                       float* out, Workspace& ws) {
  const int64_t G = c.group_size(), d = c.head_dim, Hkv = kv.n_kv_heads();
  std::vector<int64_t> piece_begin(static_cast<size_t>(Hkv + 1), 0);  // pieces of head g: [begin[g], begin[g + 1])
  for (int64_t g = 0; g < Hkv; ++g) {
    const int64_t k0 = first.empty() ? 0 : first[static_cast<size_t>(g)];
    piece_begin[static_cast<size_t>(g + 1)] =
        piece_begin[static_cast<size_t>(g)] + (kv.head_length(g) - k0 + kKeyPiece - 1) / kKeyPiece;
  }
  const int64_t pieces = piece_begin.back();
  const int64_t per_piece = G * kKeyPiece + G * d + 2 * G;  // S, o, m, l
  float* scratch = grow(ws.scores, static_cast<size_t>(pieces * per_piece));
  SingleThreadedBlas one_thread_each;
  parallel_for(pieces, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t g = std::upper_bound(piece_begin.begin(), piece_begin.end(), p) - piece_begin.begin() - 1;
      const int64_t k0 = (first.empty() ? 0 : first[static_cast<size_t>(g)]) +
                         (p - piece_begin[static_cast<size_t>(g)]) * kKeyPiece;
      const int64_t k1 = std::min(kv.head_length(g), k0 + kKeyPiece);
      float* S = scratch + p * per_piece;
      float* o = S + G * kKeyPiece;
      attention_piece(c, qg + g * G * d, kv, g, k0, k1, S, o, o + G * d, o + G * d + G);
    }
  });
  for (int64_t g = 0; g < Hkv; ++g) {
    for (int64_t r = 0; r < G; ++r) {
      auto piece = [&](int64_t p) { return scratch + p * per_piece + G * kKeyPiece; };  // o_p; m_p, l_p after it
      float M = -INFINITY;
      for (int64_t p = piece_begin[static_cast<size_t>(g)]; p < piece_begin[static_cast<size_t>(g + 1)]; ++p)
        M = std::max(M, piece(p)[G * d + r]);
      float* dst = out + (g * G + r) * d;
      std::fill(dst, dst + d, 0.0f);
      float L = 0.0f;
      for (int64_t p = piece_begin[static_cast<size_t>(g)]; p < piece_begin[static_cast<size_t>(g + 1)]; ++p) {
        const float w = std::exp(piece(p)[G * d + r] - M);
        L += w * piece(p)[G * d + G + r];
        for (int64_t e = 0; e < d; ++e) dst[e] += w * piece(p)[r * d + e];
      }
      for (int64_t e = 0; e < d; ++e) dst[e] /= L;
    }
  }
}

}  // namespace

void attention(const ModelConfig& c, const float* qg, int64_t n, const AttendedKV& kv, const std::vector<int64_t>& first,
               float* out, Workspace& ws, const LayerHooks* hooks) {
  const int64_t G = c.group_size(), d = c.head_dim;
  const int64_t n_blocks = (n + kQueryBlock - 1) / kQueryBlock;
  const int64_t tasks = c.n_kv_heads * n_blocks;
  const int threads = num_threads();
  const int64_t max_scores = std::min(n, kQueryBlock) * G * kv.longest();
  static const std::vector<AttentionStatsAccumulator*> kNoStats;
  const std::vector<AttentionStatsAccumulator*>& stats = hooks ? hooks->stats : kNoStats;
  // Blocks of one KV head write the same attention-mass segment: with several query blocks they run serially.
  const bool serial_hooks = hooks && (hooks->on_attention_probs || (hooks->attention_mass && n_blocks > 1));
  if (hooks && hooks->attention_mass) hooks->attention_mass->assign(static_cast<size_t>(G * kv.entries()), 0.0f);
  const bool observed = hooks && (hooks->on_attention_probs || hooks->attention_mass || !stats.empty());
  if (n == 1 && !observed) {  // a decode step: split by entries too
    attention_one_row(c, qg, kv, first, out, ws);
    return;
  }
  if (!serial_hooks && threads > 1 && tasks > 1) {
    const int64_t slots = std::min<int64_t>(threads, tasks);
    const size_t per_slot = static_cast<size_t>(max_scores + std::min(n, kQueryBlock) * G * d);
    float* scratch = grow(ws.scores, per_slot * static_cast<size_t>(slots));
    // Each slot sums its blocks' statistics into its own partials; they are added in slot order below.
    // (Built only when statistics are asked for: decode steps take this path too and allocate nothing extra.)
    std::vector<std::vector<AttentionStatsAccumulator>> partial(stats.empty() ? 0 : static_cast<size_t>(slots));
    std::vector<std::vector<AttentionStatsAccumulator*>> partial_ptrs(partial.size());
    for (int64_t slot = 0; slot < static_cast<int64_t>(partial.size()); ++slot) {
      auto& p = partial[static_cast<size_t>(slot)];
      for (const AttentionStatsAccumulator* acc : stats) p.push_back(acc->zero_copy());
      for (auto& a : p) partial_ptrs[static_cast<size_t>(slot)].push_back(&a);
    }
    SingleThreadedBlas one_thread_each;
    parallel_for(slots, 1, [&](int64_t s0, int64_t s1) {
      for (int64_t slot = s0; slot < s1; ++slot) {
        float* S = scratch + per_slot * static_cast<size_t>(slot);
        for (int64_t t = slot; t < tasks; t += slots) {
          attention_block(c, qg, n, kv, t % c.n_kv_heads, (t / c.n_kv_heads) * kQueryBlock, first, S, S + max_scores, out,
                          false, hooks && hooks->attention_mass ? hooks : nullptr,
                          stats.empty() ? kNoStats : partial_ptrs[static_cast<size_t>(slot)]);
        }
      }
    });
    for (size_t slot = 0; slot < partial.size(); ++slot)
      for (size_t k = 0; k < stats.size(); ++k) stats[k]->add(partial[slot][k]);
    return;
  }
  float* S = grow(ws.scores, static_cast<size_t>(max_scores));
  float* O = grow(ws.o, static_cast<size_t>(std::min(n, kQueryBlock) * G * d));
  for (int64_t g = 0; g < c.n_kv_heads; ++g) {
    for (int64_t i0 = 0; i0 < n; i0 += kQueryBlock)
      attention_block(c, qg, n, kv, g, i0, first, S, O, out, true, hooks, stats);
  }
}

}  // namespace rkv::cpu
