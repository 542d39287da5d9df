// `ripplekv run` end to end on a tiny synthetic model (label unit; no assets needed), for the reliability issue:
// a run cancelled inside a slow plugin (from another thread and through the C API's cancel callback) stops within a
// bounded time and leaves only complete cell files; a plugin that ignores cancellation delays the stop by at most the
// rest of the current example; corrupt or truncated cell files and results.jsonl lines are reported and recomputed
// (--resume) or skipped (merge), never fatal; prompts longer than the model's context length are a clear error.
#include <gtest/gtest.h>
#include <ripplekv/ripplekv.h>

#include <atomic>
#include <csignal>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <nlohmann/json.hpp>
#include <map>
#include <set>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "core/atomic_file.hpp"
#include "core/errors.hpp"
#include "core/sha256.hpp"
#include "core/subprocess.hpp"
#include "common/child_process.hpp"
#include "backend/backend.hpp"
#include "backend/cpu/forward.hpp"
#include "runner/tasks/lm_fidelity.hpp"
#include "plugin/instance.hpp"
#include "plugin/scorer_call.hpp"
#include "runner/analyze/analyze.hpp"
#include "runner/decode/generate_compressed.hpp"
#include "runner/profile/compression_damage.hpp"
#include "runner/compress/plan_backend.hpp"
#include "runner/profile/profile.hpp"
#include "runner/plan/config.hpp"
#include "runner/run/run.hpp"
#include "runner/records/dumps.hpp"
#include "runner/records/cell_records.hpp"
#include "synthetic_run.hpp"
#include "tokenizer/tokenizer.hpp"
#include "runner/report/outputs.hpp"

namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

/// One folder per test with the synthetic model and texts.
class SyntheticRun : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = fs::temp_directory_path() / ("rkv-reliab-" + std::to_string(::getpid()) + "-" +
                                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir);
    rkv_test::write_synthetic_run_folder(dir);
  }
  // RKV_KEEP=1 keeps the folder (its outputs and plots) for a reader debugging a failure.
  void TearDown() override {
    if (!std::getenv("RKV_KEEP")) fs::remove_all(dir);
  }

  /// A config: `scorer_table` is the [scorer] section (with its params), `extra` is appended.
  std::string config(const std::string& scorer_table, const std::string& extra = "") const {
    return "plugin_paths = [\"" RKV_TEST_BINARY_DIR "/tests/plugins/slow\"]\n"
           "[model]\npath = \"model.gguf\"\nthreads = 1\n"
           "[data.calibration]\nfiles = [\"cal.txt\"]\nexamples = 2\nprefix_tokens = 32\nwindow_tokens = 8\n"
           "[data.eval]\nfiles = [\"eval.txt\"]\nexamples = 2\nprefix_tokens = 32\n" +
           scorer_table + "[allocator]\nplugin = \"uniform\"\n[budget]\nfraction = 0.5\n" +
           "[tasks.lm_fidelity]\ncontinuation_tokens = 8\n[output]\nbootstrap_resamples = 100\n" + extra;
  }
  rkv::RunPlan plan(const std::string& text) const {
    const fs::path p = dir / "cfg.toml";
    std::ofstream(p) << text;
    return rkv::load_run_plan(p.string());
  }
  /// Every file under out/cells is a complete cell record (no temporary or partial file).
  static void expect_only_complete_cells(const fs::path& out, size_t expected) {
    size_t n = 0;
    const std::string base =
        nlohmann::json::parse(rkv::read_file((out / "run.json").string())).at("base_sha256").get<std::string>();
    for (const auto& e : fs::directory_iterator(out / "cells")) {
      const std::string name = e.path().filename().string();
      ASSERT_EQ(e.path().extension(), ".json") << "stray file " << name;
      EXPECT_TRUE(rkv::cell_file_complete(rkv::Folder::open(out.string(), false), e.path().stem().string(), base, "cpu",
                                          "f32"))
          << name;
      ++n;
    }
    EXPECT_EQ(n, expected);
  }
  /// Every file under out/partial is a checkpoint (runner/records/checkpoint.hpp) of one of `cells` cells holding
  /// exactly `examples` finished examples after its header line, each a whole JSON line.
  static void expect_checkpoints(const fs::path& out, size_t cells, size_t examples) {
    size_t n = 0;
    for (const auto& e : fs::directory_iterator(out / "partial")) {
      ASSERT_EQ(e.path().extension(), ".jsonl") << "stray file " << e.path();
      std::ifstream in(e.path());
      std::vector<nlohmann::json> lines;
      for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
      ASSERT_GE(lines.size(), 1u);
      EXPECT_EQ(lines.front().at("cell_id"), e.path().stem().string());
      EXPECT_EQ(lines.size() - 1, examples) << e.path();
      ++n;
    }
    EXPECT_EQ(n, cells);
  }
  fs::path dir;
};

const char* kSlowPoll = "[scorer]\nplugin = \"slow_scorer\"\n[scorer.slow_scorer]\nmode = \"poll\"\nlimit_seconds = 60\n";

TEST_F(SyntheticRun, CancelledInsideASlowScorerKeepsTheFinishedExampleOfEveryCell) {
  const rkv::RunPlan p = plan(config(kSlowPoll));
  ASSERT_EQ(p.cells.size(), 2u);  // full cache, then the slow scorer's cell; two examples
  std::atomic<bool> cancel{false};
  rkv::RunOptions o;
  o.out_dir = (dir / "out").string();
  o.quiet = true;
  o.cancel = &cancel;
  // Example 1 runs the full cache, then the slow scorer, which polls until cancelled: cancel it from a thread.
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(1000));
    cancel.store(true);
  });
  const auto t0 = Clock::now();
  EXPECT_THROW(rkv::run_ablation(p, o), rkv::Cancelled);
  const double s = seconds_since(t0);
  canceller.join();
  EXPECT_LT(s, 60.0);  // the fixture's own limit is 60 s per call: well below means the cancellation stopped it
  expect_only_complete_cells(dir / "out", 0);  // no cell has both examples
  // The full cache finished example 1 before the slow cell started it: its checkpoint keeps it, the other is empty.
  const rkv::Cell& full = p.cells[0];
  std::ifstream full_checkpoint(dir / "out" / "partial" / (full.id + ".jsonl"));
  size_t lines = 0;
  for (std::string line; std::getline(full_checkpoint, line); ++lines) EXPECT_TRUE(nlohmann::json::parse(line).is_object());
  EXPECT_EQ(lines, 2u);  // header + example 1
  std::ifstream slow_checkpoint(dir / "out" / "partial" / (p.cells[1].id + ".jsonl"));
  lines = 0;
  for (std::string line; std::getline(slow_checkpoint, line); ++lines) EXPECT_TRUE(nlohmann::json::parse(line).is_object());
  EXPECT_EQ(lines, 1u);  // header only
  EXPECT_FALSE(fs::exists(dir / "out" / "results.jsonl"));  // merged outputs only after a complete run
  // A partial report over what finished (the full cache's example 1), marked partial at its top.
  const std::string report = rkv::read_file((dir / "out" / "report.md").string());
  EXPECT_NE(report.find("> warning: partial report: the run was cancelled after 0 of 2 examples"), std::string::npos)
      << report;
  EXPECT_NE(report.find("cells: 1;"), std::string::npos) << report;  // the slow cell finished nothing: left out
}

/// Cancels 1 s after the run started, i.e. inside the slow scorer's cell on the first example (the slow scorer polls
/// until cancelled; the full-cache cell before it takes milliseconds).
struct CancelState {
  std::atomic<int64_t> started_at_ns{0};
  std::atomic<int64_t> progress_calls{0};
};
void on_progress(int64_t, int64_t, const char*, void* user) { ++static_cast<CancelState*>(user)->progress_calls; }
int cancel_inside_second_cell(void* user) {
  const auto* st = static_cast<CancelState*>(user);
  return Clock::now().time_since_epoch().count() - st->started_at_ns.load() > 1000000000 ? 1 : 0;
}

TEST_F(SyntheticRun, CApiCancelCallbackStopsASlowScorer) {
  const fs::path cfg = dir / "cfg.toml";
  std::ofstream(cfg) << config(kSlowPoll);
  rkv_context* ctx = nullptr;
  ASSERT_EQ(rkv_context_create(&ctx), RKV_OK);
  const std::string out = (dir / "out").string(), cfg_path = cfg.string();
  CancelState st;
  st.started_at_ns.store(Clock::now().time_since_epoch().count());
  rkv_run_options o{};
  o.struct_size = sizeof o;
  o.config_path = cfg_path.c_str();
  o.out_dir = out.c_str();
  o.progress = &on_progress;
  o.cancel = &cancel_inside_second_cell;
  o.user_data = &st;
  const auto t0 = Clock::now();
  EXPECT_EQ(rkv_run(ctx, &o), RKV_ERROR_CANCELLED) << rkv_context_last_error(ctx);
  EXPECT_LT(seconds_since(t0), 60.0);  // the fixture gives up after 60 s per call
  EXPECT_EQ(st.progress_calls.load(), 0);  // cancelled inside the first example
  EXPECT_EQ(std::string(rkv_context_last_error(ctx)), "cancelled");
  EXPECT_FALSE(fs::exists(dir / "out" / "results.jsonl"));
  for (const auto& e : fs::directory_iterator(dir / "out" / "cells")) EXPECT_EQ(e.path().extension(), ".json");
  rkv_context_destroy(ctx);
}

/// The number of finished examples in `out`/partial/<cell>.jsonl (lines after the header); -1 when it is missing.
int64_t checkpoint_examples(const fs::path& out, const std::string& cell) {
  std::ifstream in(out / "partial" / (cell + ".jsonl"));
  if (!in) return -1;
  int64_t lines = 0;
  for (std::string line; std::getline(in, line); ++lines) EXPECT_TRUE(nlohmann::json::parse(line).is_object());
  return lines - 1;
}

TEST_F(SyntheticRun, APluginIgnoringCancellationDelaysTheStopByAtMostOneCall) {
  // 0.4 s per score() call, 6 layers: 2.4 s per example of the slow cell. Cancelled 0.1 s into example 2 (inside
  // the slow cell's first layer there): the run finishes that one call, then the cancellation point before the next
  // per-layer call stops it. Before: it ran the example's other five layers (2 s more) and finished the example.
  fs::remove_all(dir);
  rkv_test::write_synthetic_run_folder(dir, "llama", 8, 6);
  std::string text = config("[scorer]\nplugin = \"slow_scorer\"\n[scorer.slow_scorer]\nmode = \"ignore\"\nseconds = 0.4\n");
  text.replace(text.find("examples = 2\nprefix_tokens = 32\n["), 13, "examples = 3\n");
  const rkv::RunPlan p = plan(text);
  std::atomic<bool> cancel{false};
  rkv::RunOptions o;
  o.out_dir = (dir / "out").string();
  o.quiet = true;
  o.cancel = &cancel;
  Clock::time_point t_cancel;
  std::thread canceller;
  o.progress = [&](int64_t done, int64_t, const std::string&) {
    if (done == 1)
      canceller = std::thread([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        t_cancel = Clock::now();
        cancel.store(true);
      });
  };
  EXPECT_THROW(rkv::run_ablation(p, o), rkv::Cancelled);
  ASSERT_TRUE(canceller.joinable());
  canceller.join();
  const double after_cancel = seconds_since(t_cancel);
  EXPECT_LT(after_cancel, 1.5);  // the rest of one 0.4 s call, with slack (not the example's 2 s left)
  expect_only_complete_cells(dir / "out", 0);
  EXPECT_EQ(checkpoint_examples(dir / "out", p.cells[0].id), 2);  // the full cache finished examples 1 and 2
  EXPECT_EQ(checkpoint_examples(dir / "out", p.cells[1].id), 1);  // the slow cell only example 1
}

std::pair<int, std::string> cli_argv(const std::vector<std::string>& args, const fs::path& cwd);  // below

TEST_F(SyntheticRun, CliEndsARunWhosePluginIgnoresSigtermPastTheCancelLimit) {
  // One score() call takes 30 s and never polls the host. SIGTERM inside it: with --cancel-limit 1 the process ends
  // about 1 s later with exit 130 and a message naming the plugin and the call; the full cache's finished example
  // stays in its checkpoint. Before: the run waited for every remaining call (minutes).
  const rkv::RunPlan p = plan(config(  // writes cfg.toml
      "[scorer]\nplugin = \"slow_scorer\"\n[scorer.slow_scorer]\nmode = \"ignore\"\nseconds = 30\n"));
  const fs::path log = dir / "run.log";
  const pid_t pid = rkv::start_program({std::string(RKV_TEST_BINARY_DIR) + "/bin/ripplekv", "run", "cfg.toml", "--out",
                                        "out", "--cancel-limit", "1"},
                                       dir.string(), log.string());
  ASSERT_GT(pid, 0);
  // Wait until the full-cache cell has checkpointed example 1: the slow cell's first call is then under way.
  const auto t_start = Clock::now();
  auto whole_lines = [&] {  // polled while the run appends: count only complete lines, parse nothing
    std::ifstream in(dir / "out" / "partial" / (p.cells[0].id + ".jsonl"));
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return std::count(text.begin(), text.end(), '\n');
  };
  while (seconds_since(t_start) < 60 && whole_lines() < 2) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ::kill(pid, SIGTERM);
  const auto t_kill = Clock::now();
  const int rc = rkv_test::finish(pid, 20.0);
  const double after = seconds_since(t_kill);
  const std::string text = rkv::read_file(log.string());
  EXPECT_EQ(rc, 130) << text;
  EXPECT_GE(after, 0.9) << text;  // it did give the call its limit ...
  EXPECT_LT(after, 6.0) << text;  // ... and no more (the call alone would take 30 s)
  EXPECT_NE(text.find("ripplekv run: cancelled, but plugin 'org.test.slow_scorer' inside score (for "),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("(--cancel-limit); ending the process. Finished cells are kept in out/cells"), std::string::npos)
      << text;
  EXPECT_EQ(checkpoint_examples(dir / "out", p.cells[0].id), 1);  // the finished example is intact
  expect_only_complete_cells(dir / "out", 0);
}

TEST_F(SyntheticRun, CliPluginCallingExitEndsWithStatus3NamingThePluginAndTheCall) {
  // Before: `plugins check` and `run` both exited 0 with no message.
  const auto [rc, out] = cli_argv({"plugins", "check", "org.test.slow_scorer", "--param", "mode=exit",
                                   "--plugin-path", RKV_TEST_BINARY_DIR "/tests/plugins/slow"},
                                  dir);
  EXPECT_EQ(rc, 3) << out;
  EXPECT_NE(out.find("ripplekv: plugin org.test.slow_scorer called exit() inside score\n"), std::string::npos) << out;
  std::ofstream(dir / "cfg.toml") << config("[scorer]\nplugin = \"slow_scorer\"\n[scorer.slow_scorer]\nmode = \"exit\"\n");
  const auto [run_rc, run_out] = cli_argv({"run", "cfg.toml", "--out", "out", "--quiet"}, dir);
  EXPECT_EQ(run_rc, 3) << run_out;
  EXPECT_NE(run_out.find("ripplekv: plugin org.test.slow_scorer called exit() inside score\n"), std::string::npos)
      << run_out;
}

