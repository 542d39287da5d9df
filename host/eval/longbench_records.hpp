// LongBench records: the JSON Lines files of THUDM/LongBench v1 (data/<dataset>.jsonl, one example per line).
//
// A line is a JSON object with the keys (types as LongBench ships them):
//   "input"        string          the question or instruction ("" for tasks without one, e.g. gov_report)
//   "context"      string          the long context
//   "answers"      array of string the references (at least one); an example scores the maximum over them
//   "all_classes"  null or array of string   the label set of classification tasks (trec), else null
//   "length"       integer >= 0    LongBench's length of the example (words or characters), used by LongBench-E
//   "dataset"      string          the dataset name, e.g. "hotpotqa" (LongBench-E files: "hotpotqa_e" also accepted)
//   "_id"          string          optional here (LongBench always has it; nothing is computed from it)
//   "language"     string          optional ("en", "zh")
// Other keys are ignored. Blank lines (only whitespace) are skipped; a UTF-8 byte order mark at the start of the file
// is ignored. Every error is an rkv::InputError that names the file, the 1-based line and the key, and says what was
// expected, e.g. "data/trec.jsonl:12: key 'answers' must be an array of strings, got number".
//
// No LongBench data ships with ripplekv: the user points the config at their own copy.
// Thread rules: the functions are pure (they only read the file); records are plain values.
#pragma once
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rkv {

struct LongBenchRecord {
  std::string input;
  std::string context;
  std::vector<std::string> answers;                     ///< never empty
  std::optional<std::vector<std::string>> all_classes;  ///< nullopt when the file has null
  int64_t length = 0;
  std::string dataset;
  std::string id;        ///< "_id", "" when absent
  std::string language;  ///< "" when absent
  std::string source;    ///< "<file>:<line>", for messages
};

/// Parses one JSONL line. `file` and `line` (1-based) only label error messages and `source`.
/// Throws rkv::InputError for text that is not JSON, not an object, a missing required key or a wrong type.
LongBenchRecord parse_longbench_record(std::string_view json_line, const std::string& file, size_t line);

/// Reads every record of a LongBench JSONL file, in file order; with `max_records` > 0 stops after that many.
/// Throws rkv::InputError when the file cannot be opened or any line is bad (parse_longbench_record), and when the
/// file holds no record.
std::vector<LongBenchRecord> read_longbench_jsonl(const std::filesystem::path& path, size_t max_records = 0);

}  // namespace rkv
