// libFuzzer target: ablation-config validation, as `ripplekv validate CONFIG` runs it (host/cli/cmd_run.cpp:
// load_run_plan, which reads the file and calls load_run_plan_from_string).
//
// The input bytes are the TOML text of "<sandbox>/fuzz.toml"; relative paths resolve against a per-process sandbox
// folder that holds a few real files for the config to point to (fuzz/corpus/config/*.toml use them):
//   model.gguf, hf/config.json, a.txt, b.txt, c.txt, d.txt, longbench.jsonl
// Validation checks that files exist but reads none of them; plugins come from the build's plugin folder.
// rkv::InputError is the expected outcome for bad input.
//
// One guard: `plugin_paths` makes validation dlopen every .so in the folders it names. An input whose plugin_paths
// name anything outside the sandbox is skipped, so the fuzzer never loads arbitrary system libraries.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <toml++/toml.h>

#include "core/errors.hpp"
#include "fuzz_support.hpp"
#include "runner/plan/config.hpp"

namespace fs = std::filesystem;

namespace {

const fs::path& sandbox() {
  static const fs::path dir = [] {
    const fs::path d = rkv_fuzz::process_temp_dir("config") / "sandbox";
    fs::create_directories(d / "hf");
    for (const char* name : {"a.txt", "b.txt", "c.txt", "d.txt"}) {
      // distinct texts: calibration and evaluation sets are compared by content
      const std::string text = std::string("It is a truth universally acknowledged (") + name + ").\n";
      rkv_fuzz::write_file(d / name, text.data(), text.size());
    }
    const std::string lb = R"({"input": "q", "context": "c", "answers": ["a"], "dataset": "qasper", "length": 1})" "\n";
    rkv_fuzz::write_file(d / "longbench.jsonl", lb.data(), lb.size());
    rkv_fuzz::write_file(d / "model.gguf", "GGUF", 4);
    rkv_fuzz::write_file(d / "hf" / "config.json", "{}", 2);
    return d;
  }();
  return dir;
}

/// False when the text parses as TOML and its top-level plugin_paths name a place outside the sandbox.
bool plugin_paths_stay_inside(const std::string& text) {
  toml::table root;
  try {
    root = toml::parse(text, std::string("fuzz.toml"));
  } catch (const toml::parse_error&) {
    return true;  // validation stops at the syntax error
  }
  const toml::array* paths = root["plugin_paths"].as_array();
  if (!paths) return true;
  const std::string inside = sandbox().string() + "/";
  for (const toml::node& e : *paths) {
    if (!e.is_string()) continue;
    const std::string p = rkv::resolve_config_path(e.as_string()->get(), sandbox().string());
    std::error_code ec;
    const std::string canon = fs::weakly_canonical(p, ec).string() + "/";
    if (ec || canon.compare(0, inside.size(), inside) != 0) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  if (!plugin_paths_stay_inside(text)) return 0;
  try {
    const rkv::RunPlan plan = rkv::load_run_plan_from_string(text, (sandbox() / "fuzz.toml").string(), sandbox().string());
    if (plan.cells.empty() || !plan.cells.front().config.full_cache)
      rkv_fuzz::fuzz_fail("a validated plan does not start with the full-cache cell");
    for (size_t k = 1; k < plan.cells.size(); ++k) {
      const rkv::CellConfig& c = plan.cells[k].config;
      if (!c.scorer || !c.allocator || (c.budget_fraction.has_value() == c.budget_tokens.has_value()))
        rkv_fuzz::fuzz_fail("validated cell '" + plan.cells[k].label + "' lacks a scorer, allocator or one budget");
      if (c.budget_fraction && !(*c.budget_fraction > 0.0 && *c.budget_fraction <= 1.0))
        rkv_fuzz::fuzz_fail("validated cell '" + plan.cells[k].label + "' has a budget fraction outside (0, 1]");
    }
  } catch (const rkv::InputError& e) {
    rkv_fuzz::note_rejection("load_run_plan", e);
  }
  return 0;
}
