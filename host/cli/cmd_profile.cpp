// `ripplekv profile CONFIG`: compute a sensitivity profile (docs/ARCHITECTURE.md "perturbation_kl") for the config's model and
// calibration data, write profile.json and print it per layer.
#include <boost/program_options.hpp>
#include <cmath>
#include <iomanip>
#include <iostream>

#include "backend/backend.hpp"
#include "cli/command.hpp"
#include "cli/command_line.hpp"
#include "core/errors.hpp"
#include "core/progress.hpp"
#include "model/model.hpp"
#include "core/atomic_file.hpp"
#include "runner/compress/plan_backend.hpp"
#include "runner/plan/config.hpp"
#include "runner/profile/profile.hpp"
#include "tokenizer/tokenizer.hpp"

namespace po = boost::program_options;

namespace rkv::cli {
namespace {

const char* kUsage =
    "usage: ripplekv profile CONFIG [--out FILE] [--signal ID] [--threads N] [--backend K] [--dtype D]\n"
    "                        [--no-cache] [--force] [--set KEY=VALUE]...\n\n"
    "Computes the sensitivity profile s[L] of the config's model with its [signal] plugin (the first sweep cell that\n"
    "has one that is not per-prompt; --signal overrides it) over the calibration set [data.calibration] (N windows\n"
    "of prefix_tokens + window_tokens tokens); a per-prompt signal (cake, squeezeattention) is computed on each\n"
    "prompt a run compresses and is refused here. Positions protected by the cell's [scorer] are never perturbed.\n"
    "Writes profile.json (default ./profile.json; `ripplekv allocate --profile` reads it) and prints s with 95%\n"
    "bootstrap CIs per layer and the split-half Spearman. Profiles are cached under <asset cache>/profiles;\n"
    "--no-cache recomputes (and refreshes the cache entry). The cache is used only when its folder and files belong\n"
    "to you and no one else can write them (else a warning says why it was skipped). An existing FILE must be a\n"
    "ripplekv profile, and a link, FIFO or device there is refused: --force replaces them (never writing through a\n"
    "link).\n";

int run_profile(const std::vector<std::string>& args) {
  po::options_description opts("options");
  opts.add_options()("help,h", "show this help")("out", po::value<std::string>()->default_value("profile.json"),
                                                  "output file")(
      "signal", po::value<std::string>(), "signal plugin id, or \"damage\" for the builtin oracle (overrides the config's [signal])")(
      "threads", po::value<int64_t>(), "CPU threads (default: the config's model.threads; 0: all cores)")(
      "no-cache", "ignore cached profiles and recompute")(
      "force", "replace --out FILE even when it is not a ripplekv profile or not a regular file");
  add_backend_options(opts);
  add_set_option(opts);
  po::options_description hidden;
  hidden.add_options()("config", po::value<std::string>(), "config file");
  po::options_description all;
  all.add(opts).add(hidden);
  po::positional_options_description pos;
  pos.add("config", 1);
  po::variables_map vm = parse_command_line(args, all, &pos, kUsage);
  if (vm.count("help")) {
    std::cout << kUsage << "\n" << opts;
    return 0;
  }
  if (!vm.count("config")) throw UsageError(std::string("a CONFIG file is required\n") + kUsage);
  if (vm.count("threads") && vm["threads"].as<int64_t>() < 0)
    throw UsageError("--threads must be >= 0 (got " + std::to_string(vm["threads"].as<int64_t>()) + ")");

  const std::string out = vm["out"].as<std::string>();
  const bool force = vm.count("force") != 0;
  check_profile_output(out, force);  // before hours of work: a target that would be refused at the end is refused now
  RunPlan plan = load_run_plan(vm["config"].as<std::string>(), set_overrides(vm));
  apply_backend_options(vm, plan);
  note_first_run(plan, "profile");
  const std::string signal_override = vm.count("signal") ? vm["signal"].as<std::string>() : "";
  // The first cell with a calibration signal (a per-prompt one has no profile here: the last resort, refused below
  // by name).
  const CellConfig* cell = nullptr;
  for (const bool per_prompt_too : {false, true})
    for (const auto& c : plan.cells)
      if (!cell && c.config.signal &&
          (per_prompt_too || !(c.config.signal->info->descriptor->flags & RKV_FLAG_PER_PROMPT)))
        cell = &c.config;
  if (!cell && !signal_override.empty())
    for (const auto& c : plan.cells)
      if (c.config.scorer) {
        cell = &c.config;
        break;
      }
  if (!cell)
    throw UsageError(plan.config_path + " has no [signal] section; add one with plugin = \"perturbation_kl\" or give "
                     "--signal ID");
  const BackendOptions backend_options = plan_backend_options(plan, vm.count("threads") ? vm["threads"].as<int64_t>() : 0);
  check_plan_backend(plan, backend_options);  // before the model is loaded

  const Model model = load_model(plan.model_path, weights_for_backend(plan.backend, plan.weights));
  const Tokenizer tokenizer = model.gguf ? Tokenizer::from_gguf(*model.gguf) : Tokenizer::from_path(plan.model_path);
  const std::unique_ptr<Backend> backend = make_backend(plan.backend, model, backend_options);
  ProfileRequest req = make_profile_request(plan, *cell, model, tokenizer, signal_override);
  req.backend = backend.get();
  req.threads = backend_options.threads;
  req.read_cache = !vm.count("no-cache");
  req.bootstrap_resamples = static_cast<int>(plan.bootstrap_resamples);
  const Progress progress(false, {});
  progress.note("profile: " + req.signal.id + " on " + std::to_string(req.examples.size()) + " calibration examples of " +
                std::to_string(req.prefix_tokens) + " + " + std::to_string(req.window_tokens) + " tokens" +
                (req.read_cache ? " (read from the cache when it holds this profile)" : ""));
  const auto t0 = SteadyClock::now();
  req.on_example = [&](int64_t done, int64_t total) {
    progress.phase("calibration examples done", done, total, t0);
  };
  const SensitivityProfile p = compute_profile(req);
  check_profile_output(out, force);  // again: the file may have changed meanwhile
  write_json_atomically(out, p.to_json(), force);

  for (const auto& w : p.warnings) std::cerr << "ripplekv profile: warning: " << w << "\n";
  std::cout << "signal " << p.signal << " (" << p.params.dump() << "), scorer "
            << (req.scorer_id.empty() ? std::string("none") : req.scorer_id) << " protecting "
            << p.calibration["protected"]["count"] << " of " << req.prefix_tokens << " prefix positions\n"
            << "model " << plan.model_path << ", backend " << backend->description() << "\n"
            << "calibration: " << req.examples.size() << " examples x (prefix " << req.prefix_tokens << " + window "
            << req.window_tokens << ") tokens\n\n"
            << std::setw(6) << "layer" << std::setw(14) << "s" << std::setw(14) << "ci_low" << std::setw(14)
            << "ci_high" << "\n";
  for (size_t l = 0; l < p.s.size(); ++l)
    std::cout << std::setw(6) << p.layers[l] << std::scientific << std::setprecision(4) << std::setw(14) << p.s[l]
              << std::setw(14) << p.ci_low[l] << std::setw(14) << p.ci_high[l] << "\n";
  std::cout << std::defaultfloat << std::setprecision(4) << "\nsplit-half Spearman: ";
  if (std::isfinite(p.split_half_spearman))
    std::cout << p.split_half_spearman << "\n";
  else
    std::cout << "undefined (needs >= 2 examples and a non-constant profile in each half)\n";
  std::cout << std::fixed << std::setprecision(1) << "time: " << p.seconds << " s"
            << (p.from_cache ? " (from the cache; the time is the original computation's)" : "") << "\n"
            << "wrote " << out << "\n";
  return 0;
}

}  // namespace

RKV_CLI_COMMAND("profile", "compute a layer sensitivity profile (profile.json)", run_profile);

}  // namespace rkv::cli
