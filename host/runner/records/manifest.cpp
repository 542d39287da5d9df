// The reproducibility manifest of a run's cells (runner/records/manifest.hpp).
#include "runner/records/manifest.hpp"

#include <filesystem>
#include <string>

#include "core/errors.hpp"
#include "core/sha256.hpp"
#include "model/model_info.hpp"
#include "runner/tasks/task.hpp"
#include "tokenizer/chat_template.hpp"

namespace rkv {

namespace {

std::string sha256_of(const std::string& text) { return sha256_hex(text.data(), text.size()); }

std::string vocab_sha256(const Tokenizer& tok) {
  std::string all;
  for (int32_t id = 0; id < tok.n_vocab(); ++id) {
    all += tok.token_text(id);
    all += '\0';
    all += std::to_string(tok.token_attr(id));
    all += '\n';
  }
  return sha256_of(all);
}

/// Every task of the plan with its settings (Task::manifest_settings).
nlohmann::json task_settings(const RunPlan& plan) {
  nlohmann::json tasks = nlohmann::json::object();
  for (const Task* task : tasks_of(plan)) tasks[task->name()] = task->manifest_settings(plan);
  return tasks;
}

}  // namespace

nlohmann::json reproducibility_manifest(const RunPlan& plan, const Tokenizer& tok, const Model& model) {
  nlohmann::json m;
  const ModelConfig& c = model.config;
  std::filesystem::path file(model.path);
  if (file.filename().empty()) file = file.parent_path();  // an HF folder given as "folder/"
  m["model"] = {{"name", model_name(model)},
                {"file", file.filename().string()},
                {"architecture", c.architecture},
                {"parameters", model.parameter_count()},
                {"n_layers", c.n_layers},
                {"n_heads", c.n_heads},
                {"n_kv_heads", c.n_kv_heads},
                {"head_dim", c.head_dim},
                {"context_length", c.context_length},
                {"sliding_window", c.sliding_window}};
  m["tokenizer"] = {{"description", tok.description()}, {"n_vocab", tok.n_vocab()},
                    {"vocab_sha256", vocab_sha256(tok)}, {"bos", tok.bos()}, {"eos", tok.eos()},
                    {"eot", tok.eot()}, {"add_bos", tok.add_bos_by_default()}};
  std::string name = "none";  // a model without a template (a base model) or with one no known name matches
  try {
    if (!tok.chat_template().empty()) name = ChatTemplate::for_tokenizer(tok).name();
  } catch (const InputError&) {
    name = "unrecognised";
  }
  m["chat_template"] = {{"name", name},
                        {"jinja_sha256", tok.chat_template().empty() ? "" : sha256_of(tok.chat_template())}};
  m["generation"] = {{"decoding", "greedy"}, {"stop_ids", tok.end_of_generation_ids()}, {"tasks", task_settings(plan)}};
  return m;
}

}  // namespace rkv
