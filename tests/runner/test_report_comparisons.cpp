// The report's paired comparisons (runner/report/comparisons.hpp) on hand-made cells: which cell is each cell's
// partner (uniform at the same scorer, budget, codec and decode policy; eviction alone at the same KV bytes), and
// the mean of the per-example differences worked out by hand.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "core/errors.hpp"
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

namespace {

/// A cell of a sweep over scorers and budgets (its swept values in "cell"), kl per example.
rkv::CellData swept(const std::string& scorer, double f, const std::vector<double>& kl) {
  const std::string id = scorer + "@" + std::to_string(f);
  rkv::CellData c = cell(id, "uniform", scorer, 0.0, "none", kl);
  c.meta["budget_bytes_fraction"] = nullptr;
  c.meta["budget_fraction"] = f;
  c.meta["cell"] = {{"scorer.plugin", scorer}, {"budget.fraction", f}};
  return c;
}

rkv::ReportBaseline selector(const nlohmann::json& select, std::vector<std::string> free) {
  rkv::ReportBaseline b;
  b.kind = rkv::ReportBaseline::Kind::selector;
  b.select = select;
  b.free = std::move(free);
  return b;
}

}  // namespace

TEST(BaselineComparison, ASweepOverScorersComparesScorersAtEachBudget) {
  // baseline = { "scorer.plugin" = "snapkv" }: each cell against snapkv at its own budget. h2o@0.1 - snapkv@0.1 =
  // (0.1, 0.1, 0.4): mean 0.2; h2o@0.5 - snapkv@0.5 = (0.1, 0.1, 0.1): 0.1; knorm@0.5 - snapkv@0.5 = -0.1. The snapkv
  // cells are the baselines (not compared themselves), the full cache is never compared.
  rkv::CellData full = cell("full", "uniform", "snapkv", 0.0, "none", {0.0, 0.0, 0.0});
  full.meta["full_cache"] = true;
  full.meta["cell"] = nlohmann::json::object();
  const std::vector<rkv::CellData> cells = {
      full,
      swept("snapkv", 0.1, {0.5, 0.6, 0.7}), swept("h2o", 0.1, {0.6, 0.7, 1.1}),
      swept("snapkv", 0.5, {0.2, 0.2, 0.2}), swept("h2o", 0.5, {0.3, 0.3, 0.3}),
      swept("knorm", 0.5, {0.1, 0.1, 0.1}),
  };
  const std::map<std::string, std::vector<std::string>> metrics = {{"lm_fidelity", {"kl"}}};
  const rkv::ReportBaseline b = selector({{"scorer.plugin", "snapkv"}}, {"scorer.plugin"});
  const auto cmp = rkv::compare_with_baseline(cells, metrics, 200, b);
  ASSERT_EQ(cmp.size(), 3u);
  EXPECT_EQ(cmp[0].label, "h2o@0.100000");
  EXPECT_NEAR(cmp[0].stats.mean_difference, 0.2, 1e-12);
  EXPECT_EQ(cmp[1].label, "h2o@0.500000");
  EXPECT_NEAR(cmp[1].stats.mean_difference, 0.1, 1e-12);
  EXPECT_EQ(cmp[2].label, "knorm@0.500000");
  EXPECT_NEAR(cmp[2].stats.mean_difference, -0.1, 1e-12);
  // Against uniform nothing pairs (every cell is uniform): before [output] baseline, a sweep over scorers had no
  // comparison at all.
  EXPECT_TRUE(rkv::compare_with_uniform(cells, metrics, 200).empty());
  // The section names the baseline and prints one row per comparison.
  const std::string md = rkv::comparison_section(cmp, "lm_fidelity", "Against " + b.describe(), b.describe());
  EXPECT_NE(md.find("cell - scorer.plugin = snapkv per example"), std::string::npos) << md;
  EXPECT_NE(md.find("| knorm@0.500000 | kl | -0.1"), std::string::npos) << md;
  // "full": every compressed cell against the full cache (kl 0): the differences are the cells' own means.
  rkv::ReportBaseline f;
  f.kind = rkv::ReportBaseline::Kind::full;
  const auto vs_full = rkv::compare_with_baseline(cells, metrics, 200, f);
  ASSERT_EQ(vs_full.size(), 5u);
  EXPECT_NEAR(vs_full[1].stats.mean_difference, 0.8, 1e-12);  // h2o@0.1: (0.6 + 0.7 + 1.1) / 3
}

