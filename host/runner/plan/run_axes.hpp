// Run-level sweep keys: [sweep] "model.path" = [...] and "data.eval.seed" = [...]. Every cell of a run reads the one
// model and the one set of examples, so these keys do not make cells: each value (each combination, the first key
// varying fastest) makes a run of its own -- an ordinary run of the rest of the config, with its own full-cache
// reference and profile, in <out>/runs/<name>/ -- and the runs are then reported side by side as `ripplekv compare`
// reports finished runs (runner/run/run_axes.hpp). One model is loaded at a time.
//
// Thread rules: pure functions of the TOML.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <toml++/toml.h>
#include <vector>

#include "runner/plan/sweep.hpp"
#include "runner/plan/toml_reader.hpp"

namespace rkv {

/// The [sweep] keys that make runs rather than cells, in the order of their axes: the seed varies fastest, so the runs
/// of one model are neighbours (SmolLM2 seed 1, SmolLM2 seed 2, Gemma seed 1, ...).
inline const std::vector<std::string> kRunAxisKeys = {"data.eval.seed", "model.path"};

/// True when `key` is one of kRunAxisKeys.
bool is_run_axis_key(const std::string& key);

/// Takes the run-level keys out of `root`'s [sweep] (erasing [sweep] when nothing else is left in it), in
/// kRunAxisKeys' order, each checked: a non-empty array of distinct values; model.path's values non-empty strings (resolved and
/// checked as model.path is, per run, when the run's plan is built), data.eval.seed's integers in [0, 2^63 - 1].
/// Empty when [sweep] sweeps neither. rkv::InputError naming the file, line and key otherwise.
std::vector<SweepAxis> take_run_axes(const TomlContext& c, toml::table& root);

/// How many runs `axes` make: the product of their value counts (1 when empty).
size_t run_count(const std::vector<SweepAxis>& axes);

/// Run k's values ({"model.path": "...", "data.eval.seed": 2}; the first axis varies fastest).
nlohmann::json run_values(const std::vector<SweepAxis>& axes, size_t k);

/// Sets run k's values into `root` (model.path, data.eval.seed; the tables created when missing).
void set_run_values(toml::table& root, const std::vector<SweepAxis>& axes, size_t k);

/// Every run's name, in run order: its model file's name without ".gguf" (a model folder's name) and "seed-N", joined
/// by "_"; each run of characters other than ASCII letters, digits, '.', '-' and '_' replaced by one '-', at most 80
/// characters, "run" before a name that would start with '.' or '-'. Two model paths whose names would be equal
/// each get "-" and 6 hex digits of fnv1a64 of the path as written, so a name does not depend on the list's order;
/// "-2", "-3" only where that still meets another name. A name is a folder under <out>/runs/ and a column heading of the report.
std::vector<std::string> run_names(const std::vector<SweepAxis>& axes);

/// Run `name`'s config text: a comment naming `origin`, the run and the --set `overrides` that made it, then
/// `root` (its values set, the run-level sweep keys taken out) as TOML. What the run records as its config.toml and
/// what its plan is built from.
std::string run_config_text(const toml::table& root, const std::string& origin, const std::string& name,
                            const nlohmann::json& values, const std::vector<std::string>& overrides);

}  // namespace rkv
