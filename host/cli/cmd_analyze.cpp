// `ripplekv analyze CONFIG`: the paper's Table 1 — Spearman rho (signed) between each configured signal and the per-layer
// compression damage, at each budget fraction (host/runner/analyze.hpp).
#include <boost/program_options.hpp>
#include <iostream>
#include <sstream>

#include "cli/command.hpp"
#include "cli/command_line.hpp"
#include "runner/analyze.hpp"
#include "runner/config.hpp"
#include "runner/profile_file.hpp"

namespace po = boost::program_options;

namespace rkv::cli {
namespace {

const char* kUsage =
    "usage: ripplekv analyze CONFIG --out DIR [--fractions f1,f2,...] [--threads N] [--backend K] [--dtype D] [--quiet]\n\n"
    "On the evaluation set, compresses one layer at a time with the configured scorer to floor(f T + 0.5) positions\n"
    "and measures the damage D_l = mean KL(full || compressed) over the continuation tokens; then reports, for every\n"
    "configured signal (the [signal] and any swept \"signal.plugin\"), Spearman rho (signed) against D at each fraction f\n"
    "(default: the config's budget fractions) with bootstrap CIs over evaluation examples. Writes analysis.json,\n"
    "analysis.md and plots/analysis_damage.png|svg in DIR.\n";

int run_analyze(const std::vector<std::string>& args) {
  po::options_description opts("options");
  opts.add_options()("help,h", "show this help")("config", po::value<std::string>(), "config TOML")(
      "out", po::value<std::string>(), "output folder")("fractions", po::value<std::string>(), "f1,f2,... in (0, 1]")(
      "threads", po::value<int64_t>(), "CPU threads")("quiet,q", "no progress output");
  add_backend_options(opts);
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
  if (vm.count("threads")) o.threads = vm["threads"].as<int64_t>();
  if (o.threads < 0) throw UsageError("--threads must be >= 0 (0: all cores)");
  if (vm.count("fractions")) {
    for (double f : parse_sensitivity_list(vm["fractions"].as<std::string>(), "--fractions")) {
      if (!(f > 0.0 && f <= 1.0)) throw UsageError("--fractions: " + std::to_string(f) + " is outside (0, 1]");
      o.fractions.push_back(f);
    }
  }
  RunPlan plan = load_run_plan(vm["config"].as<std::string>());
  apply_backend_options(vm, plan);
  run_analysis(plan, o);
  return 0;
}

}  // namespace

RKV_CLI_COMMAND("analyze", "Spearman rho (signed) of each signal against per-layer compression damage (Table 1)", run_analyze);

}  // namespace rkv::cli
