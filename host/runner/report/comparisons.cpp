// Paired comparisons against uniform (runner/report/comparisons.hpp).
#include "runner/report/comparisons.hpp"

#include <cmath>
#include <sstream>

#include "core/errors.hpp"
#include "core/fnv1a.hpp"
#include "core/format.hpp"
#include "runner/report/summary.hpp"

namespace rkv {

namespace {

/// A joint cell (its "joint" field) replaces the allocator with its plan: never uniform, whatever [allocator] says.
bool is_joint(const nlohmann::json& m) { return !m.value("joint", nlohmann::json()).is_null(); }

bool is_uniform(const nlohmann::json& m) {
  return !m.at("full_cache").get<bool>() && !is_joint(m) && short_id(m.at("allocator")) == "uniform" &&
         (!m.contains("heads") || m.at("heads").is_null());
}

/// The uniform cell with the same scorer (and params), route, budget and decode policy as `m`; null when none.
const CellData* uniform_partner(const std::vector<CellData>& cells, const nlohmann::json& m) {
  const CellData* partner = nullptr;
  for (const auto& u : cells)
    if (is_uniform(u.meta) && u.meta.at("scorer") == m.at("scorer") &&
        u.meta.value("route", nlohmann::json()) == m.value("route", nlohmann::json()) &&
        u.meta.at("budget_fraction") == m.at("budget_fraction") &&
        u.meta.at("budget_tokens") == m.at("budget_tokens") && decode_of(u.meta) == decode_of(m) &&
        u.meta.value("budget_bytes_fraction", nlohmann::json()) == m.value("budget_bytes_fraction", nlohmann::json()) &&
        u.meta.value("codec", nlohmann::json()) == m.value("codec", nlohmann::json()) &&
        u.meta.value("share", nlohmann::json()) == m.value("share", nlohmann::json()) && !is_joint(m))
      partner = &u;
  return partner;
}

bool no_codec(const nlohmann::json& m) {
  return !m.contains("codec") || m.at("codec").is_null() || m.at("codec").value("format", "none") == "none";
}

bool has_route(const nlohmann::json& m) {
  const nlohmann::json r = m.value("route", nlohmann::json());
  return !r.is_null() && !r.empty();
}

bool has_share(const nlohmann::json& m) { return !m.value("share", nlohmann::json()).is_null(); }

/// The equal-bytes baseline of `m`: eviction alone -- a float32 cache (no codec) under the uniform allocator, the
/// cell's [scorer] in every layer (no route), every layer its own cache (no sharing) -- with the same scorer, decode policy and budget.bytes_fraction; null
/// when `m` has no bytes budget or is that baseline.
const CellData* equal_bytes_partner(const std::vector<CellData>& cells, const nlohmann::json& m) {
  const nlohmann::json bytes = m.value("budget_bytes_fraction", nlohmann::json());
  if (bytes.is_null() || (is_uniform(m) && no_codec(m) && !has_route(m) && !has_share(m))) return nullptr;
  const CellData* partner = nullptr;
  for (const auto& u : cells)
    if (is_uniform(u.meta) && no_codec(u.meta) && !has_route(u.meta) && !has_share(u.meta) &&
        u.meta.at("scorer") == m.at("scorer") &&
        u.meta.value("budget_bytes_fraction", nlohmann::json()) == bytes && decode_of(u.meta) == decode_of(m))
      partner = &u;
  return partner;
}

/// Values of `metric` on the examples of `task` that both cells hold, paired by example index.
void paired_values(const CellData& a, const CellData& b, const std::string& task, const std::string& metric,
                   std::vector<double>* va, std::vector<double>* vb) {
  for (const auto& e : a.examples) {
    if (e.task != task || !e.values.count(metric)) continue;
    for (const auto& f : b.examples)
      if (f.task == task && f.example == e.example && f.values.count(metric)) {
        va->push_back(e.values.at(metric));
        vb->push_back(f.values.at(metric));
      }
  }
}

}  // namespace

namespace {

/// Every cell against partner(cells, its meta) (skipped when null), metric by metric; `tag` seeds the resampling.
template <class Partner>
std::vector<UniformComparison> compare_with(const std::vector<CellData>& cells,
                                            const std::map<std::string, std::vector<std::string>>& metrics,
                                            int resamples, Partner partner, const std::string& tag) {
  std::vector<UniformComparison> out;
  for (const auto& c : cells) {
    const auto& m = c.meta;
    if (m.at("full_cache").get<bool>()) continue;
    const CellData* base = partner(cells, m);
    if (!base || base == &c) continue;
    for (const auto& [task, names] : metrics)
      for (const auto& metric : names) {
        if (is_reference_metric(metric)) continue;
        std::vector<double> a, b;
        paired_values(c, *base, task, metric, &a, &b);
        if (a.empty()) continue;
        UniformComparison u;
        u.task = task, u.metric = metric, u.label = m.at("label").get<std::string>(), u.group = group_of(m);
        u.baseline_label = base->meta.at("label").get<std::string>();
        u.budget = budget_x(m);
        u.stats = paired_bootstrap(a, b, fnv1a64(m.at("cell_id").get<std::string>() + tag + metric), resamples);
        out.push_back(std::move(u));
      }
  }
  // One Holm family per task: the comparisons one table prints (comparison_section), so the count it states is the
  // number of its rows that print a p.
  std::map<std::string, std::vector<size_t>> by_task;
  for (size_t i = 0; i < out.size(); ++i) by_task[out[i].task].push_back(i);
  for (const auto& [task, rows] : by_task) {
    std::vector<const PairedComparison*> family;
    for (size_t i : rows) family.push_back(&out[i].stats);
    const std::vector<double> holm = holm_adjust_reportable(family);
    for (size_t k = 0; k < rows.size(); ++k) out[rows[k]].p_holm = holm[k];
  }
  return out;
}

}  // namespace

std::vector<UniformComparison> compare_with_uniform(const std::vector<CellData>& cells,
                                                    const std::map<std::string, std::vector<std::string>>& metrics,
                                                    int resamples) {
  return compare_with(
      cells, metrics, resamples,
      [](const std::vector<CellData>& all, const nlohmann::json& m) {
        return is_uniform(m) ? nullptr : uniform_partner(all, m);
      },
      "/vs-uniform/");
}

namespace {

/// The cell `m` is compared with under a selector baseline: it has every selected value and the same other swept
/// values; among several (a "methods" axis frees its keys), the one that agrees with `m` on the most free keys that are
/// not selected (h2o + uniform pairs with snapkv + uniform, not snapkv + pyramid), then the one setting the fewest free
/// keys (the plain method), then the first. Null for a cell that is itself a baseline cell, and for the full cache.
const CellData* selected_partner(const std::vector<CellData>& cells, const nlohmann::json& m, const ReportBaseline& b) {
  const nlohmann::json& values = m.at("cell");
  if (m.at("full_cache").get<bool>() || b.selects(values)) return nullptr;
  const CellData* partner = nullptr;
  size_t best_agree = 0, best_set = 0;
  for (const auto& u : cells) {
    const nlohmann::json& uv = u.meta.at("cell");
    if (u.meta.at("full_cache").get<bool>() || !b.selects(uv) || !b.same_other_values(values, uv)) continue;
    size_t agree = 0, set = 0;
    for (const auto& k : b.free) {
      set += uv.contains(k);
      if (b.select.contains(k)) continue;
      agree += values.contains(k) == uv.contains(k) && (!uv.contains(k) || values.at(k) == uv.at(k));
    }
    if (!partner || agree > best_agree || (agree == best_agree && set < best_set))
      partner = &u, best_agree = agree, best_set = set;
  }
  return partner;
}

const CellData* full_cache_cell(const std::vector<CellData>& cells) {
  for (const auto& u : cells)
    if (u.meta.at("full_cache").get<bool>()) return &u;
  return nullptr;
}

}  // namespace

std::vector<UniformComparison> compare_with_baseline(const std::vector<CellData>& cells,
                                                     const std::map<std::string, std::vector<std::string>>& metrics,
                                                     int resamples, const ReportBaseline& baseline) {
  switch (baseline.kind) {
    case ReportBaseline::Kind::uniform: return compare_with_uniform(cells, metrics, resamples);
    case ReportBaseline::Kind::full:
      return compare_with(
          cells, metrics, resamples,
          [](const std::vector<CellData>& all, const nlohmann::json&) { return full_cache_cell(all); }, "/vs-full/");
    case ReportBaseline::Kind::selector:
      return compare_with(
          cells, metrics, resamples,
          [&](const std::vector<CellData>& all, const nlohmann::json& m) { return selected_partner(all, m, baseline); },
          "/vs-baseline/" + baseline.describe() + "/");
  }
  return {};
}

ReportBaseline recorded_baseline(const std::vector<CellData>& cells, std::string* note) {
  ReportBaseline b;
  bool first = true;
  for (const auto& c : cells) {
    const nlohmann::json j = c.meta.value("report_baseline", nlohmann::json("uniform"));
    ReportBaseline mine;
    try {
      mine = ReportBaseline::from_json(j, "cell '" + c.meta.at("cell_id").get<std::string>() + "'");
    } catch (const InputError& e) {
      if (note) *note = std::string(e.what()) + "; comparing with uniform";
      return ReportBaseline{};
    }
    if (first) {
      b = mine, first = false;
    } else if (mine.to_json() != b.to_json()) {
      if (note)
        *note = "the cells were run with different [output] baseline settings ('" + b.describe() + "', '" +
                mine.describe() + "'); comparing with uniform";
      return ReportBaseline{};
    }
  }
  return b;
}

std::vector<UniformComparison> compare_at_equal_bytes(const std::vector<CellData>& cells,
                                                      const std::map<std::string, std::vector<std::string>>& metrics,
                                                      int resamples) {
  return compare_with(cells, metrics, resamples, equal_bytes_partner, "/vs-equal-bytes/");
}

std::vector<std::string> cells_without_equal_bytes_baseline(const std::vector<CellData>& cells) {
  std::vector<std::string> labels;
  for (const auto& c : cells) {
    const nlohmann::json& m = c.meta;
    if (m.at("full_cache").get<bool>() || m.value("budget_bytes_fraction", nlohmann::json()).is_null()) continue;
    if (is_uniform(m) && no_codec(m) && !has_route(m) && !has_share(m)) continue;  // itself the baseline
    if (!equal_bytes_partner(cells, m)) labels.push_back(m.at("label").get<std::string>());
  }
  return labels;
}

std::string comparison_section(const std::vector<UniformComparison>& comparisons, const std::string& task,
                               const std::string& heading, const std::string& baseline) {
  std::ostringstream rows;
  size_t family = 0;  // the rows of this table that print a p: Holm's family (compare_with)
  for (const auto& u : comparisons) family += u.task == task && u.stats.n >= kMinExamplesForPValue;
  for (const auto& u : comparisons) {
    if (u.task != task) continue;
    const PairedComparison& p = u.stats;
    const bool printable = p.n >= kMinExamplesForPValue;
    rows << "| " << u.label << " | " << u.metric << " | " << fmt(p.mean_difference) << " | [" << fmt(p.ci.low) << ", "
         << fmt(p.ci.high) << "] | " << (printable ? fmt(p.p_value, 3) : "n too small") << " | "
         << (printable ? fmt(u.p_holm, 3) : "n too small") << " | " << (p.sd > 0 ? fmt(p.effect_size, 3) : "n/a (sd = 0)")
         << " | " << (!printable ? "n too small" : p.sd > 0 ? fmt(p.mdd, 3) : "n/a (sd = 0)") << " | " << p.n << " | "
         << u.baseline_label << " |\n";
  }
  if (rows.str().empty()) return "";
  // Rows where the CI and p point different ways at alpha = 0.05 (CI excludes 0 with p >= 0.05, or the reverse).
  size_t disagree = 0;
  for (const auto& u : comparisons) {
    const PairedComparison& p = u.stats;
    if (u.task != task || p.n < kMinExamplesForPValue) continue;
    const bool ci_excludes_0 = p.ci.low > 0 || p.ci.high < 0;
    disagree += ci_excludes_0 != (p.p_value < 0.05);
  }
  std::ostringstream md;
  md << "### " << heading << "\n\n"
     << "Difference = cell - " << baseline << " per example, with its 95% percentile-bootstrap CI. p: two-sided sign-flip "
        "permutation test (exact up to n = 16), printed only when n >= "
     << kMinExamplesForPValue << " (below that: \"n too small\", and the CI is little more than the range of the "
        "differences); p (Holm): "
     << (family ? "adjusted across the " + std::to_string(family) + (family == 1 ? " row" : " rows") +
                      " of this table that print a p"
                : std::string("no comparison in this table has enough examples"))
     << ". d_z = mean / sd of the differences. MDD: the smallest difference this n detects at alpha = 0.05 with power "
        "0.8, (1.96 + 0.84) sd / sqrt(n) (normal approximation; from n = "
     << kMinExamplesForPValue << ").\n\n"
     << "| cell | metric | mean difference | 95% CI | p | p (Holm) | d_z | MDD | n | compared with |\n"
     << "|---|---|---:|---|---:|---:|---:|---:|---:|---|\n"
     << rows.str() << "\n";
  if (disagree)
    md << "> note: in " << disagree << (disagree == 1 ? " row" : " rows")
       << " the 95% CI and p disagree (one excludes 0 at 0.05, the other does not). They answer with different "
          "methods: the percentile bootstrap is known to be too narrow at small n (it resamples only the differences "
          "observed), while the sign-flip p is exact under its null; read such a row as not significant.\n\n";
  return md.str();
}

}  // namespace rkv
