// What a run was, in words a reader checks first: the model (its own name and shape from the manifest each cell file
// records, runner/records/manifest.hpp), the backend and weights, each task's number of examples, prompt length T and
// settings, and the budgets. The report's headline (runner/report/report.hpp) and `ripplekv compare`
// (runner/report/compare_runs.hpp) both open with it.
// Thread rules: pure functions.
#pragma once
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runner/records/cell_files.hpp"

namespace rkv {

/// The weights the cells record ("quantized", "f32"; "not recorded" for cell files that predate the field), each
/// distinct value once, joined by ", ".
std::string weights_label(const std::vector<CellData>& cells);

/// One model as a report names it: "SmolLM2 135M Instruct (`file.gguf`): llama, 134.5M parameters, 30 layers,
/// 9 heads / 3 KV heads (GQA group 3), head dim 64, trained context 8192" from the cell's manifest "model" block; the
/// file name alone ("`file.gguf`") for cell files written before the block existed, "(not recorded)" without a path.
std::string model_line(const nlohmann::json& meta);

/// "n = 2, T = 512 tokens" or "n = 4, T = 480-512 tokens": how many examples of `task` the cells hold (each example
/// index once) and the range of their prompt lengths; "no examples" when none.
std::string examples_and_lengths(const std::vector<CellData>& cells, const std::string& task);

/// A task's settings as the manifest records them (Task::manifest_settings): "continuation_tokens = 64,
/// prefix_tokens = 512" (strings quoted, values of sha256 keys cut to 16 hex digits); "" when the cell predates the
/// manifest or the task is not in it.
std::string task_settings_text(const nlohmann::json& meta, const std::string& task);

/// "0.2, 0.5 (budget.fraction: share of each layer's span kept)": the compressed cells' budgets by kind (fractions,
/// token counts, byte fractions, each kind's values ascending); "none (full cache only)" when every cell is the
/// full cache.
std::string budgets_text(const std::vector<CellData>& cells);

/// The markdown list of what was run: one "- **Model**" line per distinct model, "- **Backend**", one "- **Task**"
/// line per task of `metrics` (examples_and_lengths, settings), "- **Budgets**" with the number of cells. `cells` must
/// not be empty.
std::string what_was_run(const std::vector<CellData>& cells,
                         const std::map<std::string, std::vector<std::string>>& metrics);

}  // namespace rkv
