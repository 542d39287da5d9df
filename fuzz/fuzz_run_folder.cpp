// libFuzzer target: a run's output folder as `ripplekv run --resume` and `ripplekv merge` read it back (and
// rkv_results_json, the C API's reader of results.jsonl) — files someone may have hand-edited, truncated or mixed.
//
// Input: up to four files and a list of plants separated by NUL bytes (valid JSON holds no raw NUL):
//   cells/<full-cache cell id>.json \0 run.json \0 results.jsonl \0 cells/<sweep cell id>.json \0 plants
// plants: lines "<kind> <folder>/<path>", kind l (a link to a file outside), d (a link to a folder outside), x (a
// dangling link outside) or f (a foreign regular file), folder "run" or "merged" (the merge's output folder, planted
// before the merge writes it). Whatever is planted, the file and folder outside must stay as they were (issue 37:
// nothing outside the named output folder changes through anything planted inside it).
// The cell ids and base_sha256 are those of a fixed config validated once in a per-process sandbox (so realistic
// seeds pass the identity checks and reach the deeper readers). Each input is written into a fresh folder and read by
//   cell_file_complete and check_cell_model (--resume), merge_outputs into a second folder (merge: cells, run.json;
//   report and tables from the cells), rkv_results_json (results.jsonl), and prepare_output_folder with resume
//   (run.json's identity).
// rkv::InputError (RKV_ERROR_INVALID_ARGUMENT from the C API) is the expected outcome of bad input; any other
// exception (an uncaught one aborts), an RKV_ERROR_INTERNAL, a crash or a sanitizer report is a finding.
//
// gnuplot is never started ($PATH is emptied for this process), so merges stay fast; the plots are simply not drawn.
//
// Seeds: with RIPPLEKV_FUZZ_RUN_FOLDER_SEEDS=<dir> in the environment, the first call writes realistic inputs (built
// with the runner's own writers: write_cell_file, prepare_output_folder, merge_outputs) into <dir> and returns;
// fuzz/corpus/run_folder/ was made that way (`RIPPLEKV_FUZZ_RUN_FOLDER_SEEDS=fuzz/corpus/run_folder
// build/tests/fuzz/test_fuzz_run_folder --gtest_filter='*SeedCorpus'`).
#include <ripplekv/ripplekv.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "core/atomic_file.hpp"
#include "core/errors.hpp"
#include "fuzz_support.hpp"
#include "runner/plan/config.hpp"
#include "runner/run/run.hpp"
#include "runner/records/cell_records.hpp"
#include "runner/report/outputs.hpp"

namespace fs = std::filesystem;

