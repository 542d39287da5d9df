// How a cell is named: its label ("uniform + snapkv(window=16) @ f=0.1"), unique within a run; its group (the label
// without the budget: one line of a metric-vs-budget plot); and its effective key (equal for cells that compute the
// same thing, e.g. uniform under two signals, so a run computes it once).
//
// Thread rules: pure functions.
#pragma once
#include <string>
#include <vector>

#include "runner/plan/run_plan.hpp"

namespace rkv {

/// Labels and plot groups of every cell: "<group> @ <budget>", where the group names the allocator (and its signal,
/// where the cell reads a profile), the per-head allocator, the scorer and its route, each with the swept params that
/// differ between cells (a key that some cells set and others do not, as one `methods` table's param, differs), the
/// decode policy, the codec, sharing or the joint plan, and any other swept setting that
/// differs; with `rerotate` (a run-level setting) ", rerotated keys"; with [prefill] compress_between_chunks
/// ", compressed between chunks of C" (another computation than compressing after the prompt). Cells that would still share a label (e.g. two
/// values of a param that none of their plugins reads) gain " [key=value, ...]" of the swept values that set them
/// apart, so labels are unique. The full-cache cell keeps its own.
void label_cells(std::vector<Cell>& cells, bool rerotate, const PrefillSpec& prefill = {});

/// The key of what `cell` computes: its signal (only when it reads a profile), scorer and params, route, allocator
/// (not for a joint cell) and per-head allocator, budget, decode policy, and codec, sharing and joint plan when set;
/// "full" for the full cache.
std::string effective_key(const CellConfig& cell);

}  // namespace rkv
