// `ripplekv run CONFIG`, `ripplekv validate CONFIG` and `ripplekv merge DIR...`.
#include <boost/program_options.hpp>
#include <csignal>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "cli/command.hpp"
#include "cli/command_line.hpp"
#include "core/cancel.hpp"
#include "core/errors.hpp"
#include "core/format.hpp"
#include "plugin/call_guard.hpp"
#include "runner/compress/plan_backend.hpp"
#include "runner/plan/config.hpp"
#include "runner/records/dumps.hpp"
#include "runner/report/outputs.hpp"
#include "runner/run/run.hpp"

namespace po = boost::program_options;

namespace rkv::cli {
namespace {

std::atomic<bool> g_cancel{false};
/// The first Ctrl-C / SIGTERM asks the run to stop (every phase polls it: loading, tokenizing, each example); a
/// second one ends the process at once with the signal's default action.
extern "C" void on_sigint(int sig) {
  if (g_cancel.exchange(true)) {
    std::signal(sig, SIG_DFL);
    std::raise(sig);
  }
}

const char* kRunUsage =
    "usage: ripplekv run CONFIG [--out DIR] [--resume | --force] [--shard I/N] [--threads N] [--set KEY=VALUE]...\n"
    "                    [--backend cpu|cuda|auto] [--dtype f32|bf16] [--dump kept,logits] [--cancel-limit S]\n"
    "                    [--quiet]\n\n"
    "Runs the ablation sweep of CONFIG (TOML; see configs/default.toml) on the real model: the full-cache reference\n"
    "plus every cell of the [sweep]'s cartesian product. Writes results.jsonl, examples.jsonl, budgets.json,\n"
    "profile.json, report.md and plots/ under DIR (default: the config's [output] dir, else ./runs/<config name>\n"
    "in the current folder, so the source tree is never written unless asked). Examples run one at a time: each is\n"
    "prefilled once, every pending cell runs on it, then it is released (memory: the weights and one example's\n"
    "cache). A cell's finished examples go to DIR/partial/<cell>.jsonl as they finish, and the cell to\n"
    "DIR/cells/<cell>.json (atomically) once it has them all, so an interrupted run keeps what it finished;\n"
    "--resume computes only what is missing and refuses when the non-swept part of the config changed. --shard I/N computes a deterministic 1/N of the cells (merge the\n"
    "shard folders with `ripplekv merge`). Ctrl-C or SIGTERM stops the run within about a second in every phase\n"
    "(loading the model, reading and tokenizing texts, between examples, between plugin calls and between decoded\n"
    "tokens; exit 130) and finished cells and examples stay; a second one ends it at once. A plugin call that ignores\n"
    "the cancellation is given --cancel-limit seconds (default 5; < 0: wait for it): then the process ends with\n"
    "exit 130 and a message naming the plugin and the call, keeping what was finished. A plugin that calls exit()\n"
    "inside a call ends the process with exit 3 and \"ripplekv: plugin ID called exit() inside CALL\".\n"
    "Tasks ([tasks] run): lm_fidelity, needle, ruler (RULER's synthetic subtasks; [tasks.ruler] subtasks,\n"
    "context_tokens, examples, seed, max_new_tokens, haystack = paul_graham | eval_text, word_pool = wonderwords |\n"
    "eval_text, length_includes_answer), multi_question (one context, several questions, query-agnostic\n"
    "and query-aware; [tasks.multi_question] context_tokens, questions, examples, seed, max_new_tokens) and longbench.\n"
    "Besides plugins and budgets, a cell sets its decode policy ([compression.decode] policy = none | rolling | h2o |\n"
    "periodic, sweepable as \"compression.decode.policy\"), its codec ([compression.codec]), shared layers\n"
    "([compression.share]) or a joint plan of tokens x bits x sharing under budget.bytes_fraction\n"
    "([compression.joint]; docs/DECISIONS.md \"One byte budget: the joint allocator\"); [compression] rerotate = true re-rotates kept keys for\n"
    "every cell (docs/DECISIONS.md). [prefill] chunk_tokens = C prefills each prompt in chunks of at most C\n"
    "tokens (the same cache as one shot); compress_between_chunks = true makes every compressed cell prefill again\n"
    "in chunks, evicting to its budgets after each (docs/DECISIONS.md \"Chunked prefill\"). [sweep] methods = [{...}, ...] is one\n"
    "axis of named methods, each table setting several keys. [sweep] \"model.path\" = [...] and\n"
    "\"data.eval.seed\" = [...] make runs, not cells: each value (each combination) is an ordinary run of the rest of\n"
    "the config in DIR/runs/<name>/ (one model loaded at a time), then DIR/report.md puts the runs side by side as\n"
    "`ripplekv compare` does (DIR/runs.json lists them; --shard is refused). A sweep may have at most [output]\n"
    "max_cells cells (default 10000);\n"
    "--threads above 4 per core is lowered to that, with a warning.\n"
    "One process writes DIR at a time (DIR/.ripplekv.lock): a second one exits 2 naming the first one's pid. A\n"
    "non-empty DIR that holds no ripplekv run is refused; --force writes there anyway, and in a folder that holds a\n"
    "run it starts over (DIR/cells/*.json and DIR/partial/*.jsonl are deleted).\n"
    "--backend runs the decoder core on cpu (f32, the reference) or cuda (--dtype f32 or bf16); auto = cuda when this\n"
    "build has the CUDA backend and a device is present. Every cell records its backend and compute dtype; --resume\n"
    "refuses a folder whose cells were computed on another backend or dtype, or with another model file.\n"
    "--dump kept writes DIR/dumps/kept/<cell>.jsonl (per task, example, layer and KV head: the prompt positions kept);\n"
    "--dump logits writes DIR/dumps/logits/<cell>/<task>-<example>.npy (lm_fidelity continuation logits, float32\n"
    "[n, V]); both: --dump kept,logits. For the cells this invocation computes (docs/REFERENCE.md \"Outputs\").\n"
    "--set KEY=VALUE (repeatable) overrides one config key, e.g. --set budget.fraction=0.25 --set scorer.plugin=h2o\n"
    "or --set 'sweep.\"budget.fraction\"=[0.1, 0.2]' (a TOML value; a bare word is a string); DIR/config.toml records\n"
    "the effective config, and --resume names the keys that changed when it refuses.\n"
    "Plugins are loaded from the config's top-level plugin_paths (relative to the config), then $RIPPLEKV_PLUGIN_PATH (':'-separated\n"
    "folders or libraries), then the plugin folder beside libripplekv; `ripplekv plugins list` shows what is found.\n";

int run_run(const std::vector<std::string>& args) {
  po::options_description opts("options");
  opts.add_options()("help,h", "show this help")("config", po::value<std::string>(), "config TOML")(
      "out", po::value<std::string>(), "output folder")("resume", "continue: skip finished cells and examples")(
      "force", "write into a non-empty folder that is not a run; start a run's folder over")(
      "shard", po::value<std::string>(), "I/N: run the I-th of N shards")(
      "threads", po::value<int64_t>(), "CPU threads (default: model.threads, 0 = all cores)")(
      "dump", po::value<std::string>(), "kept, logits or kept,logits: write what each cell kept / predicted")(
      "quiet,q", "no progress output")(
      "cancel-limit", po::value<double>()->default_value(5.0),
      "seconds a plugin call may ignore Ctrl-C / SIGTERM before the process ends (< 0: wait)");
  add_backend_options(opts);
  add_set_option(opts);
  po::positional_options_description pos;
  pos.add("config", 1);
  const po::variables_map vm = parse_command_line(args, opts, &pos, kRunUsage);
  if (vm.count("help")) {
    std::cout << kRunUsage << "\n" << opts;
    return 0;
  }
  if (!vm.count("config")) throw UsageError(std::string("missing CONFIG\n") + kRunUsage);
  RunPlan plan = load_run_plan(vm["config"].as<std::string>(), set_overrides(vm));
  apply_backend_options(vm, plan);
  RunOptions o;
  o.out_dir = vm.count("out") ? vm["out"].as<std::string>() : plan.output_dir;
  if (o.out_dir.empty())  // ./runs/<config file name without .toml>, under the current folder
    o.out_dir = (std::filesystem::path("runs") / std::filesystem::path(vm["config"].as<std::string>()).stem()).string();
  if (vm.count("dump")) o.dumps = parse_dump_kinds(vm["dump"].as<std::string>());
  o.resume = vm.count("resume") != 0;
  o.force = vm.count("force") != 0;
  if (o.resume && o.force) throw UsageError("--resume and --force exclude each other (continue a run, or start over)");
  o.quiet = vm.count("quiet") != 0;
  if (vm.count("threads")) o.threads = vm["threads"].as<int64_t>();
  if (o.threads < 0) throw UsageError("--threads must be >= 0 (0: all cores)");
  if (vm.count("shard")) {
    const std::string s = vm["shard"].as<std::string>();
    int i = 0, n = 0;
    char extra = 0;
    if (std::sscanf(s.c_str(), "%d/%d%c", &i, &n, &extra) != 2 || n < 1 || i < 1 || i > n)
      throw UsageError("--shard '" + s + "' is not I/N with 1 <= I <= N");
    o.shard_index = i;
    o.shard_count = n;
  }
  const double cancel_limit = vm["cancel-limit"].as<double>();
  if (std::isnan(cancel_limit)) throw UsageError("--cancel-limit must be a number of seconds (negative: wait)");
  o.cancel = &g_cancel;
  std::signal(SIGINT, on_sigint);
  std::signal(SIGTERM, on_sigint);
  // The host cannot pre-empt a plugin call: one that ignores the cancellation past the limit ends the process here,
  // with what it finished already on disk (cells are written atomically, examples as whole checkpoint lines).
  const std::string out_dir = o.out_dir;
  const CancelWatchdog watchdog(&g_cancel, cancel_limit, [out_dir](double waited) {
    const std::string busy = plugin_calls_in_flight();
    const std::string line = "ripplekv run: cancelled, but " + (busy.empty() ? std::string("the run") : busy) +
                             " did not stop within " + fmt(waited, 3) +
                             " s of the request (--cancel-limit); ending the process. Finished cells are kept in " +
                             out_dir + "/cells (continue with --resume)\n";
    std::fwrite(line.data(), 1, line.size(), stderr);
    std::fflush(stderr);
    ::_exit(130);
  });
  try {
    const RunSummary s = run_ablation(plan, o);
    if (!o.quiet)
      std::cerr << "run: " << s.cells_computed << " cells computed, " << s.cells_skipped
                << " skipped (finished or other shards), " << s.cells_total << " in the sweep; " << s.seconds
                << " s; outputs in " << o.out_dir << "\n";
  } catch (const Cancelled&) {
    std::error_code ec;
    const bool kept = std::filesystem::is_directory(std::filesystem::path(o.out_dir) / "cells", ec) ||
                      std::filesystem::is_directory(std::filesystem::path(o.out_dir) / "partial", ec) ||
                      (!plan.runs.empty() && std::filesystem::is_directory(std::filesystem::path(o.out_dir) / "runs", ec));
    if (kept)
      std::cerr << "ripplekv run: cancelled; finished cells and examples are kept in " << o.out_dir
                << " (continue with --resume)\n";
    else
      std::cerr << "ripplekv run: cancelled before any example finished; nothing to resume in " << o.out_dir << "\n";
    return 130;
  }
  return 0;
}

const char* kValidateUsage =
    "usage: ripplekv validate CONFIG [--backend cpu|cuda|auto] [--dtype f32|bf16] [--set KEY=VALUE]...\n\n"
    "Checks CONFIG without running: TOML syntax, known sections and keys, types and ranges, that files exist, that\n"
    "plugins exist and their params are valid for them, task names and [tasks.ruler] subtasks, sweep keys, and that\n"
    "calibration and evaluation sets are disjoint, that the sweep has at most [output] max_cells cells, that a\n"
    "\"periodic\" decode policy's scorer can re-score while decoding, and that this machine can run the backend\n"
    "(model.backend / --backend, model.dtype / --dtype). Then, from the model's headers alone (no weights; a few MB),\n"
    "that every sequence fits the model's context length and every cell suits the model (its head dim, sliding\n"
    "windows, layers), as a run checks right after loading it, and that [output] baseline selects swept values some\n"
    "cell has. Errors name the TOML line. Prints the cells of the sweep and the report's baseline (and, for a [sweep]\n"
    "over model.path or data.eval.seed, each run with its values, every run's model checked).\n"
    "--set KEY=VALUE overrides a key as `run --set` does (the effective config is what is checked).\n";

/// validate's check and listing of a sweep over run-level keys: every run's model headers, then per run its name,
/// values and cell count (the cells are the first run's listing; every run has the same sweep).
int validate_runs(const RunPlan& plan) {
  std::vector<RunPlan> runs;
  for (size_t k = 0; k < plan.runs.size(); ++k) {
    RunPlan run = load_sweep_run(plan, k);
    try {
      if (!check_run_plan_with_model_headers(run))
        std::cerr << "validate: " << run.model_path << " is not there: lengths and cells not checked against it\n";
    } catch (const InputError& e) {
      throw InputError(std::string(e.what()) + " (in run " + plan.runs[k].name + " of the sweep: " +
                       plan.runs[k].values.dump() + ")");
    }
    runs.push_back(std::move(run));
  }
  std::cout << plan.config_path << ": ok (" << runs.size() << (runs.size() == 1 ? " run" : " runs") << " over ";
  for (size_t i = 0; i < plan.run_axis_keys.size(); ++i) std::cout << (i ? " and " : "") << plan.run_axis_keys[i];
  std::cout << ", written to runs/<name>/ and compared side by side)\n";
  for (size_t k = 0; k < runs.size(); ++k)
    std::cout << "  run " << plan.runs[k].name << "  " << plan.runs[k].values.dump() << "  run id " << runs[k].run_id
              << ", " << runs[k].cells.size() << " cells\n";
  std::cout << "cells of each run:\n";
  for (const auto& c : plan.cells) std::cout << "  " << c.id << "  " << c.label << "  " << c.values.dump() << "\n";
  std::cout << "report baseline: " << plan.report_baseline.describe() << "\n";
  return 0;
}

int run_validate(const std::vector<std::string>& args) {
  po::options_description opts("options");
  opts.add_options()("help,h", "show this help")("config", po::value<std::string>(), "config TOML");
  add_backend_options(opts);
  add_set_option(opts);
  po::positional_options_description pos;
  pos.add("config", 1);
  const po::variables_map vm = parse_command_line(args, opts, &pos, kValidateUsage);
  if (vm.count("help")) {
    std::cout << kValidateUsage << "\n" << opts;
    return 0;
  }
  if (!vm.count("config")) throw UsageError(std::string("missing CONFIG\n") + kValidateUsage);
  RunPlan plan = load_run_plan(vm["config"].as<std::string>(), set_overrides(vm));
  apply_backend_options(vm, plan);
  check_plan_backend(plan, plan_backend_options(plan));  // a backend this machine cannot run is an error here too
  // Task settings no model can run, then (when the model is there) what its headers rule out: lengths beyond its
  // context, cells it cannot run.
  if (!plan.runs.empty()) return validate_runs(plan);  // every run's model, not only the first's
  if (!check_run_plan_with_model_headers(plan))
    std::cerr << "validate: " << plan.model_path << " is not there: lengths and cells not checked against the model\n";
  std::cout << plan.config_path << ": ok (run id " << plan.run_id << ", " << plan.cells.size() << " cells)\n";
  for (const auto& c : plan.cells) std::cout << "  " << c.id << "  " << c.label << "  " << c.values.dump() << "\n";
  std::cout << "report baseline: " << plan.report_baseline.describe() << "\n";
  return 0;
}

const char* kMergeUsage =
    "usage: ripplekv merge DIR... --out OUT [--force]\n\n"
    "Combines the output folders of the shards of one sweep (`ripplekv run --shard I/N`) into OUT: results.jsonl,\n"
    "examples.jsonl, budgets.json, report.md and plots. Corrupt or truncated cell files are reported and skipped.\n"
    "Cells of the sweep (run.json) that no DIR holds are named in a warning and at the top of report.md.\n"
    "Cells computed on different backends or compute dtypes, or with different model files (model_sha256), are\n"
    "refused (one report, one backend, one model). A non-empty OUT that holds no ripplekv run or merge, or that\n"
    "holds a run of its own that is not among the DIRs, is refused unless --force.\n";

int run_merge(const std::vector<std::string>& args) {
  po::options_description opts("options");
  opts.add_options()("help,h", "show this help")("dirs", po::value<std::vector<std::string>>(), "shard folders")(
      "out", po::value<std::string>(), "output folder")("quiet,q", "no summary line")(
      "force", "write into a non-empty folder that holds no ripplekv run or merge");
  po::positional_options_description pos;
  pos.add("dirs", -1);
  const po::variables_map vm = parse_command_line(args, opts, &pos, kMergeUsage);
  if (vm.count("help")) {
    std::cout << kMergeUsage << "\n" << opts;
    return 0;
  }
  if (!vm.count("dirs")) throw UsageError(std::string("missing DIR\n") + kMergeUsage);
  if (!vm.count("out")) throw UsageError(std::string("missing --out OUT\n") + kMergeUsage);
  merge_outputs(vm["dirs"].as<std::vector<std::string>>(), vm["out"].as<std::string>(), vm.count("quiet") != 0,
                vm.count("force") != 0);
  return 0;
}

}  // namespace

RKV_CLI_COMMAND("run", "run an ablation sweep from a TOML config", run_run);
RKV_CLI_COMMAND("validate", "check an ablation config without running it", run_validate);
RKV_CLI_COMMAND("merge", "combine the output folders of sweep shards", run_merge);

}  // namespace rkv::cli
