#include "runner/plan/task_settings.hpp"

#include <algorithm>
#include <filesystem>

#include "eval/ruler_assets.hpp"
#include "runner/plan/config_paths.hpp"
#include "runner/plan/run_plan.hpp"

namespace rkv {

namespace {

namespace fs = std::filesystem;

/// `<table>.context_tokens`: a non-empty list of prompt lengths, each in [64, 2^24] (ruler, multi_question).
std::vector<int64_t> context_lengths(const TomlContext& c, const toml::table& t, const std::string& table,
                                     const std::vector<int64_t>& fallback) {
  const std::string key = table + ".context_tokens";
  std::vector<int64_t> lengths = get_number_list<int64_t>(c, t, "context_tokens", key, fallback);
  if (lengths.empty()) throw InputError(where(c, *t.get("context_tokens"), key) + " lists no length");
  for (int64_t n : lengths)
    if (n < 64 || n > kMaxTokens)
      throw InputError(where(c, *t.get("context_tokens"), key) + " must be in [64, " + std::to_string(kMaxTokens) +
                       "] (got " + std::to_string(n) + ")");
  return lengths;
}

/// [tasks.lm_fidelity]: continuation_tokens in [2, 2^24] (the perplexity predicts continuation tokens 2 .. n from the
/// rows before them, so one token gives it nothing to predict).
void read_lm_fidelity(const TomlContext& c, const toml::table& t, RunPlan& plan) {
  check_keys(c, t, "tasks.lm_fidelity", {"continuation_tokens"});
  plan.continuation_tokens =
      get_int(c, t, "continuation_tokens", "tasks.lm_fidelity.continuation_tokens", 64, 2, kMaxTokens);
}

/// [tasks.needle]: context lengths in [64, 2^24], depths in [0, 1], trials, seed, and at most kMaxCount prompts.
void read_needle(const TomlContext& c, const toml::table& t, RunPlan& plan) {
  NeedleConfig& n = plan.needle;
  check_keys(c, t, "tasks.needle", {"context_tokens", "depths", "trials", "seed"});
  n.context_tokens = get_number_list<int64_t>(c, t, "context_tokens", "tasks.needle.context_tokens", n.context_tokens);
  n.depths = get_number_list<double>(c, t, "depths", "tasks.needle.depths", n.depths);
  for (int64_t len : n.context_tokens)
    if (len < 64 || len > kMaxTokens)
      throw InputError(where(c, *t.get("context_tokens"), "tasks.needle.context_tokens") + " must be in [64, " +
                       std::to_string(kMaxTokens) + "] (got " + std::to_string(len) + ")");
  for (double x : n.depths)
    if (!(x >= 0.0 && x <= 1.0)) throw InputError(where(c, *t.get("depths"), "tasks.needle.depths") + " must be in [0, 1]");
  n.trials = get_int(c, t, "trials", "tasks.needle.trials", 2, 1, kMaxCount);
  const double prompts = static_cast<double>(n.context_tokens.size()) * static_cast<double>(n.depths.size()) *
                         static_cast<double>(n.trials);
  if (prompts > static_cast<double>(kMaxCount))
    throw InputError(where_table(c, t, "tasks.needle") + ": context_tokens x depths x trials = " +
                     std::to_string(static_cast<int64_t>(prompts)) + " prompts, more than " +
                     std::to_string(kMaxCount) + "; lower tasks.needle.trials");
  n.seed = static_cast<uint64_t>(get_int(c, t, "seed", "tasks.needle.seed", 7, 0, INT64_MAX));
}

/// The value of the string setting `key` of `t` among `names` (index into it), `def` when absent; rkv::InputError
/// naming the key, the allowed values and the closest one.
size_t choose(const TomlContext& c, const toml::table& t, const std::string& key, const std::string& full,
              const std::vector<std::string>& names, size_t def) {
  if (!t.get(key)) return def;
  const std::string v = get_string(c, t, key, full, "");
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == v) return i;
  std::string all;
  for (const auto& n : names) all += (all.empty() ? "\"" : ", \"") + n + "\"";
  throw InputError(where(c, *t.get(key), full) + " must be one of " + all + " (got \"" + v + "\"; did you mean \"" +
                   closest_match(v, names) + "\"?)");
}

/// [tasks.ruler]: subtask names (known, each once), context lengths in [64, 2^24], examples, seed, max_new_tokens,
/// length_includes_answer, haystack, word_pool, and at most kMaxCount prompts in all.
void read_ruler(const TomlContext& c, const toml::table& t, RunPlan& plan) {
  RulerConfig& r = plan.ruler;
  check_keys(c, t, "tasks.ruler", {"subtasks", "context_tokens", "examples", "seed", "max_new_tokens",
                                   "length_includes_answer", "haystack", "word_pool"});
  const std::vector<std::string> known = ruler_subtask_names();
  r.subtasks = t.get("subtasks") ? get_string_list(c, t, "subtasks", "tasks.ruler.subtasks") : known;
  if (r.subtasks.empty()) throw InputError(where(c, *t.get("subtasks"), "tasks.ruler.subtasks") + " lists no subtask");
  for (size_t i = 0; i < r.subtasks.size(); ++i) {
    const std::string& name = r.subtasks[i];
    if (!find_ruler_subtask(name)) {
      std::string all;
      for (const auto& k : known) all += (all.empty() ? "" : ", ") + k;
      throw InputError(where(c, *t.get("subtasks"), "tasks.ruler.subtasks") + ": unknown subtask '" + name +
                       "'; known: " + all + "; did you mean '" + closest_match(name, known) + "'?");
    }
    if (std::find(r.subtasks.begin(), r.subtasks.begin() + static_cast<int64_t>(i), name) !=
        r.subtasks.begin() + static_cast<int64_t>(i))
      throw InputError(where(c, *t.get("subtasks"), "tasks.ruler.subtasks") + " lists '" + name + "' twice");
  }
  r.context_tokens = context_lengths(c, t, "tasks.ruler", r.context_tokens);
  r.examples = get_int(c, t, "examples", "tasks.ruler.examples", r.examples, 1, kMaxCount);
  const double prompts = static_cast<double>(r.subtasks.size()) * static_cast<double>(r.context_tokens.size()) *
                         static_cast<double>(r.examples);
  if (prompts > static_cast<double>(kMaxCount))
    throw InputError(where_table(c, t, "tasks.ruler") + ": subtasks x context_tokens x examples = " +
                     std::to_string(static_cast<int64_t>(prompts)) + " prompts, more than " + std::to_string(kMaxCount) +
                     "; lower tasks.ruler.examples");
  r.seed = static_cast<uint64_t>(get_int(c, t, "seed", "tasks.ruler.seed", 42, 0, INT64_MAX));
  r.max_new_tokens = get_int(c, t, "max_new_tokens", "tasks.ruler.max_new_tokens", 0, 0, kMaxCount);
  r.length_includes_answer =
      get_bool(c, t, "length_includes_answer", "tasks.ruler.length_includes_answer", r.length_includes_answer);
  r.haystack = static_cast<RulerHaystackSource>(
      choose(c, t, "haystack", "tasks.ruler.haystack", {"paul_graham", "eval_text"}, static_cast<size_t>(r.haystack)));
  r.word_pool = static_cast<RulerWordSource>(
      choose(c, t, "word_pool", "tasks.ruler.word_pool", {"wonderwords", "eval_text"}, static_cast<size_t>(r.word_pool)));
}

/// RULER's own sources must be in the asset cache when the plan runs ruler with them: the essay folder holds a .txt
/// file, the word lists exist (eval/ruler_assets.hpp reads them when the examples are built).
void check_ruler_runnable(const TomlContext& c, const RunPlan& plan) {
  const RulerConfig& r = plan.ruler;
  const std::string fetch = "; run scripts/fetch-assets (it puts RULER's essays and word lists in " +
                            fs::path(r.essays_dir).parent_path().string() + ")";
  if (r.haystack == RulerHaystackSource::PaulGraham) {
    bool any = false;
    std::error_code ec;
    if (fs::is_directory(r.essays_dir, ec))
      for (const auto& e : fs::directory_iterator(r.essays_dir, ec))
        if (e.path().extension() == ".txt") any = true;
    if (!any)
      throw InputError(c.origin + ": tasks.ruler.haystack = \"paul_graham\" reads RULER's essays from " + r.essays_dir +
                       "/*.txt, which holds none" + fetch + ", or set tasks.ruler.haystack = \"eval_text\" " +
                       "(\"paul_graham\" is the default)");
  }
  if (r.word_pool == RulerWordSource::Wonderwords)
    for (const char* list : {"nounlist.txt", "adjectivelist.txt", "verblist.txt"}) {
      const std::string path = (fs::path(r.words_dir) / list).string();
      if (const std::string problem = input_file_problem(path); !problem.empty())
        throw InputError(c.origin + ": tasks.ruler.word_pool = \"wonderwords\" reads " + path + ", which " + problem +
                         fetch + ", or set tasks.ruler.word_pool = \"eval_text\" (\"wonderwords\" is the default)");
    }
}

/// [tasks.multi_question]: context lengths in [64, 2^24], questions, examples, seed, max_new_tokens, and at most
/// kMaxCount prompts (each context once plus once per question).
void read_multi_question(const TomlContext& c, const toml::table& t, RunPlan& plan) {
  MultiQuestionConfig& m = plan.multi_question;
  check_keys(c, t, "tasks.multi_question", {"context_tokens", "questions", "examples", "seed", "max_new_tokens"});
  m.context_tokens = context_lengths(c, t, "tasks.multi_question", m.context_tokens);
  m.questions = get_int(c, t, "questions", "tasks.multi_question.questions", m.questions, 1, kMaxCount);
  m.examples = get_int(c, t, "examples", "tasks.multi_question.examples", m.examples, 1, kMaxCount);
  const double prompts = static_cast<double>(m.context_tokens.size()) * static_cast<double>(m.examples) *
                         (static_cast<double>(m.questions) + 1.0);
  if (prompts > static_cast<double>(kMaxCount))
    throw InputError(where_table(c, t, "tasks.multi_question") + ": context_tokens x examples x (questions + 1) = " +
                     std::to_string(static_cast<int64_t>(prompts)) + " prompts, more than " + std::to_string(kMaxCount) +
                     "; lower tasks.multi_question.examples or questions");
  m.seed = static_cast<uint64_t>(get_int(c, t, "seed", "tasks.multi_question.seed", 42, 0, INT64_MAX));
  m.max_new_tokens =
      get_int(c, t, "max_new_tokens", "tasks.multi_question.max_new_tokens", m.max_new_tokens, 1, kMaxCount);
}

/// [tasks.longbench]: files (regular files), max_context_tokens, and per dataset a prompt template and max_new_tokens.
void read_longbench(const TomlContext& c, const toml::table& t, RunPlan& plan) {
  LongBenchConfig& lb = plan.longbench;
  check_keys(c, t, "tasks.longbench", {"files", "max_context_tokens", "datasets"});
  for (const auto& f : get_string_list(c, t, "files", "tasks.longbench.files")) {
    const std::string p = resolve_config_path(c, *t.get("files"), "tasks.longbench.files", f);
    if (const std::string problem = input_file_problem(p); !problem.empty())
      throw InputError(where(c, *t.get("files"), "tasks.longbench.files") + ": file '" + p + "' " + problem);
    lb.files.push_back(p);
  }
  lb.max_context_tokens = get_int(c, t, "max_context_tokens", "tasks.longbench.max_context_tokens", 0, 0, kMaxTokens);
  if (const toml::table* ds = sub_table(c, t, "datasets", "tasks.longbench.datasets")) {
    for (const auto& [k, v] : *ds) {
      const std::string name(k.str()), full = "tasks.longbench.datasets." + name;
      if (!v.is_table()) throw InputError(where(c, v, full) + " must be a table");
      check_keys(c, *v.as_table(), full, {"prompt", "max_new_tokens"});
      LongBenchDatasetConfig d;
      d.prompt = get_string(c, *v.as_table(), "prompt", full + ".prompt", "");
      d.max_new_tokens = get_int(c, *v.as_table(), "max_new_tokens", full + ".max_new_tokens", 0, 0, kMaxCount);
      lb.datasets[name] = d;
    }
  }
}

/// LongBench ships no data: the task needs the user's files.
void check_longbench_runnable(const TomlContext& c, const RunPlan& plan) {
  if (plan.longbench.files.empty())
    throw InputError(c.origin + ": task longbench needs [tasks.longbench] files = [\"...jsonl\"]");
}

}  // namespace

