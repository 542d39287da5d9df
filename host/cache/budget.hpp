// Budget semantics (DESIGN.md "Budget semantics", one definition everywhere).
//
// T: prompt positions eligible for compression; A: compressible layers; b_l = |S_l| positions layer l keeps,
// including protected positions; B: the global budget summed over A.
#pragma once
#include <cstdint>
#include <vector>

namespace rkv {

/// B = floor(f * T * |A| + 0.5) for a budget fraction f in (0, 1]. Throws rkv::InputError when f is outside (0, 1]
/// or T, |A| are not positive.
int64_t budget_total_from_fraction(double fraction, int64_t prefix_tokens, int64_t n_layers);

/// B = min(tokens, T) * |A| for an average per-layer token budget (KVCache-Factory's max_capacity_prompt).
/// Throws rkv::InputError when tokens < 1.
int64_t budget_total_from_tokens(int64_t tokens, int64_t prefix_tokens, int64_t n_layers);

/// Integerizes an allocator's real budgets x [|A|] (finite, >= 0) to integers b [|A|] with sum exactly B and
/// 1 <= b_l <= T:
///  1. water-filling: find lambda with sum_l clamp(lambda * x_l, 1, T) = B (values above T are capped and the excess
///     goes to the other layers in proportion to x), by bisection on lambda to double precision;
///  2. largest remainder: floor every value, then give one more position to the layers with the largest fractional
///     parts until the sum is B, ties to the lower layer index.
/// Throws rkv::InputError when B < |A| (every compressible layer keeps at least one position) or B > |A| * T.
std::vector<int64_t> integerize_budgets(const std::vector<double>& x, int64_t budget_total, int64_t prefix_tokens);

/// The same two steps with a lower bound `lo` instead of 1: integers b [n] with sum exactly `total` and
/// lo <= b_i <= T (integerize_budgets is lo = 1; per-head budgets use lo = the protected count). Throws
/// rkv::InputError when x is empty, has a non-finite or negative value, or n lo <= total <= n T does not hold.
std::vector<int64_t> integerize_between(const std::vector<double>& x, int64_t total, int64_t lo, int64_t T);

}  // namespace rkv
