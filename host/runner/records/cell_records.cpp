#include "runner/records/cell_records.hpp"

#include <filesystem>
#include <iostream>
#include <map>
#include <mutex>

#include "core/errors.hpp"
#include "core/sha256.hpp"
#include "runner/profile/profile.hpp"
#include "runner/plan/scorer_route.hpp"

namespace fs = std::filesystem;

namespace rkv {

nlohmann::json ExampleOutcomeRecord::to_json() const {
  nlohmann::json j;
  j["task"] = task;
  j["example"] = example;
  j["values"] = values;
  j["full_values"] = full_values;
  j["T"] = prefix_tokens;
  j["B"] = budget_total;
  j["budgets"] = budgets;
  if (!head_budgets.empty()) j["head_budgets"] = head_budgets;
  if (!layer_bits.empty()) j["layer_bits"] = layer_bits;
  if (!prompt_profile.empty()) j["prompt_profile"] = prompt_profile;
  if (!token_class_entries.empty()) j["token_class_entries"] = token_class_entries;
  if (!share_sources.empty()) j["share_sources"] = share_sources;
  if (!joint_plan.empty()) j["joint_plan"] = joint_plan;
  j["kv_bytes"] = kv_bytes;
  j["kv_bytes_full"] = kv_bytes_full;
  j["kv_bytes_end"] = kv_bytes_end;
  j["compress_seconds"] = compress_seconds;
  j["decode_tokens_per_second"] = decode_tokens_per_second;
  j["warnings"] = warnings;
  if (!input.source.empty()) j["input"] = input.to_json();
  return j;
}

namespace {

// A hand-edited or fuzzed cell file may hold anything: integers must be JSON integers (nlohmann would cast 1e300 to
// int64 with undefined behaviour), sizes non-negative ones. Violations are InputError naming the key.
int64_t integer_field(const nlohmann::json& j, const char* key) {
  const nlohmann::json& v = j.at(key);
  if (!v.is_number_integer()) throw InputError(std::string("'") + key + "' is not an integer");
  return v.get<int64_t>();
}
size_t size_field(const nlohmann::json& j, const char* key) {
  const nlohmann::json& v = j.at(key);
  if (!v.is_number_unsigned()) throw InputError(std::string("'") + key + "' is not a non-negative integer");
  return v.get<size_t>();
}
std::vector<int64_t> integer_list(const nlohmann::json& v, const char* key) {
  if (!v.is_array()) throw InputError(std::string("'") + key + "' is not a list");
  std::vector<int64_t> out;
  for (const auto& e : v) {
    if (!e.is_number_integer()) throw InputError(std::string("'") + key + "' holds a value that is not an integer");
    out.push_back(e.get<int64_t>());
  }
  return out;
}

}  // namespace

ExampleOutcomeRecord ExampleOutcomeRecord::from_json(const nlohmann::json& j) {
  ExampleOutcomeRecord r;
  r.task = j.at("task").get<std::string>();
  r.example = integer_field(j, "example");
  r.values = j.at("values").get<std::map<std::string, double>>();
  r.full_values = j.at("full_values").get<std::map<std::string, double>>();
  r.prefix_tokens = integer_field(j, "T");
  r.budget_total = integer_field(j, "B");
  r.budgets = integer_list(j.at("budgets"), "budgets");
  if (j.contains("head_budgets")) {
    if (!j.at("head_budgets").is_array()) throw InputError("'head_budgets' is not a list");
    for (const auto& row : j.at("head_budgets")) r.head_budgets.push_back(integer_list(row, "head_budgets"));
  }
  if (j.contains("layer_bits")) r.layer_bits = integer_list(j.at("layer_bits"), "layer_bits");
  if (j.contains("prompt_profile")) {
    const nlohmann::json& p = j.at("prompt_profile");
    if (!p.is_array()) throw InputError("'prompt_profile' is not a list");
    for (const auto& e : p) {
      if (!e.is_number()) throw InputError("'prompt_profile' holds a value that is not a number");
      r.prompt_profile.push_back(e.get<double>());
    }
  }
  if (j.contains("token_class_entries")) {
    if (!j.at("token_class_entries").is_array()) throw InputError("'token_class_entries' is not a list");
    for (const auto& row : j.at("token_class_entries"))
      r.token_class_entries.push_back(integer_list(row, "token_class_entries"));
  }
  if (j.contains("share_sources")) r.share_sources = integer_list(j.at("share_sources"), "share_sources");
  if (j.contains("joint_plan")) {
    if (!j.at("joint_plan").is_array()) throw InputError("'joint_plan' is not a list");
    for (const auto& e : j.at("joint_plan")) {
      if (!e.is_string()) throw InputError("'joint_plan' holds a value that is not a string");
      r.joint_plan.push_back(e.get<std::string>());
    }
  }
  r.kv_bytes = size_field(j, "kv_bytes");
  r.kv_bytes_full = size_field(j, "kv_bytes_full");
  // Cells written before the field existed have none: their caches ended as they were compressed.
  if (!j.contains("kv_bytes_end")) {
    r.kv_bytes_end = r.kv_bytes;
  } else if (j.at("kv_bytes_end").is_number_unsigned()) {
    r.kv_bytes_end = j.at("kv_bytes_end").get<size_t>();
  } else {
    throw InputError("kv_bytes_end is not a non-negative integer");
  }
  r.compress_seconds = j.at("compress_seconds").get<double>();
  r.decode_tokens_per_second = j.at("decode_tokens_per_second").get<double>();
  r.warnings = j.at("warnings").get<std::vector<std::string>>();
  if (j.contains("input")) r.input = ExampleInput::from_json(j.at("input"));
  return r;
}


namespace {

std::string cell_file(const std::string& id) { return "cells/" + id + ".json"; }

/// sha256 of each plugin library, computed once per path.
std::string library_sha256(const std::string& path) {
  static std::mutex m;
  static std::map<std::string, std::string> memo;
  std::lock_guard<std::mutex> lock(m);
  auto it = memo.find(path);
  if (it == memo.end()) it = memo.emplace(path, sha256_file(path)).first;
  return it->second;
}

nlohmann::json param_json(const ParamValue& v) {
  if (auto b = std::get_if<bool>(&v)) return *b;
  if (auto i = std::get_if<int64_t>(&v)) return *i;
  if (auto d = std::get_if<double>(&v)) return *d;
  return std::get<std::string>(v);
}

nlohmann::json plugin_json(const std::optional<PluginChoice>& c, bool used) {
  if (!c || !used) return nullptr;
  nlohmann::json j;
  j["id"] = c->id;
  j["version"] = c->info->descriptor->version;
  nlohmann::json params = nlohmann::json::object();
  for (const auto& [k, v] : c->params.values()) params[k] = param_json(v);
  j["params"] = params;
  // A host builtin (the damage signal, runner/profile/damage_signal.hpp) has no library: null.
  j["library_sha256"] = c->info->library ? nlohmann::json(library_sha256(c->info->library->path)) : nlohmann::json(nullptr);
  return j;
}

}  // namespace

bool cell_file_complete(const Folder& out, const std::string& cell_id, const std::string& base_sha256,
                        const std::string& backend, const std::string& compute_dtype) {
  const std::string path = out.path_of(cell_file(cell_id));
  if (out.kind(cell_file(cell_id)) == Folder::Kind::missing) return false;
  std::string cell_base, cell_backend, cell_dtype;
  try {
    const nlohmann::json j = nlohmann::json::parse(out.read(cell_file(cell_id), "cell file"));
    // A cell without examples is not a finished cell (every run has at least one example): recomputed, not kept.
    if (j.at("cell_id").get<std::string>() != cell_id || !j.at("examples").is_array() || j.at("examples").empty())
      throw std::runtime_error("bad");
    for (const auto& e : j.at("examples")) (void)ExampleOutcomeRecord::from_json(e);
    cell_base = j.at("base_sha256").get<std::string>();
    cell_backend = j.at("backend").get<std::string>();
    cell_dtype = j.value("compute_dtype", std::string("f32"));
  } catch (const std::exception&) {
    std::cerr << "warning: cell file '" << path << "' is corrupt or incomplete; the cell will be recomputed\n";
    return false;
  }
  if (cell_base != base_sha256)
    throw InputError("--resume: cell file '" + path + "' was computed with another non-swept config (base config " +
                     "sha256 " + cell_base.substr(0, 12) + " then, " + base_sha256.substr(0, 12) +
                     " now); results would not be comparable. Use another --out folder, or restore the config");
  if (cell_backend != backend || cell_dtype != compute_dtype)
    throw InputError("--resume: cell file '" + path + "' was computed on backend " + cell_backend + " (" + cell_dtype +
                     "); this run uses " + backend + " (" + compute_dtype + "). Results of two backends would mix in " +
                     "one report: use another --out folder, or --backend " + cell_backend + " --dtype " + cell_dtype);
  return true;
}

void check_cell_model(const Folder& out, const std::string& cell_id, const std::string& model_sha256) {
  const std::string path = out.path_of(cell_file(cell_id));
  std::string cell_model;
  try {
    cell_model = nlohmann::json::parse(out.read(cell_file(cell_id), "cell file")).value("model_sha256", std::string());
  } catch (const std::exception&) {
    return;
  }
  if (!cell_model.empty() && !model_sha256.empty() && cell_model != model_sha256)
    throw InputError("--resume: cell file '" + path + "' was computed with another model file (model sha256 " +
                     cell_model.substr(0, 16) + " then, " + model_sha256.substr(0, 16) +
                     " now); results would not be comparable. Use another --out folder, or restore the model");
}

nlohmann::json cell_record(const RunPlan& plan, const RunIdentity& id, const Cell& cell,
                           const std::vector<ExampleOutcomeRecord>& outcomes, double seconds) {
  const CellConfig& cc = cell.config;
  nlohmann::json j;
  j["run_id"] = id.run_id;
  j["config_sha256"] = id.config_sha256;
  j["base_sha256"] = id.base_sha256;
  j["model_sha256"] = id.model_sha256;
  j["cell_id"] = cell.id;
  j["label"] = cell.label;
  j["group"] = cell.group;
  j["cell"] = cell.values;
  j["effective_key"] = cell.effective_key;
  j["full_cache"] = cc.full_cache;
  j["signal"] = plugin_json(cc.signal, !cc.full_cache && cc.uses_profile);
  j["scorer"] = plugin_json(cc.scorer, !cc.full_cache);
  if (!cc.full_cache && !cc.route.empty()) j["route"] = route_json(cc.route);  // [[scorer.route]] (scorer_route.hpp)
  j["allocator"] = plugin_json(cc.allocator, !cc.full_cache);
  if (!cc.full_cache && cc.allocator && cc.allocator->heads)
    j["heads"] = plugin_json(std::optional<PluginChoice>(*cc.allocator->heads), true);
  j["budget_fraction"] = cc.budget_fraction ? nlohmann::json(*cc.budget_fraction) : nlohmann::json(nullptr);
  j["budget_tokens"] = cc.budget_tokens ? nlohmann::json(*cc.budget_tokens) : nlohmann::json(nullptr);
  if (cc.budget_bytes_fraction) j["budget_bytes_fraction"] = *cc.budget_bytes_fraction;
  j["decode"] = cc.decode.describe();  // the decode policy with its parameters ("none" for the full cache)
  j["rerotate"] = !cc.full_cache && plan.rerotate;
  // [prefill]: how the prompt was prefilled (chunks without compression give the one-shot cache; with compression
  // between chunks a compressed cell computed something else)
  j["prefill"] = {{"chunk_tokens", plan.prefill.chunk_tokens},
                  {"compress_between_chunks", !cc.full_cache && plan.prefill.compress_between_chunks}};
  j["codec"] = cc.codec.to_json();  // how the kept entries are stored ({"format": "none"}: float32)
  if (!cc.full_cache && !cc.share.none()) j["share"] = cc.share.label();  // [compression.share] (cache_share.hpp)
  // [compression.joint] (joint_spec.hpp): the plan and its grid; the allocator and codec recorded above do not apply
  if (!cc.full_cache && !cc.joint.none()) j["joint"] = cc.joint.plan + ": " + cc.joint.label();
  j["model_path"] = plan.model_path;
  j["backend"] = id.backend;
  j["compute_dtype"] = id.compute_dtype;
  j["weights"] = id.weights;
  j["bootstrap_resamples"] = plan.bootstrap_resamples;
  // [output] baseline: what the report compares each cell with (absent: uniform, as before the key existed)
  if (plan.report_baseline.kind != ReportBaseline::Kind::uniform) j["report_baseline"] = plan.report_baseline.to_json();
  j["seconds"] = seconds;
  if (!id.manifest.is_null()) j["manifest"] = id.manifest;
  j["examples"] = nlohmann::json::array();
  for (const auto& o : outcomes) j["examples"].push_back(o.to_json());
  return j;
}

void write_cell_file(const Folder& out, const RunPlan& plan, const RunIdentity& id, const Cell& cell,
                     const std::vector<ExampleOutcomeRecord>& outcomes, double seconds) {
  out.write_atomically(cell_file(cell.id), cell_record(plan, id, cell, outcomes, seconds).dump() + "\n");
}

void write_profile_file(const Folder& out, const SensitivityProfile& p, bool primary) {
  const auto dot = p.signal.rfind('.');
  const std::string name = p.signal.substr(dot == std::string::npos ? 0 : dot + 1) + "-" + p.cache_key.substr(0, 12);
  const std::string text = p.to_json().dump(2) + "\n";
  out.write_atomically("profiles/" + name + ".json", text);
  if (primary) out.write_atomically("profile.json", text);
}

}  // namespace rkv
