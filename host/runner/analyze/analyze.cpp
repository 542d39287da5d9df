#include "runner/analyze/analyze.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>

#include "backend/backend.hpp"
#include "core/errors.hpp"
#include "core/fnv1a.hpp"
#include "core/format.hpp"
#include "core/progress.hpp"
#include "core/timing.hpp"
#include "eval/stats.hpp"
#include "model/model.hpp"
#include "runner/analyze/routes.hpp"
#include "runner/analyze/sharing.hpp"
#include "runner/compress/plan_backend.hpp"
#include "runner/compress/scorers.hpp"
#include "runner/plan/damage_signal_spec.hpp"
#include "runner/profile/compression_damage.hpp"
#include "runner/profile/profile.hpp"
#include "runner/records/output_folder.hpp"
#include "runner/report/plots.hpp"
#include "runner/tasks/text_windows.hpp"
#include "tokenizer/tokenizer.hpp"

namespace fs = std::filesystem;

namespace rkv {

namespace {

/// The figures of an analysis, drawn into `plots`: D_l per fraction (log scale), every signal's profile overlaid on
/// D_l (min-max normalised), and per fraction a scatter of each signal against D_l with its signed rho. Returns their
/// markdown (or a note when gnuplot failed).
std::string analysis_figures(const Folder& plots_folder, const std::vector<double>& fractions,
                             const std::vector<std::vector<double>>& D, const std::vector<SensitivityProfile>& profiles,
                             const nlohmann::json& signals, const std::string& damage_dat) {
  ReportPlots plots(plots_folder, "analysis.gp");
  plots.data_file("analysis_damage.dat", damage_dat);
  std::ostringstream damage;
  damage << "set title 'compression damage D_l: only layer l compressed'\nset xlabel 'layer'\n"
         << "set ylabel 'mean KL (nats/token), log scale'\nset logscale y\n"
         << "set key outside below center horizontal\nplot ";
  for (size_t fi = 0; fi < fractions.size(); ++fi)
    damage << (fi ? ", " : "") << "'analysis_damage.dat' using 1:" << (fi + 2) << " with linespoints lt " << fi + 1
           << " title 'f = " << fractions[fi] << "'";
  plots.figure("analysis_damage", 1000, 560, damage.str());
  auto per_layer = [](const std::vector<double>& v) {
    std::vector<PlotPoint> points;
    for (size_t l = 0; l < v.size(); ++l) points.push_back({static_cast<double>(l), v[l], v[l], v[l]});
    return points;
  };
  PlotSeries references, signal_lines;
  for (size_t fi = 0; fi < fractions.size(); ++fi) references["D_l at f = " + fmt(fractions[fi], 3)] = per_layer(D[fi]);
  std::vector<ScatterPanel> panels;
  for (size_t fi = 0; fi < fractions.size(); ++fi) {
    ScatterPanel panel;
    panel.title = "f = " + fmt(fractions[fi], 3) + ": signal rank vs damage rank";
    panel.xlabel = "rank of s_l (1 = least sensitive)";
    panel.ylabel = "rank of D_l (1 = least damaged)";
    panel.diagonal = "perfect agreement (rho = 1)";
    for (size_t si = 0; si < profiles.size(); ++si) {
      const std::vector<double> rs = average_ranks(profiles[si].s), rd = average_ranks(D[fi]);
      std::vector<PlotPoint> points;
      for (size_t l = 0; l < rs.size() && l < rd.size(); ++l) points.push_back({rs[l], rd[l], rd[l], rd[l]});
      const nlohmann::json& rho = signals[si].at("rho")[fi];
      panel.points[short_id(profiles[si].signal) + " (rho = " + (rho.is_null() ? "n/a" : fmt(rho.get<double>(), 3)) +
                   ")"] = points;
    }
    panels.push_back(panel);
  }
  for (const auto& p : profiles) signal_lines[short_id(p.signal) + " profile s_l"] = per_layer(p.s);
  const std::string overlay = plots.normalized_overlay(
      "analysis_profiles", "signal profiles over damage per layer (each curve min-max normalised)", references,
      signal_lines);
  const std::string scatter = plots.scatter_panels("analysis_scatter", panels);
  std::vector<std::string> notes;
  plots.draw(notes);
  if (!notes.empty()) return "> note: " + notes.front() + "\n";
  return "![damage](plots/analysis_damage.png)\n\n![profiles over damage](plots/" + overlay +
         ")\n\n![signal vs damage](plots/" + scatter + ")\n";
}

/// The scorers whose damage is measured: the config's [scorer] first, then each of `extra` (ids or short ids) not
/// already listed, with the params of the config's [scorer] or of the first [[scorer.route]] entry that uses it, else
/// the plugin's defaults.
std::vector<PluginChoice> damage_scorers(const RunPlan& plan, const PluginChoice& base, const std::vector<std::string>& extra) {
  std::vector<PluginChoice> out = {base};
  for (const std::string& name : extra) {
    const PluginInfo* info = nullptr;
    try {
      info = &plan.registry->resolve(name, RKV_KIND_SCORER);
    } catch (const InputError& e) {
      throw InputError("analyze: --scorers: " + std::string(e.what()));
    }
    if (std::any_of(out.begin(), out.end(), [&](const PluginChoice& c) { return c.id == info->id(); })) continue;
    PluginChoice choice;
    choice.info = info;
    choice.id = info->id();
    choice.params = ParamSet::validate(*info->descriptor, {});
    for (auto c = plan.cells.rbegin(); c != plan.cells.rend(); ++c)  // the first cell's route wins
      for (auto e = c->config.route.rbegin(); e != c->config.route.rend(); ++e)
        if (e->scorer.id == choice.id) choice.params = e->scorer.params;
    out.push_back(choice);
  }
  return out;
}

/// D[f][l] = mean over examples of d[f][i][l].
std::vector<std::vector<double>> mean_damage(const std::vector<std::vector<std::vector<double>>>& d) {
  std::vector<std::vector<double>> D;
  for (const auto& per_example : d) {
    std::vector<double> row(per_example.empty() ? 0 : per_example.front().size(), 0.0);
    for (const auto& e : per_example)
      for (size_t l = 0; l < row.size(); ++l) row[l] += e[l] / static_cast<double>(per_example.size());
    D.push_back(row);
  }
  return D;
}

/// analysis.json "scorers" and the markdown table of D_l per scorer at each fraction.
nlohmann::json scorer_damage_json(const std::vector<PluginChoice>& choices, const std::vector<ScorerDamage>& damage,
                                  const std::vector<double>& fractions, std::ostringstream& md) {
  nlohmann::json out = nlohmann::json::array();
  md << "\n## Compression damage per scorer\n\n| layer |";
  for (const auto& s : damage)
    for (double f : fractions) md << " " << short_id(s.id) << " (f = " << f << ") |";
  md << "\n|---:|";
  for (size_t k = 0; k < damage.size() * fractions.size(); ++k) md << "---:|";
  md << "\n";
  for (size_t l = 0; !damage.empty() && l < damage.front().D.front().size(); ++l) {
    md << "| " << l << " |";
    for (const auto& s : damage)
      for (const auto& row : s.D) md << " " << fmt(row[l], 4) << " |";
    md << "\n";
  }
  for (size_t s = 0; s < damage.size(); ++s)
    out.push_back({{"id", damage[s].id}, {"params", choices[s].params.to_string()}, {"D", damage[s].D}});
  return out;
}

/// The route builder's options from the command line: --route-counts matched to `choices` (by full or short id) and
/// checked to sum to the `L` layers. rkv::InputError for --scorers without a second scorer, a count naming a scorer
/// that is not analysed, or counts of another total.
RouteBuildOptions route_build_options(const AnalyzeOptions& opt, const std::vector<PluginChoice>& choices, int64_t L) {
  if (!opt.scorers.empty() && choices.size() < 2)
    throw InputError("analyze: --scorers names only the config's [scorer] (" + choices.front().id +
                     "); a route needs a second scorer");
  RouteBuildOptions o;
  o.random_routes = opt.random_routes;
  o.seed = opt.route_seed;
  if (opt.route_counts.empty()) return o;
  o.counts.assign(choices.size(), 0);
  size_t named = 0;
  for (size_t s = 0; s < choices.size(); ++s)
    for (const auto& [name, count] : opt.route_counts)
      if (name == choices[s].id || name == short_id(choices[s].id)) o.counts[s] = count, ++named;
  if (named != opt.route_counts.size())
    throw InputError("analyze: --route-counts names a scorer that is not analysed (the config's [scorer] and --scorers)");
  int64_t total = 0;
  for (int64_t c : o.counts) total += c;
  if (total != L)
    throw InputError("analyze: --route-counts sum to " + std::to_string(total) + ", but the model has " +
                     std::to_string(L) + " layers");
  return o;
}

/// Every scorer's D (all examples, and the even/odd halves for the held-out rank) from d[s][f][i][l], then
/// analysis.json "scorers" and "routes", their analysis.md sections, route.toml and route-random.toml in `out`.
void write_routes(const std::vector<PluginChoice>& choices,
                  const std::vector<std::vector<std::vector<std::vector<double>>>>& d, const std::vector<double>& fractions,
                  const AnalyzeOptions& opt, RouteBuildOptions options, const Folder& out, nlohmann::json& j,
                  std::ostringstream& md) {
  std::vector<ScorerDamage> damage;
  for (size_t s = 0; s < choices.size(); ++s) {
    ScorerDamage sd;
    sd.id = choices[s].id;
    sd.D = mean_damage(d[s]);
    const size_t N = d[s].front().size();
    if (N >= 2) {  // the held-out rank: fit on the even-indexed examples, test on the odd-indexed ones
      std::vector<std::vector<std::vector<double>>> even(fractions.size()), odd(fractions.size());
      for (size_t fi = 0; fi < fractions.size(); ++fi)
        for (size_t i = 0; i < N; ++i) (i % 2 ? odd : even)[fi].push_back(d[s][fi][i]);
      sd.D_fit = mean_damage(even);
      sd.D_test = mean_damage(odd);
    }
    for (auto* spec = choices[s].info->descriptor->params; spec && *spec; ++spec)
      sd.params.emplace_back((*spec)->name, choices[s].params.values().at((*spec)->name));
    damage.push_back(std::move(sd));
  }
  j["scorers"] = scorer_damage_json(choices, damage, fractions, md);
  const auto at = std::find(fractions.begin(), fractions.end(), opt.route_fraction.value_or(fractions.front()));
  options.toml_fraction = static_cast<size_t>(at - fractions.begin());
  const RouteReport routes = build_route_report(damage, fractions, options);
  j["routes"] = routes.json;
  md << "\n" << routes.markdown;
  out.write_atomically("route.toml", routes.toml);
  out.write_atomically("route-random.toml", routes.random_toml);
}

/// What an analysis compares: the scorer of the config's first compressed cell (`base`), every distinct signal
/// configured (one cell each), and the fractions (--fractions, else the swept or set budget.fraction values).
struct AnalysisSelection {
  const CellConfig* base = nullptr;
  std::vector<const CellConfig*> signal_cells;
  std::vector<double> fractions;  ///< ascending, each in (0, 1]
};

/// The selection of `plan` under `opt`, with every option checked before the model is loaded. rkv::InputError for no
/// compressed cell, no signal, no fraction or one outside (0, 1], a route fraction that is not analysed, route
/// options without --scorers, or --random-routes outside [1, 1000000].
AnalysisSelection select_analysis(const RunPlan& plan, const AnalyzeOptions& opt) {
  AnalysisSelection sel;
  std::vector<std::string> signal_keys;
  sel.fractions = opt.fractions;
  for (const Cell& c : plan.cells) {
    if (c.config.full_cache) continue;
    if (!sel.base) sel.base = &c.config;
    // A per-prompt signal has no calibration profile to rank D_l with: analyze leaves it out.
    if (c.config.signal && !(c.config.signal->info->descriptor->flags & RKV_FLAG_PER_PROMPT) &&
        std::find(signal_keys.begin(), signal_keys.end(), c.config.signal->key()) == signal_keys.end()) {
      signal_keys.push_back(c.config.signal->key());
      sel.signal_cells.push_back(&c.config);
    }
    if (opt.fractions.empty() && c.config.budget_fraction &&
        std::find(sel.fractions.begin(), sel.fractions.end(), *c.config.budget_fraction) == sel.fractions.end())
      sel.fractions.push_back(*c.config.budget_fraction);
  }
  if (!sel.base) throw InputError("analyze: the config has no compressed cell");
  if (sel.signal_cells.empty())
    throw InputError("analyze: no calibration [signal] is configured (per-prompt signals are left out); add one (or "
                     "sweep \"signal.plugin\")");
  if (sel.fractions.empty()) throw InputError("analyze: no budget fractions (give --fractions or budget.fraction)");
  std::sort(sel.fractions.begin(), sel.fractions.end());
  for (double f : sel.fractions)
    if (!(f > 0.0 && f <= 1.0)) throw InputError("analyze: fraction " + fmt(f, 6) + " is outside (0, 1]");
  if (opt.route_fraction &&
      std::find(sel.fractions.begin(), sel.fractions.end(), *opt.route_fraction) == sel.fractions.end())
    throw InputError("analyze: --route-fraction " + fmt(*opt.route_fraction, 6) + " is not an analysed fraction");
  if ((opt.route_fraction || !opt.route_counts.empty()) && opt.scorers.empty())
    throw InputError("analyze: --route-fraction and --route-counts build a route; give --scorers a,b too");
  if (opt.random_routes < 1 || opt.random_routes > 1000000)
    throw InputError("analyze: --random-routes must be in [1, 1000000]");
  return sel;
}

/// The profile of every selected signal (with the base scorer; cached like a run's), and the oracle: the damage
/// signal (runner/profile/damage_signal.hpp) at each fraction, i.e. D_l(f) on the calibration split.
void analysis_profiles(const RunPlan& plan, const AnalysisSelection& sel, const Model& model, const Tokenizer& tok,
                       Backend& backend, const std::function<void(const std::string&)>& note, const Progress& progress,
                       std::vector<SensitivityProfile>* profiles, std::vector<SensitivityProfile>* oracle) {
  for (const CellConfig* cc : sel.signal_cells) {
    note("analyze: profile of " + cc->signal->id);
    CellConfig with_scorer = *cc;
    with_scorer.scorer = sel.base->scorer;
    ProfileRequest req = make_profile_request(plan, with_scorer, model, tok);
    req.backend = &backend;
    const auto t0 = SteadyClock::now();
    req.on_example = [&](int64_t done, int64_t total) { progress.phase("calibration examples done", done, total, t0); };
    profiles->push_back(compute_profile(req));
    for (const auto& w : profiles->back().warnings) std::cerr << "analyze: warning: " << w << "\n";
  }
  for (double f : sel.fractions) {
    note("analyze: oracle profile (damage at f = " + fmt(f, 3) + " on the calibration split)");
    ProfileRequest req = make_profile_request(plan, *sel.base, model, tok, kDamageSignalId);
    req.signal.params = ParamSet::validate(*req.signal.info->descriptor, {UserParam{"fraction", f, false, "analyze"}});
    req.backend = &backend;
    const auto t0 = SteadyClock::now();
    req.on_example = [&](int64_t done, int64_t total) { progress.phase("calibration examples done", done, total, t0); };
    oracle->push_back(compute_profile(req));
    for (const auto& w : oracle->back().warnings) std::cerr << "analyze: warning: " << w << "\n";
  }
}

/// The rows of the signal table: each signal's signed Spearman rho against D(f) at every fraction, with a bootstrap CI
/// over evaluation examples (the profile held fixed). d[f][i][l] are the per-example damages, D[f][l] their means.
class SignalRows {
 public:
  SignalRows(const std::vector<std::vector<std::vector<double>>>& d, const std::vector<std::vector<double>>& D,
             int resamples)
      : d_(d), D_(D), resamples_(resamples) {}

