// The figures of a run's report (plots/*.png and *.svg), drawn by gnuplot from data files this class writes.
//
// gnuplot, not matplotlib: the report is written by the C++ binary at the end of every run and merge, and gnuplot is
// one Debian package (`gnuplot-nox`) with no Python environment to keep in step; it draws everything below. Each
// figure is written once per terminal (pngcairo for the report, svg for papers) by one script, plots/plots.gp, run in
// plots/ with an argument vector (no shell sees the folder's name). gnuplot missing or failing is a note in the report,
// never an error.
//
// Conventions every figure follows, so a reader sees the result at a glance: one colour per line from a 10-colour
// qualitative palette (Tableau 10, colour-blind safe up to ~8 lines) keyed by the line's label, so a method keeps its
// colour from report to report, and past 10 lines a marker and dash style per round of colours (series_styles); the
// legend below the data in columns, 95% CIs as error bars nudged apart per line (never overlapping shaded bands), the
// full-cache reference as a labelled dashed black line, the zero line drawn on difference plots, a log axis when a
// metric's values span two decades or more, and "lower/higher is better" on every metric's axis.
//
// Thread rules: one ReportPlots per report; not thread-safe.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "core/folder.hpp"

namespace rkv {

/// A point of a metric-vs-budget line: x = budget (fraction or tokens), y = value, [low, high] its 95% CI.
struct PlotPoint {
  double x = 0, y = 0, low = 0, high = 0;
};

/// Lines of one figure, by legend title.
using PlotSeries = std::map<std::string, std::vector<PlotPoint>>;

/// How one line is drawn: colour ("#rrggbb"), gnuplot point type and dash type.
struct SeriesStyle {
  std::string colour;
  int point_type = 7;
  int dash_type = 1;
};

/// The styles of one figure's lines, one per label in order. A label's colour is keyed by the label itself (FNV-1a of
/// its text modulo the 10 colours), so a method keeps its colour in every report; a label whose colour an earlier
/// label of the same figure took gets the next free colour, and only when all 10 are taken does a line move to the
/// next marker and dash (circle/solid, triangle/dashed, square/dotted, diamond/dash-dot), so up to 40 lines are
/// pairwise distinct (beyond that styles repeat). Pure; reentrant.
std::vector<SeriesStyle> series_styles(const std::vector<std::string>& labels);

/// One panel of a scatter figure: points (x, y) per legend title (low/high unused), and its title and axis labels.
struct ScatterPanel {
  std::string title, xlabel, ylabel;
  PlotSeries points;
  std::string diagonal;  ///< when not empty, the line y = x drawn dashed grey with this legend title
};

class ReportPlots {
 public:
  /// Figures for the folder `plots` (plots/ of an output folder). Data files, the script `script_name` and gnuplot's
  /// outputs are written in a private temporary folder (core/folder.hpp PrivateTempFolder), then moved into `plots`
  /// atomically by draw(): gnuplot never opens a name in the output folder. rkv::InputError when the temporary
  /// folder cannot be created.
  explicit ReportPlots(Folder plots, std::string script_name = "plots.gp");

  /// The sensitivity profile s_l with its 95% CIs (`profile` rows: layer, s, low, high). Returns the PNG's name.
  std::string profile(const std::string& signal, const std::vector<PlotPoint>& profile);

  /// `metric` of `task` against the budget, one line per group with CI error bars, and the full cache's value as a
  /// labelled dashed line when `full` is finite. Returns the PNG's name.
  /// `better` ("lower is better", "higher is better" or "") goes on the metric's axis; the axis is logarithmic when
  /// every value, CI end and the reference are positive and span two decades or more.
  /// `subset` (e.g. one method of several runs) names a figure of a part of the lines: it joins the title and, with
  /// every character but letters and digits as "_", the file name, so several figures of one metric can coexist.
  std::string metric_vs_budget(const std::string& task, const std::string& metric, const PlotSeries& series,
                               double full, const std::string& better = "", const std::string& subset = "");

