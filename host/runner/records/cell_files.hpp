// The finished cells of a run as the outputs read them: cell files (cells/<id>.json) collected from one or more
// output folders (a run, or the shards of one sweep) and checked field by field. Used by runner/report/ (results.jsonl,
// examples.jsonl, budgets.json, report.md).
// Thread rules: pure functions over their arguments, except collect_cells, which reads files and warns on stderr.
#pragma once
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runner/records/cell_records.hpp"

namespace rkv {

/// One finished cell: its cell file's fields (without "examples") and its per-example outcomes.
struct CellData {
  nlohmann::json meta;
  std::vector<ExampleOutcomeRecord> examples;
};

/// "cpu (f32)": the backend and compute dtype a cell file records (cells written before the dtype existed are f32).
std::string backend_of(const nlohmann::json& meta);

/// The weights a cell file records ("quantized" or "f32", model.weights as loaded); null for cell files written
/// before they were recorded (then the weights are unknown).
nlohmann::json weights_of(const nlohmann::json& meta);

/// The last component of a plugin record's id ("rkv.snapkv" -> "snapkv"); "" for null.
std::string short_id(const nlohmann::json& plugin);

/// The line a cell belongs to in metric-vs-budget plots: its label without the budget (the "group" its cell file
/// records; rebuilt from the plugin ids for cell files written before groups were recorded).
std::string group_of(const nlohmann::json& meta);

/// The decode policy a cell ran under ("none" for cell files written before it was recorded).
std::string decode_of(const nlohmann::json& meta);

/// The budget a cell's x coordinate is: its fraction, else its token count, else 1 (full cache).
double budget_x(const nlohmann::json& meta);

/// Throws rkv::InputError naming the first field a report reads that is missing or of another type.
void check_cell_meta(const nlohmann::json& meta);

/// Cell files of every input, deduplicated by id; throws rkv::InputError when they belong to different non-swept
/// configs, backends or model files. `order` receives the cell ids the inputs' run.json files list (first occurrence
/// order), `labels` their labels; a cell takes the label and group its sweep's run.json gives it. With `only_listed`,
/// a cell file that its own folder's run.json does not list (left over from an earlier sweep that --resume changed) is
/// skipped. Corrupt cell files are skipped with a warning on stderr naming the file and the field. With `warn`
/// (merge), skipped leftovers and inputs of different sweeps are also said on stderr. Ends with
/// drop_repeats_of_other_sweeps.
std::vector<CellData> collect_cells(const std::vector<std::string>& inputs, std::vector<std::string>* order,
                                    std::map<std::string, std::string>* labels, bool only_listed, bool warn);

/// Cells of several sweeps (different run ids) that compute the same thing (equal effective_key) are one
/// measurement: the first is kept, the others dropped, so a report never shows one computation twice under two
/// labels. Within one sweep equal keys stay (uniform under two signals is reported under each label). Dropped cells'
/// ids leave `order` (they are not missing). With `warn`, says on stderr that the inputs mix sweeps.
std::vector<CellData> drop_repeats_of_other_sweeps(std::vector<CellData> cells, std::vector<std::string>* order,
                                                   bool warn);

}  // namespace rkv