  /// The row of signal `name` whose profile at fraction index fi is s_of(fi): its JSON, and its markdown cells in `md`
  /// (the caller ends the line).
  nlohmann::json row(const std::string& name, const nlohmann::json& params,
                     const std::function<const std::vector<double>&(size_t)>& s_of, std::ostringstream& md) const {
    nlohmann::json sj;
    sj["signal"] = name;
    sj["params"] = params;
    for (const char* key : {"rho", "abs_rho", "ci_low", "ci_high"}) sj[key] = nlohmann::json::array();
    for (size_t fi = 0; fi < D_.size(); ++fi) {
      const std::vector<double>& s = s_of(fi);
      const double rho = spearman_rho(s, D_[fi]);  // signed: depth correlates negatively on held-out text
      const Interval ci = bootstrap_interval(
          d_[fi].size(), [&](const std::vector<size_t>& idx) { return spearman_rho(s, resampled_damage(fi, idx)); },
          fnv1a64(name + "/analyze/" + std::to_string(fi)), resamples_);
      sj["rho"].push_back(num(rho));
      sj["abs_rho"].push_back(num(std::fabs(rho)));
      sj["ci_low"].push_back(num(ci.low));
      sj["ci_high"].push_back(num(ci.high));
      md << " " << fmt(rho, 3) << " [" << fmt(ci.low, 3) << ", " << fmt(ci.high, 3) << "] |";
    }
    return sj;
  }