// validate reads the model's headers (no weights) and refuses what a run would refuse right after loading the model:
// here a sequence longer than the synthetic model's context length of 256.
TEST_F(SyntheticRun, ValidateChecksLengthsAgainstTheModelsHeaders) {
  std::ofstream(dir / "cfg.toml") << config("[scorer]\nplugin = \"streamingllm\"\n");
  const auto [rc, out] = cli_argv({"validate", "cfg.toml"}, dir);
  EXPECT_EQ(rc, 0) << out;
  const auto [long_rc, long_out] = cli_argv({"validate", "cfg.toml", "--set", "data.eval.prefix_tokens=250"}, dir);
  EXPECT_EQ(long_rc, 2) << long_out;
  EXPECT_NE(long_out.find("data.eval.prefix_tokens + tasks.lm_fidelity.continuation_tokens = 258 tokens is longer "
                          "than the model's context length 256"),
            std::string::npos)
      << long_out;
}

/// results.jsonl rows without the timing fields, sorted.
std::vector<nlohmann::json> result_rows(const fs::path& out) {
  std::vector<nlohmann::json> rows;
  std::ifstream in(out / "results.jsonl");
  for (std::string line; std::getline(in, line);) {
    nlohmann::json j = nlohmann::json::parse(line);  // every line must parse
    for (const char* k : {"seconds", "compress_seconds", "decode_tokens_per_second"}) j.erase(k);
    rows.push_back(j);
  }
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.dump() < b.dump(); });
  return rows;
}

// An interrupted run keeps every (cell, example) it finished; --resume computes only the rest, and the outputs equal
// an uninterrupted run's. Examples run one at a time (each prefilled once for every cell), so a cancellation after
// the first example leaves every cell one example in.
TEST_F(SyntheticRun, AnInterruptedRunResumesAfterItsLastFinishedExampleAndEqualsAnUninterruptedOne) {
  std::string text = config("[scorer]\nplugin = \"snapkv\"\n[scorer.snapkv]\nwindow = 4\n",
                            "[sweep]\n\"budget.fraction\" = [0.3, 0.6]\n\"allocator.plugin\" = [\"uniform\", \"pyramid\"]\n");
  text.replace(text.find("examples = 2\nprefix_tokens = 32\n["), 13, "examples = 4\n");
  const rkv::RunPlan p = plan(text);
  ASSERT_EQ(p.cells.size(), 5u);  // the full cache + 2 allocators x 2 fractions; 4 examples
  rkv::RunOptions whole;
  whole.out_dir = (dir / "whole").string();
  whole.quiet = true;
  ASSERT_EQ(rkv::run_ablation(p, whole).cells_computed, 5);
  std::atomic<bool> cancel{false};
  rkv::RunOptions o;
  o.out_dir = (dir / "out").string();
  o.quiet = true;
  o.cancel = &cancel;
  std::vector<int64_t> steps;
  o.progress = [&](int64_t done, int64_t total, const std::string&) {
    steps.push_back(done);
    EXPECT_EQ(total, 4);  // one step per example
    if (done == 2) cancel.store(true);  // stops before the third example
  };
  EXPECT_THROW(rkv::run_ablation(p, o), rkv::Cancelled);
  EXPECT_EQ(steps, (std::vector<int64_t>{1, 2}));
  expect_only_complete_cells(dir / "out", 0);
  expect_checkpoints(dir / "out", 5, 2);
  // A fresh run into the folder would lose that work: refused, as a folder with finished cells is.
  rkv::RunOptions fresh;
  fresh.out_dir = o.out_dir;
  fresh.quiet = true;
  EXPECT_THROW(rkv::run_ablation(p, fresh), rkv::InputError);
  rkv::RunOptions resume = fresh;
  resume.resume = true;
  EXPECT_EQ(rkv::run_ablation(p, resume).cells_computed, 5);
  EXPECT_FALSE(fs::exists(dir / "out" / "partial"));  // every checkpoint became a cell file
  expect_only_complete_cells(dir / "out", 5);
  EXPECT_EQ(result_rows(dir / "out"), result_rows(dir / "whole"));
  EXPECT_EQ(rkv::read_file((dir / "out" / "budgets.json").string()), rkv::read_file((dir / "whole" / "budgets.json").string()));
}

TEST_F(SyntheticRun, CorruptCellFilesAndResultLinesAreReportedAndSkippedNeverFatal) {
  const rkv::RunPlan p = plan(config("[scorer]\nplugin = \"streamingllm\"\n",
                                     "[sweep]\n\"budget.fraction\" = [0.3, 0.6]\n"));
  ASSERT_EQ(p.cells.size(), 3u);
  const fs::path out = dir / "out";
  rkv::RunOptions o;
  o.out_dir = out.string();
  o.quiet = true;
  EXPECT_EQ(rkv::run_ablation(p, o).cells_computed, 3);
  const std::vector<nlohmann::json> reference = result_rows(out);
  ASSERT_FALSE(reference.empty());

  // A truncated cell file, an empty one, and results.jsonl with a truncated and a garbage line (as if copied from
  // an interrupted machine).
  const std::string cell1 = p.cells[1].id, cell2 = p.cells[2].id;
  {
    const std::string text = rkv::read_file((out / "cells" / (cell1 + ".json")).string());
    std::ofstream(out / "cells" / (cell1 + ".json"), std::ios::trunc) << text.substr(0, text.size() / 2);
    std::ofstream(out / "cells" / (cell2 + ".json"), std::ios::trunc);
    std::ofstream(out / "results.jsonl", std::ios::app) << "{\"cell_id\": \"x\", \"val\n\x01\x02 not json\n";
  }
  {  // merge: reported and skipped; the other cells' rows are all there
    testing::internal::CaptureStderr();
    rkv::merge_outputs({out.string()}, (dir / "merged").string(), true);
    const std::string err = testing::internal::GetCapturedStderr();
    EXPECT_NE(err.find("skipping corrupt cell file"), std::string::npos) << err;
    EXPECT_NE(err.find(cell1), std::string::npos) << err;
    EXPECT_NE(err.find(cell2), std::string::npos) << err;
    std::set<std::string> cells;
    for (const auto& r : result_rows(dir / "merged")) cells.insert(r.at("cell_id").get<std::string>());
    EXPECT_EQ(cells, (std::set<std::string>{p.cells[0].id}));
  }
  {  // --resume: reported and recomputed; results.jsonl is rebuilt whole from the cells
    o.resume = true;
    testing::internal::CaptureStderr();
    const rkv::RunSummary s = rkv::run_ablation(p, o);
    const std::string err = testing::internal::GetCapturedStderr();
    EXPECT_EQ(s.cells_computed, 2);
    EXPECT_NE(err.find("is corrupt or incomplete; the cell will be recomputed"), std::string::npos) << err;
    EXPECT_EQ(result_rows(out), reference);
    expect_only_complete_cells(out, 3);
  }
}

TEST_F(SyntheticRun, ResumeRefusesCellsOfAnotherBaseConfigEvenWithoutRunJson) {
  const fs::path out = dir / "out";
  rkv::RunOptions o;
  o.out_dir = out.string();
  o.quiet = true;
  const std::string base = config("[scorer]\nplugin = \"streamingllm\"\n");
  ASSERT_NE(base.find("fraction = 0.5"), std::string::npos);
  EXPECT_EQ(rkv::run_ablation(plan(base), o).cells_computed, 2);  // full cache + one compressed cell
  // The non-swept budget changes, and run.json (which would have told) is gone or corrupt: the folder no longer
  // counts as a ripplekv run (refused unless --force), and even with --force the cells themselves carry the base
  // config's sha256, so --resume still refuses instead of reusing results of another budget.
  std::string changed = base;
  changed.replace(changed.find("fraction = 0.5"), 14, "fraction = 0.4");
  o.resume = true;
  for (const char* damage : {"remove", "corrupt"}) {
    if (std::string(damage) == "remove") fs::remove(out / "run.json");
    else std::ofstream(out / "run.json", std::ios::trunc) << "{";
    o.force = false;
    try {
      rkv::run_ablation(plan(changed), o);
      FAIL() << "expected an InputError (" << damage << ", without --force)";
    } catch (const rkv::InputError& e) {
      EXPECT_NE(std::string(e.what()).find("holds no ripplekv run"), std::string::npos) << e.what();
    }
    o.force = true;
    try {
      rkv::run_ablation(plan(changed), o);
      FAIL() << "expected an InputError (" << damage << ")";
    } catch (const rkv::InputError& e) {
      EXPECT_NE(std::string(e.what()).find("computed with another non-swept config"), std::string::npos) << e.what();
    }
  }
  // The same base config resumes with nothing to compute (--force: without run.json the folder is not a run's).
  fs::remove(out / "run.json");
  EXPECT_EQ(rkv::run_ablation(plan(base), o).cells_computed, 0);
}

TEST_F(SyntheticRun, ResumeAndMergeRefuseToMixBackends) {
  const fs::path out = dir / "out";
  rkv::RunOptions o;
  o.out_dir = out.string();
  o.quiet = true;
  const rkv::RunPlan p = plan(config("[scorer]\nplugin = \"streamingllm\"\n"));
  ASSERT_EQ(rkv::run_ablation(p, o).cells_computed, 2);
  // Pretend one finished cell came from the cuda backend in bf16 (as a shard on a GPU node would write it).
  fs::path cell;
  for (const auto& e : fs::directory_iterator(out / "cells")) cell = e.path();
  nlohmann::json j = nlohmann::json::parse(rkv::read_file(cell.string()));
  j["backend"] = "cuda";
  j["compute_dtype"] = "bf16";
  std::ofstream(cell, std::ios::trunc) << j.dump();
  o.resume = true;
  try {
    rkv::run_ablation(p, o);
    FAIL() << "--resume reused a cell of another backend";
  } catch (const rkv::InputError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("was computed on backend cuda (bf16); this run uses cpu (f32)"), std::string::npos) << m;
    EXPECT_NE(m.find(cell.filename().string()), std::string::npos) << m;
  }
  try {
    rkv::merge_outputs({out.string()}, (dir / "merged").string(), true);
    FAIL() << "merge mixed two backends";
  } catch (const rkv::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("merge runs of one backend and dtype"), std::string::npos) << e.what();
  }
  // A cell file without its backend, with a compute_dtype that is not a string, or with a kv_bytes_end that is not a
  // non-negative integer is corrupt: recomputed by --resume, skipped by merge, never an internal error.
  auto damaged = [&](const std::function<void(nlohmann::json&)>& damage) {
    nlohmann::json d = nlohmann::json::parse(rkv::read_file(cell.string()));
    damage(d);
    std::ofstream(cell, std::ios::trunc) << d.dump();
  };
  damaged([](nlohmann::json& d) { d.erase("backend"); });
  EXPECT_EQ(rkv::run_ablation(p, o).cells_computed, 1);
  damaged([](nlohmann::json& d) { d["compute_dtype"] = 5; });
  EXPECT_NO_THROW(rkv::merge_outputs({out.string()}, (dir / "merged").string(), true));
  EXPECT_EQ(rkv::run_ablation(p, o).cells_computed, 1);
  for (const nlohmann::json bad : {nlohmann::json(-5), nlohmann::json(1.5e30), nlohmann::json("x")}) {
    damaged([&](nlohmann::json& d) { d["examples"][0]["kv_bytes_end"] = bad; });
    EXPECT_EQ(rkv::run_ablation(p, o).cells_computed, 1) << bad.dump();
  }
}

// [compression.decode] policy = "rolling": the 8 continuation tokens of lm_fidelity are evicted as they arrive, so a
// compressed cell ends holding exactly what compression kept (kv_bytes_end == kv_bytes); with "none" the cache grows
// by 8 entries per layer and KV head. The full-cache cell never evicts.
TEST_F(SyntheticRun, RollingDecodeKeepsTheCacheAtItsBudget) {
  for (const std::string policy : {"none", "rolling"}) {
    const fs::path out = dir / ("out-" + policy);
    rkv::RunOptions o;
    o.out_dir = out.string();
    o.quiet = true;
    const rkv::RunPlan p = plan(config("[scorer]\nplugin = \"streamingllm\"\n",
                                       "[compression.decode]\npolicy = \"" + policy + "\"\nsinks = 2\n"));
    ASSERT_EQ(rkv::run_ablation(p, o).cells_computed, 2);
    for (const auto& e : fs::directory_iterator(out / "cells")) {
      const nlohmann::json j = nlohmann::json::parse(rkv::read_file(e.path().string()));
      for (const auto& ex : j.at("examples")) {
        const size_t kept = ex.at("kv_bytes").get<size_t>(), end = ex.at("kv_bytes_end").get<size_t>();
        if (j.at("full_cache").get<bool>() || policy == "none")
          EXPECT_GT(end, kept) << policy << " " << j.at("label");
        else
          EXPECT_EQ(end, kept) << policy << " " << j.at("label");
      }
    }
  }
}

// [[scorer.route]] end to end: a route that names streamingllm for both layers computes what the homogeneous
// streamingllm cell computes (the same values on every example), whatever the cell's [scorer]; the route is recorded
// in the cell files and in results.jsonl, and changes the cell's label and id.
TEST_F(SyntheticRun, ARouteNamingOneScorerEverywhereIsItsHomogeneousCell) {
  const fs::path out = dir / "out";
  rkv::RunOptions o;
  o.out_dir = out.string();
  o.quiet = true;
  const rkv::RunPlan p = plan(config(
      "[scorer]\nplugin = \"snapkv\"\n[scorer.snapkv]\nwindow = 4\nkernel = 3\n[scorer.streamingllm]\nsinks = 2\n",
      "[sweep]\n\"scorer.plugin\" = [\"snapkv\", \"streamingllm\"]\n"
      "\"scorer.route\" = [[], [{ layers = \"0-1\", plugin = \"streamingllm\", streamingllm = { sinks = 2 } }]]\n"));
  ASSERT_EQ(rkv::run_ablation(p, o).cells_computed, 5);
  std::map<std::string, nlohmann::json> by_label;
  for (const auto& e : fs::directory_iterator(out / "cells")) {
    const nlohmann::json j = nlohmann::json::parse(rkv::read_file(e.path().string()));
    by_label[j.at("label").get<std::string>()] = j;
  }
  const std::string route = " + route[streamingllm(sinks=2):0-1] @ f=0.5";
  ASSERT_EQ(by_label.count("uniform + streamingllm @ f=0.5"), 1u);
  ASSERT_EQ(by_label.count("uniform + snapkv" + route), 1u);
  ASSERT_EQ(by_label.count("uniform + streamingllm" + route), 1u);
  const nlohmann::json& homogeneous = by_label.at("uniform + streamingllm @ f=0.5");
  const nlohmann::json& snap = by_label.at("uniform + snapkv @ f=0.5");
  EXPECT_FALSE(homogeneous.contains("route"));
  for (const std::string fallback : {"snapkv", "streamingllm"}) {
    const nlohmann::json& routed = by_label.at("uniform + " + fallback + route);
    ASSERT_TRUE(routed.contains("route"));
    EXPECT_EQ(routed.at("route")[0].at("layers"), nlohmann::json({0, 1}));
    EXPECT_EQ(routed.at("route")[0].at("params").at("sinks"), 2);
    EXPECT_NE(routed.at("cell_id"), homogeneous.at("cell_id"));
    ASSERT_EQ(routed.at("examples").size(), homogeneous.at("examples").size());
    for (size_t i = 0; i < homogeneous.at("examples").size(); ++i) {
      EXPECT_EQ(routed.at("examples")[i].at("values"), homogeneous.at("examples")[i].at("values")) << fallback << " " << i;
      EXPECT_EQ(routed.at("examples")[i].at("kv_bytes"), homogeneous.at("examples")[i].at("kv_bytes"));
    }
  }
  EXPECT_NE(snap.at("examples")[0].at("values"), homogeneous.at("examples")[0].at("values"));  // the scorers differ
  size_t routed_rows = 0;
  std::ifstream results(out / "results.jsonl");
  for (std::string line; std::getline(results, line);) {
    const nlohmann::json r = nlohmann::json::parse(line);
    ASSERT_TRUE(r.contains("route"));
    if (r.at("route").is_null()) continue;
    ++routed_rows;
    EXPECT_EQ(r.at("route")[0].at("id"), "org.ripplekv.scorer.streamingllm");
  }
  EXPECT_GT(routed_rows, 0u);
}

