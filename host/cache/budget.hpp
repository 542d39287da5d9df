// Budget semantics (docs/ARCHITECTURE.md "Budget semantics", one definition everywhere).
//
// T: prompt positions eligible for compression; A: compressible layers; b_l = |S_l| positions layer l keeps,
// including protected positions; B: the global budget summed over A.
//
// Layers with different spans (sliding-window models, Gemma 2/3): layer l can hold span_l = min(T, W_l) entries
// (W_l its window; T for a global layer), so budgets are fractions of spans and each b_l is capped at its own span:
//   B = floor(f * sum_{l in A} span_l + 0.5),   1 <= b_l <= span_l.
// Worked example (Gemma 3 270M, T = 2048, window 512, A = the 18 layers: 15 sliding, 3 global):
//   sum span = 15 * 512 + 3 * 2048 = 13,824; f = 0.25 gives B = 3,456. The uniform allocator keeps f of each span:
//   128 entries in a sliding layer and 512 in a global one; an allocator that wants more than 512 for a sliding
//   layer is capped there and the excess goes to the other layers by water-filling.
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

/// B = floor(f * sum_l span_l + 0.5) over the spans [|A|] of the compressible layers (each in [1, T]; all T for a
/// model without sliding windows, where this equals budget_total_from_fraction). Throws rkv::InputError when f is
/// outside (0, 1], spans is empty or a span is below 1.
int64_t budget_total_from_fraction(double fraction, const std::vector<int64_t>& spans);

/// B = sum_l min(tokens, span_l): `tokens` per layer, never more than a layer can hold. Throws rkv::InputError when
/// tokens < 1, spans is empty or a span is below 1.
int64_t budget_total_from_tokens(int64_t tokens, const std::vector<int64_t>& spans);

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

/// The same two steps against a cap per part: integers b [n] with sum exactly `total` and lo <= b_i <= caps[i]
/// (caps [n], each >= lo). Water-filling finds lambda with sum_i clamp(lambda * x_i, lo, caps[i]) = total, so what a
/// capped part cannot take goes to the others in proportion to x. Worked examples (tests: BudgetSpans): caps = spans
/// [512, 512, 1024]; f = 0.25 gives B = 512, and x = spans gives b = [128, 128, 256]; f = 0.75 gives B = 1536, and
/// x = [0.5, 0.4, 0.1] (proportional split [768, 614.4, 153.6]) puts both sliding layers at their cap 512 and the
/// global layer takes the rest, b = [512, 512, 512]. Throws rkv::InputError
/// when x is empty, caps has another length, has a value below lo, x has a non-finite or negative value, lo < 1, or
/// n lo <= total <= sum caps does not hold.
std::vector<int64_t> integerize_capped(const std::vector<double>& x, int64_t total, int64_t lo,
                                       const std::vector<int64_t>& caps);

/// integerize_budgets against per-layer spans: 1 <= b_l <= spans[l], sum exactly B (integerize_capped with lo = 1).
/// Throws rkv::InputError when B < |A| or B > sum spans (naming both), and as integerize_capped.
std::vector<int64_t> integerize_budgets(const std::vector<double>& x, int64_t budget_total,
                                        const std::vector<int64_t>& spans);

}  // namespace rkv
