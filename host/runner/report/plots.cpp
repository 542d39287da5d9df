// The figures of a run's report (runner/report/plots.hpp).
#include "runner/report/plots.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "core/fnv1a.hpp"
#include "core/subprocess.hpp"

namespace fs = std::filesystem;

namespace rkv {

namespace {

/// Tableau 10: a qualitative palette whose first eight colours stay distinct under common colour-vision deficiencies
/// (its yellow #edc948 darkened to #d4a72c, which a thin line on white shows).
const char* const kPalette[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                "#d4a72c", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
constexpr int kColours = 10;
/// The marker and dash of each round of colours: filled circle / solid, triangle / dashed, square / dotted,
/// diamond / dash-dot (gnuplot's pngcairo and svg point types 7, 9, 5, 13 and dash types 1-4).
constexpr int kPointTypes[] = {7, 9, 5, 13};
constexpr int kStyles = 4;

/// The gnuplot clause that draws a line in `style`.
std::string style_clause(const SeriesStyle& style) {
  return "lc rgb '" + style.colour + "' pt " + std::to_string(style.point_type) + " dt " +
         std::to_string(style.dash_type) + " lw 2 ps 0.9";
}


/// A label inside a gnuplot single-quoted string.
std::string gq(const std::string& s) { return gnuplot_single_quoted(s); }

/// The legend below the plot, in as many columns as fit: it never takes width from the data.
const char* kLegendBelow = "set key outside below center horizontal Left reverse samplen 2 spacing 1.1 width 2\n";

/// The distinct x values (budgets) of every point of `series`, ascending.
std::vector<double> distinct_x(const PlotSeries& series) {
  std::vector<double> xs;
  for (const auto& [group, points] : series)
    for (const auto& p : points) xs.push_back(p.x);
  std::sort(xs.begin(), xs.end());
  xs.erase(std::unique(xs.begin(), xs.end()), xs.end());
  return xs;
}

/// Tics at the budgets themselves (the x values are discrete settings; nudged points must not read as other
/// budgets), and 5% of room around the data so that no point or reference line hides under the frame.
std::string budget_axis(const PlotSeries& series) {
  std::ostringstream os;
  os << "set xtics (";
  const std::vector<double> xs = distinct_x(series);
  for (size_t i = 0; i < xs.size(); ++i) os << (i ? ", " : "") << "'" << xs[i] << "' " << xs[i];
  os << ")\nset offsets graph 0.08, graph 0.08, graph 0.06, graph 0.06\n";
  return os.str();
}

/// `set logscale y` when every y, CI end and `reference` (when finite) is positive and they span >= 100x; else "".
std::string log_axis_if_decades(const PlotSeries& series, double reference) {
  double lo = INFINITY, hi = 0;
  auto see = [&](double v) {
    if (!std::isfinite(v)) return;
    lo = std::min(lo, v), hi = std::max(hi, v);
  };
  for (const auto& entry : series)
    for (const auto& p : entry.second) see(p.y), see(p.low), see(p.high);
  see(reference);
  return lo > 0 && hi >= 100 * lo ? "set logscale y\n" : "";
}

/// "metric (lower is better)", or the metric alone when `better` is empty.
std::string axis_label(const std::string& metric, const std::string& better) {
  return better.empty() ? metric : metric + " (" + better + ")";
}

std::string number(double v) {
  std::ostringstream os;
  os.precision(4);
  os << v;
  return os.str();
}

}  // namespace

std::vector<SeriesStyle> series_styles(const std::vector<std::string>& labels) {
  std::vector<SeriesStyle> out;
  std::vector<bool> taken(static_cast<size_t>(kColours * kStyles), false);
  for (size_t i = 0; i < labels.size(); ++i) {
    const int preferred = static_cast<int>(fnv1a64(labels[i]) % kColours);
    int slot = -1;  // style * kColours + colour: every colour in the first style before any line gets the second
    for (int s = 0; s < kStyles && slot < 0; ++s)
      for (int c = 0; c < kColours && slot < 0; ++c)
        if (!taken[static_cast<size_t>(s * kColours + (preferred + c) % kColours)])
          slot = s * kColours + (preferred + c) % kColours;
    if (slot < 0) slot = static_cast<int>(i) % (kColours * kStyles);  // past 40 lines, styles repeat
    taken[static_cast<size_t>(slot)] = true;
    out.push_back({kPalette[slot % kColours], kPointTypes[slot / kColours], slot / kColours + 1});
  }
  return out;
}

void ReportPlots::use_labels(const std::vector<std::string>& labels) {
  fixed_labels_ = labels;
  std::sort(fixed_labels_.begin(), fixed_labels_.end());
  fixed_labels_.erase(std::unique(fixed_labels_.begin(), fixed_labels_.end()), fixed_labels_.end());
}

std::vector<SeriesStyle> ReportPlots::styles_of(const PlotSeries& series) const {
  // The fixed labels first (their styles do not depend on this figure), then this figure's other lines.
  std::vector<std::string> labels = fixed_labels_;
  for (const auto& entry : series)
    if (!std::binary_search(fixed_labels_.begin(), fixed_labels_.end(), entry.first)) labels.push_back(entry.first);
  const std::vector<SeriesStyle> all = series_styles(labels);
  std::vector<SeriesStyle> out;
  for (const auto& entry : series) {
    const auto it = std::find(labels.begin(), labels.end(), entry.first);
    out.push_back(all[static_cast<size_t>(it - labels.begin())]);
  }
  return out;
}

ReportPlots::ReportPlots(Folder plots, std::string script_name)
    : plots_(std::move(plots)), script_name_(std::move(script_name)) {
  for (int k = 0; k < kColours; ++k)
    script_ += "set linetype " + std::to_string(k + 1) + " lc rgb '" + kPalette[k] + "' lw 2 pt 7 ps 0.9\n";
  script_ += "set linetype cycle " + std::to_string(kColours) + "\n";
}

void ReportPlots::figure(const std::string& name, int width, int height, const std::string& body) {
  for (const char* term : {"png", "svg"}) {
    const bool png = std::string(term) == "png";
    script_ += "reset\nset terminal " + std::string(png ? "pngcairo" : "svg") + " size " + std::to_string(width) +
               "," + std::to_string(height) + " noenhanced font 'Sans,11'\nset output '" + gq(name) + "." + term +
               "'\nset grid lc rgb '#dddddd'\nset border 3\nset tics nomirror\n" + body + "\n";
  }
}

void ReportPlots::data_file(const std::string& file, const std::string& content) {
  work_.folder().write_atomically(file, content);
}

void ReportPlots::write_points(const std::string& file, const std::vector<PlotPoint>& points_in, double dx) {
  std::vector<PlotPoint> points = points_in;
  std::sort(points.begin(), points.end(), [](const PlotPoint& a, const PlotPoint& b) { return a.x < b.x; });
  std::ostringstream dat;
  dat.precision(9);
  for (const auto& p : points) dat << p.x + dx << " " << p.y << " " << p.low << " " << p.high << "\n";
  work_.folder().write_atomically(file, dat.str());
}

std::string ReportPlots::series_clauses(const std::string& stem, const PlotSeries& series) {
  // Lines are nudged apart by up to ±1.5% of the budgets' span (of the budget itself when there is one) so that their
  // error bars never hide each other.
  const std::vector<double> xs = distinct_x(series);
  const double span = xs.size() > 1 ? xs.back() - xs.front() : (xs.empty() || xs[0] == 0 ? 1.0 : std::fabs(xs[0]));
  const double n = static_cast<double>(series.size());
  std::ostringstream clauses;
  const std::vector<SeriesStyle> styles = styles_of(series);
  int k = 0;
  for (const auto& [group, points] : series) {
    const double dx = n > 1 ? (static_cast<double>(k) - (n - 1) / 2) * 0.03 * span / (n - 1) : 0.0;
    const std::string file = stem + "_" + std::to_string(k) + ".dat";
    write_points(file, points, dx);
    clauses << (k ? ", " : "") << "'" << gq(file) << "' using 1:2:3:4 with yerrorlines "
            << style_clause(styles[static_cast<size_t>(k)]) << " title '" << gq(group) << "'";
    ++k;
  }
  return clauses.str();
}

std::string ReportPlots::profile(const std::string& signal, const std::vector<PlotPoint>& profile) {
  write_points("profile.dat", profile, 0.0);
  figure("profile", 900, 520,
         "set title 'sensitivity profile (" + gq(signal) + "), 95% CI over calibration examples'\n"
         "set xlabel 'layer'\nset ylabel 's_l'\nset key off\n"
         "plot 'profile.dat' using 1:2:3:4 with yerrorlines lt 1");
  return "profile.png";
}

std::string ReportPlots::metric_vs_budget(const std::string& task, const std::string& metric, const PlotSeries& series,
                                          double full, const std::string& better, const std::string& subset) {
  std::string slug = subset;
  for (char& ch : slug) ch = std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
  const std::string stem = task + "_" + metric + (subset.empty() ? "" : "_" + slug);
  std::string plot = "plot " + series_clauses(stem, series);
  if (std::isfinite(full))
    plot += ", " + number(full) + " with lines dt 2 lw 2 lc rgb 'black' title 'full cache (" + number(full) + ")'";
  const int height = 520 + 22 * static_cast<int>((series.size() + 2) / 2);
  figure(stem, 1000, height,
         "set title '" + gq(task) + ": " + gq(metric) + (subset.empty() ? "" : ", " + gq(subset)) +
             " vs budget (mean, 95% CI)'\nset xlabel 'budget'\n"
         "set ylabel '" + gq(axis_label(metric, better)) + "'\n" + log_axis_if_decades(series, full) +
             budget_axis(series) + kLegendBelow + plot);
  return stem + ".png";
}

std::string ReportPlots::paired_differences(const std::string& task, const std::string& metric,
                                            const PlotSeries& differences, const std::string& baseline,
                                            const std::string& better) {
  std::string slug = baseline;
  for (char& ch : slug) ch = std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
  const std::string stem = task + "_" + metric + "_vs_" + slug;
  const std::string plot = "plot " + series_clauses(stem, differences) +
                           ", 0 with lines dt 2 lw 2 lc rgb 'black' title '" + gq(baseline) + " (0)'";
  const int height = 520 + 22 * static_cast<int>((differences.size() + 2) / 2);
  figure(stem, 1000, height,
         "set title '" + gq(task) + ": " + gq(metric) + ", cell - " + gq(baseline) +
             // a long baseline (a sweep key set) leaves room for the short form only in 1000 px
             (baseline.size() > 60 ? ", paired (mean, 95% CI)'\n" : " on the same examples (mean, 95% CI)'\n") +
         "set xlabel '" + std::string(baseline == "eviction alone" ? "budget (KV bytes: fraction of the float32 cache)" : "budget") +
             "'\nset ylabel 'difference in " + gq(axis_label(metric, better)) + "'\n" + budget_axis(differences) +
             kLegendBelow + plot);
  return stem + ".png";
}

std::string ReportPlots::budget_heatmap(const std::string& task,
                                        const std::vector<std::pair<std::string, std::vector<double>>>& rows) {
  const std::string stem = "budgets_" + task;
  std::ostringstream dat, ytics;
  size_t layers = 0;
  for (size_t r = 0; r < rows.size(); ++r) {
    for (double v : rows[r].second) dat << v << " ";
    dat << "\n";
    layers = std::max(layers, rows[r].second.size());
    ytics << (r ? ", " : "") << "'" << gq(rows[r].first) << "' " << r;
  }
  work_.folder().write_atomically(stem + ".dat", dat.str());
  const int height = 160 + 26 * static_cast<int>(rows.size());
  // The left margin holds the longest row label whole (about 7 px a character at 11 pt); the figure widens with it.
  size_t longest = 0;
  for (const auto& row : rows) longest = std::max(longest, row.first.size());
  const int margin = static_cast<int>(std::max<size_t>(52, longest + 2));
  figure(stem, 900 + 7 * margin, height,
         "set title '" + gq(task) + ": budget per layer relative to uniform, b_l / (B span_l / sum span) (span_l = T "
         "without sliding windows, so B / L)'\n"
         "set xlabel 'layer'\nset ytics (" + ytics.str() + ")\nset xrange [-0.5:" + std::to_string(layers) +
             "-0.5]\nset yrange [" + std::to_string(rows.size()) + "-0.5:-0.5]\nset grid noxtics noytics\n"
         "set lmargin " + std::to_string(margin) + "\nset rmargin 16\nset logscale cb 2\nset cbrange [0.5:2]\n"
         "set cbtics ('<= 0.5' 0.5, '0.71' 0.7071, '1 (uniform)' 1, '1.41' 1.4142, '>= 2' 2)\n"
         "set palette defined (0 '#2166ac', 0.25 '#92c5de', 0.5 '#f7f7f7', 0.75 '#f4a582', 1 '#b2182b')\nset key off\n"
         "plot '" + gq(stem) + ".dat' matrix using 1:2:($3 > 2 ? 2 : ($3 < 0.5 ? 0.5 : $3)) with image");
  return stem + ".png";
}

std::string ReportPlots::joint_plans(const std::string& task,
                                     const std::vector<std::pair<std::string, std::vector<JointBar>>>& rows) {
  const std::string stem = "joint_plan_" + task;
  const std::vector<std::pair<int, std::string>> colours = {
      {32, "1f77b4"}, {8, "2ca02c"}, {4, "ff7f0e"}, {2, "d62728"}};
  std::ostringstream body;
  const int panels = static_cast<int>(rows.size());
  body << "set multiplot layout " << panels << ",1\nset style fill solid 0.9 border lc rgb '#555555'\n"
       << "set boxwidth 0.8\nset yrange [0:1.05]\nset ylabel 'share of positions kept'\nset ytics 0.25\n"
       << "set key outside right top vertical Left reverse samplen 2\n";
  for (int r = 0; r < panels; ++r) {
    const auto& [label, bars] = rows[static_cast<size_t>(r)];
    std::ostringstream kept, shared;
    for (size_t l = 0; l < bars.size(); ++l) {
      if (bars[l].shared) {
        shared << l << " 1\n";
        continue;
      }
      long colour = 0x777777;
      for (const auto& [bits, hex] : colours)
        if (bits == bars[l].bits) colour = std::stol(hex, nullptr, 16);
      kept << l << " " << bars[l].kept << " " << colour << "\n";
    }
    const std::string file = stem + "_" + std::to_string(r);
    work_.folder().write_atomically(file + "_kept.dat", kept.str().empty() ? "0 0 0\n" : kept.str());
    work_.folder().write_atomically(file + "_shared.dat", shared.str().empty() ? "0 NaN\n" : shared.str());
    body << "set title '" << gq(label) << "'\nset xrange [-0.6:" << static_cast<double>(bars.size()) - 0.4 << "]\n"
         << "set xtics " << (bars.size() <= 40 ? 1 : 5) << "\n"
         << (r + 1 == panels ? "set xlabel 'layer'\n" : "unset xlabel\n") << "plot '" << gq(file)
         << "_kept.dat' using 1:2:3 with boxes lc rgb variable notitle, '" << gq(file)
         << "_shared.dat' using 1:2 with boxes fs pattern 4 lc rgb '#999999' title 'shared (no cache)'";
    for (const auto& [bits, hex] : colours)
      body << ", NaN with boxes lc rgb '#" << hex << "' title '"
           << (bits == 32 ? std::string("float32") : "int" + std::to_string(bits)) << "'";
    body << "\n";
  }
  body << "unset multiplot";
  figure(stem, 1200, 60 + 230 * panels, body.str());
  return stem + ".png";
}

std::string ReportPlots::normalized_overlay(const std::string& name, const std::string& title,
                                            const PlotSeries& references, const PlotSeries& signals) {
  auto normalised = [](std::vector<PlotPoint> points) {
    double lo = INFINITY, hi = -INFINITY;
    for (const auto& p : points) lo = std::min(lo, p.y), hi = std::max(hi, p.y);
    for (auto& p : points) p.y = p.low = p.high = hi > lo ? (p.y - lo) / (hi - lo) : 0.5;
    return points;
  };
  std::ostringstream plot;
  int k = 0;
  const double n_ref = static_cast<double>(references.size());
  for (const auto& [title_k, points] : references) {
    const std::string file = name + "_ref_" + std::to_string(k) + ".dat";
    write_points(file, normalised(points), 0.0);
    const int grey = n_ref > 1 ? static_cast<int>(160.0 * (1.0 - static_cast<double>(k) / (n_ref - 1))) : 0;
    char colour[8];
    std::snprintf(colour, sizeof colour, "#%02x%02x%02x", grey, grey, grey);
    plot << (k ? ", " : "") << "'" << gq(file) << "' using 1:2 with linespoints lw 3 pt 7 ps 0.7 lc rgb '" << colour
         << "' title '" << gq(title_k) << "'";
    ++k;
  }
  int j = 0;
  const std::vector<SeriesStyle> styles = styles_of(signals);
  for (const auto& [title_j, points] : signals) {
    const std::string file = name + "_signal_" + std::to_string(j) + ".dat";
    write_points(file, normalised(points), 0.0);
    SeriesStyle style = styles[static_cast<size_t>(j)];
    style.dash_type = 2;  // signals dashed beside the solid references
    plot << (k + j ? ", " : "") << "'" << gq(file) << "' using 1:2 with linespoints " << style_clause(style)
         << " title '" << gq(title_j) << "'";
    ++j;
  }
  figure(name, 1000, 600,
         "set title '" + gq(title) + "'\nset xlabel 'layer'\nset ylabel 'min-max normalised (0 = lowest layer, 1 = "
         "highest)'\nset yrange [-0.05:1.05]\n" + kLegendBelow + "plot " + plot.str());
  return name + ".png";
}

std::string ReportPlots::scatter_panels(const std::string& name, const std::vector<ScatterPanel>& panels) {
  if (panels.empty()) return "";
  const int n = static_cast<int>(panels.size());
  std::ostringstream body;
  body << "set multiplot layout 1," << n << "\n";
  for (int p = 0; p < n; ++p) {
    const ScatterPanel& panel = panels[static_cast<size_t>(p)];
    body << "set title '" << gq(panel.title) << "'\nset xlabel '" << gq(panel.xlabel) << "'\nset ylabel '"
         << gq(panel.ylabel) << "'\n" << kLegendBelow << "plot ";
    int k = 0;
    const std::vector<SeriesStyle> styles = styles_of(panel.points);
    for (const auto& [title_k, points] : panel.points) {
      const std::string file = name + "_" + std::to_string(p) + "_" + std::to_string(k) + ".dat";
      write_points(file, points, 0.0);
      body << (k ? ", " : "") << "'" << gq(file) << "' using 1:2 with points " << style_clause(styles[static_cast<size_t>(k)])
           << " title '" << gq(title_k) << "'";
      ++k;
    }
    if (!panel.diagonal.empty()) body << ", x with lines dt 2 lw 1 lc rgb '#888888' title '" << gq(panel.diagonal) << "'";
    body << "\n";
  }
  body << "unset multiplot";
  figure(name, std::max(700, 520 * n), 560, body.str());
  return name + ".png";
}

void ReportPlots::draw(std::vector<std::string>& notes) {
  const std::string log = fs::path(script_name_).stem().string() + "_gnuplot.log";
  // gnuplot runs in the private folder (it opens its outputs by name and would follow a link planted in plots/);
  // what it wrote, the data and the script are then moved into plots/ through the folder's descriptor.
  const Folder& work = work_.folder();
  work.write_atomically(script_name_, script_);
  if (run_program({"gnuplot", script_name_}, work_.path(), log) != 0)
    notes.push_back("plots were not drawn: gnuplot failed or is missing (see " + plots_.path_of(log) + ")");
  for (const std::string& name : work.list_files()) plots_.write_atomically(name, work.read(name, "plot file"));
}

}  // namespace rkv
