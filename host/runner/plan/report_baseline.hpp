// [output] baseline: the cell every compressed cell is compared with in the report's paired-comparison tables
// (runner/report/comparisons.hpp). Three forms:
//   (absent) or "uniform"   the uniform allocator at the same scorer, budget, codec, route and decode policy (the
//                           report's behaviour before this key existed)
//   "full"                  the full-cache reference
//   { KEY = VALUE, ... }    a selector over swept keys, e.g. { "scorer.plugin" = "snapkv" } or
//                           { "allocator.plugin" = "uniform" }: a cell's baseline is the cell that has these values and
//                           shares every other swept value (so a sweep over scorers compares scorers, at each budget)
// Keys a selector leaves free: its own keys, and every key of a "methods" axis that sets one of them (a method is one
// choice: its other keys vary with it). Among several cells that qualify, the baseline is the one agreeing with the cell
// on the most free keys that are not selected (h2o + uniform pairs with snapkv + uniform, not snapkv + pyramid), then
// the one setting the fewest free keys (the plain method, e.g. without allocator.heads), then the first in sweep order.
// The baseline is part of the run's config: changing it changes the run id (--resume and merge refuse the mix).
//
// Thread rules: pure values and functions.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <toml++/toml.h>
#include <vector>

namespace rkv {

struct Cell;         // runner/plan/run_plan.hpp
struct SweepAxis;    // runner/plan/sweep.hpp
struct TomlContext;  // runner/plan/toml_reader.hpp

struct ReportBaseline {
  enum class Kind { uniform, full, selector };
  Kind kind = Kind::uniform;
  nlohmann::json select = nlohmann::json::object();  ///< selector: {"scorer.plugin": "snapkv", ...} (swept values)
  std::vector<std::string> free;  ///< selector: keys a cell and its baseline may differ in (sorted)

  /// "uniform", "full", or {"select": {...}, "free": [...]}: what a cell file records.
  nlohmann::json to_json() const;
  /// Reads to_json()'s form; rkv::InputError naming `where` for anything else.
  static ReportBaseline from_json(const nlohmann::json& j, const std::string& where);
  /// How a report names it: "uniform", "the full cache", "scorer.plugin = snapkv".
  std::string describe() const;
  /// True when a cell whose swept values are `values` has every selected value (selector only).
  bool selects(const nlohmann::json& values) const;
  /// True when `a` and `b` (swept values) agree on every key but the free ones (a key absent in both agrees).
  bool same_other_values(const nlohmann::json& a, const nlohmann::json& b) const;
};

/// Reads `output.baseline` from the [output] table `output` (null: absent): "uniform", "full" or an inline table of
/// swept keys. Each key must be a key the sweep sets (a [sweep] key or a key of a "methods" table), each value a value
/// that key takes in some cell of `cells`, and some compressed cell must have every selected value. rkv::InputError
/// naming the key and line otherwise.
ReportBaseline read_report_baseline(const TomlContext& c, const toml::table* output, const std::vector<SweepAxis>& axes,
                                    const std::vector<Cell>& cells);

}  // namespace rkv
