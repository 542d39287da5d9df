// Which positions a layer keeps: protected positions first, then the top scores per KV head (docs/ARCHITECTURE.md "Budget
// semantics" and "Algorithms": ties go to the earlier position; protected positions are enforced by the host, never
// by a sentinel score).
//
// Thread rules: pure functions, reentrant.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace rkv {

/// What a scorer protects (rkv_scorer_requirements): the first `sinks` positions, then the last `recent` positions,
/// in that priority order. Both >= 0; values above T are clamped to T.
struct ProtectedSpec {
  int64_t sinks = 0;
  int64_t recent = 0;
};

/// The protected positions of a prefix of T positions in priority order: 0, 1, ..., sinks - 1, then T - 1, T - 2,
/// ..., T - recent (most recent first), each position once (sinks and recent may overlap when sinks + recent > T).
/// The length of the result is the protected count. Throws rkv::InputError for T < 0 or negative sinks/recent.
std::vector<int64_t> protected_positions(int64_t prefix_tokens, const ProtectedSpec& spec);

/// The positions one layer keeps.
struct Selection {
  int64_t layer = 0;          ///< model layer index (for messages and records)
  int64_t n_kv_heads = 0;     ///< H_kv
  int64_t prefix_tokens = 0;  ///< T
  int64_t budget = 0;         ///< b_l requested (per-head selections: sum_h b_{l,h})
  bool untouched = false;     ///< every head's budget >= T: the layer keeps everything and is not compacted
  int64_t kept = 0;           ///< positions kept per KV head: min(b_l, T) (per-head selections: the largest count)
  /// Per-head selections (rkv.allocator/2 budgets b_{l,h}): [n_kv_heads] positions kept by each head; empty: every
  /// head keeps `kept`.
  std::vector<int64_t> head_kept;
  /// Kept positions, head after head: head h's head_kept_count(h) positions, ascending; empty when untouched.
  std::vector<int64_t> positions;
  std::vector<std::string> warnings;  ///< e.g. b_l below the protected count

  bool per_head() const { return !head_kept.empty(); }
  /// Positions kept by KV head `head`.
  int64_t head_kept_count(int64_t head) const { return per_head() ? head_kept[static_cast<size_t>(head)] : kept; }
  /// Positions kept by KV head `head` (head_kept_count(head) entries, ascending).
  const int64_t* head_positions(int64_t head) const {
    if (!per_head()) return positions.data() + head * kept;
    int64_t start = 0;
    for (int64_t h = 0; h < head; ++h) start += head_kept[static_cast<size_t>(h)];
    return positions.data() + start;
  }
};

/// Selects, per KV head, the positions a layer keeps under budget b_l = `budget`:
///  1. b_l >= T: untouched (nothing selected, no compaction);
///  2. the protected positions in priority order (protected_positions()) up to b_l; when b_l is below the
///     protected count the first b_l of them are kept and a warning is recorded (never an error);
///  3. the remaining b_l - (protected kept) slots go to the highest scores among unprotected positions, ties to
///     the earlier position (order: score descending, then position ascending);
///  4. each head's kept positions are sorted ascending.
/// scores: float32 [n_kv_heads, T] row-major (larger = keep), borrowed; may be null when b_l >= T.
/// Throws rkv::InputError when b_l < 1, n_kv_heads < 1, T < 1, or a score that could be used is not finite
/// (naming layer, head and position).
Selection select_positions(const float* scores, int64_t n_kv_heads, int64_t prefix_tokens, int64_t budget,
                           const ProtectedSpec& spec, int64_t layer);

/// Per-head budgets (rkv.allocator/2): head h keeps min(head_budgets[h], T) positions chosen as select_positions()
/// chooses them for a budget of head_budgets[h] (protected positions first, then the top scores, ascending). The
/// selection is untouched when every head's budget is >= T, and uniform (head_kept empty) when all heads keep the
/// same count. head_budgets: [n_kv_heads], each >= 1. Throws rkv::InputError as select_positions() does, and for a
/// head budget < 1.
Selection select_positions_per_head(const float* scores, int64_t n_kv_heads, int64_t prefix_tokens,
                                    const std::vector<int64_t>& head_budgets, const ProtectedSpec& spec,
                                    int64_t layer);

}  // namespace rkv