// [compression.share] through a run: groups = 1 is the cell without sharing bit for bit; CLA@2 on the 2-layer model
// at f = 0.5 spends B = 0.5 x 2 x 32 = 32 = T on layer 0 (kept whole) and layer 1 reads it, holding nothing: half the
// full cache's bytes, budgets [32, 0], share_sources [0, 0] recorded, and a continuation that differs from the full
// cache's (KL > 0).
TEST_F(SyntheticRun, SharingGroupsOfOneIsNoSharingAndClaAtTwoHoldsHalfTheBytes) {
  rkv::RunOptions o;
  o.quiet = true;
  const std::string base = config("[scorer]\nplugin = \"streamingllm\"\n");
  o.out_dir = (dir / "plain").string();
  ASSERT_EQ(rkv::run_ablation(plan(base), o).cells_computed, 2);
  o.out_dir = (dir / "shared").string();
  ASSERT_EQ(rkv::run_ablation(plan(base + "[sweep]\n\"compression.share.groups\" = [1, 2]\n"), o).cells_computed, 3);
  auto cells_by_label = [](const fs::path& out) {
    std::map<std::string, nlohmann::json> m;
    for (const auto& e : fs::directory_iterator(out / "cells")) {
      const nlohmann::json j = nlohmann::json::parse(rkv::read_file(e.path().string()));
      m[j.at("label").get<std::string>()] = j;
    }
    return m;
  };
  const auto plain = cells_by_label(dir / "plain"), shared = cells_by_label(dir / "shared");
  const std::string label = "uniform + streamingllm @ f=0.5";
  ASSERT_EQ(plain.count(label), 1u);
  ASSERT_EQ(shared.count(label), 1u);
  ASSERT_EQ(shared.count(label + ", share CLA@2"), 1u);
  const nlohmann::json& one = shared.at(label);
  const nlohmann::json& cla = shared.at(label + ", share CLA@2");
  ASSERT_EQ(one.at("examples").size(), plain.at(label).at("examples").size());
  for (size_t i = 0; i < one.at("examples").size(); ++i) {
    EXPECT_EQ(one.at("examples")[i].at("values"), plain.at(label).at("examples")[i].at("values"));
    EXPECT_FALSE(one.at("examples")[i].contains("share_sources"));
  }
  for (const nlohmann::json& e : cla.at("examples")) {
    EXPECT_EQ(e.at("budgets"), nlohmann::json({32, 0}));
    EXPECT_EQ(e.at("share_sources"), nlohmann::json({0, 0}));
    EXPECT_EQ(e.at("kv_bytes").get<size_t>() * 2, e.at("kv_bytes_full").get<size_t>());
    EXPECT_GT(e.at("values").at("kl").get<double>(), 1e-6);
  }
  const nlohmann::json budgets = nlohmann::json::parse(rkv::read_file((dir / "shared" / "budgets.json").string()));
  EXPECT_NE(budgets.dump().find("share_sources"), std::string::npos);
}

// [compression.joint] through a run on the 2-layer model (H_kv = 2, d = 8, T = 32; one float32 entry of one head:
// e = 2 x 8 x 4 + 4 = 68 bytes; int4 asymmetric with groups of 8: 2 x (4 + 4) + 4 = 20 bytes):
//  - a grid of one option (f = 0.5, float32) at bytes_fraction 0.5 is eviction alone at that x bit for bit: budget
//    floor(0.5 x 2 layers x 2 heads x 32 x 68) = 4352 bytes = 16 entries per head and layer, nothing left over;
//  - a wider grid at x = 0.2: the plan's bytes, worked out from the recorded plan and the entry sizes above, equal
//    the packed cache's kv_bytes, stay within the budget floor(0.2 x 8704) = 1740 and come within one entry (of every
//    layer still below its span) of it; whole int4 layers would take 2560, so some layer keeps fewer entries.
TEST_F(SyntheticRun, JointPlanOfOneOptionIsEvictionAloneAndAWiderGridSpendsTheBytesBudget) {
  rkv::RunOptions o;
  o.quiet = true;
  std::string base = config("[scorer]\nplugin = \"streamingllm\"\n");
  base.replace(base.find("fraction = 0.5"), 14, "bytes_fraction = 0.5");
  o.out_dir = (dir / "one").string();
  ASSERT_EQ(rkv::run_ablation(plan(base + "[compression.joint]\nfractions = [0.5]\nbits = [32]\n"
                                          "[sweep]\n\"compression.joint.plan\" = [\"none\", \"damage\"]\n"), o)
                .cells_computed, 3);
  std::map<std::string, nlohmann::json> cells;
  for (const auto& e : fs::directory_iterator(dir / "one" / "cells")) {
    const nlohmann::json j = nlohmann::json::parse(rkv::read_file(e.path().string()));
    cells[j.at("label").get<std::string>()] = j;
  }
  const std::string plain = "uniform + streamingllm @ kv bytes=0.5", joint = "joint(damage) + streamingllm @ kv bytes=0.5, joint f 0.5 x bits 32";
  ASSERT_EQ(cells.count(plain), 1u);
  ASSERT_EQ(cells.count(joint), 1u) << [&] { std::string l; for (auto& kv : cells) l += kv.first + "\n"; return l; }();
  for (size_t i = 0; i < cells.at(plain).at("examples").size(); ++i) {
    const nlohmann::json &a = cells.at(plain).at("examples")[i], &b = cells.at(joint).at("examples")[i];
    EXPECT_EQ(a.at("values"), b.at("values"));
    EXPECT_EQ(b.at("budgets"), nlohmann::json({16, 16}));
    EXPECT_EQ(a.at("kv_bytes"), b.at("kv_bytes"));
    EXPECT_EQ(b.at("kv_bytes").get<int64_t>(), 4352);
    EXPECT_EQ(b.at("joint_plan"), nlohmann::json({"f=0.5 f32", "f=0.5 f32"}));
  }

  o.out_dir = (dir / "wide").string();
  std::string wide = base;
  wide.replace(wide.find("bytes_fraction = 0.5"), 20, "bytes_fraction = 0.2");
  ASSERT_EQ(rkv::run_ablation(plan(wide + "[compression.joint]\nfractions = [1.0, 0.5, 0.25]\nbits = [32, 4]\n"
                                          "share = true\ngroup = 8\n"), o)
                .cells_computed, 2);
  bool checked = false;
  for (const auto& e : fs::directory_iterator(dir / "wide" / "cells")) {
    const nlohmann::json j = nlohmann::json::parse(rkv::read_file(e.path().string()));
    if (j.at("label").get<std::string>().rfind("joint(damage)", 0) != 0) continue;
    for (const nlohmann::json& ex : j.at("examples")) {
      int64_t bytes = 0, largest_entry = 0;
      for (size_t l = 0; l < 2; ++l) {
        const int64_t b = ex.at("budgets")[l].get<int64_t>(), bits = ex.at("layer_bits")[l].get<int64_t>();
        const int64_t entry = 2 * (bits == 32 ? 68 : 20);
        bytes += b * entry;
        if (b > 0 && b < 32) largest_entry = std::max(largest_entry, entry);
      }
      EXPECT_EQ(ex.at("kv_bytes").get<int64_t>(), bytes) << ex.dump();
      EXPECT_LE(bytes, 1740) << ex.dump();
      EXPECT_GT(largest_entry, 0) << ex.dump();
      EXPECT_LT(1740 - bytes, largest_entry) << ex.dump();
      EXPECT_EQ(ex.at("joint_plan").size(), 2u);
      checked = true;
    }
  }
  EXPECT_TRUE(checked);
  const nlohmann::json budgets = nlohmann::json::parse(rkv::read_file((dir / "wide" / "budgets.json").string()));
  EXPECT_NE(budgets.dump().find("joint_plan"), std::string::npos);
}

// A joint grid the model cannot run is refused before any work, naming the key: a group that does not divide the
// head dim (8) and a fraction that keeps no position of the 32-token calibration prefix (floor(0.01 x 32 + 0.5) = 0).
TEST_F(SyntheticRun, AJointGridTheModelCannotRunIsRefusedNamingTheKey) {
  rkv::RunOptions o;
  o.quiet = true;
  o.out_dir = (dir / "out").string();
  std::string base = config("[scorer]\nplugin = \"streamingllm\"\n");
  base.replace(base.find("fraction = 0.5"), 14, "bytes_fraction = 0.5");
  for (const auto& [joint, key] : std::vector<std::pair<std::string, std::string>>{
           {"bits = [32, 4]\ngroup = 16\n", "compression.joint.bits / group"},
           {"fractions = [1.0, 0.01]\nbits = [32]\n", "compression.joint.fractions: 0.010000 keeps no position"}}) {
    try {
      rkv::run_ablation(plan(base + "[compression.joint]\n" + joint), o);
      ADD_FAILURE() << "expected an InputError for " << joint;
    } catch (const rkv::InputError& e) {
      EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
    }
    EXPECT_FALSE(fs::exists(dir / "out" / "run.json"));
  }
}

TEST_F(SyntheticRun, PromptsLongerThanTheContextLengthAreAClearError) {
  rkv::RunOptions o;
  o.out_dir = (dir / "out").string();
  o.quiet = true;
  std::string text = config("[scorer]\nplugin = \"streamingllm\"\n");
  text.replace(text.find("examples = 2\nprefix_tokens = 32\n["), 32, "examples = 2\nprefix_tokens = 300\n");
  try {
    rkv::run_ablation(plan(text), o);
    FAIL() << "expected an InputError";
  } catch (const rkv::InputError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("data.eval.prefix_tokens"), std::string::npos) << m;
    EXPECT_NE(m.find("context length 256"), std::string::npos) << m;
  }
  text = config("[scorer]\nplugin = \"streamingllm\"\n");
  text.replace(text.find("prefix_tokens = 32\nwindow_tokens = 8"), 36, "prefix_tokens = 250\nwindow_tokens = 8");
  text += "[signal]\nplugin = \"depth\"\n";
  text.replace(text.find("plugin = \"uniform\""), 18, "plugin = \"ripplekv\"");
  try {
    rkv::run_ablation(plan(text), o);
    FAIL() << "expected an InputError";
  } catch (const rkv::InputError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("data.calibration"), std::string::npos) << m;
    EXPECT_NE(m.find("context length 256"), std::string::npos) << m;
  }
}

/// Runs the CLI with an argument vector (no shell) in the folder `cwd`; returns its exit status and output.
std::pair<int, std::string> cli_argv(const std::vector<std::string>& args, const fs::path& cwd) {
  std::vector<std::string> argv = {std::string(RKV_TEST_BINARY_DIR) + "/bin/ripplekv"};
  argv.insert(argv.end(), args.begin(), args.end());
  const fs::path log = cwd / "cli.log";
  const int rc = rkv::run_program(argv, cwd.string(), log.string());
  return {rc, rkv::read_file(log.string())};
}

TEST_F(SyntheticRun, CliRefusesAnOutputFolderThatCannotBeWrittenAndOverlongPrompts) {
  std::ofstream(dir / "cfg.toml") << config("[scorer]\nplugin = \"streamingllm\"\n");
  std::ofstream(dir / "a_file") << "x";
  auto [rc, err] = cli_argv({"run", (dir / "cfg.toml").string(), "--out", (dir / "a_file" / "out").string()}, dir);
  EXPECT_EQ(rc, 2) << err;
  EXPECT_NE(err.find("output folder '" + (dir / "a_file" / "out").string() + "': cannot be created"), std::string::npos)
      << err;
  if (::geteuid() != 0) {  // root writes anywhere: the permission check only bites for other users
    fs::create_directories(dir / "ro");
    fs::permissions(dir / "ro", fs::perms::owner_read | fs::perms::owner_exec);
    std::tie(rc, err) = cli_argv({"run", (dir / "cfg.toml").string(), "--out", (dir / "ro" / "out").string()}, dir);
    EXPECT_EQ(rc, 2) << err;
    EXPECT_NE(err.find("cannot be created"), std::string::npos) << err;
    fs::permissions(dir / "ro", fs::perms::owner_all);
  }
  // A library message that already names its entry point is printed once: "ripplekv analyze: no [signal] ...", not
  // "ripplekv analyze: analyze: no [signal] ..." (this config has no [signal]).
  std::tie(rc, err) =
      cli_argv({"analyze", (dir / "cfg.toml").string(), "--out", (dir / "an").string(), "--fractions", "0.5"}, dir);
  EXPECT_EQ(rc, 2) << err;
  EXPECT_NE(err.find("ripplekv analyze: no calibration [signal] is configured"), std::string::npos) << err;
  EXPECT_EQ(err.find("analyze: analyze:"), std::string::npos) << err;
  // The same fraction twice (also written differently) is refused naming the option and the value, before any work
  // (before: each copy was measured, and here the run went on to the [signal] error).
  for (const char* twice : {"0.5,0.5", "0.25,0.5,0.50"}) {
    std::tie(rc, err) =
        cli_argv({"analyze", (dir / "cfg.toml").string(), "--out", (dir / "an").string(), "--fractions", twice}, dir);
    EXPECT_EQ(rc, 2) << err;
    EXPECT_NE(err.find(std::string("--fractions: 0.5 is given twice (items ") +
                       (std::string(twice) == "0.5,0.5" ? "0 and 1" : "1 and 2") + "); give each fraction once"),
              std::string::npos)
        << err;
  }
  // generate: a prompt of 300 tokens (one byte each) for a model with context length 256.
  std::tie(rc, err) = cli_argv({"generate", "--model", (dir / "model.gguf").string(), "--prompt", std::string(300, 'x'),
                                    "--max-new-tokens", "4"}, dir);
  EXPECT_EQ(rc, 2) << err;
  EXPECT_NE(err.find("300 tokens"), std::string::npos) << err;
  EXPECT_NE(err.find("context length 256"), std::string::npos) << err;
  // A prompt that fits, with more new tokens than the context has room for: capped, with a note.
  std::tie(rc, err) = cli_argv({"generate", "--model", (dir / "model.gguf").string(), "--prompt", std::string(250, 'x'),
                                    "--max-new-tokens", "20"}, dir);
  EXPECT_EQ(rc, 0) << err;
  EXPECT_NE(err.find("--max-new-tokens lowered to 6"), std::string::npos) << err;
  // generate --compress --profile: a profile with NaN (null) or the wrong number of layers is a clear error.
  std::ofstream(dir / "compress.toml")
      << "[scorer]\nplugin = \"streamingllm\"\n[allocator]\nplugin = \"ripplekv\"\n[budget]\nfraction = 0.5\n";
  const auto gen = [&](const std::string& profile) {
    return cli_argv({"generate", "--model", (dir / "model.gguf").string(), "--prompt", std::string(40, 'y'),
                     "--max-new-tokens", "2", "--compress", (dir / "compress.toml").string(), "--profile", profile},
                    dir);
  };
  std::ofstream(dir / "p3.json") << R"({"s": [1, 2, 3]})";
  std::tie(rc, err) = gen((dir / "p3.json").string());
  EXPECT_EQ(rc, 2) << err;
  EXPECT_NE(err.find("the profile has 3 layers, the model 2"), std::string::npos) << err;
  std::ofstream(dir / "pnan.json") << R"({"s": [1, null]})";
  std::tie(rc, err) = gen((dir / "pnan.json").string());
  EXPECT_EQ(rc, 2) << err;
  EXPECT_NE(err.find("s[1] is not a finite number"), std::string::npos) << err;
  std::ofstream(dir / "pneg.json") << R"({"s": [-1, -3]})";  // negative values are legal
  std::tie(rc, err) = gen((dir / "pneg.json").string());
  EXPECT_EQ(rc, 0) << err;
  // A joint plan needs a run's calibration split: generate --compress refuses it instead of ignoring it.
  std::ofstream(dir / "compress.toml") << "[scorer]\nplugin = \"streamingllm\"\n[allocator]\nplugin = \"uniform\"\n"
                                          "[budget]\nbytes_fraction = 0.5\n[compression.joint]\n";
  std::tie(rc, err) = gen((dir / "pneg.json").string());
  EXPECT_EQ(rc, 2) << err;
  EXPECT_NE(err.find("[compression.joint] is a `ripplekv run` setting"), std::string::npos) << err;
}

