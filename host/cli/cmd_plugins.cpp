// `ripplekv plugins list [--json]`, `ripplekv plugins describe ID` and `ripplekv plugins check ID` (the conformance
// kit of conformance/conformance.hpp: exit 0 when every case passes, 1 when one fails, 2 for usage or load errors).
#include <algorithm>
#include <cstring>
#include <boost/program_options.hpp>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/command.hpp"
#include "cli/command_line.hpp"
#include "conformance/conformance.hpp"
#include "plugin/params.hpp"
#include "plugin/plugin_json.hpp"
#include "plugin/registry.hpp"

namespace po = boost::program_options;

namespace rkv::cli {
namespace {

const char* kUsage =
    "usage: ripplekv plugins list [--json] [--plugin-path DIR]...\n"
    "       ripplekv plugins describe ID [--json] [--plugin-path DIR]...\n"
    "       ripplekv plugins check ID [--param KEY=VALUE]... [--json] [--plugin-path DIR]...\n\n"
    "Plugins are searched in --plugin-path folders, then $RIPPLEKV_PLUGIN_PATH (':'-separated), then the plugin\n"
    "folder beside libripplekv. ID may be a full id or its last component when unambiguous.\n\n"
    "check runs the rules every plugin of ID's kind must follow on seeded synthetic inputs, through the host's own\n"
    "call paths, and prints one line per rule (case, PASS or FAIL, detail) and a summary:\n"
    "  scorer     requirements, scores_finite, deterministic, budget_respected, protected_kept, protected_priority,\n"
    "             decode_scores_finite, decode_budget_respected, decode_protected_kept (decode-time inputs, for a\n"
    "             scorer that declares decode_scoring; otherwise one decode_time case, not applicable),\n"
    "             short_prompt (shapes (H, H_kv, d) = (4, 2, 8), (3, 1, 16), (2, 2, 4); T in {1, 7, 64, 300})\n"
    "  allocator  allocate_call, finite, non_negative, sums_to_B, integer_budgets, deterministic; a per-head\n"
    "             allocator (rkv.allocator/2 only): allocate_heads_call, head_integer_budgets, head_deterministic\n"
    "  signal     profile_call, profile_length, finite, deterministic, host_accepts (tiny synthetic models); a\n"
    "             per-prompt signal (rkv.prompt_signal/1): requirements, value_finite, deterministic,\n"
    "             varies_with_prompt (the scorer shapes and lengths, only the requested statistics given)\n"
    "each after a `create` case. --param KEY=VALUE sets a plugin parameter (validated against its spec).\n"
    "Exit status: 0 when every case passes, 1 when any case fails (a value the plugin itself refuses when created,\n"
    "such as an even snapkv kernel, fails the create case), 2 for usage errors, an unknown ID, a parameter its spec\n"
    "refuses or a plugin library that cannot be loaded (a broken param spec included: a NaN or out-of-range\n"
    "default, min > max, a name that is no identifier), 3 when the plugin calls exit() inside a call (stderr:\n"
    "\"ripplekv: plugin ID called exit() inside CALL\").\n";

/// `plugins check`: runs the kit and prints the table or JSON; returns the exit code.
int run_check(const PluginInfo& p, const std::vector<std::string>& param_args, bool json) {
  std::vector<UserParam> user;
  for (const auto& kv : param_args) {
    const auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) throw UsageError("--param '" + kv + "' is not KEY=VALUE");
    user.push_back(UserParam{kv.substr(0, eq), kv.substr(eq + 1), true, "--param " + kv});
  }
  const ParamSet params = ParamSet::validate(*p.descriptor, user);
  const std::vector<ConformanceCase> cases = check_plugin(p, params);
  size_t passed = 0;
  for (const auto& c : cases) passed += c.passed ? 1 : 0;
  const bool ok = all_passed(cases);
  if (json) {
    nlohmann::json j;
    j["id"] = p.id();
    j["kind"] = plugin_kind_name(p.descriptor->kind);
    j["version"] = p.descriptor->version;
    j["library"] = p.library->path;
    j["params"] = params.to_string();
    j["cases"] = nlohmann::json::array();
    for (const auto& c : cases)
      j["cases"].push_back({{"case", c.name}, {"result", c.passed ? "PASS" : "FAIL"}, {"passed", c.passed},
                            {"detail", c.detail}});
    j["summary"] = {{"total", cases.size()}, {"passed", passed}, {"failed", cases.size() - passed}, {"ok", ok}};
    std::cout << j.dump(2) << "\n";
    return ok ? 0 : 1;
  }
  std::cout << "check " << p.id() << " (" << plugin_kind_name(p.descriptor->kind) << ", version "
            << p.descriptor->version << ")\n  library: " << p.library->path << "\n  params: "
            << (params.to_string().empty() ? "(none)" : params.to_string()) << "\n\n";
  size_t width = 4;
  for (const auto& c : cases) width = std::max(width, c.name.size());
  std::cout << std::left << std::setw(static_cast<int>(width + 2)) << "CASE" << std::setw(8) << "RESULT"
            << "DETAIL\n";
  for (const auto& c : cases)
    std::cout << std::left << std::setw(static_cast<int>(width + 2)) << c.name << std::setw(8)
              << (c.passed ? "PASS" : "FAIL") << c.detail << "\n";
  std::cout << "\n" << (ok ? "PASS" : "FAIL") << ": " << passed << " of " << cases.size() << " cases passed ("
            << p.id() << ")\n";
  return ok ? 0 : 1;
}

int run_plugins(const std::vector<std::string>& args) {
  po::options_description opts("options");
  opts.add_options()("help,h", "show this help")("json", "print JSON")(
      "plugin-path", po::value<std::vector<std::string>>()->composing(), "extra plugin folder or library (repeatable)")(
      "param", po::value<std::vector<std::string>>()->composing(),
      "check: plugin parameter KEY=VALUE (repeatable)")("action", po::value<std::string>(), "list | describe | check")(
      "id", po::value<std::string>(), "plugin id");
  po::positional_options_description pos;
  pos.add("action", 1).add("id", 1);
  po::variables_map vm = parse_command_line(args, opts, &pos, kUsage);
  if (vm.count("help")) {
    std::cout << kUsage << "\n" << opts;
    return 0;
  }
  if (!vm.count("action")) throw UsageError(std::string("missing action (list, describe or check)\n") + kUsage);
  const std::string action = vm["action"].as<std::string>();
  const bool json = vm.count("json") != 0;
  std::vector<std::string> extra;
  if (vm.count("plugin-path")) extra = vm["plugin-path"].as<std::vector<std::string>>();
  std::vector<std::string> param_args;
  if (vm.count("param")) param_args = vm["param"].as<std::vector<std::string>>();
  if (!param_args.empty() && action != "check") throw UsageError("--param is only for 'plugins check'");

  if (action == "list") {
    if (vm.count("id")) throw UsageError("'plugins list' takes no positional argument");
    const PluginRegistry reg = PluginRegistry::discover(extra);
    if (json) {
      nlohmann::json arr = nlohmann::json::array();
      for (const auto& p : reg.plugins()) arr.push_back(plugin_json(p));
      std::cout << arr.dump(2) << "\n";
      return 0;
    }
    int id_width = 36;  // the longest id plus a space (org.ripplekv.scorer.non_causal_attention is 40)
    for (const auto& p : reg.plugins()) id_width = std::max(id_width, static_cast<int>(p.id().size()) + 1);
    std::cout << std::left << std::setw(id_width) << "ID" << std::setw(11) << "KIND" << std::setw(9) << "VERSION"
              << "DESCRIPTION\n";
    for (const auto& p : reg.plugins())
      std::cout << std::left << std::setw(id_width) << p.id() << std::setw(11) << plugin_kind_name(p.descriptor->kind)
                << std::setw(9) << p.descriptor->version << p.descriptor->description << "\n"
                << std::string(static_cast<size_t>(id_width), ' ') << "library: " << p.library->path << "\n";
    return 0;
  }
  if (action == "describe") {
    if (!vm.count("id")) throw UsageError("'plugins describe' needs a plugin ID");
    const PluginRegistry reg = PluginRegistry::discover(extra);
    const PluginInfo& p = reg.resolve(vm["id"].as<std::string>());
    if (json) {
      std::cout << plugin_json(p).dump(2) << "\n";
      return 0;
    }
    std::cout << p.id() << " (" << plugin_kind_name(p.descriptor->kind) << ", version " << p.descriptor->version
              << ")\n  " << p.descriptor->description << "\n  library: " << p.library->path << "\n";
    if (p.descriptor->flags & RKV_FLAG_NEEDS_PROFILE) std::cout << "  needs a sensitivity profile\n";
    if (p.descriptor->flags & RKV_FLAG_NEEDS_SCORES) std::cout << "  per-head allocator: needs the scorer's scores\n";
    if (p.descriptor->flags & RKV_FLAG_PER_PROMPT)
      std::cout << "  per-prompt signal: computed on each prompt being compressed (rkv.prompt_signal/1)\n";
    std::cout << "\nparameters:\n";
    bool any = false;
    size_t name_width = 11;  // the longest parameter name sets the column (names were cut into their type before)
    if (p.descriptor->params)
      for (const rkv_param_spec* const* sp = p.descriptor->params; *sp; ++sp)
        name_width = std::max(name_width, std::strlen((*sp)->name));
    if (p.descriptor->params)
      for (const rkv_param_spec* const* sp = p.descriptor->params; *sp; ++sp) {
        any = true;
        const nlohmann::json j = param_spec_json(**sp);
        std::cout << "  " << std::left << std::setw(static_cast<int>(name_width + 1)) << (*sp)->name << std::setw(8)
                  << j["type"].get<std::string>()
                  << "default " << j["default"].dump();
        if (j.contains("min")) std::cout << ", min " << j["min"].dump();
        if (j.contains("max")) std::cout << ", max " << j["max"].dump();
        if (j.contains("choices")) std::cout << ", choices " << j["choices"].dump();
        std::cout << "\n" << std::string(22, ' ') << j["doc"].get<std::string>() << "\n";
      }
    if (!any) std::cout << "  (none)\n";
    return 0;
  }
  if (action == "check") {
    if (!vm.count("id")) throw UsageError("'plugins check' needs a plugin ID");
    const PluginRegistry reg = PluginRegistry::discover(extra);
    return run_check(reg.resolve(vm["id"].as<std::string>()), param_args, json);
  }
  throw UsageError("unknown action '" + action + "' (expected list, describe or check)\n" + kUsage);
}

}  // namespace

RKV_CLI_COMMAND("plugins", "list plugins, describe one plugin's parameters, or check one against its kind's rules",
                run_plugins);

}  // namespace rkv::cli
