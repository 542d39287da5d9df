// The report's figures (runner/report/plots.hpp): line styles keyed by label, distinct for 20 and more lines; the
// metric's direction on its axis and a log axis when values span decades, read from the gnuplot script written.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/folder.hpp"
#include "core/fnv1a.hpp"
#include "runner/report/plots.hpp"

namespace fs = std::filesystem;

namespace {

std::vector<std::string> labels(int n) {
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) out.push_back("method " + std::to_string(i));
  return out;
}

// 20 lines (e.g. configs/methods.toml's 16 scorers plus references): 20 distinct (colour, marker) pairs, and the
// first 10 all in the first style (10 distinct colours, filled circles, solid lines) before any line needs a marker.
TEST(ReportPlots, TwentyLinesGetTwentyDistinctColourAndMarkerPairs) {
  for (int n : {10, 20, 40}) {
    const auto styles = rkv::series_styles(labels(n));
    ASSERT_EQ(styles.size(), static_cast<size_t>(n));
    std::set<std::pair<std::string, int>> pairs;
    std::set<std::string> colours;
    int solid = 0;
    for (const auto& s : styles) {
      pairs.insert({s.colour, s.point_type});
      colours.insert(s.colour);
      solid += s.dash_type == 1 && s.point_type == 7;
    }
    EXPECT_EQ(pairs.size(), static_cast<size_t>(n)) << n << " lines";
    EXPECT_EQ(colours.size(), 10u) << n << " lines use every colour";
    EXPECT_EQ(solid, 10) << "the first round of colours is circles on solid lines";
  }
  const auto two = rkv::series_styles({"a", "b"});
  EXPECT_NE(two[0].colour, two[1].colour);
}

// A method keeps its colour from report to report, whatever else the report draws and wherever it sorts: it is
// keyed by the label, not by the line's index (which gave "uniform + snapkv" another colour in every sweep).
TEST(ReportPlots, TheSameLabelGetsTheSameColourInTwoReports) {
  const std::string method = "uniform + snapkv";
  const auto first = rkv::series_styles({method, "uniform + h2o"});
  const auto second = rkv::series_styles({"pyramid + knorm", "ripplekv(perturbation_kl) + snapkv", method});
  EXPECT_EQ(first[0].colour, second[2].colour);
  EXPECT_EQ(first[0].colour, rkv::series_styles({method})[0].colour);
  // The colour is the label's own: Tableau 10 in order, indexed by FNV-1a of the text modulo 10.
  const char* const tableau10[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                   "#d4a72c", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
  EXPECT_EQ(first[0].colour, tableau10[rkv::fnv1a64(method) % 10]);
  // Two labels that want the same colour: the second takes the next free one, the first keeps its own.
  std::string twin;
  for (int i = 0; twin.empty(); ++i)
    if (std::string t = "twin " + std::to_string(i); rkv::fnv1a64(t) % 10 == rkv::fnv1a64(method) % 10) twin = t;
  const auto clash = rkv::series_styles({method, twin});
  EXPECT_EQ(clash[0].colour, first[0].colour);
  EXPECT_EQ(clash[1].colour, tableau10[(rkv::fnv1a64(method) + 1) % 10]);
}

// Within one report a line keeps its colour in a figure that shows only some of the lines (use_labels).
TEST(ReportPlots, FixedLabelsKeepTheirStylesInFiguresOfSomeOfTheLines) {
  const std::vector<std::string> all = {"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l"};
  const auto styles = rkv::series_styles(all);
  // Find a label that another label pushed off its own colour: shown alone it would get another one.
  size_t moved = all.size();
  for (size_t i = 0; i < all.size() && moved == all.size(); ++i)
    if (rkv::series_styles({all[i]})[0].colour != styles[i].colour) moved = i;
  ASSERT_LT(moved, all.size()) << "12 labels on 10 colours: some label must have moved";
  const fs::path dir = fs::temp_directory_path() / ("rkv-plots-fixed-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  {
    rkv::ReportPlots plots(rkv::Folder::open(dir.string(), false));
    plots.use_labels(all);
    plots.metric_vs_budget("t", "m", {{all[moved], {{0.5, 1, 0.9, 1.1}}}}, NAN, "");
    std::vector<std::string> notes;
    plots.draw(notes);
  }
  const std::string script = rkv::Folder::open(dir.string(), false).read("plots.gp", "plot script");
  fs::remove_all(dir);
  EXPECT_NE(script.find("lc rgb '" + styles[moved].colour + "' pt " + std::to_string(styles[moved].point_type)),
            std::string::npos) << script;
}

std::string script_of(const std::function<void(rkv::ReportPlots&)>& draw_figures) {
  const fs::path dir = fs::temp_directory_path() / ("rkv-plots-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  {
    rkv::ReportPlots plots(rkv::Folder::open(dir.string(), false));
    draw_figures(plots);
    std::vector<std::string> notes;
    plots.draw(notes);  // without gnuplot: a note, and the script is still written
  }
  const rkv::Folder folder = rkv::Folder::open(dir.string(), false);
  std::string script = folder.read("plots.gp", "plot script");
  fs::remove_all(dir);
  return script;
}

TEST(ReportPlots, AxesSayWhichWayIsBetterAndGoLogarithmicOverDecades) {
  const rkv::PlotSeries decades = {{"uniform + snapkv", {{0.1, 0.5, 0.4, 0.6}, {0.5, 0.004, 0.003, 0.005}}}};
  const rkv::PlotSeries narrow = {{"uniform + snapkv", {{0.1, 0.5, 0.4, 0.6}, {0.5, 0.2, 0.1, 0.3}}}};
  const rkv::PlotSeries crossing = {{"uniform + snapkv", {{0.1, 50, -1, 100}, {0.5, 0.2, 0.1, 0.3}}}};
  const std::string script = script_of([&](rkv::ReportPlots& p) {
    p.metric_vs_budget("lm", "kl", decades, NAN, "lower is better");
  });
  EXPECT_NE(script.find("set ylabel 'kl (lower is better)'"), std::string::npos) << script;
  EXPECT_NE(script.find("set logscale y"), std::string::npos) << "0.003 .. 0.6 spans two decades";
  for (const auto& series : {narrow, crossing}) {
    const std::string linear = script_of([&](rkv::ReportPlots& p) {
      p.metric_vs_budget("needle", "accuracy", series, 1.0, "higher is better");
    });
    EXPECT_EQ(linear.find("set logscale y"), std::string::npos) << linear;
    EXPECT_NE(linear.find("set ylabel 'accuracy (higher is better)'"), std::string::npos);
  }
  const std::string diff = script_of([&](rkv::ReportPlots& p) {
    p.paired_differences("lm", "kl", decades, "uniform", "lower is better");
  });
  EXPECT_NE(diff.find("set ylabel 'difference in kl (lower is better)'"), std::string::npos) << diff;
  EXPECT_EQ(diff.find("set logscale y"), std::string::npos) << "differences are never on a log axis";
}

}  // namespace