namespace {

const char* kConfig =
    "[model]\npath = \"model.gguf\"\n"
    "[data.calibration]\nfiles = [\"a.txt\"]\nexamples = 2\nprefix_tokens = 32\nwindow_tokens = 8\n"
    "[data.eval]\nfiles = [\"b.txt\"]\nexamples = 2\nprefix_tokens = 32\n"
    "[scorer]\nplugin = \"streamingllm\"\n[allocator]\nplugin = \"uniform\"\n[budget]\nfraction = 0.5\n"
    "[output]\nbootstrap_resamples = 100\n[sweep]\n\"budget.fraction\" = [0.25, 0.5]\n";

struct Sandbox {
  fs::path dir;
  rkv::RunPlan plan;
};

const Sandbox& sandbox() {
  static const Sandbox s = [] {
    ::setenv("PATH", "", 1);  // no gnuplot: merges write their tables without plots
    Sandbox b;
    b.dir = rkv_fuzz::process_temp_dir("run_folder") / "sandbox";
    fs::create_directories(b.dir);
    rkv_fuzz::write_file(b.dir / "model.gguf", "GGUF", 4);  // validation checks that the model exists, not more
    for (const char* name : {"a.txt", "b.txt"}) {
      const std::string text = std::string("Some text of ") + name + ".\n";
      rkv_fuzz::write_file(b.dir / name, text.data(), text.size());
    }
    b.plan = rkv::load_run_plan_from_string(kConfig, (b.dir / "fuzz.toml").string(), b.dir.string());
    return b;
  }();
  return s;
}

/// One example outcome as the runner records it.
rkv::ExampleOutcomeRecord outcome(int64_t example, bool full) {
  rkv::ExampleOutcomeRecord r;
  r.task = "lm_fidelity";
  r.example = example;
  r.values = {{"kl", full ? 0.0 : 0.01 * static_cast<double>(example + 1)}, {"top1_agreement", full ? 1.0 : 0.9},
              {"ppl", 12.5}, {"ppl_full", 12.0}};
  r.full_values = {{"kl", 0.0}, {"top1_agreement", 1.0}, {"ppl", 12.0}, {"ppl_full", 12.0}};
  r.prefix_tokens = 32;
  r.budget_total = full ? 64 : 16;
  r.budgets = full ? std::vector<int64_t>{32, 32} : std::vector<int64_t>{8, 8};
  r.kv_bytes = full ? 4096 : 1024;
  r.kv_bytes_full = 4096;
  r.kv_bytes_end = r.kv_bytes;
  r.compress_seconds = full ? 0 : 0.001;
  if (!full) r.warnings = {"a warning"};
  return r;
}

/// Writes seed inputs built with the runner's own writers into `seeds` (see the file comment).
void write_seeds(const fs::path& seeds) {
  const Sandbox& sb = sandbox();
  const fs::path run = rkv_fuzz::process_temp_dir("run_folder") / "seed_run";
  fs::remove_all(run);
  const rkv::Folder folder = rkv::Folder::open(run.string(), true);
  rkv::RunIdentity id = rkv::prepare_output_folder(sb.plan, folder, false);
  rkv::write_run_identity(sb.plan, folder, false, 1, 1);
  id.model_sha256 = std::string(64, 'a');
  for (size_t c = 0; c < sb.plan.cells.size(); ++c) {
    const bool full = sb.plan.cells[c].config.full_cache;
    rkv::write_cell_file(folder, sb.plan, id, sb.plan.cells[c], {outcome(0, full), outcome(1, full)}, 0.5);
  }
  rkv::merge_outputs({run.string()}, run.string(), true, false);
  auto file = [&](const fs::path& p) { return fs::exists(p) ? rkv::read_file(p.string()) : std::string(); };
  const std::string cell0 = file(run / "cells" / (sb.plan.cells[0].id + ".json"));
  const std::string cell1 = file(run / "cells" / (sb.plan.cells[1].id + ".json"));
  const std::string run_json = file(run / "run.json"), results = file(run / "results.jsonl");
  const std::string nul(1, '\0');
  fs::create_directories(seeds);
  auto seed = [&](const std::string& name, const std::string& bytes) {
    rkv_fuzz::write_file(seeds / name, bytes.data(), bytes.size());
  };
  seed("complete_run.bin", cell0 + nul + run_json + nul + results + nul + cell1);
  seed("cells_only.bin", cell0 + nul + nul + nul + cell1);
  seed("run_json_only.bin", nul + run_json);
  seed("results_only.bin", nul + nul + results);
  seed("one_cell.bin", cell0);
  seed("planted_links.bin", cell0 + nul + run_json + nul + results + nul + cell1 + nul +
                                "l merged/report.md\nd merged/plots\nx merged/results.jsonl\nl merged/.ripplekv.lock\n"
                                "f merged/notes.txt\nl run/cells/x.json\n");
}

/// Parts of the input separated by NUL bytes (at most five; the last one keeps any further NULs).
std::vector<std::string> split(const uint8_t* data, size_t size) {
  std::vector<std::string> parts(1);
  for (size_t i = 0; i < size; ++i) {
    if (data[i] == 0 && parts.size() < 5) {
      parts.emplace_back();
      continue;
    }
    parts.back().push_back(static_cast<char>(data[i]));
  }
  parts.resize(5);
  return parts;
}

/// The sentinel outside every output folder: a file (victim) in a folder (outside) that nothing may change.
const std::string kVictim = "outside the output folders: never changed\n";

/// Plants what the plants part lists (see the file comment) below `root`; malformed lines and paths that would leave
/// run/ or merged/ ("..", absolute, empty components) are skipped.
void plant(const std::string& plants, const fs::path& root, const fs::path& outside) {
  std::istringstream in(plants);
  int count = 0;
  for (std::string line; std::getline(in, line) && count < 16;) {
    if (line.size() < 3 || line[1] != ' ') continue;
    const std::string rel = line.substr(2);
    if (rel.rfind("run/", 0) != 0 && rel.rfind("merged/", 0) != 0) continue;
    bool ok = rel.find('\0') == std::string::npos;
    for (const auto& part : fs::path(rel)) ok = ok && !part.empty() && part != "." && part != ".." && part != "/";
    if (!ok || fs::path(rel).is_absolute()) continue;
    const fs::path at = root / rel;
    std::error_code ec;
    fs::create_directories(at.parent_path(), ec);
    fs::remove_all(at, ec);
    switch (line[0]) {
      case 'l': fs::create_symlink(outside / "victim", at, ec); break;
      case 'd': fs::create_directory_symlink(outside, at, ec); break;
      case 'x': fs::create_symlink(outside / "created", at, ec); break;
      case 'f': rkv_fuzz::write_file(at, "someone else's\n", 15); break;
      default: continue;
    }
    ++count;
  }
}

/// fuzz_fail unless `outside` holds exactly the victim, unchanged.
void check_outside(const fs::path& outside) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(outside)) names.push_back(e.path().filename().string());
  if (names != std::vector<std::string>{"victim"} || rkv::read_file((outside / "victim").string()) != kVictim)
    rkv_fuzz::fuzz_fail("a file or folder outside the output folders was changed through something planted inside");
}