// generate --compress takes the cell sequence of a run cell (runner/compress/cell.hpp compress_cell): the profile
// reaches the share chooser and the per-layer bits there as in a run. (A second copy of the sequence for generate
// once passed no profile to share planning and no per-layer bits to the codec, and refused both settings.)
TEST_F(SyntheticRun, GenerateCompressTakesTheRunsCellSequenceWithItsProfile) {
  const rkv::Model model = rkv::load_model((dir / "model.gguf").string());
  const rkv::Tokenizer tok = rkv::Tokenizer::from_path((dir / "model.gguf").string());
  const std::unique_ptr<rkv::Backend> backend = rkv::make_backend("cpu", model);
  const std::vector<int32_t> ids = tok.encode(std::string(48, 'z'), false, false);
  ASSERT_GE(ids.size(), 40u);
  const std::string shares = (dir / "share.toml").string(), bits = (dir / "bits.toml").string();
  std::ofstream(shares) << "[scorer]\nplugin = \"streamingllm\"\n[allocator]\nplugin = \"uniform\"\n[budget]\n"
                           "fraction = 0.5\n[compression.share]\ncount = 1\n";
  std::ofstream(bits) << "[scorer]\nplugin = \"streamingllm\"\n[allocator]\nplugin = \"uniform\"\n[budget]\n"
                         "fraction = 0.5\n[compression.codec]\nformat = \"int\"\nbits = 4\ngroup = 8\n"
                         "layer_bits = \"profile\"\n";
  std::ofstream(dir / "up.json") << R"({"s": [2, 1]})";    // layer 0 the more sensitive
  std::ofstream(dir / "down.json") << R"({"s": [1, 2]})";  // layer 1 the more sensitive
  // Without a profile both are refused, naming what reads it.
  try {
    rkv::generate_compressed(*backend, tok, ids, shares, "", 2);
    FAIL() << "share count = 1 without a profile";
  } catch (const rkv::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("compression.share.count needs a sensitivity profile"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(rkv::generate_compressed(*backend, tok, ids, bits, "", 2), rkv::InputError);
  // count = 1 of 2 layers: layer 1 (layer 0 never shares) reads layer 0's cache; B = round(0.5 x 2T) = T entries go
  // to layer 0, which keeps all of its T: the cache holds exactly one of the two layers.
  const rkv::CompressedGeneration shared = rkv::generate_compressed(*backend, tok, ids, shares, (dir / "up.json").string(), 2);
  const auto T = static_cast<int64_t>(ids.size());
  EXPECT_EQ(shared.share_sources, (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(shared.budgets, (std::vector<int64_t>{T, 0}));
  EXPECT_EQ(shared.budget_total, T);
  EXPECT_EQ(2 * shared.bytes_kept, shared.bytes_full);
  EXPECT_EQ(shared.tokens.size(), 2u);
  // Per-layer bits follow the profile (4 layers: two can spend what two others save at the bytes of uniform 4 bits):
  // the more sensitive layers get the wider codes, whichever they are.
  rkv_test::write_synthetic_run_folder(dir / "four", "llama", 8, 4);
  const rkv::Model four = rkv::load_model((dir / "four" / "model.gguf").string());
  const std::unique_ptr<rkv::Backend> backend4 = rkv::make_backend("cpu", four);
  std::ofstream(dir / "up4.json") << R"({"s": [4, 3, 2, 1]})";
  std::ofstream(dir / "down4.json") << R"({"s": [1, 2, 3, 4]})";
  const rkv::CompressedGeneration up = rkv::generate_compressed(*backend4, tok, ids, bits, (dir / "up4.json").string(), 2);
  const rkv::CompressedGeneration down =
      rkv::generate_compressed(*backend4, tok, ids, bits, (dir / "down4.json").string(), 2);
  ASSERT_EQ(up.layer_bits.size(), 4u);
  EXPECT_TRUE(std::is_sorted(up.layer_bits.rbegin(), up.layer_bits.rend())) << ::testing::PrintToString(up.layer_bits);
  EXPECT_GT(up.layer_bits.front(), up.layer_bits.back()) << ::testing::PrintToString(up.layer_bits);
  EXPECT_EQ(down.layer_bits, (std::vector<int64_t>(up.layer_bits.rbegin(), up.layer_bits.rend())));
}

// Regression: gnuplot was started through a shell command line (cd '<dir>' && gnuplot ...), so an output folder named
// "x'; touch PWNED; echo '" (from --out, or from [output] dir in someone else's TOML) ran `touch PWNED`, and an
// ordinary folder named O'Brien lost every plot. Now no folder name reaches a shell, and the plots are drawn.
TEST_F(SyntheticRun, ShellInjectionThroughTheOutputFolderRunsNothingAndKeepsThePlots) {
  const bool have_gnuplot = rkv::program_exists("gnuplot");
  if (!have_gnuplot) std::cerr << "note: gnuplot is not installed: the plot assertions are skipped\n";
  const std::string base_cfg = config("[scorer]\nplugin = \"streamingllm\"\n[signal]\nplugin = \"depth\"\n");
  std::ofstream(dir / "cfg.toml") << base_cfg;
  const std::string hostile = "x'; touch PWNED; echo '";
  const std::string hostile_toml = "y'; touch PWNED_TOML; echo '";
  std::ofstream(dir / "cfg_out.toml") << base_cfg << "dir = \"" << hostile_toml << "\"\n";  // inside [output]
  struct Case {
    std::vector<std::string> args;
    fs::path out;
    std::vector<std::string> plots;
    fs::path report;
  };
  const std::vector<Case> cases = {
      {{"run", "cfg.toml", "--out", hostile, "--quiet"}, dir / hostile, {"lm_fidelity_kl.png", "budgets_lm_fidelity.svg"},
       dir / hostile / "report.md"},
      {{"run", "cfg_out.toml", "--quiet"}, dir / hostile_toml, {"lm_fidelity_kl.png"}, dir / hostile_toml / "report.md"},
      {{"run", "cfg.toml", "--out", "O'Brien", "--quiet"}, dir / "O'Brien", {"lm_fidelity_kl.png", "lm_fidelity_kl.svg"},
       dir / "O'Brien" / "report.md"},
      {{"analyze", "cfg.toml", "--out", "z'; touch PWNED_ANALYZE; echo '", "--fractions", "0.5"},
       dir / "z'; touch PWNED_ANALYZE; echo '", {"analysis_damage.png"}, dir / "z'; touch PWNED_ANALYZE; echo '" / "analysis.md"},
      {{"analyze", "cfg.toml", "--out", "O'Brien-analysis", "--fractions", "0.5"}, dir / "O'Brien-analysis",
       {"analysis_damage.png", "analysis_damage.svg"}, dir / "O'Brien-analysis" / "analysis.md"},
  };
  for (const Case& c : cases) {
    const auto [rc, log] = cli_argv(c.args, dir);
    ASSERT_EQ(rc, 0) << c.args[0] << " " << c.out << ": " << log;
    ASSERT_TRUE(fs::is_regular_file(c.report)) << c.out;
    const std::string report = rkv::read_file(c.report.string());
    for (const char* sentinel : {"PWNED", "PWNED_TOML", "PWNED_ANALYZE"}) {
      EXPECT_FALSE(fs::exists(dir / sentinel)) << "a shell ran `touch " << sentinel << "` for " << c.out;
      EXPECT_FALSE(fs::exists(fs::current_path() / sentinel)) << "a shell ran `touch " << sentinel << "`";
    }
    if (!have_gnuplot) continue;
    for (const auto& p : c.plots) {
      const fs::path f = c.out / "plots" / p;
      EXPECT_TRUE(fs::is_regular_file(f) && fs::file_size(f) > 0) << "plot not drawn: " << f << "\n" << report;
    }
    EXPECT_EQ(report.find("not drawn"), std::string::npos) << report;
  }
}

// Labels and names inside the gnuplot script (a swept value, a hand-edited cell file's label) cannot end their
// quoted string: ' is doubled and a newline (which would start a new gnuplot command) becomes a space.
TEST_F(SyntheticRun, GnuplotLabelsCannotEndTheirQuoteOrStartACommand) {
  const std::string label = "a'b\nsystem('touch PWNED_GP')\r#";
  EXPECT_EQ(rkv::gnuplot_single_quoted(label), "a''b system(''touch PWNED_GP'') #");
  if (!rkv::program_exists("gnuplot")) GTEST_SKIP() << "gnuplot is not installed";
  std::ofstream(dir / "t.gp") << "set terminal svg\nset output 't.svg'\nplot x title '"
                              << rkv::gnuplot_single_quoted(label) << "'\n";
  EXPECT_EQ(rkv::run_program({"gnuplot", "t.gp"}, dir.string(), "t.log"), 0) << rkv::read_file((dir / "t.log").string());
  EXPECT_FALSE(fs::exists(dir / "PWNED_GP"));
  EXPECT_TRUE(fs::is_regular_file(dir / "t.svg"));
  EXPECT_EQ(rkv::run_program({"no-such-program-rkv"}, dir.string(), ""), -1);
}

// Regression: two runs into one --out at once overwrote each other's cells. The folder is locked (flock on
// .ripplekv.lock): a second run or merge into it exits 2 naming the holder's pid, and the lock goes with its holder.
TEST_F(SyntheticRun, SecondWriterOfAnOutputFolderExitsNamingTheHoldersPid) {
  std::ofstream(dir / "cfg.toml") << config("[scorer]\nplugin = \"streamingllm\"\n");
  const fs::path out = dir / "out";
  const std::string holder = "pid " + std::to_string(::getpid());
  {
    const rkv::OutputFolderLock lock(rkv::Folder::open(out.string(), true));  // this process is "the first run"
    auto [rc, log] = cli_argv({"run", "cfg.toml", "--out", "out", "--quiet"}, dir);
    EXPECT_EQ(rc, 2) << log;
    EXPECT_NE(log.find("output folder 'out' is in use by another ripplekv process (" + holder), std::string::npos) << log;
    EXPECT_FALSE(fs::exists(out / "run.json")) << "the second writer wrote before it had the lock";
    std::tie(rc, log) = cli_argv({"merge", "some-shard", "--out", "out"}, dir);
    EXPECT_EQ(rc, 2) << log;
    EXPECT_NE(log.find(holder), std::string::npos) << log;
    rkv::RunOptions o;  // in-process (the C API's and Python's way in) too
    o.out_dir = out.string();
    o.quiet = true;
    try {
      rkv::run_ablation(plan(config("[scorer]\nplugin = \"streamingllm\"\n")), o);
      FAIL() << "a second writer ran";
    } catch (const rkv::InputError& e) {
      EXPECT_NE(std::string(e.what()).find(holder), std::string::npos) << e.what();
    }
  }
  auto [rc, log] = cli_argv({"run", "cfg.toml", "--out", "out", "--quiet"}, dir);  // released: the run goes ahead
  EXPECT_EQ(rc, 0) << log;
  EXPECT_TRUE(fs::exists(out / "report.md"));
}

// Regression: --out into an existing folder that is not a ripplekv run overwrote its report.md,
// results.jsonl and profile.json. It is refused (run and merge) unless --force; --force on a run's folder starts over.
TEST_F(SyntheticRun, NonEmptyFolderThatIsNotARunIsRefusedUnlessForce) {
  const std::string cfg_text = config("[scorer]\nplugin = \"streamingllm\"\n");
  std::ofstream(dir / "cfg.toml") << cfg_text;
  const fs::path mine = dir / "mine";
  fs::create_directories(mine);
  std::ofstream(mine / "report.md") << "my own report\n";
  auto [rc, log] = cli_argv({"run", "cfg.toml", "--out", "mine", "--quiet"}, dir);
  EXPECT_EQ(rc, 2) << log;
  EXPECT_NE(log.find("output folder 'mine' is not empty and holds no ripplekv run"), std::string::npos) << log;
  EXPECT_NE(log.find("--force"), std::string::npos) << log;
  std::tie(rc, log) = cli_argv({"run", "cfg.toml", "--out", "out", "--quiet"}, dir);  // a run to merge from
  ASSERT_EQ(rc, 0) << log;
  std::tie(rc, log) = cli_argv({"merge", "out", "--out", "mine", "--quiet"}, dir);
  EXPECT_EQ(rc, 2) << log;
  EXPECT_NE(log.find("merge: output folder 'mine' is not empty"), std::string::npos) << log;
  EXPECT_EQ(rkv::read_file((mine / "report.md").string()), "my own report\n");
  EXPECT_FALSE(fs::exists(mine / "results.jsonl"));
  std::tie(rc, log) = cli_argv({"merge", "out", "--out", "merged", "--quiet"}, dir);  // new folder: fine
  EXPECT_EQ(rc, 0) << log;
  std::tie(rc, log) = cli_argv({"merge", "out", "--out", "merged", "--quiet"}, dir);  // a merge's own folder: fine
  EXPECT_EQ(rc, 0) << log;
  std::tie(rc, log) = cli_argv({"run", "cfg.toml", "--out", "mine", "--quiet", "--force"}, dir);
  EXPECT_EQ(rc, 0) << log;
  EXPECT_NE(rkv::read_file((mine / "report.md").string()), "my own report\n");
  // --force in a run's folder starts over: the earlier run's cells (another base config) are gone.
  std::string changed = cfg_text;
  changed.replace(changed.find("fraction = 0.5"), 14, "fraction = 0.4");
  std::ofstream(dir / "cfg2.toml") << changed;
  std::tie(rc, log) = cli_argv({"run", "cfg2.toml", "--out", "out", "--quiet"}, dir);
  EXPECT_EQ(rc, 2) << log;
  EXPECT_NE(log.find("--force to start over"), std::string::npos) << log;
  std::tie(rc, log) = cli_argv({"run", "cfg2.toml", "--out", "out", "--quiet", "--force"}, dir);
  EXPECT_EQ(rc, 0) << log;
  size_t n = 0;
  for (const auto& e : fs::directory_iterator(dir / "out" / "cells")) n += e.path().extension() == ".json";
  EXPECT_EQ(n, 2u);
  EXPECT_NO_THROW(rkv::merge_outputs({(dir / "out").string()}, (dir / "merged2").string(), true));
  std::tie(rc, log) = cli_argv({"run", "cfg2.toml", "--out", "out", "--resume", "--force"}, dir);
  EXPECT_EQ(rc, 2) << log;
}

/// Changes one byte of the model file's last tensor: the model still loads, its sha256 is another one.
void alter_model_file(const fs::path& model) {
  std::fstream f(model, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(-4, std::ios::end);
  char b = 0;
  f.get(b);
  f.seekp(-4, std::ios::end);
  f.put(static_cast<char>(b ^ 1));  // the lowest mantissa byte of an f32 weight (or alignment padding)
}

// Regression: --resume and merge ignored model_sha256, so cells computed on two model files mixed in one
// report. Both refuse, naming the cell file and both hashes; the report header lists the model hash.
TEST_F(SyntheticRun, ResumeAndMergeRefuseCellsOfAnotherModelFile) {
  const rkv::RunPlan p = plan(config("[scorer]\nplugin = \"streamingllm\"\n",
                                     "[sweep]\n\"budget.fraction\" = [0.3, 0.6]\n"));
  rkv::RunOptions o;
  o.quiet = true;
  o.out_dir = (dir / "out").string();
  ASSERT_EQ(rkv::run_ablation(p, o).cells_computed, 3);
  const std::string sha_a = rkv::sha256_file((dir / "model.gguf").string());
  EXPECT_NE(rkv::read_file((dir / "out" / "report.md").string()).find("model sha256 `" + sha_a.substr(0, 16) + "`"),
            std::string::npos);
  o.out_dir = (dir / "shard1").string();
  o.shard_index = 1, o.shard_count = 2;
  ASSERT_GT(rkv::run_ablation(p, o).cells_computed, 0);
  alter_model_file(dir / "model.gguf");
  const std::string sha_b = rkv::sha256_file((dir / "model.gguf").string());
  ASSERT_NE(sha_a, sha_b);
  o.out_dir = (dir / "shard2").string();
  o.shard_index = 2;
  ASSERT_GT(rkv::run_ablation(p, o).cells_computed, 0);
  try {
    rkv::merge_outputs({(dir / "shard1").string(), (dir / "shard2").string()}, (dir / "merged").string(), true);
    FAIL() << "merge mixed two model files";
  } catch (const rkv::InputError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("merge runs of one model file"), std::string::npos) << m;
    EXPECT_NE(m.find(sha_a.substr(0, 16)), std::string::npos) << m;
    EXPECT_NE(m.find(sha_b.substr(0, 16)), std::string::npos) << m;
  }
  // --resume over cells of model A with model B: one cell missing, so there is work to do; refused before it.
  fs::remove(dir / "out" / "cells" / (p.cells[2].id + ".json"));
  o.out_dir = (dir / "out").string();
  o.shard_index = 1, o.shard_count = 1;
  o.resume = true;
  try {
    rkv::run_ablation(p, o);
    FAIL() << "--resume mixed two model files";
  } catch (const rkv::InputError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("was computed with another model file"), std::string::npos) << m;
    EXPECT_NE(m.find(sha_a.substr(0, 16)), std::string::npos) << m;
  }
  EXPECT_FALSE(fs::exists(dir / "out" / "cells" / (p.cells[2].id + ".json")));  // nothing computed
}

// A cell's numbers say which weights produced them. model.weights (default "quantized") is recorded in every
// cell file, every results.jsonl row and the report header.
TEST_F(SyntheticRun, CellsResultsAndReportRecordTheWeights) {
  for (const std::string weights : {"", "f32", "quantized"}) {
    std::string text = config("[scorer]\nplugin = \"streamingllm\"\n");
    if (!weights.empty()) {
      const std::string at = "threads = 1\n";
      text.replace(text.find(at), at.size(), at + "weights = \"" + weights + "\"\n");
    }
    const std::string expected = weights.empty() ? "quantized" : weights;
    const fs::path out = dir / ("out-" + expected + (weights.empty() ? "-default" : ""));
    rkv::RunOptions o;
    o.quiet = true;
    o.out_dir = out.string();
    ASSERT_EQ(rkv::run_ablation(plan(text), o).cells_computed, 2) << text;
    size_t cells = 0, rows = 0;
    for (const auto& e : fs::directory_iterator(out / "cells")) {
      EXPECT_EQ(nlohmann::json::parse(rkv::read_file(e.path().string())).at("weights"), expected) << e.path();
      ++cells;
    }
    std::istringstream results(rkv::read_file((out / "results.jsonl").string()));
    for (std::string line; std::getline(results, line); ++rows)
      EXPECT_EQ(nlohmann::json::parse(line).at("weights"), expected) << line;
    EXPECT_EQ(cells, 2u);
    EXPECT_GT(rows, 0u);
    const std::string report = rkv::read_file((out / "report.md").string());
    EXPECT_NE(report.find("backend cpu (f32), weights " + expected + "\n"), std::string::npos) << report;
  }
}

// Regression: --resume accepted a cell file whose "examples" is [] and the cell vanished from the report.
// It is recomputed (--resume) or skipped with a warning (merge), like any incomplete cell file.
TEST_F(SyntheticRun, ResumeRecomputesACellFileWithNoExamples) {
  const rkv::RunPlan p = plan(config("[scorer]\nplugin = \"streamingllm\"\n"));
  rkv::RunOptions o;
  o.quiet = true;
  o.out_dir = (dir / "out").string();
  ASSERT_EQ(rkv::run_ablation(p, o).cells_computed, 2);
  const fs::path cell = dir / "out" / "cells" / (p.cells[1].id + ".json");
  nlohmann::json j = nlohmann::json::parse(rkv::read_file(cell.string()));
  j["examples"] = nlohmann::json::array();
  std::ofstream(cell, std::ios::trunc) << j.dump();
  testing::internal::CaptureStderr();
  rkv::merge_outputs({(dir / "out").string()}, (dir / "merged").string(), true);
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("skipping corrupt cell file '" + cell.string() + "': it holds no examples"), std::string::npos)
      << err;
  o.resume = true;
  testing::internal::CaptureStderr();
  EXPECT_EQ(rkv::run_ablation(p, o).cells_computed, 1);
  err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("is corrupt or incomplete; the cell will be recomputed"), std::string::npos) << err;
  std::set<std::string> cells;
  for (const auto& r : result_rows(dir / "out")) cells.insert(r.at("cell_id").get<std::string>());
  EXPECT_EQ(cells, (std::set<std::string>{p.cells[0].id, p.cells[1].id}));
}

// merge into a folder that holds another run (a typo in `merge shard-* --out ...`) overwrote that run's report with
// exit 0. It is refused unless the folder is one of the inputs (a run re-assembling its own folder) or --force.
TEST_F(SyntheticRun, MergeIntoAFolderHoldingAnotherRunIsRefused) {
  rkv::RunOptions o;
  o.quiet = true;
  o.out_dir = (dir / "a").string();
  ASSERT_EQ(rkv::run_ablation(plan(config("[scorer]\nplugin = \"streamingllm\"\n")), o).cells_computed, 2);
  o.out_dir = (dir / "b").string();
  ASSERT_EQ(rkv::run_ablation(plan(config("[scorer]\nplugin = \"h2o\"\n")), o).cells_computed, 2);
  const std::string report_b = rkv::read_file((dir / "b" / "report.md").string());
  try {
    rkv::merge_outputs({(dir / "a").string()}, (dir / "b").string(), true);
    FAIL() << "merged into another run's folder";
  } catch (const rkv::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("holds a run of its own"), std::string::npos) << e.what();
  }
  EXPECT_EQ(rkv::read_file((dir / "b" / "report.md").string()), report_b);  // untouched
  EXPECT_NO_THROW(rkv::merge_outputs({(dir / "b").string()}, (dir / "b").string(), true));  // its own folder
  EXPECT_NO_THROW(rkv::merge_outputs({(dir / "a").string()}, (dir / "b").string(), true, /*force=*/true));
}

