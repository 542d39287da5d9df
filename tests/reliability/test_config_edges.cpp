// Config values at the edges the runner's config tests leave out: budget fractions 0, negative, NaN and
// infinite, and swept ones outside (0, 1]; zero and negative lengths, budgets and thread counts; both or neither of
// fraction and tokens. Each is an rkv::InputError naming the file, the line and the key. And the atomic writer every
// output goes through: no temporary file is left behind, on success or on failure.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/atomic_file.hpp"
#include "core/errors.hpp"
#include "runner/plan/config.hpp"

namespace fs = std::filesystem;

namespace {

class ConfigEdges : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = fs::temp_directory_path() / ("rkv-reliab-config-" + std::to_string(::getpid()) + "-" +
                                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir);
    for (const char* f : {"model.gguf", "a.txt", "b.txt"}) std::ofstream(dir / f) << "text of " << f;
  }
  void TearDown() override { fs::remove_all(dir); }
  /// A valid config with `line` replacing the line that starts with the same key in `section` (or appended there).
  std::string config(const std::string& budget = "fraction = 0.2", const std::string& extra = "") const {
    return "[model]\npath = \"model.gguf\"\n"
           "[data.calibration]\nfiles = [\"a.txt\"]\n"
           "[data.eval]\nfiles = [\"b.txt\"]\n"
           "[scorer]\nplugin = \"streamingllm\"\n"
           "[allocator]\nplugin = \"uniform\"\n"
           "[budget]\n" + budget + "\n" + extra;
  }
  std::string error(const std::string& text) const {
    try {
      rkv::load_run_plan_from_string(text, "cfg.toml", dir.string());
    } catch (const rkv::InputError& e) {
      return e.what();
    }
    return "(no error)";
  }
  fs::path dir;
};

TEST_F(ConfigEdges, BudgetFractionsOutsideTheUnitInterval) {
  EXPECT_EQ(error(config()), "(no error)");
  for (const char* v : {"0.0", "-0.25", "1.0000001", "nan", "inf", "-inf"}) {
    const std::string e = error(config(std::string("fraction = ") + v));
    EXPECT_NE(e.find("cfg.toml:12"), std::string::npos) << v << ": " << e;
    EXPECT_NE(e.find("'budget.fraction' must be in (0, 1]"), std::string::npos) << v << ": " << e;
  }
  EXPECT_EQ(error(config("fraction = 1.0")), "(no error)");  // 1 is inside
  const std::string e = error(config("fraction = 0.2", "[sweep]\n\"budget.fraction\" = [0.5, 0.0]\n"));
  EXPECT_NE(e.find("must be in (0, 1]"), std::string::npos) << e;
  EXPECT_NE(error(config("fraction = \"half\"")).find("budget.fraction"), std::string::npos);
}

TEST_F(ConfigEdges, ZeroAndNegativeLengthsBudgetsAndThreads) {
  struct Case {
    std::string text, needle;
  };
  const std::string base = config();
  auto with = [&](const std::string& from, const std::string& to) {
    std::string t = base;
    t.replace(t.find(from), from.size(), to);
    return t;
  };
  const Case cases[] = {
      {config("tokens = 0"), "'budget.tokens' must be >= 1 (got 0)"},
      {config("tokens = -64"), "'budget.tokens' must be >= 1 (got -64)"},
      {config("fraction = 0.2\ntokens = 64"), "needs exactly one of fraction = f, tokens = N or bytes_fraction = x"},
      {config(""), "needs exactly one of fraction = f, tokens = N or bytes_fraction = x"},
      {with("[data.calibration]\n", "[data.calibration]\nprefix_tokens = 0\n"), "'data.calibration.prefix_tokens' must be >= 1 (got 0)"},
      {with("[data.calibration]\n", "[data.calibration]\nwindow_tokens = -1\n"), "'data.calibration.window_tokens' must be >= 1 (got -1)"},
      {with("[data.eval]\n", "[data.eval]\nexamples = 0\n"), "'data.eval.examples' must be >= 1 (got 0)"},
      {with("[data.eval]\n", "[data.eval]\nprefix_tokens = -5\n"), "'data.eval.prefix_tokens' must be >= 1 (got -5)"},
      {with("path = \"model.gguf\"\n", "path = \"model.gguf\"\nthreads = -2\n"), "'model.threads' must be >= 0 (got -2)"},
      {config("fraction = 0.2", "[tasks.needle]\ncontext_tokens = [0]\n"), "tasks.needle.context_tokens"},
      {config("fraction = 0.2", "[tasks.needle]\ndepths = [1.5]\n"), "must be in [0, 1]"},
      {config("fraction = 0.2\nlayers = [-1]"), "budget.layers"},
  };
  for (const Case& c : cases) {
    const std::string e = error(c.text);
    EXPECT_NE(e.find("cfg.toml"), std::string::npos) << c.needle << ": " << e;
    EXPECT_NE(e.find(c.needle), std::string::npos) << c.needle << ": " << e;
  }
}

TEST(AtomicFile, LeavesNoTemporaryFileOnSuccessOrFailure) {
  const fs::path d = fs::temp_directory_path() / ("rkv-reliab-atomic-" + std::to_string(::getpid()));
  fs::remove_all(d);
  const std::string p = (d / "sub" / "results.jsonl").string();
  rkv::write_file_atomically(p, "one\n");  // creates the folders
  rkv::write_file_atomically(p, "two\n");  // replaces whole
  EXPECT_EQ(rkv::read_file(p), "two\n");
  // A target that cannot be written (its "folder" is a regular file): an error naming it, the old file untouched.
  std::ofstream(d / "plain") << "x";
  try {
    rkv::write_file_atomically((d / "plain" / "x.json").string(), "{}");
    ADD_FAILURE() << "expected an InputError";
  } catch (const rkv::InputError& e) {
    EXPECT_NE(std::string(e.what()).find((d / "plain").string()), std::string::npos) << e.what();
  }
  size_t n = 0;
  for (const auto& e : fs::recursive_directory_iterator(d)) {
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
    ++n;
  }
  EXPECT_EQ(n, 3u);  // sub/, sub/results.jsonl, plain
  fs::remove_all(d);
}

}  // namespace
