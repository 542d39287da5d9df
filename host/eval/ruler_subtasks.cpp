#include "eval/ruler_subtasks.hpp"

namespace rkv {

namespace {
RulerSubtask niah(const std::string& name, RulerHaystack hay, RulerItem key, RulerItem value, int64_t keys,
                  int64_t values, int64_t queries) {
  RulerSubtask s;
  s.name = name;
  s.family = RulerFamily::Niah;
  s.haystack = hay;
  s.key_type = key;
  s.value_type = value;
  s.num_keys = keys;
  s.num_values = values;
  s.num_queries = queries;
  s.max_new_tokens = 128;
  return s;
}

RulerSubtask of_family(const std::string& name, RulerFamily family, int64_t max_new_tokens) {
  RulerSubtask s;
  s.name = name;
  s.family = family;
  s.haystack = RulerHaystack::Noise;
  s.max_new_tokens = max_new_tokens;
  return s;
}

std::vector<RulerSubtask> make_table() {
  using H = RulerHaystack;
  using I = RulerItem;
  return {
      niah("niah_single_1", H::Noise, I::Words, I::Numbers, 1, 1, 1),
      niah("niah_single_2", H::Essay, I::Words, I::Numbers, 1, 1, 1),
      niah("niah_single_3", H::Essay, I::Words, I::Uuids, 1, 1, 1),
      niah("niah_multikey_1", H::Essay, I::Words, I::Numbers, 4, 1, 1),
      niah("niah_multikey_2", H::Needle, I::Words, I::Numbers, 1, 1, 1),
      niah("niah_multikey_3", H::Needle, I::Uuids, I::Uuids, 1, 1, 1),
      niah("niah_multivalue", H::Essay, I::Words, I::Numbers, 1, 4, 1),
      niah("niah_multiquery", H::Essay, I::Words, I::Numbers, 4, 1, 4),
      of_family("vt", RulerFamily::VariableTracking, 30),
      of_family("cwe", RulerFamily::CommonWords, 120),
      of_family("fwe", RulerFamily::FrequentWords, 50),
  };
}
}  // namespace

const std::vector<RulerSubtask>& ruler_subtasks() {
  static const std::vector<RulerSubtask> table = make_table();
  return table;
}

const RulerSubtask* find_ruler_subtask(const std::string& name) {
  for (const auto& s : ruler_subtasks())
    if (s.name == name) return &s;
  return nullptr;
}

std::vector<std::string> ruler_subtask_names() {
  std::vector<std::string> names;
  for (const auto& s : ruler_subtasks()) names.push_back(s.name);
  return names;
}

}  // namespace rkv
