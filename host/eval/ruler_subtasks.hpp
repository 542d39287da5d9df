// RULER's synthetic subtasks (NVIDIA/RULER scripts/synthetic.yaml at c3f5e3b, without the two QA tasks, which need
// SQuAD and HotpotQA): their names, generator family, parameters, and RULER's tokens_to_generate (constants.py).
//
//   name               family   haystack  key    value  keys values queries        max new tokens
//   niah_single_1      niah     noise     words  numbers   1    1    1                  128
//   niah_single_2      niah     essay     words  numbers   1    1    1                  128
//   niah_single_3      niah     essay     words  uuids     1    1    1                  128
//   niah_multikey_1    niah     essay     words  numbers   4    1    1                  128
//   niah_multikey_2    niah     needle    words  numbers   1    1    1                  128
//   niah_multikey_3    niah     needle    uuids  uuids     1    1    1                  128
//   niah_multivalue    niah     essay     words  numbers   1    4    1                  128
//   niah_multiquery    niah     essay     words  numbers   4    1    4                  128
//   vt                 variable tracking, noise haystack, 1 chain of 4 hops                 30
//   cwe                common words extraction, freq_cw 30, freq_ucw 3, num_cw 10          120
//   fwe                frequent words extraction, alpha 2.0, coded words of 6 letters       50
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace rkv {

enum class RulerFamily { Niah, VariableTracking, CommonWords, FrequentWords };
enum class RulerHaystack { Noise, Essay, Needle };
enum class RulerItem { Words, Numbers, Uuids };

/// One subtask of RULER's synthetic.yaml with its arguments (defaults of the generator scripts where it sets none).
struct RulerSubtask {
  std::string name;
  RulerFamily family = RulerFamily::Niah;
  // niah
  RulerHaystack haystack = RulerHaystack::Essay;
  RulerItem key_type = RulerItem::Words, value_type = RulerItem::Numbers;
  int64_t num_keys = 1, num_values = 1, num_queries = 1;
  // variable tracking
  int64_t num_chains = 1, num_hops = 4;
  // common words extraction
  int64_t freq_cw = 30, freq_ucw = 3, num_cw = 10;
  // frequent words extraction
  double alpha = 2.0;
  int64_t coded_word_length = 6;
  int64_t max_new_tokens = 128;  ///< RULER's tokens_to_generate for the family
};

/// Every subtask, in the table's order.
const std::vector<RulerSubtask>& ruler_subtasks();

/// The subtask called `name`, or null.
const RulerSubtask* find_ruler_subtask(const std::string& name);

/// The names of ruler_subtasks(), in order.
std::vector<std::string> ruler_subtask_names();

}  // namespace rkv