template <class F>
void expect_input_errors_only(const char* step, F&& f) {
  try {
    f();
  } catch (const rkv::InputError& e) {
    rkv_fuzz::note_rejection(step, e);
  }
  // Anything else propagates out of LLVMFuzzerTestOneInput: std::terminate, a finding.
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (const char* seeds = std::getenv("RIPPLEKV_FUZZ_RUN_FOLDER_SEEDS"); seeds && *seeds) {
    static bool written = false;
    if (!written) write_seeds(seeds);
    written = true;
    return 0;
  }
  const Sandbox& sb = sandbox();
  const std::vector<std::string> parts = split(data, size);
  const fs::path run = rkv_fuzz::process_temp_dir("run_folder") / "run";
  const fs::path merged = rkv_fuzz::process_temp_dir("run_folder") / "merged";
  const fs::path outside = rkv_fuzz::process_temp_dir("run_folder") / "outside";
  fs::remove_all(run);
  fs::remove_all(merged);
  fs::remove_all(outside);
  fs::create_directories(outside);
  rkv_fuzz::write_file(outside / "victim", kVictim.data(), kVictim.size());
  fs::create_directories(run / "cells");
  const std::string id0 = sb.plan.cells[0].id, id1 = sb.plan.cells[1].id;
  rkv_fuzz::write_file(run / "cells" / (id0 + ".json"), parts[0].data(), parts[0].size());
  if (!parts[1].empty()) rkv_fuzz::write_file(run / "run.json", parts[1].data(), parts[1].size());
  if (!parts[2].empty()) rkv_fuzz::write_file(run / "results.jsonl", parts[2].data(), parts[2].size());
  if (!parts[3].empty()) rkv_fuzz::write_file(run / "cells" / (id1 + ".json"), parts[3].data(), parts[3].size());
  plant(parts[4], run.parent_path(), outside);

  // --resume: which cells are complete, and of which model.
  for (const std::string& id : {id0, id1}) {
    expect_input_errors_only("cell_file_complete", [&] {
      const rkv::Folder folder = rkv::Folder::open(run.string(), false);
      if (rkv::cell_file_complete(folder, id, sb.plan.base_sha256, "cpu", "f32"))
        rkv::check_cell_model(folder, id, std::string(64, 'a'));
    });
  }
  // merge: cells and run.json into another folder (tables, report).
  expect_input_errors_only("merge_outputs", [&] { rkv::merge_outputs({run.string()}, merged.string(), true, true); });
  // The C API's reader of results.jsonl.
  rkv_context* ctx = nullptr;
  if (rkv_context_create(&ctx) != RKV_OK || !ctx) rkv_fuzz::fuzz_fail("rkv_context_create failed");
  char* json = nullptr;
  const rkv_status st = rkv_results_json(ctx, run.c_str(), &json);
  if (st != RKV_OK && st != RKV_ERROR_INVALID_ARGUMENT)
    rkv_fuzz::fuzz_fail(std::string("rkv_results_json: status ") + std::to_string(st) + ": " +
                        rkv_context_last_error(ctx));
  rkv_string_free(json);
  rkv_context_destroy(ctx);
  // --resume: run.json's identity against the config.
  expect_input_errors_only("prepare_output_folder",
                           [&] { rkv::prepare_output_folder(sb.plan, rkv::Folder::open(run.string(), false), true); });
  check_outside(outside);
  return 0;
}