TEST(BaselineComparison, AMethodsAxisPairsWithThePlainMethod) {
  // leaderboard-style methods: {snapkv, pyramid}, {snapkv, uniform}, {snapkv, uniform, heads = adakv},
  // {snapkv, ripplekv}, {h2o, uniform} at one budget. baseline = { "allocator.plugin" = "uniform", "scorer.plugin" =
  // "snapkv" } frees every methods key; two cells qualify and the one setting fewer free keys (no allocator.heads) is
  // the baseline: pyramid - plain = 0.2, ripplekv - plain = -0.1.
  auto method = [](const std::string& id, const nlohmann::json& values, const std::vector<double>& kl) {
    rkv::CellData c = cell(id, "uniform", "snapkv", 0.0, "none", kl);
    c.meta["budget_bytes_fraction"] = nullptr;
    c.meta["cell"] = values;
    return c;
  };
  const std::vector<rkv::CellData> cells = {
      method("snapkv-pyramid", {{"scorer.plugin", "snapkv"}, {"allocator.plugin", "pyramid"}, {"budget.fraction", 0.5}},
             {0.7, 0.7}),
      method("plain", {{"scorer.plugin", "snapkv"}, {"allocator.plugin", "uniform"}, {"budget.fraction", 0.5}},
             {0.5, 0.5}),
      method("adakv",
             {{"scorer.plugin", "snapkv"}, {"allocator.plugin", "uniform"}, {"allocator.heads", "adakv"},
              {"budget.fraction", 0.5}},
             {0.3, 0.3}),
      method("ripple", {{"scorer.plugin", "snapkv"}, {"allocator.plugin", "ripplekv"}, {"budget.fraction", 0.5}},
             {0.4, 0.4}),
      method("ripple-0.25", {{"scorer.plugin", "snapkv"}, {"allocator.plugin", "ripplekv"}, {"budget.fraction", 0.25}},
             {0.9, 0.9}),  // no baseline cell at 0.25: left out
      method("h2o", {{"scorer.plugin", "h2o"}, {"allocator.plugin", "uniform"}, {"budget.fraction", 0.5}}, {0.6, 0.6}),
  };
  const rkv::ReportBaseline b = selector({{"allocator.plugin", "uniform"}, {"scorer.plugin", "snapkv"}},
                                         {"allocator.heads", "allocator.plugin", "scorer.plugin"});
  const auto cmp = rkv::compare_with_baseline(cells, {{"lm_fidelity", {"kl"}}}, 200, b);
  ASSERT_EQ(cmp.size(), 3u);  // adakv has every selected value: it is a baseline cell itself
  EXPECT_EQ(cmp[0].label, "snapkv-pyramid");
  EXPECT_EQ(cmp[0].baseline_label, "plain");
  EXPECT_NEAR(cmp[0].stats.mean_difference, 0.2, 1e-12);
  EXPECT_EQ(cmp[1].label, "ripple");
  EXPECT_EQ(cmp[1].baseline_label, "plain");
  EXPECT_NEAR(cmp[1].stats.mean_difference, -0.1, 1e-12);
  EXPECT_EQ(cmp[2].label, "h2o");  // h2o sets no allocator.heads, like plain: plain, not adakv
  EXPECT_EQ(cmp[2].baseline_label, "plain");
  // With only the scorer selected, two snapkv cells qualify for h2o + uniform: the one agreeing on the allocator
  // (snapkv + uniform), although snapkv + pyramid comes first: 0.6 - 0.5 = 0.1.
  const rkv::ReportBaseline by_scorer =
      selector({{"scorer.plugin", "snapkv"}}, {"allocator.heads", "allocator.plugin", "scorer.plugin"});
  const auto cmp2 = rkv::compare_with_baseline(cells, {{"lm_fidelity", {"kl"}}}, 200, by_scorer);
  ASSERT_EQ(cmp2.size(), 1u);
  EXPECT_EQ(cmp2[0].label, "h2o");
  EXPECT_EQ(cmp2[0].baseline_label, "plain");
  EXPECT_NEAR(cmp2[0].stats.mean_difference, 0.1, 1e-12);
  // The table names the cell each row was compared with.
  EXPECT_NE(rkv::comparison_section(cmp2, "lm_fidelity", "x", "y").find("| 2 | plain |"), std::string::npos);
}

