// Issue 37, class 2: a model file that changes under a running process. The quantized weights are read in place from
// the mapped GGUF for the life of the process; a copy truncated, rewritten in place or replaced after loading used to
// let `run` finish with exit 0 (perplexities of 1e5..1e8) and `generate` print garbage. Now the change is detected at
// every prefill, decode step, example and cell, the error names the file, and no result computed after it is written.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "backend/backend.hpp"
#include "common/child_process.hpp"
#include "core/atomic_file.hpp"
#include "core/errors.hpp"
#include "core/subprocess.hpp"
#include "model/mapped_file.hpp"
#include "model/model.hpp"
#include "runner/decode/generate.hpp"
#include "runner/plan/config.hpp"
#include "runner/profile/profile.hpp"
#include "tokenizer/tokenizer.hpp"
#include "synthetic_run.hpp"

namespace fs = std::filesystem;

namespace {

const std::string kCli = std::string(RKV_TEST_BINARY_DIR) + "/bin/ripplekv";

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

class ModelChange : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = fs::temp_directory_path() / ("rkv-model-change-" + std::to_string(::getpid()) + "-" +
                                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir);
    rkv_test::write_synthetic_run_folder(dir);
  }
  void TearDown() override { fs::remove_all(dir); }
  fs::path model() const { return dir / "model.gguf"; }
  fs::path dir;
};

/// Overwrites the first bytes after the GGUF header area with other bytes, keeping the size (an in-place edit).
void rewrite_in_place(const fs::path& p) {
  std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(static_cast<std::streamoff>(fs::file_size(p) / 2));
  const std::string junk(64, '\x7f');
  f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
}

