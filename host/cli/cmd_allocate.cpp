// `ripplekv allocate`: run one allocator plugin standalone and print the integer budgets per layer.
#include <boost/program_options.hpp>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cache/budget.hpp"
#include "cli/command.hpp"
#include "cli/command_line.hpp"
#include "core/errors.hpp"
#include "plugin/allocator_call.hpp"
#include "plugin/instance.hpp"
#include "runner/plan/profile_file.hpp"

namespace po = boost::program_options;

namespace rkv::cli {
namespace {

const char* kUsage =
    "usage: ripplekv allocate --allocator ID [--param KEY=VALUE ...] [--sensitivity s0,s1,... | --profile FILE]\n"
    "                         [--layers L] --prefix-tokens T (--budget-fraction F | --budget-tokens N) [--json]\n\n"
    "Runs one allocator and prints the per-layer budgets b_l (positions kept, protected positions included), which sum\n"
    "exactly to B = floor(F * T * L + 0.5) or B = min(N, T) * L. L is the number of compressible layers; it is taken\n"
    "from the profile when one is given (a different --layers is an error). A profile is needed only by allocators\n"
    "that use one (e.g. ripplekv). No model is read, so every layer's span is T (a run on a model with sliding-window\n"
    "layers, such as Gemma 3, caps each layer at min(T, window) instead: docs/DECISIONS.md \"Budgets for layers with different\n"
    "spans\"). With --json prints {\"budgets\": [...], \"budget_total\": B, \"warnings\": [...]}.\n";

int run_allocate(const std::vector<std::string>& args) {
  po::options_description opts("options");
  opts.add_options()("help,h", "show this help")("allocator", po::value<std::string>(), "allocator plugin id")(
      "param", po::value<std::vector<std::string>>()->composing(), "plugin parameter KEY=VALUE (repeatable)")(
      "sensitivity", po::value<std::string>(), "comma-separated sensitivity per layer")(
      "profile", po::value<std::string>(), "profile.json with an array \"s\"")(
      "layers", po::value<int64_t>(), "number of compressible layers L")(
      "prefix-tokens", po::value<int64_t>(), "prompt positions T eligible for compression")(
      "budget-fraction", po::value<double>(), "budget fraction F in (0, 1]")(
      "budget-tokens", po::value<int64_t>(), "average per-layer budget N in positions")(
      "plugin-path", po::value<std::vector<std::string>>()->composing(), "extra plugin folder or library")(
      "json", "print JSON");
  po::variables_map vm = parse_command_line(args, opts, nullptr, kUsage);
  if (vm.count("help")) {
    std::cout << kUsage << "\n" << opts;
    return 0;
  }
  if (!vm.count("allocator")) throw UsageError("--allocator is required");
  if (!vm.count("prefix-tokens")) throw UsageError("--prefix-tokens is required");
  if (vm.count("budget-fraction") == vm.count("budget-tokens"))
    throw UsageError("give exactly one of --budget-fraction and --budget-tokens");
  if (vm.count("sensitivity") && vm.count("profile")) throw UsageError("give --sensitivity or --profile, not both");
  const int64_t T = vm["prefix-tokens"].as<int64_t>();
  if (T < 1) throw UsageError("--prefix-tokens must be >= 1 (got " + std::to_string(T) + ")");

  std::vector<double> profile;
  std::string profile_source;
  if (vm.count("sensitivity")) {
    profile = parse_sensitivity_list(vm["sensitivity"].as<std::string>());
    profile_source = "--sensitivity";
  } else if (vm.count("profile")) {
    profile_source = vm["profile"].as<std::string>();
    profile = read_profile_file(profile_source).s;
  }
  int64_t L = 0;
  if (!profile.empty()) {
    L = static_cast<int64_t>(profile.size());
    if (vm.count("layers") && vm["layers"].as<int64_t>() != L)
      throw UsageError("--layers " + std::to_string(vm["layers"].as<int64_t>()) + " does not match the " +
                       std::to_string(L) + " layers of " + profile_source);
  } else if (vm.count("layers")) {
    L = vm["layers"].as<int64_t>();
  } else {
    throw UsageError("give --layers, or a profile (--sensitivity or --profile) to take the layer count from");
  }
  if (L < 1) throw UsageError("--layers must be >= 1 (got " + std::to_string(L) + ")");
  if (L > 1000000) throw UsageError("--layers " + std::to_string(L) + " is more than 1000000 layers");

  std::vector<std::string> extra;
  if (vm.count("plugin-path")) extra = vm["plugin-path"].as<std::vector<std::string>>();
  const PluginRegistry reg = PluginRegistry::discover(extra);
  const PluginInfo& info = reg.resolve(vm["allocator"].as<std::string>(), RKV_KIND_ALLOCATOR);
  std::vector<UserParam> user;
  if (vm.count("param"))
    for (const auto& kv : vm["param"].as<std::vector<std::string>>()) {
      const auto eq = kv.find('=');
      if (eq == std::string::npos || eq == 0) throw UsageError("--param '" + kv + "' is not KEY=VALUE");
      user.push_back(UserParam{kv.substr(0, eq), kv.substr(eq + 1), true, "--param " + kv});
    }
  const ParamSet params = ParamSet::validate(*info.descriptor, user);
  if ((info.descriptor->flags & RKV_FLAG_NEEDS_PROFILE) && profile.empty())
    throw UsageError("allocator '" + info.id() + "' needs a sensitivity profile: give --sensitivity or --profile");

  const int64_t B = vm.count("budget-fraction") ? budget_total_from_fraction(vm["budget-fraction"].as<double>(), T, L)
                                                : budget_total_from_tokens(vm["budget-tokens"].as<int64_t>(), T, L);
  HostServices host;
  const PluginInstance inst = PluginInstance::create(info, params, host);
  if (!serves_layer_budgets(inst))
    throw UsageError("allocator '" + info.id() + "' is a per-head allocator (" RKV_INTERFACE_ALLOCATOR_V2 "): it splits "
                     "budgets over KV heads from a scorer's scores, which `allocate` does not have; use it in a run "
                     "config ([allocator] plugin or heads)");
  const Allocation a = run_allocator(inst, profile, B, T, L, /*protected_count=*/-1);

  if (vm.count("json")) {
    nlohmann::json j;
    j["allocator"] = info.id();
    j["params"] = params.to_string();
    j["budgets"] = a.budgets;
    j["budget_total"] = a.budget_total;
    j["prefix_tokens"] = T;
    j["warnings"] = a.warnings;
    std::cout << j.dump() << "\n";
    return 0;
  }
  std::cout << "allocator " << info.id() << " (" << params.to_string() << ")\n"
            << "T = " << T << ", |A| = " << L << ", B = " << B << "\n\n"
            << std::setw(6) << "layer" << std::setw(10) << "budget" << std::setw(14) << "allocator" << "\n";
  for (int64_t l = 0; l < L; ++l)
    std::cout << std::setw(6) << l << std::setw(10) << a.budgets[static_cast<size_t>(l)] << std::setw(14)
              << std::fixed << std::setprecision(3) << a.raw[static_cast<size_t>(l)] << "\n";
  for (const auto& w : a.warnings) std::cout << "warning: " << w << "\n";
  return 0;
}

}  // namespace

RKV_CLI_COMMAND("allocate", "run one allocator plugin and print per-layer budgets", run_allocate);

}  // namespace rkv::cli
