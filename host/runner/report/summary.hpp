// A cell's numbers as reports and results.jsonl show them: per task the metrics its examples hold, and per metric the
// mean over examples with a 95% percentile-bootstrap CI and the full cache's mean on the same examples.
// Thread rules: pure functions.
#pragma once
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "runner/records/cell_files.hpp"

namespace rkv {

/// Per task, the metric names in a stable (sorted) order.
std::map<std::string, std::vector<std::string>> metrics_by_task(const std::vector<CellData>& cells);

/// A cell's mean of one task's metric over its examples, with a 95% percentile-bootstrap CI seeded by the cell id,
/// task and metric, and the full cache's mean on the same examples (NaN when the task records none).
struct Summary {
  double value = NAN, ci_low = NAN, ci_high = NAN, full = NAN;
  size_t n = 0;
  std::vector<double> per_example;
};
Summary summarize(const CellData& cell, const std::string& task, const std::string& metric, int resamples);

/// True for a metric that is the full cache's own value on each example (its name ends in "_full": "ppl_full"):
/// every cell of a task holds the same values, so reports show it once and never compare it.
bool is_reference_metric(const std::string& metric);

/// "lower is better" or "higher is better" for `metric` of `task` (Task::lower_is_better); "" for a task no table
/// entry names (an older cell file).
std::string better_of(const std::string& task, const std::string& metric);

/// The metric `task`'s headline ranks by (Task::primary_metric over `names`, which must not be empty; the first for a
/// task no table entry names).
std::string primary_of(const std::string& task, const std::vector<std::string>& names);


}  // namespace rkv
