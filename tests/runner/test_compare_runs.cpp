// `ripplekv compare` (runner/report/compare_runs.hpp) on hand-made runs: cells aligned by label across runs of
// different models, paired only when every example's input ids hash matches, differences worked out by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "core/errors.hpp"
#include "runner/report/compare_runs.hpp"

namespace {

/// A cell of lm_fidelity whose example i has kl[i] and input ids hash ids[i].
rkv::CellData cell(const std::string& label, const std::string& model, const std::vector<double>& kl,
                   const std::vector<std::string>& ids) {
  rkv::CellData c;
  c.meta = {{"cell_id", label}, {"label", label}, {"group", label}, {"full_cache", label == "full cache"},
            {"budget_fraction", label == "full cache" ? nlohmann::json(nullptr) : nlohmann::json(0.5)},
            {"budget_tokens", nullptr}, {"backend", "cpu"}, {"model_path", "/models/" + model}};
  for (size_t i = 0; i < kl.size(); ++i) {
    rkv::ExampleOutcomeRecord r;
    r.task = "lm_fidelity";
    r.example = static_cast<int64_t>(i);
    r.values["kl"] = kl[i];
    r.input.ids_sha256 = ids[i];
    c.examples.push_back(r);
  }
  return c;
}

const std::vector<std::string> kSame = {"aa", "bb", "cc"};

TEST(CompareRuns, PairedWhenEveryExampleHasTheSameInput) {
  const rkv::CellData a = cell("snapkv @ f=0.5", "m1.gguf", {0.1, 0.2, 0.6}, kSame);
  const rkv::CellData b = cell("snapkv @ f=0.5", "m1.gguf", {0.2, 0.2, 0.9}, kSame);
  const rkv::RunDifference d = rkv::run_difference(a, b, "lm_fidelity", "kl", 1, 500);
  EXPECT_TRUE(d.paired);
  // Differences b - a per example: 0.1, 0, 0.3 -> mean 0.4 / 3; a bootstrap mean of three of them lies in [0, 0.3].
  EXPECT_NEAR(d.difference, 0.4 / 3, 1e-12);
  EXPECT_GE(d.ci_low, 0.0 - 1e-12);
  EXPECT_LE(d.ci_high, 0.3 + 1e-12);
  EXPECT_TRUE(std::isnan(d.p));  // n = 3 < 10: no p
  EXPECT_EQ(d.n_reference, 3u);
}

TEST(CompareRuns, UnpairedWhenAnInputDiffersOrTheExamplesDiffer) {
  const rkv::CellData a = cell("snapkv @ f=0.5", "m1.gguf", {0.1, 0.2, 0.6}, kSame);
  // Another model tokenizes the same text differently: one hash differs, so nothing is paired.
  const rkv::CellData b = cell("snapkv @ f=0.5", "m2.gguf", {0.3, 0.3, 0.3}, {"aa", "xx", "cc"});
  rkv::RunDifference d = rkv::run_difference(a, b, "lm_fidelity", "kl", 1, 500);
  EXPECT_FALSE(d.paired);
  EXPECT_NEAR(d.difference, 0.3 - 0.3, 1e-12);  // mean 0.3 minus mean 0.3
  // b is constant, so the CI is 0.3 minus a bootstrap mean of a: within [0.3 - 0.6, 0.3 - 0.1].
  EXPECT_GE(d.ci_low, -0.3 - 1e-12);
  EXPECT_LE(d.ci_high, 0.2 + 1e-12);
  // Other example indices (two examples only): unpaired too; an unrecorded hash ("") never pairs.
  d = rkv::run_difference(a, cell("snapkv @ f=0.5", "m1.gguf", {0.1, 0.2}, kSame), "lm_fidelity", "kl", 1, 500);
  EXPECT_FALSE(d.paired);
  EXPECT_NEAR(d.difference, 0.15 - 0.3, 1e-12);
  const rkv::CellData blank = cell("snapkv @ f=0.5", "m1.gguf", {0.1, 0.2, 0.6}, {"", "", ""});
  EXPECT_FALSE(rkv::run_difference(blank, blank, "lm_fidelity", "kl", 1, 500).paired);
}

TEST(CompareRuns, PairedPValueFromTenExamples) {
  // 12 examples where b = a + 0.1 exactly: every difference is +0.1, the sign-flip p is 2 / 2^12 (all + or all -).
  std::vector<double> ka, kb;
  std::vector<std::string> ids;
  for (int i = 0; i < 12; ++i) ka.push_back(0.05 * i), kb.push_back(0.05 * i + 0.1), ids.push_back("h" + std::to_string(i));
  const rkv::RunDifference d =
      rkv::run_difference(cell("c", "m", ka, ids), cell("c", "m", kb, ids), "lm_fidelity", "kl", 3, 500);
  ASSERT_TRUE(d.paired);
  EXPECT_NEAR(d.difference, 0.1, 1e-12);
  EXPECT_NEAR(d.p, 2.0 / 4096.0, 1e-12);
}

TEST(CompareRuns, TheReportAlignsCellsByLabelAcrossModels) {
  std::vector<rkv::ComparedRun> runs(2);
  runs[0].name = "smol", runs[0].folder = "/runs/smol";
  runs[1].name = "gemma", runs[1].folder = "/runs/gemma";
  runs[0].cells = {cell("full cache", "smol.gguf", {0, 0, 0}, kSame), cell("snapkv @ f=0.5", "smol.gguf", {0.1, 0.2, 0.6}, kSame),
                   cell("only in smol @ f=0.5", "smol.gguf", {1, 1, 1}, kSame)};
  // The second run lists its cells in another order and tokenizes differently (other hashes).
  runs[1].cells = {cell("snapkv @ f=0.5", "gemma.gguf", {0.4, 0.5, 0.6}, {"x", "y", "z"}),
                   cell("full cache", "gemma.gguf", {0, 0, 0}, {"x", "y", "z"})};
  nlohmann::json rows = nlohmann::json::array();
  const std::string md = rkv::comparison_report(runs, 200, &rows);
  EXPECT_NE(md.find("| smol | `/runs/smol` | `smol.gguf` |"), std::string::npos) << md;
  EXPECT_NE(md.find("| gemma | `/runs/gemma` | `gemma.gguf` |"), std::string::npos) << md;
  EXPECT_NE(md.find("| cell | smol | gemma | gemma - smol |"), std::string::npos) << md;
  // A name with a pipe or a newline cannot add columns or rows.
  runs[1].name = "gem|ma\nx";
  const std::string escaped = rkv::comparison_report(runs, 200, nullptr);
  EXPECT_NE(escaped.find("| cell | smol | gem\\|ma\\x0ax | gem\\|ma\\x0ax - smol |"), std::string::npos) << escaped;
  runs[1].name = "gemma";
  // snapkv's row: means 0.3 and 0.5, difference 0.2, unpaired; the cell only smol has shows "-" for gemma.
  const size_t row = md.find("| snapkv @ f=0.5 | 0.3 [");
  ASSERT_NE(row, std::string::npos) << md;
  const std::string line = md.substr(row, md.find('\n', row) - row);
  EXPECT_NE(line.find("| 0.5 ["), std::string::npos) << line;
  EXPECT_NE(line.find("| 0.2 ["), std::string::npos) << line;
  EXPECT_NE(line.find("] unpaired |"), std::string::npos) << line;
  EXPECT_NE(md.find("| only in smol @ f=0.5 | 1 [1, 1] (n 3) | - | - |"), std::string::npos) << md;
  // comparison.jsonl's rows: 3 cells of smol + 2 of gemma; gemma's carry the difference.
  ASSERT_EQ(rows.size(), 5u);
  for (const auto& r : rows)
    if (r["run"] == "gemma" && r["cell"] == "snapkv @ f=0.5") {
      EXPECT_NEAR(r["difference"]["value"].get<double>(), 0.2, 1e-12);
      EXPECT_FALSE(r["difference"]["paired"].get<bool>());
    }
}

TEST(CompareRuns, RefusesTooFewRunsAndBadNames) {
  EXPECT_THROW(rkv::read_compared_runs({"/tmp"}, {}), rkv::InputError);
  EXPECT_THROW(rkv::read_compared_runs({"/a", "/b"}, {"one"}), rkv::InputError);
  EXPECT_THROW(rkv::read_compared_runs({"/a", "/b"}, {"x", "x"}), rkv::InputError);
  // A folder without finished cells is named.
  const std::string empty = testing::TempDir() + "/rkv-compare-empty";
  std::filesystem::create_directories(empty);
  try {
    rkv::read_compared_runs({empty, empty}, {});
    FAIL() << "no error";
  } catch (const rkv::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("rkv-compare-empty' holds no finished cells"), std::string::npos) << e.what();
  }
}

}  // namespace