 private:
  /// sum over the resampled examples `idx` of d[fi][i][l], per layer (Spearman needs no division by N).
  std::vector<double> resampled_damage(size_t fi, const std::vector<size_t>& idx) const {
    std::vector<double> Dstar(D_[fi].size(), 0.0);
    for (size_t i : idx)
      for (size_t l = 0; l < Dstar.size(); ++l) Dstar[l] += d_[fi][i][l];
    return Dstar;
  }

  const std::vector<std::vector<std::vector<double>>>& d_;
  const std::vector<std::vector<double>>& D_;
  int resamples_;
};

/// Seconds of one prefill of a calibration-length window (prefix_tokens of [data.calibration], the first window its
/// seed draws), timed on the second of two runs so the first's allocations are not counted: the unit of the signal
/// table's profiling cost ("prefill-equivalents"; issue 32 step 3).
double calibration_prefill_seconds(const RunPlan& plan, const Tokenizer& tok, Backend& backend) {
  const auto w = draw_text_windows(tok, plan.calibration.files, 1, plan.calibration.prefix_tokens, plan.calibration.seed);
  backend.prefill(w.front().tokens, PrefillRequest{});
  const auto t0 = SteadyClock::now();
  backend.prefill(w.front().tokens, PrefillRequest{});
  return seconds_since(t0);
}

/// A profile's cost cell: "S s = P prefills" (", cached" when it was read from the profile cache: S is then the
/// seconds it took when it was computed).
std::string cost_cell(const SensitivityProfile& p, double prefill_seconds) {
  return fmt(p.seconds, 3) + " s = " + fmt(p.seconds / prefill_seconds, 3) + (p.from_cache ? " (cached)" : "");
}

/// The signal table of analysis.md and analysis.json "signals" and "oracle".
void signal_table(const RunPlan& plan, const AnalysisSelection& sel, const std::vector<SensitivityProfile>& profiles,
                  const std::vector<SensitivityProfile>& oracle, const SignalRows& rows, int64_t N,
                  double prefill_seconds, nlohmann::json& j, std::ostringstream& md) {
  const int64_t T = plan.eval.prefix_tokens;
  md << "# ripplekv analysis: do signals predict compression damage?\n\n"
     << "Compression damage D_l(f): only layer l compressed with " << sel.base->scorer->id
     << " to floor(f span_l + 0.5) of span_l = min(T, window) of T = " << T << " positions; mean KL(full || compressed) "
     << "over " << plan.continuation_tokens << " continuation tokens, averaged over " << N << " evaluation examples. "
     << "rho is Spearman's (average ranks) between the signal's profile and D(f), signed (negative: the signal ranks "
     << "the damaged layers lowest); 95% CIs of rho resample evaluation examples (" << plan.bootstrap_resamples
     << " resamples). Profiling cost: the profile's wall time on the calibration split (" << plan.calibration.examples
     << " windows of " << plan.calibration.prefix_tokens << " tokens) and that time in prefill-equivalents, one "
     << "prefill of a " << plan.calibration.prefix_tokens << "-token window taking " << fmt(prefill_seconds, 3)
     << " s here.\n\n| signal |";
  for (double f : sel.fractions) md << " f = " << f << " |";
  md << " profiling cost (s = prefills) |\n|---|";
  for (size_t k = 0; k < sel.fractions.size(); ++k) md << "---|";
  md << "---|\n";
  j["signals"] = nlohmann::json::array();
  for (const SensitivityProfile& p : profiles) {
    md << "| " << p.signal << (p.params.empty() ? "" : " (" + p.params.dump() + ")") << " |";
    nlohmann::json sj = rows.row(p.signal, p.params, [&](size_t) -> const std::vector<double>& { return p.s; }, md);
    md << " " << cost_cell(p, prefill_seconds) << " |\n";
    sj["s"] = p.s;
    sj["profile_seconds"] = p.seconds;
    sj["cost_prefills"] = p.seconds / prefill_seconds;
    sj["profile_from_cache"] = p.from_cache;
    j["signals"].push_back(sj);
  }
  md << "| **damage (oracle: calibration D_l at the same f)** |";
  j["oracle"] = rows.row(kDamageSignalId, nullptr, [&](size_t fi) -> const std::vector<double>& { return oracle[fi].s; }, md);
  std::string costs;
  for (const auto& o : oracle) costs += (costs.empty() ? "" : "; ") + cost_cell(o, prefill_seconds);
  md << " " << costs << " (one per f) |\n";
  j["oracle"]["s"] = nlohmann::json::array();
  j["oracle"]["profile_seconds"] = nlohmann::json::array();
  j["oracle"]["cost_prefills"] = nlohmann::json::array();
  for (const auto& o : oracle) {
    j["oracle"]["s"].push_back(o.s);
    j["oracle"]["profile_seconds"].push_back(o.seconds);
    j["oracle"]["cost_prefills"].push_back(o.seconds / prefill_seconds);
  }
  j["calibration_prefill_seconds"] = prefill_seconds;
  md << "\nThe oracle row allocates nothing: it is the damage signal (" << kDamageSignalId
     << ") measured on the calibration split at each f: how well damage itself carries over from calibration to "
     << "evaluation text, the reference a sensitivity signal's rho is read against.\n";
}

/// The per-layer damage table of analysis.md, and plots/analysis_damage.dat (layer, D(f) per fraction).
std::string damage_table(const std::vector<double>& fractions, const std::vector<std::vector<double>>& D,
                         std::ostringstream& md) {
  md << "\n## Compression damage per layer\n\n| layer |";
  for (double f : fractions) md << " D (f = " << f << ") |";
  md << "\n|---:|";
  for (size_t k = 0; k < fractions.size(); ++k) md << "---:|";
  md << "\n";
  std::ostringstream dat;
  for (size_t l = 0; !D.empty() && l < D.front().size(); ++l) {
    md << "| " << l << " |";
    dat << l;
    for (size_t fi = 0; fi < fractions.size(); ++fi) {
      md << " " << fmt(D[fi][l], 4) << " |";
      dat << " " << D[fi][l];
    }
    md << "\n";
    dat << "\n";
  }
  return dat.str();
}

}  // namespace

void run_analysis(const RunPlan& plan, const AnalyzeOptions& opt) {
  const auto t0 = SteadyClock::now();
  if (opt.out_dir.empty()) throw InputError("analyze: an output folder is required (--out DIR)");
  auto note = [&](const std::string& s) {
    if (!opt.quiet) std::cerr << s << "\n";
  };
  // The backend first: one that cannot be had stops before anything is created (as run does).
  const BackendOptions backend_options = plan_backend_options(plan, opt.threads);
  check_plan_backend(plan, backend_options);
  // Opened and locked before the work: a folder of someone else's is refused at once (unless --force), and every
  // file is then written through its descriptor (core/folder.hpp).
  const Folder out = open_ripplekv_folder(opt.out_dir, opt.force, "analyze");
  const OutputFolderLock lock(out);
  const AnalysisSelection sel = select_analysis(plan, opt);
  note("analyze: loading " + plan.model_path);
  const Model model = load_model(plan.model_path, weights_for_backend(plan.backend, plan.weights));
  const Tokenizer tok = Tokenizer::from_path(plan.model_path);
  const std::unique_ptr<Backend> backend = make_backend(plan.backend, model, backend_options);
  note("analyze: backend " + backend->description());
  const ModelConfig& mc = model.config;

  HostServices host;
  InstancePool instances(host);
  const std::vector<PluginChoice> choices = damage_scorers(plan, *sel.base->scorer, opt.scorers);
  std::vector<ScorerUse> scorers;
  for (const PluginChoice& c : choices) scorers.push_back(make_scorer_use(instances.get(c), c, mc));
  const RouteBuildOptions route_options = route_build_options(opt, choices, mc.n_layers);
  std::vector<SensitivityProfile> profiles, oracle;
  const Progress progress(opt.quiet, {});
  analysis_profiles(plan, sel, model, tok, *backend, note, progress, &profiles, &oracle);
  const double prefill_seconds = calibration_prefill_seconds(plan, tok, *backend);

  // Compression damage per scorer, fraction, evaluation example and layer (runner/profile/compression_damage.hpp, the
  // loop the damage signal shares); d is the config's [scorer]'s.
  const auto windows = draw_text_windows(tok, plan.eval.files, plan.eval.examples,
                                         plan.eval.prefix_tokens + plan.continuation_tokens, plan.eval.seed);
  const int64_t N = static_cast<int64_t>(windows.size()), T = plan.eval.prefix_tokens;
  std::vector<const ScorerUse*> uses;
  for (const auto& sc : scorers) uses.push_back(&sc);
  std::vector<std::vector<int32_t>> window_tokens;
  for (const auto& w : windows) window_tokens.push_back(w.tokens);
  note("analyze: compression damage on the evaluation split");
  const auto t_damage = SteadyClock::now();
  const auto d_all = compression_damage(*backend, uses, window_tokens, T, sel.fractions, [&](int64_t i) {
    progress.phase("evaluation examples done (compression damage)", i + 1, N, t_damage);
  });
  const auto& d = d_all.front();
  const std::vector<std::vector<double>> D = mean_damage(d);

  nlohmann::json j;
  j["model_sha256"] = model.sha256;
  j["scorer"] = sel.base->scorer->id;  // D and D_per_example are this scorer's; "scorers" holds every --scorers one
  j["scorer_params"] = sel.base->scorer->params.to_string();
  j["fractions"] = sel.fractions;
  j["examples"] = N;
  j["prefix_tokens"] = T;
  j["continuation_tokens"] = plan.continuation_tokens;
  j["layers"] = mc.n_layers;
  j["D"] = D;
  j["D_per_example"] = d;
  std::ostringstream md;
  signal_table(plan, sel, profiles, oracle, SignalRows(d, D, static_cast<int>(plan.bootstrap_resamples)), N,
               prefill_seconds, j, md);
  const std::string dat = damage_table(sel.fractions, D, md);
  j["seconds"] = seconds_since(t0);
  j["schema"] = kAnalysisSchema;
  j["profiles"] = nlohmann::json::array();  // where each signal's profile came from (computed, or a cache file)
  for (const auto* set : {&profiles, &oracle})  // the signals' profiles and the oracle's (damage) profiles
    for (const SensitivityProfile& p : *set)
      j["profiles"].push_back({{"signal", p.signal}, {"params", p.params}, {"cache_key", p.cache_key},
                               {"source", p.source}});
  model.check_unchanged("the analysis");  // nothing computed from weights that changed is written
  lock.check_held();                       // still the folder's only writer
  if (choices.size() > 1)  // --scorers: D_l per scorer, the guided route and its random-placement baseline
    write_routes(choices, d_all, sel.fractions, opt, route_options, out, j, md);
  if (opt.sharing) {  // --sharing: D^share_l on the same evaluation windows, and each signal against it
    note("analyze: sharing damage (layer l reads layer l - 1's cache)");
    std::vector<NamedProfile> named;
    for (const SensitivityProfile& p : profiles) named.push_back({p.signal, p.s});
    const auto t_sharing = SteadyClock::now();
    write_sharing(sharing_damage(*backend, window_tokens, T,
                                 [&](int64_t i) { progress.phase("evaluation examples done (sharing damage)", i + 1, N, t_sharing); }),
                  named, plan.bootstrap_resamples, j, md);
  }
  model.check_unchanged("the analysis");  // nothing computed from weights that changed is written
  lock.check_held();                       // still the folder's only writer
  out.write_atomically("analysis.json", j.dump(1) + "\n");
  md << "\n" << analysis_figures(out.sub("plots"), sel.fractions, D, profiles, j["signals"], dat);
  out.write_atomically("analysis.md", md.str());
  note("analyze: wrote " + out.path_of("analysis.md"));
}

}  // namespace rkv
