// [sweep] of a run config: the keys it may vary (any key of the cell sections), the size of its cartesian product,
// and the cells it expands to, each with its swept values, a stable id and its effective key.
//
// Cell ids: 16 hex digits of fnv1a64 of the swept values' JSON (plus the route's key when the cell has a route), so an
// id is stable across runs and shards and names the same cell in every output folder. The full-cache reference's id
// is fnv1a64 of "full-cache/" + the base config's sha256: the full cache of another model, data or task set is
// another cell. docs/ARCHITECTURE.md "Reproducibility".
//
// Thread rules: pure functions of the TOML and the registry.
#pragma once
#include <string>
#include <toml++/toml.h>
#include <vector>

#include "plugin/registry.hpp"
#include "runner/plan/run_plan.hpp"
#include "runner/plan/toml_reader.hpp"

namespace rkv {

/// One swept key with its values (copied out of [sweep]). The axis "methods" sweeps several settings together: each
/// value is a table of settings (`{ "scorer.plugin" = "snapkv", "allocator.heads" = "adakv" }` or nested tables), a
/// named method in kvpress' sense (one press).
struct SweepAxis {
  std::string key;
  toml::array values;
};

/// The axes of [sweep] in `root`, in the order it lists them: each key checked (check_sweep_key), each setting swept
/// once, each value list non-empty. Empty when there is no [sweep]. `methods = [{...}, ...]` is one axis whose
/// values each set several keys (every key checked as a sweep key, at most once per table, none also swept on its
/// own); a key one table sets and another does not keeps its base value in the other's cells.
std::vector<SweepAxis> read_sweep_axes(const TomlContext& c, const toml::table& root, const PluginRegistry& reg);

/// Refuses a sweep whose cartesian product has more than `max_cells` cells, before any cell is built.
void check_sweep_size(const TomlContext& c, const toml::table& root, const std::vector<SweepAxis>& axes, int64_t max_cells);

/// The full-cache reference cell of a config whose non-swept part hashes to `base_sha256`.
Cell full_cache_cell(const std::string& base_sha256);

/// Every cell of the cartesian product of `axes` over `root` (which must no longer hold [sweep]; each cell sets its
/// values on its own copy), in order (the first axis varies fastest), read with parse_cell. Cells that
/// compute nothing new are left out: a float32 cache (codec format "none") ignores the other codec keys, a joint cell
/// every codec key, a cell without a joint plan every compression.joint key but the plan, and two cells of one id
/// are one. A cell's values hold every key it sets (a "methods" table's keys one by one, so labels name them as
/// any swept key). Errors are parse_cell's, with the sweep cell's values appended.
std::vector<Cell> expand_sweep(const TomlContext& c, toml::table& root, const std::vector<SweepAxis>& axes,
                               const PluginRegistry& reg);

/// 16 lowercase hex digits of `v`.
std::string hex16(uint64_t v);

}  // namespace rkv
