// The report's paired comparisons (runner/report/comparisons.hpp) on hand-made cells: which cell is each cell's
// partner (uniform at the same scorer, budget, codec and decode policy; eviction alone at the same KV bytes), and
// the mean of the per-example differences worked out by hand.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "runner/report/comparisons.hpp"

namespace {

/// A cell file's meta: `allocator` short id, `scorer` short id, bytes fraction, codec format.
rkv::CellData cell(const std::string& id, const std::string& allocator, const std::string& scorer, double bytes,
                   const std::string& codec, const std::vector<double>& kl) {
  rkv::CellData c;
  c.meta = {{"cell_id", id},
            {"label", id},
            {"group", id},
            {"full_cache", false},
            {"allocator", {{"id", "org.ripplekv.allocator." + allocator}}},
            {"scorer", {{"id", "org.ripplekv.scorer." + scorer}}},
            {"signal", nullptr},
            {"budget_fraction", nullptr},
            {"budget_tokens", nullptr},
            {"budget_bytes_fraction", bytes},
            {"codec", {{"format", codec}}},
            {"decode", "none"}};
  for (size_t i = 0; i < kl.size(); ++i) {
    rkv::ExampleOutcomeRecord r;
    r.task = "lm_fidelity";
    r.example = static_cast<int64_t>(i);
    r.values["kl"] = kl[i];
    c.examples.push_back(r);
  }
  return c;
}

TEST(EqualBytesComparison, PairsEachCellWithEvictionAloneAtItsBytes) {
  const std::vector<rkv::CellData> cells = {
      cell("evict-0.1", "uniform", "snapkv", 0.1, "none", {0.5, 0.7, 0.9}),
      cell("evict-0.2", "uniform", "snapkv", 0.2, "none", {0.2, 0.3, 0.4}),
      cell("int4-0.1", "uniform", "snapkv", 0.1, "int", {0.1, 0.2, 0.3}),      // - (0.5, 0.7, 0.9): mean -0.5
      cell("kivi-0.2", "uniform", "snapkv", 0.2, "kivi", {0.3, 0.3, 0.3}),     // - (0.2, 0.3, 0.4): mean 0
      cell("int4-knorm-0.1", "uniform", "knorm", 0.1, "int", {1.0, 1.0, 1.0}),  // no knorm baseline: not compared
      cell("ripple-0.1", "ripplekv", "snapkv", 0.1, "none", {0.4, 0.7, 0.9}),  // allocators too: mean -1/30
  };
  const std::map<std::string, std::vector<std::string>> metrics = {{"lm_fidelity", {"kl"}}};
  const auto eq = rkv::compare_at_equal_bytes(cells, metrics, 200);
  ASSERT_EQ(eq.size(), 3u);
  EXPECT_EQ(eq[0].label, "int4-0.1");
  EXPECT_NEAR(eq[0].stats.mean_difference, -0.5, 1e-12);
  EXPECT_DOUBLE_EQ(eq[0].budget, 0.1);  // plotted against the bytes fraction
  EXPECT_EQ(eq[1].label, "kivi-0.2");
  EXPECT_NEAR(eq[1].stats.mean_difference, 0.0, 1e-12);
  EXPECT_EQ(eq[2].label, "ripple-0.1");
  EXPECT_NEAR(eq[2].stats.mean_difference, -0.1 / 3, 1e-12);
  EXPECT_EQ(eq[0].stats.n, 3u);
  // Against uniform, a codec cell pairs only with a uniform cell of the same codec: none here (it is uniform itself);
  // the ripplekv cell pairs with the float32 uniform cell at its bytes.
  const auto un = rkv::compare_with_uniform(cells, metrics, 200);
  ASSERT_EQ(un.size(), 1u);
  EXPECT_EQ(un[0].label, "ripple-0.1");
  const std::string md = rkv::comparison_section(eq, "lm_fidelity", "Paired comparison at equal KV bytes");
  EXPECT_NE(md.find("### Paired comparison at equal KV bytes"), std::string::npos);
  EXPECT_NE(md.find("| int4-0.1 | kl | -0.5"), std::string::npos) << md;
  // The knorm codec cell has no baseline: the report names it instead of leaving it out silently.
  EXPECT_EQ(rkv::cells_without_equal_bytes_baseline(cells), std::vector<std::string>{"int4-knorm-0.1"});
}

TEST(EqualBytesComparison, ASharedCellPairsWithEvictionAloneNeverServesAsIt) {
  std::vector<rkv::CellData> cells = {
      cell("cla2-0.5", "uniform", "snapkv", 0.5, "none", {0.2, 0.2, 0.2}),
      cell("evict-0.5", "uniform", "snapkv", 0.5, "none", {0.1, 0.3, 0.5}),  // cla2 - evict: mean -0.1
  };
  cells[0].meta["share"] = "CLA@2";
  const auto eq = rkv::compare_at_equal_bytes(cells, {{"lm_fidelity", {"kl"}}}, 200);
  ASSERT_EQ(eq.size(), 1u);
  EXPECT_EQ(eq[0].label, "cla2-0.5");
  EXPECT_NEAR(eq[0].stats.mean_difference, -0.1, 1e-12);
  EXPECT_TRUE(rkv::cells_without_equal_bytes_baseline(cells).empty());
  cells.pop_back();  // without eviction alone the shared cell has no baseline (it is not one itself)
  EXPECT_EQ(rkv::cells_without_equal_bytes_baseline(cells), std::vector<std::string>{"cla2-0.5"});
}

TEST(EqualBytesComparison, AJointCellPairsWithEvictionAloneAndIsNeverAUniformPartner) {
  // The joint cell's [allocator] says uniform and its cache has no codec recorded, yet it is neither eviction alone
  // nor the uniform partner of the ripplekv cell: its plan replaces the allocator.
  std::vector<rkv::CellData> cells = {
      cell("evict-0.1", "uniform", "snapkv", 0.1, "none", {0.5, 0.7, 0.9}),
      cell("joint-0.1", "uniform", "snapkv", 0.1, "none", {0.1, 0.2, 0.3}),    // - eviction alone: mean -0.5
      cell("ripple-0.1", "ripplekv", "snapkv", 0.1, "none", {0.4, 0.7, 0.9}),  // - eviction alone: mean -1/30
  };
  cells[1].meta["joint"] = "damage: joint f 1/0.5 x bits 32/4";
  const auto eq = rkv::compare_at_equal_bytes(cells, {{"lm_fidelity", {"kl"}}}, 200);
  ASSERT_EQ(eq.size(), 2u);
  EXPECT_EQ(eq[0].label, "joint-0.1");
  EXPECT_NEAR(eq[0].stats.mean_difference, -0.5, 1e-12);
  const auto vs_uniform = rkv::compare_with_uniform(cells, {{"lm_fidelity", {"kl"}}}, 200);
  ASSERT_EQ(vs_uniform.size(), 1u);  // ripplekv against eviction alone (not the joint cell); the joint cell has none
  EXPECT_EQ(vs_uniform[0].label, "ripple-0.1");
  EXPECT_NEAR(vs_uniform[0].stats.mean_difference, -1.0 / 30, 1e-12);
  cells.erase(cells.begin());
  EXPECT_EQ(rkv::cells_without_equal_bytes_baseline(cells), (std::vector<std::string>{"joint-0.1", "ripple-0.1"}));
}

}  // namespace
