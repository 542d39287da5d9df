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


}  // namespace rkv
