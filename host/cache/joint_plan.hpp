// The joint allocator: one byte budget split across tokens kept x bits x layers shared (README "One byte budget").
//
// Every compressible layer l takes one option o from a small grid: keep a fraction f of its span at `bits` (32 =
// float32, else the cell's integer codec at 8, 4 or 2 bits), or share (hold nothing; attend over the nearest earlier
// layer that keeps its cache). Option o costs bytes_l(o) (packed data + scales + positions of the entries it keeps)
// and damage D_l(o): the KL at the output when ONLY layer l takes o (runner/profile/compression_damage.hpp option_damage,
// measured on the calibration split). Assuming the damages add up across layers, the plan solves the
// multiple-choice knapsack
//     minimise  sum_l D_l(o_l)   subject to  sum_l bytes_l(o_l) <= budget,
// exactly, by dynamic programming over the Pareto frontier of (bytes, damage) after each layer: a partial plan is
// dropped only when another spends no more bytes and does no more damage. The frontier is at most kMaxJointStates
// long; beyond that it is thinned to the lowest damage per byte bucket of budget / kMaxJointStates (never seen on
// the grids in configs/: the frontier stays below 10^4 states), which can miss the optimum by one bucket per layer.
//
// Then spend_leftover() gives the bytes the grid's coarse steps leave over to the kept layers, one more entry at a
// time, so the plan's bytes stay <= the budget and come within one entry of it (the "within one block").
//
// Thread rules: pure functions, reentrant.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace rkv {

/// Frontier states kept per layer before thinning (see the top of this file).
inline constexpr size_t kMaxJointStates = size_t{1} << 17;

/// One choice a layer may take.
struct JointOption {
  double fraction = 1.0;  ///< of the layer's span kept, in (0, 1] (unused when shared)
  int bits = 32;          ///< 32: float32; 8, 4, 2: the cell's codec at that width (unused when shared)
  bool shared = false;    ///< the layer holds no cache and reads an earlier layer's
  /// "f=0.5 int4", "f=1 f32", "shared".
  std::string label() const;
};

/// The grid: every (fraction, bits) pair in the given orders, then the shared option when `share`.
std::vector<JointOption> joint_options(const std::vector<double>& fractions, const std::vector<int>& bits, bool share);

/// The option index of every layer minimising sum_l damage[l][o_l] subject to sum_l bytes[l][o_l] <= budget, as the
/// top of this file says. `damage` and `bytes` are [L][O] (damage >= 0 or +inf for an option the layer cannot take,
/// e.g. sharing layer 0; bytes >= 0). Ties go to the plan with fewer bytes, then to the lower option indices.
/// Throws rkv::InputError when the shapes differ, a value is negative or NaN, or no plan fits the budget (naming
/// the cheapest plan's bytes).
std::vector<size_t> choose_joint_plan(const std::vector<std::vector<double>>& damage,
                                      const std::vector<std::vector<int64_t>>& bytes, int64_t budget);

/// Spends `budget` - sum_l entry_bytes[l] x kept[l] on more entries: repeatedly, over the layers in `order` (e.g.
/// the most damaged first), each layer l with kept[l] < cap[l] and entry_bytes[l] <= what is left takes as many
/// more entries as fit (up to cap[l]); stops when no layer can take one. All vectors are [L]; entry_bytes[l] is one
/// more entry's bytes over every KV head of layer l (0 for a shared layer, which is skipped). Returns the bytes
/// left, which are less than the entry bytes of every layer still below its cap. rkv::InputError when the kept
/// entries already exceed the budget.
int64_t spend_leftover(std::vector<int64_t>& kept, const std::vector<int64_t>& cap,
                       const std::vector<int64_t>& entry_bytes, const std::vector<size_t>& order, int64_t budget);

}  // namespace rkv
