// LongBench JSONL reader (see longbench_records.hpp).
#include "eval/longbench_records.hpp"

#include <fstream>

#include <nlohmann/json.hpp>

#include "core/cancel.hpp"
#include "core/errors.hpp"
#include "core/regular_file.hpp"

namespace rkv {
namespace {

using json = nlohmann::json;

std::string type_name(const json& v) {
  if (v.is_number_integer()) return "integer";
  if (v.is_number_float()) return "number";
  return v.type_name();  // "null", "boolean", "string", "array", "object"
}

[[noreturn]] void fail(const std::string& where, const std::string& what) { throw InputError(where + ": " + what); }

const json& required(const json& obj, const char* key, const std::string& where) {
  const auto it = obj.find(key);
  if (it == obj.end()) fail(where, std::string("missing key '") + key + "'");
  return *it;
}

std::string string_value(const json& v, const char* key, const std::string& where) {
  if (!v.is_string()) fail(where, std::string("key '") + key + "' must be a string, got " + type_name(v));
  return v.get<std::string>();
}

std::vector<std::string> string_array(const json& v, const char* key, const std::string& where) {
  if (!v.is_array()) fail(where, std::string("key '") + key + "' must be an array of strings, got " + type_name(v));
  std::vector<std::string> out;
  for (size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_string()) {
      fail(where, std::string("key '") + key + "' must be an array of strings, element " + std::to_string(i) +
                      " is " + type_name(v[i]));
    }
    out.push_back(v[i].get<std::string>());
  }
  return out;
}

}  // namespace

LongBenchRecord parse_longbench_record(std::string_view json_line, const std::string& file, size_t line) {
  const std::string where = file + ":" + std::to_string(line);
  json obj;
  try {
    obj = json::parse(json_line.begin(), json_line.end());
  } catch (const json::parse_error& e) {
    fail(where, "not valid JSON at byte " + std::to_string(e.byte) + " of the line (" + e.what() + ")");
  }
  if (!obj.is_object()) fail(where, "a LongBench record must be a JSON object, got " + type_name(obj));

  LongBenchRecord r;
  r.source = where;
  r.input = string_value(required(obj, "input", where), "input", where);
  r.context = string_value(required(obj, "context", where), "context", where);
  r.answers = string_array(required(obj, "answers", where), "answers", where);
  if (r.answers.empty()) fail(where, "key 'answers' is empty; a LongBench record needs at least one answer");
  const json& classes = required(obj, "all_classes", where);
  if (!classes.is_null()) r.all_classes = string_array(classes, "all_classes", where);
  const json& length = required(obj, "length", where);
  if (!length.is_number_integer()) {
    fail(where, "key 'length' must be an integer, got " + type_name(length));
  }
  if (length.is_number_unsigned()) {
    const auto u = length.get<uint64_t>();
    if (u > static_cast<uint64_t>(INT64_MAX)) fail(where, "key 'length' is too large");
    r.length = static_cast<int64_t>(u);
  } else {
    r.length = length.get<int64_t>();
  }
  if (r.length < 0) fail(where, "key 'length' must be >= 0, got " + std::to_string(r.length));
  r.dataset = string_value(required(obj, "dataset", where), "dataset", where);
  if (const auto it = obj.find("_id"); it != obj.end()) r.id = string_value(*it, "_id", where);
  if (const auto it = obj.find("language"); it != obj.end()) r.language = string_value(*it, "language", where);
  return r;
}

std::vector<LongBenchRecord> read_longbench_jsonl(const std::filesystem::path& path, size_t max_records) {
  {  // a FIFO would block the open, a device never end: refused without opening them
    std::string why;
    const PathKind kind = path_kind(path.string(), &why);
    if (kind == PathKind::directory || kind == PathKind::other)
      throw InputError("cannot open LongBench file " + path.string() + ": it is " + describe_special_file(path.string()) +
                       ", not a JSONL file of records");
    if (kind == PathKind::error) throw InputError("cannot open LongBench file " + path.string() + ": " + why);
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError("cannot open LongBench file " + path.string() + " (it must be a JSONL file of records)");
  std::vector<LongBenchRecord> records;
  std::string text;
  size_t line = 0;
  while (std::getline(in, text)) {
    ++line;
    if ((line & 1023) == 0) throw_if_cancelled();
    if (line == 1 && text.rfind("\xEF\xBB\xBF", 0) == 0) text.erase(0, 3);  // UTF-8 byte order mark
    if (text.find_first_not_of(" \t\r\n") == std::string::npos) continue;
    records.push_back(parse_longbench_record(text, path.string(), line));
    if (max_records > 0 && records.size() >= max_records) break;
  }
  if (in.bad()) throw InputError("error reading LongBench file " + path.string());
  if (records.empty()) throw InputError("LongBench file " + path.string() + " holds no record");
  return records;
}

}  // namespace rkv