TEST(BaselineComparison, RecordedBaselineRoundTripsAndDisagreementFallsBackToUniform) {
  const rkv::ReportBaseline b = selector({{"scorer.plugin", "snapkv"}}, {"scorer.plugin"});
  EXPECT_EQ(rkv::ReportBaseline::from_json(b.to_json(), "x").to_json(), b.to_json());
  EXPECT_EQ(b.describe(), "scorer.plugin = snapkv");
  EXPECT_THROW(rkv::ReportBaseline::from_json("everything", "cell 'x'"), rkv::InputError);
  EXPECT_THROW(rkv::ReportBaseline::from_json({{"select", nlohmann::json::object()}, {"free", {}}}, "x"),
               rkv::InputError);
  std::vector<rkv::CellData> cells = {swept("snapkv", 0.1, {1.0}), swept("h2o", 0.1, {1.0})};
  for (auto& c : cells) c.meta["report_baseline"] = b.to_json();
  std::string note;
  EXPECT_EQ(rkv::recorded_baseline(cells, &note).describe(), "scorer.plugin = snapkv");
  EXPECT_TRUE(note.empty());
  cells[1].meta["report_baseline"] = "full";
  EXPECT_EQ(rkv::recorded_baseline(cells, &note).kind, rkv::ReportBaseline::Kind::uniform);
  EXPECT_NE(note.find("different [output] baseline"), std::string::npos);
}

TEST(BaselineComparison, HolmFamilyIsOneTableAndItsCountIsTheRowsPrinted) {
  // Two tasks, 12 examples each (enough for a p): lm_fidelity has 2 comparisons, needle 1. Each table's text counts
  // its own rows, and Holm adjusts within the table: needle's single p is its own (Holm of a family of 1).
  auto make = [](const std::string& scorer, double shift) {
    rkv::CellData c = swept(scorer, 0.1, {});
    for (int64_t i = 0; i < 12; ++i)
      for (const char* task : {"lm_fidelity", "needle"}) {
        rkv::ExampleOutcomeRecord r;
        r.task = task;
        r.example = i;
        r.values[std::string(task) == "needle" ? "hit" : "kl"] = 0.1 * static_cast<double>(i % 3) + shift;
        if (std::string(task) == "needle" && scorer == "knorm") continue;  // knorm has no needle results
        c.examples.push_back(r);
      }
    return c;
  };
  const std::vector<rkv::CellData> cells = {make("snapkv", 0.0), make("h2o", 0.05), make("knorm", -0.05)};
  const std::map<std::string, std::vector<std::string>> metrics = {{"lm_fidelity", {"kl"}}, {"needle", {"hit"}}};
  const auto cmp = rkv::compare_with_baseline(cells, metrics, 200, selector({{"scorer.plugin", "snapkv"}}, {"scorer.plugin"}));
  ASSERT_EQ(cmp.size(), 3u);  // h2o: kl, hit; knorm: kl
  const std::string lm = rkv::comparison_section(cmp, "lm_fidelity", "x", "snapkv");
  const std::string needle = rkv::comparison_section(cmp, "needle", "x", "snapkv");
  EXPECT_NE(lm.find("adjusted across the 2 rows of this table"), std::string::npos) << lm;
  EXPECT_NE(needle.find("adjusted across the 1 row of this table"), std::string::npos) << needle;
  for (const auto& u : cmp)
    if (u.task == "needle") EXPECT_DOUBLE_EQ(u.p_holm, u.stats.p_value);
}

TEST(BaselineComparison, ARowWhoseCiAndPDisagreeIsCalledOut) {
  // Hand-made rows (n = 12, enough for a p): the CI [0.01, 0.2] excludes 0 while p = 0.06 does not reject, and the
  // reverse; a third agrees (CI excludes 0, p = 0.01); a fourth has too few examples to print a p (never counted).
  auto row = [](double low, double high, double p, size_t n) {
    rkv::UniformComparison u;
    u.task = "lm_fidelity", u.metric = "kl", u.label = "cell", u.baseline_label = "base";
    u.stats.ci = {low, high};
    u.stats.p_value = p;
    u.stats.n = n;
    u.stats.sd = 0.1;
    return u;
  };
  std::vector<rkv::UniformComparison> rows = {row(0.01, 0.2, 0.06, 12), row(-0.1, 0.2, 0.01, 12)};
  const std::string two = rkv::comparison_section(rows, "lm_fidelity", "x", "y");
  EXPECT_NE(two.find("> note: in 2 rows the 95% CI and p disagree"), std::string::npos) << two;
  rows = {row(0.01, 0.2, 0.01, 12), row(0.01, 0.2, 0.5, 4)};
  const std::string none = rkv::comparison_section(rows, "lm_fidelity", "x", "y");
  EXPECT_EQ(none.find("disagree"), std::string::npos) << none;
  rows.push_back(row(-0.3, -0.01, 0.2, 12));
  EXPECT_NE(rkv::comparison_section(rows, "lm_fidelity", "x", "y").find("in 1 row the 95% CI"), std::string::npos);
}
