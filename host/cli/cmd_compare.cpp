// `ripplekv compare RUN... --out DIR`: one report over several finished runs (runner/report/compare_runs.hpp).
#include <boost/program_options.hpp>

#include <iostream>

#include "cli/command.hpp"
#include "cli/command_line.hpp"
#include "runner/report/compare_runs.hpp"

namespace po = boost::program_options;

namespace rkv::cli {
namespace {

const char* kCompareUsage =
    "usage: ripplekv compare RUN RUN... --out DIR [--name NAME]... [--force] [--quiet]\n\n"
    "One report over several finished runs (their folders' cells/): other models, seeds, datasets or configs.\n"
    "Cells are aligned by label (which carries the budget); the first RUN is the reference, and each other run's\n"
    "value of a cell is compared with the reference run's cell of the same label, per task and metric: paired when\n"
    "both hold the same examples with the same inputs (every example's token ids hash equal; bootstrap CI of the\n"
    "mean difference and sign-flip p from n = 10, Holm across each table), unpaired otherwise (a two-sample\n"
    "bootstrap CI of the difference of means, no p), and each row says which. Writes DIR/report.md, DIR/plots/ (per\n"
    "task and method, the primary metric against the budget, a line per run),\n"
    "DIR/comparison.jsonl (one row per run, cell, task and metric) and DIR/compare.json (the inputs and names).\n"
    "Runs are named by --name (one per RUN, in order) or by their folder's last component. The runs table names the\n"
    "cells a run lacks and the config keys that differ from the first run's config.toml. DIR may not be a RUN or lie\n"
    "inside one; a DIR holding a run or merge of its own, or a non-empty DIR that is not ripplekv's, is refused unless\n"
    "--force.\n";

int run_compare(const std::vector<std::string>& args) {
  po::options_description opts("options");
  opts.add_options()("help,h", "show this help")("runs", po::value<std::vector<std::string>>(), "run folders")(
      "out", po::value<std::string>(), "output folder")(
      "name", po::value<std::vector<std::string>>()->composing(), "a run's name in the report (one per RUN)")(
      "quiet,q", "no summary line")("force", "write into a folder that holds other files or a run of its own");
  po::positional_options_description pos;
  pos.add("runs", -1);
  const po::variables_map vm = parse_command_line(args, opts, &pos, kCompareUsage);
  if (vm.count("help")) {
    std::cout << kCompareUsage << "\n" << opts;
    return 0;
  }
  if (!vm.count("runs") || vm["runs"].as<std::vector<std::string>>().size() < 2)
    throw UsageError(std::string("give at least two RUN folders\n") + kCompareUsage);
  if (!vm.count("out")) throw UsageError(std::string("missing --out DIR\n") + kCompareUsage);
  compare_runs(vm["runs"].as<std::vector<std::string>>(),
               vm.count("name") ? vm["name"].as<std::vector<std::string>>() : std::vector<std::string>{},
               vm["out"].as<std::string>(), vm.count("quiet") != 0, vm.count("force") != 0);
  return 0;
}

}  // namespace

RKV_CLI_COMMAND("compare", "one report over several finished runs (models, seeds, configs side by side)", run_compare);

}  // namespace rkv::cli