// A run's own folder reports the cells of its current sweep only: after a resumed run with another sweep (same base
// config), cells of the earlier sweep stay in cells/ but reach neither results.jsonl nor report.md.
TEST_F(SyntheticRun, ARunsOwnReportHoldsOnlyTheCellsOfItsCurrentSweep) {
  rkv::RunOptions o;
  o.quiet = true;
  o.out_dir = (dir / "out").string();
  const std::string base = config("[scorer]\nplugin = \"streamingllm\"\n");
  const rkv::RunPlan first = plan(base + "[sweep]\n\"budget.fraction\" = [0.25, 0.5]\n");
  ASSERT_EQ(rkv::run_ablation(first, o).cells_computed, 3);  // full cache + two fractions
  const rkv::RunPlan second = plan(base + "[sweep]\n\"budget.fraction\" = [0.5, 0.75]\n");
  o.resume = true;
  EXPECT_EQ(rkv::run_ablation(second, o).cells_computed, 1);  // 0.75 is new; full cache and 0.5 are kept
  std::set<std::string> want, got;
  for (const auto& c : second.cells) want.insert(c.id);
  for (const auto& r : result_rows(dir / "out")) got.insert(r.at("cell_id").get<std::string>());
  EXPECT_EQ(got, want);
  EXPECT_TRUE(fs::exists(dir / "out" / "cells" / (first.cells[1].id + ".json")));  // f = 0.25: kept on disk
  const std::string report = rkv::read_file((dir / "out" / "report.md").string());
  EXPECT_EQ(report.find("f=0.25"), std::string::npos) << report;
  EXPECT_NE(report.find("f=0.75"), std::string::npos) << report;
}

// A resumed run refused by a check made after the model is loaded (here a budget the new sweep value makes infeasible)
// used to have rewritten run.json and config.toml already, so the folder's cell list named the refused sweep and the
// finished cells of the old one dropped out of its report and of a later merge. The folder is now left as it was.
TEST_F(SyntheticRun, AResumeRefusedAfterLoadingTheModelLeavesTheFolderAsItWas) {
  rkv::RunOptions o;
  o.quiet = true;
  o.out_dir = (dir / "out").string();
  const std::string base = config("[scorer]\nplugin = \"streamingllm\"\n");
  ASSERT_EQ(rkv::run_ablation(plan(base + "[sweep]\n\"budget.fraction\" = [0.25, 0.5]\n"), o).cells_computed, 3);
  const std::string run_json = rkv::read_file((dir / "out" / "run.json").string());
  const std::string config_toml = rkv::read_file((dir / "out" / "config.toml").string());
  o.resume = true;
  EXPECT_THROW(rkv::run_ablation(plan(base + "[sweep]\n\"budget.fraction\" = [0.001, 0.5]\n"), o), rkv::InputError);
  EXPECT_EQ(rkv::read_file((dir / "out" / "run.json").string()), run_json);
  EXPECT_EQ(rkv::read_file((dir / "out" / "config.toml").string()), config_toml);
  // The original sweep resumes with nothing to compute and still reports f = 0.25.
  EXPECT_EQ(rkv::run_ablation(plan(base + "[sweep]\n\"budget.fraction\" = [0.25, 0.5]\n"), o).cells_computed, 0);
  EXPECT_NE(rkv::read_file((dir / "out" / "report.md").string()).find("f=0.25"), std::string::npos);
}

// Regression: per-task rows of results.jsonl averaged budget_total and kv_bytes over every task of the cell.
// A cell with lm_fidelity examples (B = 32) and needle examples (B = 1000): each row averages its own task only.
TEST_F(SyntheticRun, PerTaskRowsAverageOnlyTheirOwnTasksExamples) {
  const rkv::RunPlan p = plan(config("[scorer]\nplugin = \"streamingllm\"\n"));
  rkv::RunOptions o;
  o.quiet = true;
  o.out_dir = (dir / "out").string();
  ASSERT_EQ(rkv::run_ablation(p, o).cells_computed, 2);
  const fs::path cell = dir / "out" / "cells" / (p.cells[1].id + ".json");
  nlohmann::json j = nlohmann::json::parse(rkv::read_file(cell.string()));
  ASSERT_EQ(j.at("examples").size(), 2u);
  for (const auto& e : j.at("examples")) ASSERT_EQ(e.at("B").get<int64_t>(), 32);  // floor(0.5 * 32 * 2 + 0.5)
  const size_t kv_lm = j.at("examples")[0].at("kv_bytes").get<size_t>();
  for (int i = 0; i < 2; ++i) {  // two needle examples with another budget and cache size
    nlohmann::json e = j.at("examples")[0];
    e["task"] = "needle";
    e["example"] = i;
    e["values"] = {{"accuracy", 1.0}};
    e["full_values"] = {{"accuracy", 1.0}};
    e["B"] = 1000;
    e["kv_bytes"] = 7000;
    e["warnings"] = {"a needle-only warning"};
    j["examples"].push_back(e);
  }
  std::ofstream(cell, std::ios::trunc) << j.dump();
  rkv::merge_outputs({(dir / "out").string()}, (dir / "merged").string(), true);
  int seen = 0;
  for (const auto& r : result_rows(dir / "merged")) {
    if (r.at("cell_id") != p.cells[1].id) continue;
    ++seen;
    if (r.at("task") == "needle") {
      EXPECT_EQ(r.at("budget_total").get<double>(), 1000.0);
      EXPECT_EQ(r.at("kv_bytes").get<double>(), 7000.0);
      EXPECT_EQ(r.at("warnings"), nlohmann::json::array({"a needle-only warning"}));
    } else {
      EXPECT_EQ(r.at("budget_total").get<double>(), 32.0) << r.at("metric");
      EXPECT_EQ(r.at("kv_bytes").get<double>(), static_cast<double>(kv_lm)) << r.at("metric");
      for (const auto& w : r.at("warnings")) EXPECT_NE(w.get<std::string>(), "a needle-only warning");
    }
  }
  EXPECT_EQ(seen, 5);  // lm_fidelity: kl, ppl, ppl_full, top1_agreement; needle: accuracy
}

