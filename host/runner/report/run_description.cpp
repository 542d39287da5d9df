// What a run was, in words (runner/report/run_description.hpp).
#include "runner/report/run_description.hpp"

#include <algorithm>
#include <filesystem>
#include <limits>
#include <set>
#include <sstream>

#include "core/format.hpp"
#include "model/model_info.hpp"

namespace fs = std::filesystem;

namespace rkv {

std::string weights_label(const std::vector<CellData>& cells) {
  std::set<std::string> seen;
  for (const auto& c : cells) {
    const nlohmann::json w = weights_of(c.meta);
    seen.insert(w.is_string() ? w.get<std::string>() : "not recorded");
  }
  std::string out;
  for (const auto& w : seen) out += (out.empty() ? "" : ", ") + w;
  return out;
}

std::string model_line(const nlohmann::json& meta) {
  const nlohmann::json* m = nullptr;
  if (meta.contains("manifest") && meta.at("manifest").is_object() && meta.at("manifest").contains("model"))
    m = &meta.at("manifest").at("model");
  std::string file;
  if (meta.contains("model_path") && meta.at("model_path").is_string()) {
    fs::path p(meta.at("model_path").get<std::string>());
    file = (p.filename().empty() ? p.parent_path() : p).filename().string();
  }
  if (!m || !m->is_object()) return file.empty() ? std::string("(not recorded)") : "`" + file + "`";
  std::ostringstream s;
  const std::string name = m->value("name", std::string());
  s << (name.empty() ? "" : name + " ") << "(`" << m->value("file", file) << "`): " << m->value("architecture", "?")
    << ", " << human_count(m->value("parameters", int64_t{0})) << " parameters, " << m->value("n_layers", int64_t{0})
    << " layers, " << m->value("n_heads", int64_t{0}) << " heads / " << m->value("n_kv_heads", int64_t{0})
    << " KV heads";
  const int64_t h = m->value("n_heads", int64_t{0}), hkv = m->value("n_kv_heads", int64_t{0});
  if (hkv > 0 && h > hkv) s << " (GQA group " << h / hkv << ")";
  s << ", head dim " << m->value("head_dim", int64_t{0}) << ", trained context " << m->value("context_length", int64_t{0});
  if (const int64_t w = m->value("sliding_window", int64_t{0}); w > 0) s << ", sliding window " << w;
  return s.str();
}

std::string examples_and_lengths(const std::vector<CellData>& cells, const std::string& task) {
  std::map<int64_t, int64_t> t_of;  // example -> T
  for (const auto& c : cells)
    for (const auto& e : c.examples)
      if (e.task == task) t_of[e.example] = e.prefix_tokens;
  if (t_of.empty()) return "no examples";
  int64_t lo = std::numeric_limits<int64_t>::max(), hi = 0;
  for (const auto& [example, t] : t_of) lo = std::min(lo, t), hi = std::max(hi, t);
  return "n = " + std::to_string(t_of.size()) + ", T = " + std::to_string(lo) +
         (hi > lo ? "-" + std::to_string(hi) : "") + " tokens";
}

std::string task_settings_text(const nlohmann::json& meta, const std::string& task) {
  if (!meta.contains("manifest") || !meta.at("manifest").is_object()) return "";
  const nlohmann::json& m = meta.at("manifest");
  if (!m.contains("generation") || !m.at("generation").contains("tasks")) return "";
  const nlohmann::json& tasks = m.at("generation").at("tasks");
  if (!tasks.is_object() || !tasks.contains(task) || !tasks.at(task).is_object()) return "";
  std::string out;
  for (const auto& [key, value] : tasks.at(task).items()) {
    std::string text = value.dump();  // strings quoted, as in TOML
    if (value.is_string() && value.get<std::string>().size() == 64 && key.find("sha256") != std::string::npos)
      text = value.get<std::string>().substr(0, 16);  // a hash: its prefix identifies it
    out += (out.empty() ? "" : ", ") + key + " = " + text;
  }
  return out;
}

std::string budgets_text(const std::vector<CellData>& cells) {
  std::set<double> fractions, bytes;
  std::set<int64_t> tokens;
  for (const auto& c : cells) {
    const nlohmann::json& m = c.meta;
    if (m.at("full_cache").get<bool>()) continue;
    if (m.contains("budget_bytes_fraction") && m.at("budget_bytes_fraction").is_number())
      bytes.insert(m.at("budget_bytes_fraction").get<double>());
    else if (!m.at("budget_fraction").is_null())
      fractions.insert(m.at("budget_fraction").get<double>());
    else if (!m.at("budget_tokens").is_null())
      tokens.insert(m.at("budget_tokens").get<int64_t>());
  }
  std::vector<std::string> parts;
  auto list = [](const auto& values) {
    std::string out;
    for (const auto& v : values) out += (out.empty() ? "" : ", ") + fmt(static_cast<double>(v));
    return out;
  };
  if (!fractions.empty()) parts.push_back(list(fractions) + " (budget.fraction: share of each layer's span kept)");
  if (!tokens.empty()) parts.push_back(list(tokens) + " (budget.tokens: entries kept per layer)");
  if (!bytes.empty()) parts.push_back(list(bytes) + " (budget.bytes_fraction: share of the float32 cache's bytes)");
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : "; ") + p;
  return out.empty() ? "none (full cache only)" : out;
}

std::string what_was_run(const std::vector<CellData>& cells,
                         const std::map<std::string, std::vector<std::string>>& metrics) {
  std::set<std::string> models;
  for (const auto& c : cells) models.insert(model_line(c.meta));
  std::ostringstream md;
  for (const auto& m : models) md << "- **Model** " << m << "\n";
  md << "- **Backend** " << backend_of(cells[0].meta) << ", weights " << weights_label(cells) << "\n";
  for (const auto& [task, names] : metrics) {
    const std::string settings = task_settings_text(cells[0].meta, task);
    md << "- **Task** " << task << ": " << examples_and_lengths(cells, task) << (settings.empty() ? "" : "; " + settings)
       << "\n";
  }
  md << "- **Budgets** " << budgets_text(cells) << "; " << cells.size() << " cells\n";
  return md.str();
}

}  // namespace rkv
