// `ripplekv run` as named phases (runner/run/run.hpp).
#include "runner/run/run.hpp"

#include <algorithm>
#include <filesystem>
#include <iostream>

#include "core/cancel.hpp"
#include "core/errors.hpp"
#include "core/timing.hpp"
#include "model/model.hpp"
#include "runner/compress/plan_backend.hpp"
#include "runner/profile/joint_damage.hpp"
#include "runner/records/cell_records.hpp"
#include "runner/records/manifest.hpp"
#include "runner/report/outputs.hpp"
#include "runner/run/cell_checks.hpp"
#include "runner/run/cells.hpp"
#include "runner/run/examples.hpp"
#include "runner/run/run_state.hpp"
#include "runner/run/sweep_of_runs.hpp"
#include "runner/tasks/task.hpp"

namespace rkv {

namespace {

/// The cells of shard `index` of `count`: every count-th cell of the sweep sorted by id, in config order.
std::vector<size_t> shard_cells(const RunPlan& plan, int index, int count) {
  std::vector<size_t> order(plan.cells.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return plan.cells[a].id < plan.cells[b].id; });
  std::vector<size_t> mine;
  for (size_t k = 0; k < order.size(); ++k)
    if (static_cast<int>(k % static_cast<size_t>(count)) == index - 1) mine.push_back(order[k]);
  std::sort(mine.begin(), mine.end());  // config order within the shard
  return mine;
}

/// The output folder checked, writing nothing but cells/ (its lock is held): the folder's identity, and which cells
/// of this shard are pending or already complete (--resume).
void open_output_folder(RunState& s, const std::string& backend_kind) {
  const RunOptions& opt = s.opt;
  s.id = prepare_output_folder(s.plan, *s.out, opt.resume, opt.force);
  for (size_t c : shard_cells(s.plan, opt.shard_index, opt.shard_count)) {
    // Something other than a file where a cell file goes is refused now, not after the cell has been computed.
    const std::string cell_file = "cells/" + s.plan.cells[c].id + ".json";
    if (const Folder::Kind k = s.out->kind(cell_file); k == Folder::Kind::link || k == Folder::Kind::other ||
                                                        k == Folder::Kind::directory)
      throw InputError("cannot write '" + s.out->path_of(cell_file) + "': it is " +
                       (k == Folder::Kind::link ? "a symbolic link" : k == Folder::Kind::directory ? "a folder"
                                                                                               : "not a regular file") +
                       "; ripplekv never writes through a link or over another kind of file (remove it)");
    if (opt.resume && cell_file_complete(*s.out, s.plan.cells[c].id, s.plan.base_sha256, backend_kind, s.plan.dtype))
      s.complete.push_back(c);
    else
      s.pending.push_back(c);
  }
}

/// The model, tokenizer and backend, and the identity fields they fix (model hash, weights, manifest, backend).
void load_model_and_backend(RunState& s, const BackendOptions& backend_options) {
  s.progress.note("run: loading " + s.plan.model_path);
  s.model.emplace(load_model(s.plan.model_path, weights_for_backend(s.plan.backend, s.plan.weights)));
  s.tok.emplace(Tokenizer::from_path(s.plan.model_path));
  s.id.model_sha256 = s.model->sha256;
  s.id.weights = weight_storage_name(s.model->weights);
  s.id.manifest = reproducibility_manifest(s.plan, *s.tok, *s.model);
  // Cells kept from before must come from this model file (else one report mixes two models' numbers).
  for (size_t c : s.complete) check_cell_model(*s.out, s.plan.cells[c].id, s.model->sha256);
  s.backend = make_backend(s.plan.backend, *s.model, backend_options);
  s.id.backend = s.backend->kind();
  s.id.compute_dtype = s.backend->compute_dtype();
  s.progress.note("run: backend " + s.backend->description());
  s.host.watch(s.opt.cancel);  // plugin calls polling is_cancelled() see Ctrl-C / the C API's cancel callback
  s.instances = std::make_unique<InstancePool>(s.host);
}

/// The sensitivity profiles the pending cells read, one per (signal, scorer) (cached across runs).
void compute_profiles(RunState& s) {
  for (size_t c : s.pending) {
    const CellConfig& cc = s.plan.cells[c].config;
    if (cc.full_cache || !cc.uses_profile || cc.per_prompt_signal || s.profiles.count(profile_key(cc))) continue;
    throw_if_cancelled();
    s.progress.note("run: profiling with " + cc.signal->id + " (base scorer " + cc.scorer->id + ")");
    ProfileRequest req = make_profile_request(s.plan, cc, *s.model, *s.tok);
    req.backend = s.backend.get();
    req.cancel = s.opt.cancel;
    const auto t0 = SteadyClock::now();
    const std::string what = "profile " + cc.signal->id.substr(cc.signal->id.rfind('.') + 1) + ": calibration examples done";
    req.on_example = [&](int64_t done, int64_t total) { s.progress.phase(what, done, total, t0); };
    SensitivityProfile p = compute_profile(req);
    for (const auto& w : p.warnings) std::cerr << "run: warning: " << w << "\n";  // cache problems, the plugin's warnings
    // Provenance of every profile the cells read: computed, or which cache file (and its content's sha256).
    s.id.manifest["profiles"].push_back({{"signal", p.signal}, {"cache_key", p.cache_key}, {"source", p.source}});
    s.progress.note("run: profile " +
                    (p.from_cache ? "read from the cache (computed in " + std::to_string(p.seconds) + " s)"
                                  : "computed in " + std::to_string(p.seconds) + " s") +
                    ", split-half Spearman " + std::to_string(p.split_half_spearman));
    s.profile_order.push_back(profile_key(cc));
    s.profiles.emplace(profile_key(cc), std::move(p));
  }
}

/// The joint cells' damage tables, one per (scorer, grid) (runner/profile/joint_damage.hpp).
void measure_joint_tables(RunState& s) {
  for (size_t c : s.pending) {
    const CellConfig& cc = s.plan.cells[c].config;
    if (cc.full_cache || cc.joint.none() || s.joint_tables.count(joint_table_key(cc))) continue;
    s.joint_tables.emplace(joint_table_key(cc),
                           measure_joint_damage(s.plan, cc, *s.model, *s.tok, *s.backend, s.opt.cancel,
                                                [&](const std::string& line) { s.progress.note(line); }));
  }
}

/// Every check has passed: from here on the folder is this run's (a run refused before left it as it was).
void write_run_start(const RunState& s) {
  write_run_identity(s.plan, *s.out, s.opt.resume, s.opt.shard_index, s.opt.shard_count, s.opt.force);
  for (size_t i = 0; i < s.profile_order.size(); ++i)
    write_profile_file(*s.out, s.profiles.at(s.profile_order[i]), i == 0);
}

}  // namespace