// Regression: merging 1 of 2 shards (or shards of 1/2 mixed with 1/3) wrote a partial report without a word.
// merge warns naming the missing cells (run.json lists the sweep), and report.md says it too.
TEST_F(SyntheticRun, MergeOfAnIncompleteShardSetNamesTheMissingCells) {
  const rkv::RunPlan p = plan(config("[scorer]\nplugin = \"streamingllm\"\n",
                                     "[sweep]\n\"budget.fraction\" = [0.3, 0.6]\n"));
  ASSERT_EQ(p.cells.size(), 3u);
  rkv::RunOptions o;
  o.quiet = true;
  for (const auto& [i, n] : std::vector<std::pair<int, int>>{{1, 2}, {2, 2}, {1, 3}}) {
    o.out_dir = (dir / ("s" + std::to_string(i) + "of" + std::to_string(n))).string();
    o.shard_index = i, o.shard_count = n;
    rkv::run_ablation(p, o);
  }
  auto cells_in = [&](const std::string& shard) {
    std::set<std::string> ids;
    for (const auto& e : fs::directory_iterator(dir / shard / "cells")) ids.insert(e.path().stem().string());
    return ids;
  };
  auto merged = [&](const std::vector<std::string>& shards, const std::string& out) {
    std::vector<std::string> in;
    for (const auto& s : shards) in.push_back((dir / s).string());
    testing::internal::CaptureStderr();
    rkv::merge_outputs(in, (dir / out).string(), true);
    return std::make_pair(testing::internal::GetCapturedStderr(), rkv::read_file((dir / out / "report.md").string()));
  };
  for (const std::vector<std::string>& shards :
       {std::vector<std::string>{"s1of2"}, std::vector<std::string>{"s1of2", "s1of3"}}) {
    std::set<std::string> have;
    for (const auto& s : shards)
      for (const auto& id : cells_in(s)) have.insert(id);
    ASSERT_LT(have.size(), 3u);
    const auto [err, report] = merged(shards, "m" + std::to_string(shards.size()));
    const std::string count = std::to_string(3 - have.size()) + " of 3 cells of the sweep are missing";
    EXPECT_NE(err.find("warning: merge: incomplete: " + count), std::string::npos) << err;
    EXPECT_NE(report.find("> warning: incomplete: " + count), std::string::npos) << report;
    for (const auto& c : p.cells) {
      const bool missing = !have.count(c.id);
      EXPECT_EQ(err.find(c.id + " (" + c.label + ")") != std::string::npos, missing) << c.id << "\n" << err;
      EXPECT_EQ(report.find(c.id + " (" + c.label + ")") != std::string::npos, missing) << c.id;
    }
  }
  const auto [err, report] = merged({"s1of2", "s2of2"}, "complete");  // the whole set: no warning
  EXPECT_EQ(err.find("incomplete"), std::string::npos) << err;
  EXPECT_EQ(report.find("incomplete"), std::string::npos) << report;
}

// Regression: a budget too small for the model (B < |A|) was found only when its cell ran, after the
// full-cache cell file was written; the folder then accepted neither the fixed config nor --resume. The budgets are
// checked before any cell file is written, so the fixed config simply runs.
TEST_F(SyntheticRun, InfeasibleBudgetIsFoundBeforeAnyCellIsWritten) {
  std::string bad = config("[scorer]\nplugin = \"streamingllm\"\n");
  bad.replace(bad.find("fraction = 0.5"), 14, "fraction = 0.001");  // B = floor(0.001 * 32 * 2 + 0.5) = 0 < |A| = 2
  rkv::RunOptions o;
  o.quiet = true;
  o.out_dir = (dir / "out").string();
  try {
    rkv::run_ablation(plan(bad), o);
    FAIL() << "expected an InputError";
  } catch (const rkv::InputError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("global budget B = 0 is below the number of compressible layers |A| = 2"), std::string::npos) << m;
    EXPECT_NE(m.find("raise budget.fraction"), std::string::npos) << m;
  }
  if (fs::exists(dir / "out" / "cells"))  // created only once the run starts
    for (const auto& e : fs::directory_iterator(dir / "out" / "cells")) ADD_FAILURE() << "cell written: " << e.path();
  EXPECT_EQ(rkv::run_ablation(plan(config("[scorer]\nplugin = \"streamingllm\"\n")), o).cells_computed, 2);
}