const std::vector<TaskSection>& task_sections() {
  static const std::vector<TaskSection> sections = {
      {"lm_fidelity", read_lm_fidelity, nullptr},
      {"needle", read_needle, nullptr},
      {"ruler", read_ruler, check_ruler_runnable},
      {"multi_question", read_multi_question, nullptr},
      {"longbench", read_longbench, check_longbench_runnable},
  };
  return sections;
}

std::string ruler_haystack_name(RulerHaystackSource source) {
  return source == RulerHaystackSource::PaulGraham ? "paul_graham" : "eval_text";
}

std::string ruler_word_pool_name(RulerWordSource source) {
  return source == RulerWordSource::Wonderwords ? "wonderwords" : "eval_text";
}

std::vector<std::string> task_names() {
  std::vector<std::string> names;
  for (const TaskSection& s : task_sections()) names.push_back(s.name);
  return names;
}

void read_tasks_section(const TomlContext& c, const toml::table& t, RunPlan& plan) {
  const std::vector<std::string> known = task_names();
  std::vector<std::string> keys = {"run"};
  keys.insert(keys.end(), known.begin(), known.end());
  check_keys(c, t, "tasks", keys);
  if (t.get("run")) plan.tasks = get_string_list(c, t, "run", "tasks.run");
  for (const auto& name : plan.tasks)
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      std::string list;
      for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
      throw InputError(where(c, *t.get("run"), "tasks.run") + ": unknown task '" + name + "'; known: " + list +
                       "; did you mean '" + closest_match(name, known) + "'?");
    }
  if (plan.tasks.empty()) throw InputError(where(c, *t.get("run"), "tasks.run") + " lists no task");
  for (auto it = plan.tasks.begin(); it != plan.tasks.end(); ++it)
    if (std::find(plan.tasks.begin(), it, *it) != it)
      throw InputError(where(c, *t.get("run"), "tasks.run") + " lists '" + *it + "' twice");
  plan.ruler.essays_dir = ruler_essays_dir(asset_cache_dir());
  plan.ruler.words_dir = ruler_wonderwords_dir(asset_cache_dir());
  for (const TaskSection& s : task_sections())
    if (const toml::table* section = sub_table(c, t, s.name, "tasks." + s.name)) s.read(c, *section, plan);
  for (const TaskSection& s : task_sections())
    if (s.check_runnable && std::find(plan.tasks.begin(), plan.tasks.end(), s.name) != plan.tasks.end())
      s.check_runnable(c, plan);
}

}  // namespace rkv
