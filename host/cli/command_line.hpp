// Parsing a subcommand's arguments with Boost.Program_options, the same way for every subcommand.
#pragma once
#include <boost/program_options.hpp>

#include <iostream>
#include <string>
#include <vector>

#include "cli/command.hpp"

namespace rkv::cli {

/// Parses `args` (the arguments after the subcommand name) against `options` and, when given, the positional
/// arguments `positional`. A Boost.Program_options error (unknown option, missing value, bad number) becomes a
/// UsageError carrying its message, followed by `usage` when it is not empty.
inline boost::program_options::variables_map parse_command_line(
    const std::vector<std::string>& args, const boost::program_options::options_description& options,
    const boost::program_options::positional_options_description* positional, const std::string& usage) {
  namespace po = boost::program_options;
  po::variables_map vm;
  try {
    po::command_line_parser parser(args);
    parser.options(options);
    if (positional) parser.positional(*positional);
    po::store(parser.run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw UsageError(usage.empty() ? std::string(e.what()) : std::string(e.what()) + "\n" + usage);
  }
  return vm;
}

/// Adds --set KEY=VALUE (repeatable): config overrides (runner/plan/config_overrides.hpp), read by set_overrides().
inline void add_set_option(boost::program_options::options_description& options) {
  namespace po = boost::program_options;
  options.add_options()("set", po::value<std::vector<std::string>>()->composing(),
                        "KEY=VALUE: override a config key (a TOML value; a bare word is a string); repeatable");
}

/// The --set values of `vm` in the order given (empty without any).
inline std::vector<std::string> set_overrides(const boost::program_options::variables_map& vm) {
  return vm.count("set") ? vm["set"].as<std::vector<std::string>>() : std::vector<std::string>{};
}

/// Adds --backend and --dtype (the overrides of model.backend and model.dtype) to `options`.
inline void add_backend_options(boost::program_options::options_description& options) {
  namespace po = boost::program_options;
  options.add_options()("backend", po::value<std::string>(),
                        "cpu, cuda or auto (cuda when this build has it and a device is present); overrides model.backend")(
      "dtype", po::value<std::string>(), "compute dtype f32, or bf16 (cuda only); overrides model.dtype");
}

/// Applies --backend / --dtype of `vm` to a run plan's `backend` and `dtype` (checked when the backend is made).
template <class Plan>
void apply_backend_options(const boost::program_options::variables_map& vm, Plan& plan) {
  if (vm.count("backend")) plan.backend = vm["backend"].template as<std::string>();
  if (vm.count("dtype")) plan.dtype = vm["dtype"].template as<std::string>();
  if (vm.count("backend") || vm.count("dtype")) plan.backend_from_command_line = true;
}

/// profile's and analyze's note on a config whose [sweep] sweeps model.path / data.eval.seed into several runs: they
/// work on one model and one set of examples, the first run's (the plan is that run's).
template <typename Plan>
void note_first_run(const Plan& plan, const std::string& command) {
  if (plan.runs.size() < 2) return;
  std::string keys;
  for (const auto& k : plan.run_axis_keys) keys += (keys.empty() ? "" : " and ") + k;
  std::cerr << command << ": " << plan.config_path << " sweeps " << keys << " into " << plan.runs.size()
            << " runs; this is the first run's (" << plan.runs[0].name << ", " << plan.model_path
            << "); choose another by giving the sweep one value of each:";
  for (const auto& k : plan.run_axis_keys) std::cerr << " --set 'sweep.\"" << k << "\"=[...]'";
  std::cerr << "\n";
}

}  // namespace rkv::cli