  /// Paired differences cell − `baseline` (uniform: the same scorer, budget and examples; "eviction alone": the same
  /// KV bytes) against the budget, one line per group with the CI of the mean difference, and the zero line: the
  /// figure that shows whether an allocator beats uniform, or a codec beats eviction at equal bytes.
  /// `better` as in metric_vs_budget (of the metric: a negative difference is better when lower is).
  std::string paired_differences(const std::string& task, const std::string& metric, const PlotSeries& differences,
                                 const std::string& baseline = "uniform", const std::string& better = "");

  /// Budgets per layer as a heatmap: one row per compressed cell (`rows`: label -> per layer b_l relative to what
  /// uniform gives the layer out of the cell's total, 1 = uniform), one column per layer, a diverging palette on a log2 scale from 0.5 to 2
  /// centred on 1 (blue: fewer positions than uniform, red: more; values beyond are clipped). Returns the PNG's name.
  std::string budget_heatmap(const std::string& task, const std::vector<std::pair<std::string, std::vector<double>>>& rows);

  /// A layer's part of a joint plan (runner/compress/joint.hpp): the share of its span kept, its bits (32 =
  /// float32), or shared (no cache).
  struct JointBar {
    double kept = 0;
    int bits = 32;
    bool shared = false;
  };
  /// The joint plans of `rows` (label -> per layer), one panel per cell stacked: per layer a bar of the share of its
  /// positions kept, coloured by bits (float32 blue, 8 green, 4 orange, 2 red), shared layers as full-height grey
  /// hatched bars, so a reader sees where the bytes went. Returns the PNG's name.
  std::string joint_plans(const std::string& task, const std::vector<std::pair<std::string, std::vector<JointBar>>>& rows);

  /// Per-layer curves min-max normalised to [0, 1] and overlaid: `references` as solid grey-to-black lines (e.g. the
  /// damage D_l at each budget), `signals` as coloured dashed lines, so a reader sees whether a signal's shape follows
  /// the reference. Points' x is the layer, y the raw value (normalised here). Returns the PNG's name.
  std::string normalized_overlay(const std::string& name, const std::string& title, const PlotSeries& references,
                                 const PlotSeries& signals);

  /// Side-by-side scatter panels (one per `panels` entry, one colour per legend title). Returns the PNG's name.
  std::string scatter_panels(const std::string& name, const std::vector<ScatterPanel>& panels);

  /// Writes the script, runs gnuplot on it in the private folder and moves every file there (data, script, figures,
  /// gnuplot's log) into plots/; a gnuplot failure appends a note to `notes`. rkv::InputError when plots/ cannot be
  /// written (a link or another kind of file planted where a figure goes).
  void draw(std::vector<std::string>& notes);

  /// A data file a figure() body reads by name, written with the figures' own (moved into plots/ by draw()).
  void data_file(const std::string& file, const std::string& content);

  /// Emits `body` (gnuplot commands after the terminal, output and common style are set; data files it names must be
  /// in the plots folder) for the PNG and the SVG of `name`, `width` x `height` pixels.
  void figure(const std::string& name, int width, int height, const std::string& body);

  /// Fixes the styles of `labels` (series_styles over all of them) for every figure drawn after: a line keeps its
  /// colour in each figure of one report even when a figure shows only some of the lines (the paired-difference plots
  /// leave the baseline out). Labels not given here are styled per figure, avoiding the colours these took.
  void use_labels(const std::vector<std::string>& labels);

 private:
  /// The styles of a figure's lines (fixed by use_labels, else per figure).
  std::vector<SeriesStyle> styles_of(const PlotSeries& series) const;
  /// Writes one line's points (x nudged by `dx`) to `file`.
  void write_points(const std::string& file, const std::vector<PlotPoint>& points, double dx);
  /// "plot" clauses for `series`: error bars and lines per group, colours 1..10 in legend order.
  std::string series_clauses(const std::string& stem, const PlotSeries& series);

  Folder plots_;
  PrivateTempFolder work_{"ripplekv-plots"};
  std::string script_name_;
  std::string script_;
  std::vector<std::string> fixed_labels_;  ///< use_labels(), sorted and unique
};

}  // namespace rkv
