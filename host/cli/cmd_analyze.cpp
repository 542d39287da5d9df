// `ripplekv analyze CONFIG`: the paper's Table 1 — Spearman rho (signed) between each configured signal and the per-layer
// compression damage, at each budget fraction (host/runner/analyze/analyze.hpp).
#include <boost/program_options.hpp>
#include <algorithm>
#include <iostream>
#include <sstream>

#include "cli/command.hpp"
#include "cli/command_line.hpp"
#include "core/format.hpp"
#include "runner/analyze/analyze.hpp"
#include "runner/plan/config.hpp"
#include "runner/plan/profile_file.hpp"

namespace po = boost::program_options;

namespace rkv::cli {
namespace {

const char* kUsage =
    "usage: ripplekv analyze CONFIG --out DIR [--force] [--fractions f1,f2,...] [--threads N] [--backend K] [--dtype D]\n"
    "                        [--quiet] [--scorers a,b,...] [--route-counts a=N,b=M] [--random-routes N]\n"
    "                        [--route-seed S] [--route-fraction f] [--sharing] [--set KEY=VALUE]...\n\n"
    "On the evaluation set, compresses one layer at a time with the configured scorer to floor(f T + 0.5) positions\n"
    "and measures the damage D_l = mean KL(full || compressed) over the continuation tokens; then reports, for every\n"
    "configured signal (the [signal] and any swept \"signal.plugin\"), Spearman rho (signed) against D at each fraction f\n"
    "(each once; default: the config's budget fractions) with bootstrap CIs over evaluation examples, and last the oracle row: the\n"
    "builtin \"damage\" signal, the same D at each f (with the config's [scorer]) measured on the calibration set.\n"
    "Each row gives the profile's cost: its seconds on the calibration set and those in prefill-equivalents (one\n"
    "prefill of a calibration-length window, timed here).\n"
    "Writes analysis.json, analysis.md and plots/analysis_damage.png|svg in DIR. A non-empty DIR that holds no\n"
    "ripplekv record (run.json, merge.json or analysis.json of ripplekv's own) is refused unless --force; a link or\n"
    "another kind of file where one of these files goes is refused always (nothing is written through a link).\n\n"
    "Routes: --scorers a,b,... measures D_l(f) for these scorers too (params: the config's [scorer] or a\n"
    "[[scorer.route]] entry that names the plugin, else its defaults) and builds the profile-guided route: per layer\n"
    "the scorer of least damage, or with --route-counts exactly N layers on a, M on b, ... (an exact assignment,\n"
    "Hungarian). It is ranked by total damage sum_l D_l among --random-routes (default 100) random placements of the\n"
    "same counts (--route-seed, default 0), in analysis.json \"routes\" and analysis.md; the route at\n"
    "--route-fraction (default the smallest fraction) is written as [[scorer.route]] tables to DIR/route.toml, and\n"
    "the first random placement of its counts to DIR/route-random.toml.\n\n"
    "Sharing: --sharing also measures the sharing damage D^share_l (only layer l's cache dropped, its attention\n"
    "reading layer l - 1's) on the evaluation set, and each signal's rho against it, in analysis.json \"sharing\" and\n"
    "analysis.md (the layers a [compression.share] count = k chooser should pick; docs/DECISIONS.md \"Depth-wise sharing\").\n";

int run_analyze(const std::vector<std::string>& args) {
  po::options_description opts("options");
  opts.add_options()("help,h", "show this help")("config", po::value<std::string>(), "config TOML")(
      "out", po::value<std::string>(), "output folder")("force", "write into a folder that holds no ripplekv record")(
      "fractions", po::value<std::string>(), "f1,f2,... in (0, 1], each once")(
      "threads", po::value<int64_t>(), "CPU threads")("quiet,q", "no progress output")(
      "scorers", po::value<std::string>(), "more scorers to measure D_l for, a,b,... (ids or short ids)")(
      "route-counts", po::value<std::string>(), "layers per scorer held fixed, a=N,b=M (summing to the layer count)")(
      "random-routes", po::value<int64_t>(), "random placements to rank the route among (default 100)")(
      "route-seed", po::value<int64_t>(), "seed of the random placements (default 0)")(
      "route-fraction", po::value<double>(), "the fraction whose route goes to route.toml (default the smallest)")(
      "sharing", "also measure the per-layer sharing damage (layer l reads layer l - 1's cache)");
  add_backend_options(opts);
  add_set_option(opts);
  po::positional_options_description pos;
  pos.add("config", 1);
  po::variables_map vm = parse_command_line(args, opts, &pos, kUsage);
  if (vm.count("help")) {
    std::cout << kUsage << "\n" << opts;
    return 0;
  }
  if (!vm.count("config")) throw UsageError(std::string("missing CONFIG\n") + kUsage);
  if (!vm.count("out")) throw UsageError(std::string("missing --out DIR\n") + kUsage);
  AnalyzeOptions o;
  o.out_dir = vm["out"].as<std::string>();
  o.quiet = vm.count("quiet") != 0;
  o.force = vm.count("force") != 0;
  if (vm.count("threads")) o.threads = vm["threads"].as<int64_t>();
  if (o.threads < 0) throw UsageError("--threads must be >= 0 (0: all cores)");
  if (vm.count("fractions")) {
    for (double f : parse_sensitivity_list(vm["fractions"].as<std::string>(), "--fractions")) {
      if (!(f > 0.0 && f <= 1.0)) throw UsageError("--fractions: " + fmt(f, 6) + " is outside (0, 1]");
      // The same fraction twice would measure every layer twice and report one row per copy.
      const auto same = std::find(o.fractions.begin(), o.fractions.end(), f);
      if (same != o.fractions.end())
        throw UsageError("--fractions: " + fmt(f, 6) + " is given twice (items " +
                         std::to_string(same - o.fractions.begin()) + " and " + std::to_string(o.fractions.size()) +
                         "); give each fraction once");
      o.fractions.push_back(f);
    }
  }
  if (vm.count("scorers")) {
    std::stringstream ss(vm["scorers"].as<std::string>());
    for (std::string id; std::getline(ss, id, ',');)
      if (!id.empty()) o.scorers.push_back(id);
    if (o.scorers.empty()) throw UsageError("--scorers lists no scorer");
  }
  if (vm.count("route-counts")) {
    std::stringstream ss(vm["route-counts"].as<std::string>());
    for (std::string item; std::getline(ss, item, ',');) {
      const auto eq = item.find('=');
      const std::string count = eq == std::string::npos ? "" : item.substr(eq + 1);
      if (eq == std::string::npos || eq == 0 || count.empty() || count.size() > 6 ||
          count.find_first_not_of("0123456789") != std::string::npos)
        throw UsageError("--route-counts: '" + item + "' is not scorer=N (N a count of layers, 0 to 999999)");
      o.route_counts.emplace_back(item.substr(0, eq), std::stoll(count));
    }
  }
  o.sharing = vm.count("sharing") != 0;
  if (vm.count("random-routes")) o.random_routes = vm["random-routes"].as<int64_t>();
  if (o.random_routes < 1 || o.random_routes > 1000000) throw UsageError("--random-routes must be in [1, 1000000]");
  if (vm.count("route-seed")) {
    const int64_t seed = vm["route-seed"].as<int64_t>();
    if (seed < 0) throw UsageError("--route-seed must be >= 0");
    o.route_seed = static_cast<uint64_t>(seed);
  }
  if (vm.count("route-fraction")) o.route_fraction = vm["route-fraction"].as<double>();
  RunPlan plan = load_run_plan(vm["config"].as<std::string>(), set_overrides(vm));
  apply_backend_options(vm, plan);
  note_first_run(plan, "analyze");
  run_analysis(plan, o);
  return 0;
}

}  // namespace

RKV_CLI_COMMAND("analyze", "Spearman rho (signed) of each signal against per-layer compression damage (Table 1)", run_analyze);

}  // namespace rkv::cli
