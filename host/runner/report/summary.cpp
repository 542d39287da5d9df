#include "runner/report/summary.hpp"

#include "runner/tasks/task.hpp"

#include <set>

#include "core/fnv1a.hpp"
#include "eval/stats.hpp"

namespace rkv {

std::map<std::string, std::vector<std::string>> metrics_by_task(const std::vector<CellData>& cells) {
  std::map<std::string, std::set<std::string>> seen;
  for (const auto& c : cells)
    for (const auto& e : c.examples)
      for (const auto& [m, v] : e.values) seen[e.task].insert(m);
  std::map<std::string, std::vector<std::string>> out;
  for (auto& [t, s] : seen) out[t] = std::vector<std::string>(s.begin(), s.end());
  return out;
}

Summary summarize(const CellData& c, const std::string& task, const std::string& metric, int resamples) {
  Summary s;
  std::vector<double> full;
  for (const auto& e : c.examples) {
    if (e.task != task) continue;
    auto it = e.values.find(metric);
    if (it == e.values.end() || !std::isfinite(it->second)) continue;
    s.per_example.push_back(it->second);
    if (auto f = e.full_values.find(metric); f != e.full_values.end()) full.push_back(f->second);
  }
  s.n = s.per_example.size();
  if (s.n == 0) return s;
  s.value = mean_of(s.per_example);
  const uint64_t seed = fnv1a64(c.meta.at("cell_id").get<std::string>() + "/" + task + "/" + metric);
  const Interval ci = bootstrap_mean_ci(s.per_example, seed, resamples);
  s.ci_low = ci.low;
  s.ci_high = ci.high;
  s.full = full.empty() ? NAN : mean_of(full);
  return s;
}

bool is_reference_metric(const std::string& metric) {
  return metric.size() > 5 && metric.compare(metric.size() - 5, 5, "_full") == 0;
}

std::string better_of(const std::string& task, const std::string& metric) {
  const Task* driver = find_task(task);
  if (!driver) return "";
  return driver->lower_is_better(metric) ? "lower is better" : "higher is better";
}

std::string primary_of(const std::string& task, const std::vector<std::string>& names) {
  const Task* driver = find_task(task);
  return driver ? driver->primary_metric(names) : names.front();
}

}  // namespace rkv