TEST_F(SyntheticRun, CApiGenerateRefusesAPromptLongerThanTheContext) {
  rkv_context* ctx = nullptr;
  ASSERT_EQ(rkv_context_create(&ctx), RKV_OK);
  const std::string path = (dir / "model.gguf").string();
  rkv_model_options mo{};
  mo.struct_size = sizeof mo;
  mo.path = path.c_str();
  mo.threads = 1;
  rkv_model* m = nullptr;
  ASSERT_EQ(rkv_model_open(ctx, &mo, &m), RKV_OK) << rkv_context_last_error(ctx);
  const std::string long_prompt(300, 'x'), fitting(250, 'x');
  rkv_generate_options g{};
  g.struct_size = sizeof g;
  g.prompt = long_prompt.c_str();
  g.max_new_tokens = 4;
  char* text = nullptr;
  EXPECT_EQ(rkv_generate(m, &g, &text), RKV_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(std::string(rkv_model_last_error(m)), "the prompt has 300 tokens, more than the model's context length 256");
  g.prompt = fitting.c_str();  // 250 + 20 > 256: generation stops at the context length
  g.max_new_tokens = 20;
  ASSERT_EQ(rkv_generate(m, &g, &text), RKV_OK) << rkv_model_last_error(m);
  EXPECT_LE(std::string(text).size(), 3u * 6u);  // at most 6 tokens of at most 3 bytes (U+FFFD for a bad byte)
  rkv_string_free(text);
  rkv_model_close(m);
  rkv_context_destroy(ctx);
}

TEST_F(SyntheticRun, ScorerWindowLongerThanThePrefixKeepsItsProtectedPositionsWithAWarning) {
  // snapkv's observation window (48) is longer than the prefix (T = 32): the window is clamped to T, every position
  // is protected, and b_l = 16 < 32 keeps the most recent 16 with a warning in the records.
  const rkv::RunPlan p = plan(config("[scorer]\nplugin = \"snapkv\"\n[scorer.snapkv]\nwindow = 48\n"));
  rkv::RunOptions o;
  o.out_dir = (dir / "out").string();
  o.quiet = true;
  EXPECT_EQ(rkv::run_ablation(p, o).cells_computed, 2);
  bool warned = false;
  for (const auto& r : result_rows(dir / "out"))
    for (const auto& w : r.at("warnings")) warned |= w.get<std::string>().find("protected count") != std::string::npos;
  EXPECT_TRUE(warned);
  // The warnings results.jsonl holds reach report.md, with the cell that recorded them.
  const std::string report = rkv::read_file((dir / "out" / "report.md").string());
  EXPECT_NE(report.find("## Warnings"), std::string::npos);
  EXPECT_NE(report.find("protected count"), std::string::npos);
  EXPECT_NE(report.find("1 cell: uniform + snapkv @ f=0.5"), std::string::npos) << report;
  const nlohmann::json budgets = nlohmann::json::parse(rkv::read_file((dir / "out" / "budgets.json").string()));
  for (const auto& [cell, b] : budgets.items())
    if (b.at("label") != "full cache")
      for (const auto& e : b.at("examples")) EXPECT_EQ(e.at("budgets"), (std::vector<int64_t>{16, 16}));
}

// A sweep over a plugin param gives distinct labels and distinct plot lines (one data file per group, each
// holding its own budgets), and with 2 examples the report's comparisons print "n too small" instead of a p-value.
TEST_F(SyntheticRun, ASweepOverAPluginParamGivesDistinctLabelsAndPlotLines) {
  const rkv::RunPlan p = plan(config("[scorer]\nplugin = \"snapkv\"\n[scorer.snapkv]\nwindow = 4\n",
                                     "[sweep]\n\"allocator.plugin\" = [\"uniform\", \"pyramid\"]\n"
                                     "\"scorer.snapkv.window\" = [4, 8]\n\"budget.fraction\" = [0.25, 0.5]\n"));
  rkv::RunOptions o;
  o.out_dir = (dir / "out").string();
  o.quiet = true;
  EXPECT_EQ(rkv::run_ablation(p, o).cells_computed, 9);
  std::set<std::string> labels;
  std::map<std::string, std::set<double>> budgets_of_group;
  size_t rows = 0;
  for (const auto& r : result_rows(dir / "out")) {
    if (r.at("metric") != "kl") continue;
    ++rows;
    labels.insert(r.at("label").get<std::string>());
  }
  EXPECT_EQ(rows, 9u);
  EXPECT_EQ(labels.size(), 9u);
  EXPECT_TRUE(labels.count("uniform + snapkv(window=4) @ f=0.25"));
  EXPECT_TRUE(labels.count("pyramid + snapkv(window=8) @ f=0.5"));
  // Four groups (allocator x window): four kl lines, each with the two budgets.
  for (int k = 0; k < 4; ++k) {
    const fs::path dat = dir / "out" / "plots" / ("lm_fidelity_kl_" + std::to_string(k) + ".dat");
    ASSERT_TRUE(fs::exists(dat)) << dat;
    std::istringstream lines(rkv::read_file(dat.string()));
    std::string line;
    size_t points = 0;
    while (std::getline(lines, line)) points += !line.empty();
    EXPECT_EQ(points, 2u) << dat;
  }
  EXPECT_FALSE(fs::exists(dir / "out" / "plots" / "lm_fidelity_kl_4.dat"));
  const std::string report = rkv::read_file((dir / "out" / "report.md").string());
  EXPECT_NE(report.find("| pyramid + snapkv(window=4) @ f=0.25 | kl |"), std::string::npos) << report;
  // 4 pyramid cells x 3 compared metrics (kl, ppl, top1_agreement; ppl_full is the reference) = 12 rows, each with
  // "n too small" in the p, p (Holm) and MDD columns.
  size_t too_small = 0;
  for (size_t at = report.find("n too small |"); at != std::string::npos; at = report.find("n too small |", at + 1))
    ++too_small;
  EXPECT_EQ(too_small, 36u) << report;
  for (const char* png : {"lm_fidelity_kl.png", "lm_fidelity_kl_vs_uniform.png", "budgets_lm_fidelity.png"})
    EXPECT_TRUE(fs::exists(dir / "out" / "plots" / png)) << png;
}

// The report opens with the headline (every cell ranked by the task's primary metric, the full cache as reference),
// and [output] baseline picks what the paired comparisons compare with: here each window-8 cell against the window-4
// cell of the same allocator and budget (4 cells x 3 compared metrics = 12 rows), recorded in every cell file.
TEST_F(SyntheticRun, TheHeadlineRanksEveryCellAndTheBaselineSelectorPicksThePairs) {
  const rkv::RunPlan p = plan(config("[scorer]\nplugin = \"snapkv\"\n[scorer.snapkv]\nwindow = 4\n",
                                     "baseline = { \"scorer.snapkv.window\" = 4 }\n"
                                     "[sweep]\n\"allocator.plugin\" = [\"uniform\", \"pyramid\"]\n"
                                     "\"scorer.snapkv.window\" = [4, 8]\n\"budget.fraction\" = [0.25, 0.5]\n"));
  EXPECT_EQ(p.report_baseline.describe(), "scorer.snapkv.window = 4");
  rkv::RunOptions o;
  o.out_dir = (dir / "out").string();
  o.quiet = true;
  EXPECT_EQ(rkv::run_ablation(p, o).cells_computed, 9);
  const std::string report = rkv::read_file((dir / "out" / "report.md").string());
  const size_t headline = report.find("## Headline");
  ASSERT_NE(headline, std::string::npos) << report;
  EXPECT_LT(headline, report.find("## Task lm_fidelity"));  // first, before the details
  // What was run: the model's file and shape from the manifest (this synthetic GGUF has no general.name), the task's
  // n, T and settings, the budgets.
  EXPECT_NE(report.find("- **Model** (`model.gguf`): llama, "), std::string::npos) << report;
  EXPECT_NE(report.find("- **Task** lm_fidelity: n = 2, T = 32 tokens; continuation = \"teacher-forced\", continuation_tokens = 8, prefix_tokens = 32\n"), std::string::npos) << report;
  EXPECT_NE(report.find("- **Budgets** 0.25, 0.5 (budget.fraction"), std::string::npos) << report;
  EXPECT_NE(report.find("- **Baseline** scorer.snapkv.window = 4: "), std::string::npos) << report;
  // ppl_full, the same for every cell, is shown once under the task's table, not as a column.
  EXPECT_EQ(report.find("| ppl_full |"), std::string::npos) << report;
  const size_t reference = report.find("Reference (the full cache's own value, the same for every cell): ppl_full = ");
  EXPECT_NE(reference, std::string::npos) << report;
  EXPECT_EQ(report.find("ppl_full = ", reference + 80), std::string::npos) << report;
  // Ranked within each budget: two tables of 4 cells, each with the full cache as its reference row.
  for (const char* budget : {"0.25", "0.5"}) {
    const size_t table = report.find(std::string("### lm_fidelity: ranked by kl (lower is better), at budget ") + budget);
    ASSERT_NE(table, std::string::npos) << budget << "\n" << report;
    EXPECT_NE(report.find("| ref | full cache |", table), std::string::npos) << report;
    const size_t end = report.find("\n\n", report.find("|---:|", table));
    // The 4 rows after the reference: kl ascends, and each rank is 1 + the rows strictly better (competition
    // ranking: here uniform and pyramid at window 8 keep the same entries in both layers, so they tie at rank 1).
    std::vector<double> ranked;
    std::vector<int> ranks;
    size_t row = report.find("\n| ref | full cache |", table);
    for (int k = 0; k < 4; ++k) {
      row = report.find("\n| ", row + 1);
      ASSERT_LT(row, end) << k << "\n" << report.substr(table, 2000);
      ranks.push_back(std::stoi(report.substr(row + 3)));
      const size_t value = report.find(" | ", report.find(" | ", row + 3) + 3) + 3;
      ranked.push_back(std::stod(report.substr(value)));
      EXPECT_NE(report.substr(row, report.find('\n', row + 1) - row).find(std::string("@ f=") + budget), std::string::npos);
    }
    EXPECT_GT(report.find("\n| ", row + 1), end);  // no fifth row
    EXPECT_TRUE(std::is_sorted(ranked.begin(), ranked.end())) << report.substr(table, 2000);
    for (size_t k = 0; k < 4; ++k)
      EXPECT_EQ(ranks[k], 1 + std::count_if(ranked.begin(), ranked.end(), [&](double v) { return v < ranked[k]; }))
          << report.substr(table, 2000);
  }
  EXPECT_NE(report.find("### Paired comparison against the baseline scorer.snapkv.window = 4"), std::string::npos)
      << report;
  size_t too_small = 0;
  for (size_t at = report.find("n too small |"); at != std::string::npos; at = report.find("n too small |", at + 1))
    ++too_small;
  EXPECT_EQ(too_small, 36u) << report;  // 12 rows x (p, p Holm, MDD)
  EXPECT_NE(report.find("| uniform + snapkv(window=8) @ f=0.25 | kl |"), std::string::npos) << report;
  EXPECT_EQ(report.find("| uniform + snapkv(window=4) @ f=0.25 | kl |"), std::string::npos) << report;  // a baseline
  for (const auto& f : fs::directory_iterator(dir / "out" / "cells")) {
    const nlohmann::json cell = nlohmann::json::parse(rkv::read_file(f.path().string()));
    EXPECT_EQ(cell.at("report_baseline").at("select"), (nlohmann::json{{"scorer.snapkv.window", 4}})) << f.path();
  }
}

// A cell finished before --resume widened the sweep over a param takes the label the wider sweep gives it.
TEST_F(SyntheticRun, ResumingAWiderSweepRelabelsTheFinishedCells) {
  const std::string scorer = "[scorer]\nplugin = \"snapkv\"\n[scorer.snapkv]\nwindow = 4\n";
  rkv::RunOptions o;
  o.out_dir = (dir / "out").string();
  o.quiet = true;
  EXPECT_EQ(rkv::run_ablation(plan(config(scorer, "[sweep]\n\"scorer.snapkv.window\" = [4]\n")), o).cells_computed, 2);
  std::set<std::string> before;
  for (const auto& r : result_rows(dir / "out")) before.insert(r.at("label").get<std::string>());
  EXPECT_EQ(before, (std::set<std::string>{"full cache", "uniform + snapkv @ f=0.5"}));
  o.resume = true;
  EXPECT_EQ(rkv::run_ablation(plan(config(scorer, "[sweep]\n\"scorer.snapkv.window\" = [4, 8]\n")), o).cells_computed, 1);
  std::set<std::string> after;
  for (const auto& r : result_rows(dir / "out")) after.insert(r.at("label").get<std::string>());
  EXPECT_EQ(after, (std::set<std::string>{"full cache", "uniform + snapkv(window=4) @ f=0.5",
                                          "uniform + snapkv(window=8) @ f=0.5"}));
}

TEST(ExampleInputs, TokenIdsHashIsSha256OfLittleEndianInt32) {
  // Python: hashlib.sha256(struct.pack('<2i', 1, 256)).hexdigest(), and of struct.pack('<1i', -1).
  EXPECT_EQ(rkv::token_ids_sha256({1, 256}), "242045e2f1bb37769b514f182fd91b3d215324cb57f187cced1e9c62921dbac3");
  EXPECT_EQ(rkv::token_ids_sha256({-1}), "ad95131bc0b799c0b1af477fb14fcf26a6a9f76079e48bf090acb7e8367bfd0e");
}

// Every example of examples.jsonl names the text window it used (file, token offset,
// length) and the hash of its token ids, which re-tokenizing the file and cutting the window reproduces; every cell
// file carries the reproducibility manifest.
TEST_F(SyntheticRun, ExamplesNameTheirTextWindowAndCellsCarryTheManifest) {
  const rkv::RunPlan p = plan(config("[scorer]\nplugin = \"streamingllm\"\n"));
  rkv::RunOptions o;
  o.out_dir = (dir / "out").string();
  o.quiet = true;
  rkv::run_ablation(p, o);
  const rkv::Tokenizer tok = rkv::Tokenizer::from_path((dir / "model.gguf").string());
  const std::vector<int32_t> ids = tok.encode(rkv::read_file((dir / "eval.txt").string()), false, false);
  std::istringstream lines(rkv::read_file((dir / "out" / "examples.jsonl").string()));
  std::string line;
  size_t n = 0;
  std::set<int64_t> offsets;
  while (std::getline(lines, line)) {
    const nlohmann::json in = nlohmann::json::parse(line).at("input");
    EXPECT_EQ(fs::path(in.at("source").get<std::string>()), dir / "eval.txt");
    EXPECT_EQ(in.at("tokens"), 32 + 8);        // prefix_tokens + continuation_tokens
    EXPECT_EQ(in.at("prompt_tokens"), 32);
    const int64_t offset = in.at("token_offset").get<int64_t>();
    ASSERT_GE(offset, 0);
    ASSERT_LE(offset + 40, static_cast<int64_t>(ids.size()));
    const std::vector<int32_t> window(ids.begin() + offset, ids.begin() + offset + 40);
    EXPECT_EQ(in.at("ids_sha256"), rkv::token_ids_sha256(window));
    offsets.insert(offset);
    ++n;
  }
  EXPECT_EQ(n, 4u);               // 2 cells x 2 examples
  EXPECT_EQ(offsets.size(), 2u);  // the two examples' windows, the same in both cells
  for (const auto& e : fs::directory_iterator(dir / "out" / "cells")) {
    const nlohmann::json m = nlohmann::json::parse(rkv::read_file(e.path().string())).at("manifest");
    EXPECT_EQ(m.at("tokenizer").at("n_vocab"), 258);
    EXPECT_EQ(m.at("tokenizer").at("eos"), 257);
    EXPECT_EQ(m.at("tokenizer").at("vocab_sha256").get<std::string>().size(), 64u);
    EXPECT_EQ(m.at("chat_template").at("name"), "none");  // the synthetic model carries no template
    EXPECT_EQ(m.at("generation").at("stop_ids"), (std::vector<int32_t>{257}));
    EXPECT_EQ(m.at("generation").at("tasks").at("lm_fidelity").at("continuation_tokens"), 8);
  }
}

TEST(RunDumps, NpyFloat32FollowsNep1ByHand) {
  // "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }" is 59 bytes; 10 + 59 + 1 = 70, padded with 58
  // spaces to 128: header length 118 (0x76, 0x00), data from byte 128.
  const std::string npy = rkv::npy_float32({1, 2, 3, 4, 5, 6}, 2, 3);
  ASSERT_EQ(npy.size(), 128u + 24u);
  EXPECT_EQ(npy.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  EXPECT_EQ(static_cast<unsigned char>(npy[8]), 118);
  EXPECT_EQ(static_cast<unsigned char>(npy[9]), 0);
  EXPECT_EQ(npy.substr(10, 59), "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }");
  EXPECT_EQ(npy.substr(69, 58), std::string(58, ' '));
  EXPECT_EQ(npy[127], '\n');
  float sixth = 0;
  std::memcpy(&sixth, npy.data() + 128 + 20, 4);
  EXPECT_EQ(sixth, 6.0f);
  EXPECT_THROW(rkv::parse_dump_kinds("kept,weights"), rkv::InputError);
  EXPECT_EQ(rkv::parse_dump_kinds("logits,kept"), (std::set<std::string>{"kept", "logits"}));
}

// --dump kept writes, per compressed cell, one line per (example, layer, KV head) with the b_l
// positions that head keeps, ascending and inside the prompt; --dump logits writes each example's continuation
// logits [n, V] for every cell, the full cache's included.
TEST_F(SyntheticRun, DumpsHoldTheKeptPositionsAndTheContinuationLogits) {
  const rkv::RunPlan p = plan(config("[scorer]\nplugin = \"streamingllm\"\n"));
  rkv::RunOptions o;
  o.out_dir = (dir / "out").string();
  o.quiet = true;
  o.dumps = {"kept", "logits"};
  rkv::run_ablation(p, o);
  const std::string full_id = p.cells[0].id, cell_id = p.cells[1].id;
  EXPECT_FALSE(fs::exists(dir / "out" / "dumps" / "kept" / (full_id + ".jsonl")));
  std::istringstream lines(rkv::read_file((dir / "out" / "dumps" / "kept" / (cell_id + ".jsonl")).string()));
  std::string line;
  size_t n = 0;
  while (std::getline(lines, line)) {
    const nlohmann::json r = nlohmann::json::parse(line);
    const std::vector<int32_t> pos = r.at("positions").get<std::vector<int32_t>>();
    EXPECT_EQ(r.at("T"), 32);
    EXPECT_EQ(pos.size(), 16u);  // f = 0.5 of T = 32 in each of the 2 layers
    EXPECT_TRUE(std::is_sorted(pos.begin(), pos.end()));
    EXPECT_GE(pos.front(), 0);
    EXPECT_EQ(pos.back(), 31);   // streamingllm keeps the most recent positions
    ++n;
  }
  EXPECT_EQ(n, 2u * 2u * 2u);  // 2 examples x 2 layers x 2 KV heads
  for (const std::string& id : {full_id, cell_id})
    for (int e = 0; e < 2; ++e) {
      const std::string npy =
          rkv::read_file((dir / "out" / "dumps" / "logits" / id / ("lm_fidelity-" + std::to_string(e) + ".npy")).string());
      EXPECT_NE(npy.find("'shape': (8, 258)"), std::string::npos);  // 8 continuation tokens, V = 258
      EXPECT_EQ(npy.size(), 128u + 8u * 258u * 4u);
    }
  // dumps/index.json names the cell of every dump by its label: both cells (the full cache has logits only).
  const nlohmann::json index = nlohmann::json::parse(rkv::read_file((dir / "out" / "dumps" / "index.json").string()));
  EXPECT_EQ(index.at("cells").size(), 2u) << index.dump();
  EXPECT_EQ(index.at("cells").at(full_id), p.cells[0].label);
  EXPECT_EQ(index.at("cells").at(cell_id), p.cells[1].label);
}

// Review finding: `merge` of a folder whose cells/ still holds cells of an earlier sweep (--resume changed it) reports
// only the current sweep's cells, as the run's own report does; and two runs of different sweeps that computed the
// same cell (window 4 fixed, then swept as [4, 8]) show it once, not twice under two labels.
TEST_F(SyntheticRun, MergeLeavesOutLeftoverCellsAndRepeatsOfAnotherSweep) {
  const std::string scorer = "[scorer]\nplugin = \"snapkv\"\n[scorer.snapkv]\nwindow = 4\n";
  rkv::RunOptions o;
  o.quiet = true;
  o.out_dir = (dir / "a").string();
  rkv::run_ablation(plan(config(scorer, "[sweep]\n\"budget.fraction\" = [0.25, 0.5]\n")), o);  // 3 cells
  o.out_dir = (dir / "b").string();
  rkv::run_ablation(plan(config(scorer, "[sweep]\n\"scorer.snapkv.window\" = [4, 8]\n")), o);  // 3 cells
  // a and b share the full cache and "window 4 @ f=0.5"; merged, each computation appears once: full, f=0.25,
  // f=0.5 (from a), window 8 @ f=0.5 (from b).
  rkv::merge_outputs({(dir / "a").string(), (dir / "b").string()}, (dir / "ab").string(), true);
  std::set<std::string> kl_labels;
  for (const auto& r : result_rows(dir / "ab"))
    if (r.at("metric") == "kl") kl_labels.insert(r.at("label").get<std::string>());
  EXPECT_EQ(kl_labels.size(), 4u);
  EXPECT_TRUE(kl_labels.count("uniform + snapkv(window=8) @ f=0.5"));
  // Resume a with another sweep: its cells/ keeps the f=0.25 cell, which the new sweep does not list.
  o.out_dir = (dir / "a").string();
  o.resume = true;
  rkv::run_ablation(plan(config(scorer, "[sweep]\n\"scorer.snapkv.window\" = [4, 8]\n")), o);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir / "a" / "cells"), fs::directory_iterator{}), 5);
  o.resume = false;
  rkv::merge_outputs({(dir / "a").string()}, (dir / "a-merged").string(), true);
  EXPECT_EQ(result_rows(dir / "a-merged"), result_rows(dir / "a"));  // the run's own report and the merge agree
  size_t cells = 0;
  for (const auto& r : result_rows(dir / "a-merged")) cells += r.at("metric") == "kl";
  EXPECT_EQ(cells, 3u);
}

// A model with sliding-window layers (synthetic Gemma 3: layers 0 and 1 slide with window 16, layer 2 is
// global; H_kv = 2, d = 8, so an entry of one KV head is 2 x 8 floats + an int32 position = 68 bytes). At T = 32 the
// spans are [16, 16, 32], sum 64, so budget.fraction = 0.5 gives B = 32 and the uniform allocator keeps half of each
// span: [8, 8, 16]. The full cache holds only the windows of the sliding layers: (16 + 16 + 32) x 2 x 68 = 8,704
// bytes; the compressed one (8 + 8 + 16) x 2 x 68 = 4,352. After the 8 continuation tokens (positions 32 .. 39) a
// full sliding layer holds its last 16 entries (drop_out_of_window; 40 without it) and the global one 8 more:
// (16 + 16 + 40) x 136 = 9,792. With budget.layers = "global" only layer 2 is compressed: B = 16, budgets
// [16, 16, 16], kv_bytes (16 + 16 + 16) x 136 = 6,528.
TEST_F(SyntheticRun, SlidingWindowLayersHoldTheirWindowAndBudgetsAreFractionsOfSpans) {
  fs::remove_all(dir);
  rkv_test::write_synthetic_run_folder(dir, "gemma3");
  for (const std::string layers : {"", "layers = \"global\"\n"}) {
    const fs::path out = dir / (layers.empty() ? "out-all" : "out-global");
    rkv::RunOptions o;
    o.out_dir = out.string();
    o.quiet = true;
    std::string text = config("[scorer]\nplugin = \"snapkv\"\n[scorer.snapkv]\nwindow = 4\n");
    text.replace(text.find("fraction = 0.5\n"), 15, "fraction = 0.5\n" + layers);
    ASSERT_EQ(rkv::run_ablation(plan(text), o).cells_computed, 2);
    for (const auto& e : fs::directory_iterator(out / "cells")) {
      const nlohmann::json j = nlohmann::json::parse(rkv::read_file(e.path().string()));
      const bool full = j.at("full_cache").get<bool>();
      for (const auto& ex : j.at("examples")) {
        if (ex.at("task") != "lm_fidelity") continue;
        EXPECT_EQ(ex.at("kv_bytes_full").get<size_t>(), 8704u);
        if (full) {
          EXPECT_EQ(ex.at("budgets"), (std::vector<int64_t>{16, 16, 32}));
          EXPECT_EQ(ex.at("kv_bytes").get<size_t>(), 8704u);
          EXPECT_EQ(ex.at("kv_bytes_end").get<size_t>(), 9792u);
        } else if (layers.empty()) {
          EXPECT_EQ(ex.at("B").get<int64_t>(), 32);
          EXPECT_EQ(ex.at("budgets"), (std::vector<int64_t>{8, 8, 16}));
          EXPECT_EQ(ex.at("kv_bytes").get<size_t>(), 4352u);
          // A sliding layer's 8 kept prompt entries lie in [16, 32); after position 39 only those at 24 and above
          // are still in its window (at least snapkv's 4 recent ones): 12 to 16 entries, + the global layer's 24.
          EXPECT_GE(ex.at("kv_bytes_end").get<size_t>(), (12u + 12u + 24u) * 136u);
          EXPECT_LE(ex.at("kv_bytes_end").get<size_t>(), (16u + 16u + 24u) * 136u);
        } else {
          EXPECT_EQ(ex.at("B").get<int64_t>(), 16);
          EXPECT_EQ(ex.at("budgets"), (std::vector<int64_t>{16, 16, 16}));
          EXPECT_EQ(ex.at("kv_bytes").get<size_t>(), 6528u);
        }
      }
    }
  }
}