// The three ways a file changes under its mapping, each seen by MappedFile::change() and named in the error.
TEST_F(ModelChange, TruncationRewriteAndReplacementAreEachDetected) {
  {
    const rkv::MappedFile m(model().string());
    EXPECT_EQ(m.change(), "");
    fs::resize_file(model(), fs::file_size(model()) / 2);
    EXPECT_TRUE(contains(m.change(), "was truncated (now ")) << m.change();
    try {
      m.check_unchanged("decoding");
      ADD_FAILURE() << "expected an InputError";
    } catch (const rkv::InputError& e) {
      EXPECT_EQ(std::string(e.what()).rfind(model().string() + ": the file changed while it was being read", 0), 0u)
          << e.what();
      EXPECT_TRUE(contains(e.what(), " during decoding; no result computed after the change is written")) << e.what();
    }
  }
  rkv_test::write_synthetic_run_folder(dir);
  {
    const rkv::MappedFile m(model().string());
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // a distinct modification time on any file system
    rewrite_in_place(model());
    EXPECT_TRUE(contains(m.change(), "modified in place")) << m.change();
  }
  rkv_test::write_synthetic_run_folder(dir);
  {  // a writer that restores the size and the modification time: the status change time still moves
    const rkv::MappedFile m(model().string());
    struct stat before {};
    ASSERT_EQ(::stat(model().c_str(), &before), 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    rewrite_in_place(model());
    const struct timespec times[2] = {before.st_atim, before.st_mtim};
    ASSERT_EQ(::utimensat(AT_FDCWD, model().c_str(), times, 0), 0);
    EXPECT_TRUE(contains(m.change(), "status change time moved")) << m.change();
  }
  rkv_test::write_synthetic_run_folder(dir);
  {
    const rkv::MappedFile m(model().string());
    fs::copy_file(model(), dir / "other.gguf");
    fs::rename(dir / "other.gguf", model());  // the path now names another file (the mapping still reads the old one)
    EXPECT_TRUE(contains(m.change(), "names another file")) << m.change();
  }
}

// generate: the weights change after the third token; the next step fails naming the file, no token after it.
TEST_F(ModelChange, GenerateStopsAtTheFirstStepAfterTheWeightsChanged) {
  const rkv::Model m = rkv::load_model(model().string(), rkv::WeightStorage::quantized);
  const std::unique_ptr<rkv::Backend> backend = rkv::make_backend("cpu", m);
  rkv::GenerateOptions opts;
  opts.max_new_tokens = 40;
  int produced = 0;
  try {
    rkv::generate(*backend, {10, 20, 30, 40}, opts, [&](int32_t) {
      if (++produced == 3) fs::resize_file(model(), fs::file_size(model()) - 4096);
      return true;
    });
    ADD_FAILURE() << "generate finished on weights that changed";
  } catch (const rkv::InputError& e) {
    EXPECT_TRUE(contains(e.what(), model().string())) << e.what();
    EXPECT_TRUE(contains(e.what(), "during extending the cache")) << e.what();
  }
  EXPECT_EQ(produced, 3);  // the token after the change came from logits computed after it: never produced
  // Float32 weights are copies made at load: nothing of the file is read afterwards, so a change cannot reach them.
  rkv_test::write_synthetic_run_folder(dir);
  const rkv::Model copy = rkv::load_model(model().string(), rkv::WeightStorage::f32);
  fs::resize_file(model(), 100);
  EXPECT_NO_THROW(copy.check_unchanged("decoding"));
}

// A profile computed while the weights changed is neither cached nor returned (it would steer every later run).
TEST_F(ModelChange, AProfileComputedAfterTheWeightsChangedIsNotCached) {
  std::ofstream(dir / "cfg.toml")
      << "[model]\npath = \"model.gguf\"\nthreads = 1\nweights = \"quantized\"\n"
         "[data.calibration]\nfiles = [\"cal.txt\"]\nexamples = 2\nprefix_tokens = 32\nwindow_tokens = 8\n"
         "[data.eval]\nfiles = [\"eval.txt\"]\nexamples = 2\nprefix_tokens = 32\n"
         "[signal]\nplugin = \"perturbation_kl\"\n[scorer]\nplugin = \"streamingllm\"\n"
         "[allocator]\nplugin = \"ripplekv\"\n[budget]\nfraction = 0.5\n";
  const rkv::RunPlan plan = rkv::load_run_plan((dir / "cfg.toml").string());
  const rkv::Model m = rkv::load_model(model().string(), rkv::WeightStorage::quantized);
  const rkv::Tokenizer tok = rkv::Tokenizer::from_path(model().string());
  rkv::ProfileRequest req = rkv::make_profile_request(plan, plan.cells[1].config, m, tok);
  req.cache_dir = (dir / "cache").string();
  fs::resize_file(model(), fs::file_size(model()) - 4096);  // before the signal runs: what it computes is suspect
  try {
    rkv::compute_profile(req);
    ADD_FAILURE() << "a profile was computed from changed weights";
  } catch (const rkv::InputError& e) {
    EXPECT_TRUE(contains(e.what(), "during computing the org.ripplekv.signal.perturbation_kl profile")) << e.what();
  }
  EXPECT_TRUE(!fs::exists(dir / "cache") || fs::is_empty(dir / "cache")) << "a profile was cached";
}

// run: the model is truncated while a (slow) cell runs; the run exits 2 naming the file, and the cell computed after
// the change has no result anywhere (checkpoint, cell file, results).
TEST_F(ModelChange, ARunWhoseModelChangesExitsNonZeroAndWritesNoLaterResult) {
  std::ofstream(dir / "cfg.toml")
      << "plugin_paths = [\"" RKV_TEST_BINARY_DIR "/tests/plugins/slow\"]\n"
         "[model]\npath = \"model.gguf\"\nthreads = 1\nweights = \"quantized\"\n"
         "[data.calibration]\nfiles = [\"cal.txt\"]\nexamples = 2\nprefix_tokens = 32\nwindow_tokens = 8\n"
         "[data.eval]\nfiles = [\"eval.txt\"]\nexamples = 2\nprefix_tokens = 32\n"
         "[scorer]\nplugin = \"slow_scorer\"\n[scorer.slow_scorer]\nmode = \"ignore\"\nseconds = 1.0\n"
         "[allocator]\nplugin = \"uniform\"\n[budget]\nfraction = 0.5\n"
         "[tasks.lm_fidelity]\ncontinuation_tokens = 8\n[output]\nbootstrap_resamples = 100\n";
  const fs::path log = dir / "run.log";
  const pid_t pid = rkv::start_program({kCli, "run", "cfg.toml", "--out", "out", "--quiet"}, dir.string(), log.string());
  ASSERT_GT(pid, 0);
  // The full-cache cell finishes example 1 at once; the slow cell then spends about 2 s (1 s per layer) on it.
  const fs::path full_checkpoint_dir = dir / "out" / "partial";
  for (int i = 0; i < 200 && !fs::exists(full_checkpoint_dir); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(25));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  fs::resize_file(model(), fs::file_size(model()) - 4096);
  const int rc = rkv_test::finish(pid, 120);
  const std::string text = rkv::read_file(log.string());
  EXPECT_EQ(rc, 2) << text;
  EXPECT_TRUE(contains(text, model().filename().string() + ": the file changed while it was being read")) << text;
  EXPECT_FALSE(fs::exists(dir / "out" / "results.jsonl"));
  // No checkpoint holds an example of the slow cell (it was computed after the change); no cell file is complete.
  const auto run = nlohmann::json::parse(rkv::read_file((dir / "out" / "run.json").string()));
  const std::string slow_id = run.at("cells")[1].at("id");
  const fs::path slow = dir / "out" / "partial" / (slow_id + ".jsonl");
  if (fs::exists(slow)) {
    std::ifstream in(slow);
    int lines = 0;
    for (std::string line; std::getline(in, line);) ++lines;
    EXPECT_EQ(lines, 1) << "only the header: no example computed after the change";
  }
  EXPECT_FALSE(fs::exists(dir / "out" / "cells" / (slow_id + ".json")));
}

}  // namespace