void check_run_plan(const RunPlan& plan) { check_task_plans(plan); }

bool check_run_plan_with_model_headers(const RunPlan& plan) {
  check_run_plan(plan);
  std::error_code ec;
  if (!std::filesystem::exists(plan.model_path, ec)) return false;
  check_plan_on_model_config(plan, describe_model(plan.model_path).config);
  return true;
}

RunSummary run_ablation(const RunPlan& plan, const RunOptions& opt) {
  // Model loading, reading and tokenizing texts and drawing windows poll this (core/cancel.hpp), not only the
  // per-example loops: a cancelled run stops within a fraction of a second in every phase.
  if (!plan.runs.empty()) return run_sweep_of_runs(plan, opt);  // [sweep] over model.path / data.eval.seed
  const CancelScope cancel_scope(opt.cancel);
  const auto t_run = SteadyClock::now();
  if (opt.out_dir.empty()) throw InputError("run: an output folder is required (--out DIR or [output] dir)");
  if (opt.shard_count < 1 || opt.shard_index < 1 || opt.shard_index > opt.shard_count)
    throw InputError("run: --shard " + std::to_string(opt.shard_index) + "/" + std::to_string(opt.shard_count) +
                     " is not I/N with 1 <= I <= N");
  // The backend first: one that cannot be had stops the run before anything is loaded or written.
  const BackendOptions backend_options = plan_backend_options(plan, opt.threads);
  check_plan_backend(plan, backend_options);
  check_run_plan(plan);  // settings no model can run (validate checks them too)
  RunState s(plan, opt);
  const std::string backend_kind = resolve_backend_kind(plan.backend);
  // Opened once (never a folder of someone else's, unless --force) and written only through its descriptor, so that
  // nothing planted in it can redirect a write (core/folder.hpp).
  s.out = open_ripplekv_folder(opt.out_dir, opt.force, "run");
  s.lock = std::make_unique<OutputFolderLock>(*s.out);  // one writer per folder: a second run or merge stops here
  if (s.out->kind("runs.json") != Folder::Kind::missing && !opt.force)  // runner/run/sweep_of_runs.hpp
    throw InputError("run: output folder '" + opt.out_dir + "' holds a sweep of runs (runs.json) whose report.md and "
                     "config.toml this run would overwrite. Choose a new folder, or pass --force");
  open_output_folder(s, backend_kind);

  RunSummary summary;
  summary.cells_total = static_cast<int64_t>(plan.cells.size());
  summary.cells_skipped = summary.cells_total - static_cast<int64_t>(s.pending.size());
  if (s.pending.empty()) {
    s.progress.note("run: nothing to do (" + std::to_string(summary.cells_skipped) +
                    " cells complete or in other shards)");
    write_run_identity(plan, *s.out, opt.resume, opt.shard_index, opt.shard_count, opt.force);
    s.lock->check_held();
    assemble_outputs({opt.out_dir}, *s.out, true);
    summary.seconds = seconds_since(t_run);
    return summary;
  }
  load_model_and_backend(s, backend_options);
  check_cells_on_model(s);
  compute_profiles(s);
  measure_joint_tables(s);
  build_examples(s);
  check_budgets_on_examples(s);
  write_run_start(s);
  run_cells(s, summary);
  s.lock->check_held();
  {
    // Every cell is finished and on disk: the outputs (a second or less) are written even if a cancel arrives now,
    // so a finished run never ends without its report.
    const CancelShield shield;
    assemble_outputs({opt.out_dir}, *s.out, opt.quiet);
  }
  summary.seconds = seconds_since(t_run);
  return summary;
}

}  // namespace rkv