// h2o and periodic keep state per held entry, which the window cut would have to follow: refused with a clear error
// naming the config and the cell, before the first cell.
TEST_F(SyntheticRun, EntryStatefulDecodePoliciesAreRefusedOnSlidingWindowModels) {
  fs::remove_all(dir);
  rkv_test::write_synthetic_run_folder(dir, "gemma3");
  rkv::RunOptions o;
  o.out_dir = (dir / "out").string();
  o.quiet = true;
  const rkv::RunPlan p = plan(config("[scorer]\nplugin = \"streamingllm\"\n", "[compression.decode]\npolicy = \"h2o\"\n"));
  try {
    rkv::run_ablation(p, o);
    FAIL() << "h2o ran on a sliding-window model";
  } catch (const rkv::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("not supported on a model with sliding-window layers"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("cfg.toml: cell '"), std::string::npos) << e.what();
  }
  // Refused before any work: not even the full-cache cell was written.
  EXPECT_TRUE(!fs::exists(dir / "out" / "cells") || fs::is_empty(dir / "out" / "cells"));
}

}  // namespace

// The builtin `damage` signal (runner/profile/damage_signal.hpp) is the oracle. Its profile must equal D_l computed
// by hand through analyze's loop (compression_damage) on the calibration windows, and `analyze` must show it as the
// oracle row with that same profile at the config's fraction. At f = 1 every position is kept, so D_l = 0 (by hand).
TEST_F(SyntheticRun, DamageSignalIsAnalyzesDamageOnTheCalibrationSplit) {
  const std::string text = config("[scorer]\nplugin = \"streamingllm\"\n[signal]\nplugin = \"damage\"\n"
                                  "[signal.damage]\nfraction = 0.5\n");
  const rkv::RunPlan p = plan(text);
  const rkv::Model model = rkv::load_model(p.model_path, rkv::weights_for_backend(p.backend, p.weights));
  const rkv::Tokenizer tok = rkv::Tokenizer::from_path(p.model_path);
  const std::unique_ptr<rkv::Backend> backend = rkv::make_backend("cpu", model, rkv::plan_backend_options(p));
  const rkv::CellConfig& cell = p.cells.back().config;
  ASSERT_FALSE(cell.full_cache);
  rkv::ProfileRequest req = rkv::make_profile_request(p, cell, model, tok);
  req.backend = backend.get();
  req.read_cache = req.write_cache = false;
  const rkv::SensitivityProfile profile = rkv::compute_profile(req);

  // By hand: the calibration windows (P = 32 prefix, n_w = 8 continuation), only layer l compressed by streamingllm.
  const auto windows = rkv::draw_text_windows(tok, p.calibration.files, 2, 32 + 8, p.calibration.seed);
  std::vector<std::vector<int32_t>> tokens;
  for (const auto& w : windows) tokens.push_back(w.tokens);
  rkv::HostServices host;
  const rkv::PluginInstance scorer = rkv::PluginInstance::create(*cell.scorer->info, cell.scorer->params, host);
  rkv::ScorerUse use;
  use.instance = &scorer;
  use.requirements = rkv::query_scorer_requirements(scorer, rkv_attention_shape{sizeof(rkv_attention_shape),
      model.config.n_layers, model.config.n_heads, model.config.n_kv_heads, model.config.head_dim});
  use.key = "by hand";
  const auto d = rkv::compression_damage(*backend, {&use}, tokens, 32, {0.5, 1.0}).front();  // d[f][i][l]
  ASSERT_EQ(profile.s.size(), 2u);
  double largest = 0;
  for (size_t l = 0; l < 2; ++l) {
    EXPECT_NEAR(profile.s[l], (d[0][0][l] + d[0][1][l]) / 2, 1e-12) << "layer " << l;
    for (size_t i = 0; i < 2; ++i) EXPECT_NEAR(profile.per_example[i][l], d[0][i][l], 1e-12) << i << ", " << l;
    for (size_t i = 0; i < 2; ++i) EXPECT_NEAR(d[1][i][l], 0.0, 1e-6) << "f = 1 keeps every position of layer " << l;
    largest = std::max(largest, profile.s[l]);
  }
  EXPECT_GT(largest, 1e-6) << "f = 0.5 must hurt some layer, or the comparison above proves nothing";

  rkv::AnalyzeOptions o;
  o.out_dir = (dir / "analysis").string();
  o.fractions = {0.5};
  o.quiet = true;
  rkv::run_analysis(p, o);
  const auto j = nlohmann::json::parse(rkv::read_file((dir / "analysis" / "analysis.json").string()));
  ASSERT_EQ(j.at("signals").size(), 1u);
  EXPECT_EQ(j.at("signals")[0].at("signal"), "org.ripplekv.signal.damage");
  for (size_t l = 0; l < 2; ++l) {
    EXPECT_NEAR(j.at("signals")[0].at("s")[l].get<double>(), profile.s[l], 1e-12) << "layer " << l;
    EXPECT_NEAR(j.at("oracle").at("s")[0][l].get<double>(), profile.s[l], 1e-12) << "layer " << l;
  }
  const std::string md = rkv::read_file((dir / "analysis" / "analysis.md").string());
  EXPECT_NE(md.find("| **damage (oracle: calibration D_l at the same f)** |"), std::string::npos) << md;
  // Profiling cost (issue 32 step 3): each profile's seconds over one timed calibration-length prefill.
  const double unit = j.at("calibration_prefill_seconds").get<double>();
  ASSERT_GT(unit, 0.0);
  const auto& sig = j.at("signals")[0];
  EXPECT_GT(sig.at("profile_seconds").get<double>(), 0.0);
  EXPECT_NEAR(sig.at("cost_prefills").get<double>(), sig.at("profile_seconds").get<double>() / unit,
              1e-12 * sig.at("cost_prefills").get<double>());
  ASSERT_EQ(j.at("oracle").at("cost_prefills").size(), 1u);  // one oracle profile per fraction
  EXPECT_NEAR(j.at("oracle").at("cost_prefills")[0].get<double>(),
              j.at("oracle").at("profile_seconds")[0].get<double>() / unit,
              1e-12 * j.at("oracle").at("cost_prefills")[0].get<double>());
  EXPECT_NE(md.find("| f = 0.5 | profiling cost (s = prefills) |"), std::string::npos) << md;
}

// [signal.damage] of = "sharing": s_l = the sharing damage of layer l on the calibration split, worked out here with
// the CPU forward functions (layer 0 as usual, layer 1 through forward_shared_layer over layer 0's cache), not through
// Backend::share_layer; layer 0, which cannot share, gets the largest d_l. analyze --sharing reports the evaluation
// split's D^share (null for layer 0).
TEST_F(SyntheticRun, SharingDamageSignalAndAnalyzeSharingMeasureLayerOneReadingLayerZero) {
  const std::string text = config("[scorer]\nplugin = \"streamingllm\"\n[signal]\nplugin = \"damage\"\n"
                                  "[signal.damage]\nof = \"sharing\"\n");
  const rkv::RunPlan p = plan(text);
  const rkv::Model model = rkv::load_model(p.model_path, rkv::WeightStorage::f32);
  const rkv::Tokenizer tok = rkv::Tokenizer::from_path(p.model_path);
  const std::unique_ptr<rkv::Backend> backend = rkv::make_backend("cpu", model, rkv::plan_backend_options(p));
  rkv::ProfileRequest req = rkv::make_profile_request(p, p.cells.back().config, model, tok);
  req.backend = backend.get();
  req.read_cache = req.write_cache = false;
  const rkv::SensitivityProfile profile = rkv::compute_profile(req);
  const auto windows = rkv::draw_text_windows(tok, p.calibration.files, 2, 32 + 8, p.calibration.seed);
  const int64_t V = model.config.vocab_size;
  double mean = 0;
  for (size_t i = 0; i < 2; ++i) {
    const std::vector<int32_t>& w = windows[i].tokens;
    const std::vector<int32_t> prefix(w.begin(), w.begin() + 32), cont(w.begin() + 32, w.end());
    rkv::cpu::Workspace ws;
    rkv::KVCache full = rkv::cpu::make_cache(model, 0);
    rkv::cpu::prefill(model, prefix, 0, full, ws, rkv::LogitsFor::None);
    rkv::KVCache shared = full;
    const std::vector<float> want = rkv::cpu::prefill(model, cont, 32, full, ws, rkv::LogitsFor::All);
    std::vector<float> x = rkv::cpu::embed(model, cont);
    std::vector<int64_t> pos;
    for (int64_t t = 0; t < 8; ++t) pos.push_back(32 + t);
    rkv::cpu::forward_layer(model, 0, x.data(), 8, pos.data(), shared.layers[0], ws);
    rkv::cpu::forward_shared_layer(model, 1, x.data(), 8, pos.data(), shared.layers[0], ws);
    const std::vector<float> got = rkv::cpu::final_logits(model, x.data(), 8, {0, 1, 2, 3, 4, 5, 6, 7}, ws);
    double kl = 0;
    for (int64_t t = 0; t < 8; ++t) kl += rkv::kl_from_logits(want.data() + t * V, got.data() + t * V, V) / 8;
    EXPECT_NEAR(profile.per_example[i][1], kl, 1e-9) << "example " << i;
    EXPECT_EQ(profile.per_example[i][0], profile.per_example[i][1]) << "layer 0 takes the largest d_l";
    mean += kl / 2;
  }
  EXPECT_NEAR(profile.s[1], mean, 1e-9);
  EXPECT_GT(mean, 1e-6) << "sharing must change the continuation, or the comparison proves nothing";

  rkv::AnalyzeOptions o;
  o.out_dir = (dir / "analysis").string();
  o.fractions = {0.5};
  o.quiet = true;
  o.sharing = true;
  rkv::run_analysis(p, o);
  const auto j = nlohmann::json::parse(rkv::read_file((dir / "analysis" / "analysis.json").string()));
  ASSERT_TRUE(j.contains("sharing"));
  EXPECT_TRUE(j.at("sharing").at("D")[0].is_null());
  EXPECT_GT(j.at("sharing").at("D")[1].get<double>(), 1e-6);
  EXPECT_EQ(j.at("sharing").at("order"), nlohmann::json({1}));
  EXPECT_NE(rkv::read_file((dir / "analysis" / "analysis.md").string()).find("## Sharing damage per layer"),
            std::string::npos);
}

// A run allocating by the damage profile names it the oracle in its cell labels and its profile section; its cell
// records the builtin with no library hash.
TEST_F(SyntheticRun, ARunAllocatingByDamageShowsItAsTheOracle) {
  std::string text = config("[scorer]\nplugin = \"streamingllm\"\n[signal]\nplugin = \"damage\"\n");
  text.replace(text.find("plugin = \"uniform\""), std::strlen("plugin = \"uniform\""), "plugin = \"ripplekv\"");
  rkv::RunOptions o;
  o.quiet = true;
  o.out_dir = (dir / "out").string();
  ASSERT_EQ(rkv::run_ablation(plan(text), o).cells_computed, 2) << text;
  const std::string report = rkv::read_file((dir / "out" / "report.md").string());
  EXPECT_NE(report.find("## Sensitivity profile (org.ripplekv.signal.damage: the oracle)"), std::string::npos) << report;
  EXPECT_NE(report.find("ripplekv(damage: oracle) + streamingllm"), std::string::npos) << report;
  const auto profile = nlohmann::json::parse(rkv::read_file((dir / "out" / "profile.json").string()));
  EXPECT_EQ(profile.at("params").at("fraction"), 0.2);
  bool found = false;
  for (const auto& e : fs::directory_iterator(dir / "out" / "cells")) {
    const auto cell = nlohmann::json::parse(rkv::read_file(e.path().string()));
    if (cell.at("signal").is_null()) continue;
    found = true;
    EXPECT_EQ(cell.at("signal").at("id"), "org.ripplekv.signal.damage");
    EXPECT_TRUE(cell.at("signal").at("library_sha256").is_null());
  }
  EXPECT_TRUE(found);
}

// [signal.damage]: an unknown key or a fraction outside (0, 1] is an error naming the key.
TEST_F(SyntheticRun, BadDamageSignalParamsNameTheKey) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"fractoin = 0.2", "fractoin"}, {"fraction = 0.0", "signal.damage.fraction"}, {"fraction = 1.5", "fraction"}};
  for (const auto& [line, named] : cases) {
    const std::string text = config("[scorer]\nplugin = \"streamingllm\"\n[signal]\nplugin = \"damage\"\n"
                                    "[signal.damage]\n" + line + "\n");
    try {
      plan(text);
      ADD_FAILURE() << line << " was accepted";
    } catch (const rkv::InputError& e) {
      EXPECT_NE(std::string(e.what()).find(named), std::string::npos) << line << ": " << e.what();
    }
  }
}

// --set (issue 40): the run records the effective config, and --resume with a changed key names the key.
TEST_F(SyntheticRun, SetIsRecordedAndAResumeWithAChangedKeyNamesIt) {
  std::ofstream(dir / "cfg.toml") << config("[scorer]\nplugin = \"streamingllm\"\n");
  auto [rc, log] = cli_argv({"run", "cfg.toml", "--out", "out", "--quiet", "--set", "budget.fraction=0.25"}, dir);
  ASSERT_EQ(rc, 0) << log;
  const std::string recorded = rkv::read_file((dir / "out" / "config.toml").string());
  EXPECT_EQ(recorded.rfind("# the effective config: cfg.toml with --set budget.fraction=0.25\n", 0), 0u) << recorded;
  EXPECT_NE(recorded.find("fraction = 0.25"), std::string::npos) << recorded;
  std::tie(rc, log) = cli_argv({"run", "cfg.toml", "--out", "out", "--quiet", "--resume", "--set",
                                "budget.fraction=0.3", "--set", "model.threads=2"}, dir);
  EXPECT_EQ(rc, 2) << log;
  EXPECT_NE(log.find("changed: budget.fraction: 0.25 then, 0.3 now; model.threads: 1 then, 2 now"), std::string::npos)
      << log;
  std::tie(rc, log) = cli_argv({"run", "cfg.toml", "--out", "out", "--quiet", "--resume", "--set",
                                "budget.fraction=0.25"}, dir);
  EXPECT_EQ(rc, 0) << log;  // the same effective config resumes
  std::tie(rc, log) = cli_argv({"validate", "cfg.toml", "--set", "budget.fraction=2"}, dir);
  EXPECT_EQ(rc, 2) << log;
  EXPECT_NE(log.find("cfg.toml with --set: 'budget.fraction'"), std::string::npos) << log;
}
