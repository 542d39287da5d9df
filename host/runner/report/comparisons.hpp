// Paired comparisons of a report: every compressed cell against its baseline ([output] baseline,
// runner/plan/report_baseline.hpp; by default uniform -- the same count in every layer and head -- at the same scorer,
// budget, codec and decode policy), on the examples both hold, metric by metric; and every cell with a byte budget
// against eviction alone at the same bytes. Holm's adjustment runs across the comparisons of one table (one task of one
// kind of comparison) that print a p-value (n >= kMinExamplesForPValue, eval/stats.hpp).
// Thread rules: pure functions.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "eval/stats.hpp"
#include "runner/plan/report_baseline.hpp"
#include "runner/records/cell_files.hpp"

namespace rkv {

struct UniformComparison {
  std::string task, metric;
  std::string label;  ///< the cell's label
  std::string group;  ///< its plot group (label without the budget)
  std::string baseline_label;  ///< the label of the cell it is compared with
  double budget = 0;  ///< its budget (fraction or tokens; run_cells budget_x)
  PairedComparison stats;  ///< cell - uniform, per example (eval/stats.hpp paired_bootstrap, seeded by cell and metric)
  double p_holm = NAN;     ///< Holm-adjusted p across the report; NaN when n < kMinExamplesForPValue
};

/// Comparisons in cell order, then metric order; metrics whose name ends in "_full" (the reference itself) are left
/// out, as are cells without a uniform partner.
std::vector<UniformComparison> compare_with_uniform(const std::vector<CellData>& cells,
                                                    const std::map<std::string, std::vector<std::string>>& metrics,
                                                    int resamples);

/// Comparisons against `baseline` ([output] baseline, runner/plan/report_baseline.hpp), in cell order then metric
/// order, as compare_with_uniform: uniform is compare_with_uniform itself; "full" pairs every compressed cell with the
/// full-cache reference; a selector pairs each cell that does not have every selected value with the cell that does
/// and shares every other swept value (the one agreeing with it on the most free keys, then the one setting the fewest
/// free keys, then the first), and leaves out cells without one. Holm's adjustment runs across the comparisons that print a p.
std::vector<UniformComparison> compare_with_baseline(const std::vector<CellData>& cells,
                                                     const std::map<std::string, std::vector<std::string>>& metrics,
                                                     int resamples, const ReportBaseline& baseline);

/// The baseline the cells were run with (their "report_baseline"; uniform when absent). Cells that disagree (a merge
/// of runs with different [output] baseline) or a malformed field fall back to uniform, and `*note` says why.
ReportBaseline recorded_baseline(const std::vector<CellData>& cells, std::string* note);

/// Labels of the cells with a budget.bytes_fraction that are not themselves eviction alone and have no eviction-alone
/// cell (float32, uniform allocator, no route, no sharing, same scorer, decode policy and bytes_fraction) to be
/// compared with: the equal-bytes section leaves them out, and the report says so.
std::vector<std::string> cells_without_equal_bytes_baseline(const std::vector<CellData>& cells);

/// Every cell with budget.bytes_fraction against eviction alone at the same KV bytes (README "One byte budget"): the
/// cell with no codec, the uniform allocator, the same scorer, decode policy and bytes fraction. Holm's adjustment
/// runs within this family.
std::vector<UniformComparison> compare_at_equal_bytes(const std::vector<CellData>& cells,
                                                      const std::map<std::string, std::vector<std::string>>& metrics,
                                                      int resamples);

/// The markdown section of `task`'s comparisons (### `heading`, how to read it, table); "" when it has none.
std::string comparison_section(const std::vector<UniformComparison>& comparisons, const std::string& task,
                               const std::string& heading = "Paired comparison against uniform (same scorer, budget "
                                                            "and examples)",
                               const std::string& baseline = "uniform");

}  // namespace rkv
