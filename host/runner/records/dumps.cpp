// `run --dump` (runner/records/dumps.hpp).
#include "runner/records/dumps.hpp"

#include <algorithm>
#include <cstring>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/errors.hpp"

namespace fs = std::filesystem;

namespace rkv {

const std::set<std::string>& dump_kinds() {
  static const std::set<std::string> kinds = {"kept", "logits"};
  return kinds;
}

std::set<std::string> parse_dump_kinds(const std::string& list) {
  std::set<std::string> out;
  size_t start = 0;
  while (true) {  // every comma-separated piece, the empty ones included ("kept," names an empty kind)
    const size_t comma = list.find(',', start);
    const std::string kind = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!dump_kinds().count(kind))
      throw InputError("--dump: unknown kind '" + kind + "' (valid: kept, logits, or kept,logits)");
    if (!out.insert(kind).second) throw InputError("--dump: '" + kind + "' is named twice");
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

std::string kept_dump_lines(Backend& backend, const BackendCache& cache, const std::string& task, int64_t example,
                            int64_t T, const std::vector<std::vector<int32_t>>* prompt_positions) {
  std::string lines;
  for (int64_t l = 0; l < cache.n_layers(); ++l) {
    const LayerKV kv = backend.download_layer(cache, l);
    const std::vector<int32_t>* original =
        prompt_positions && static_cast<size_t>(l) < prompt_positions->size() &&
                !(*prompt_positions)[static_cast<size_t>(l)].empty()
            ? &(*prompt_positions)[static_cast<size_t>(l)]
            : nullptr;
    int64_t cache_row = 0;  // index into `original`, which lists every head's entries in cache order
    for (int64_t h = 0; h < kv.n_kv_heads; ++h) {
      std::vector<int32_t> positions;
      for (int64_t i = 0; i < kv.head_length(h); ++i, ++cache_row)
        positions.push_back(original ? (*original)[static_cast<size_t>(cache_row)]
                                     : kv.pos[static_cast<size_t>(kv.head_row(h) + i)]);
      std::sort(positions.begin(), positions.end());
      const nlohmann::json line = {{"task", task}, {"example", example}, {"layer", l},
                                   {"head", h},    {"T", T},             {"positions", positions}};
      lines += line.dump() + "\n";
    }
  }
  return lines;
}

void write_logits_dump(const Folder& out, const std::string& cell_id, const std::string& task, int64_t example,
                       const std::vector<float>& logits, int64_t V) {
  if (V <= 0) return;
  out.write_atomically("dumps/logits/" + cell_id + "/" + task + "-" + std::to_string(example) + ".npy",
                       npy_float32(logits, static_cast<int64_t>(logits.size()) / V, V));
}

void index_dump(const Folder& out, const std::string& cell_id, const std::string& label) {
  nlohmann::json index;
  if (out.kind("dumps/index.json") == Folder::Kind::regular) {
    try {
      index = nlohmann::json::parse(out.read("dumps/index.json", "dump index", 64 << 20), nullptr, false);
    } catch (const InputError&) {
    }
  }
  if (!index.is_object() || !index.contains("cells") || !index["cells"].is_object())
    index = {{"cells", nlohmann::json::object()}};
  if (index["cells"].contains(cell_id)) return;
  index["cells"][cell_id] = label;
  out.write_atomically("dumps/index.json", index.dump(1) + "\n");
}

void write_kept_dump(const Folder& out, const std::string& cell_id, const std::string& lines) {
  if (lines.empty()) return;
  out.write_atomically("dumps/kept/" + cell_id + ".jsonl", lines);
}

std::string npy_float32(const std::vector<float>& values, int64_t rows, int64_t cols) {
  // NEP 1 / numpy.lib.format: magic, version 1.0, little-endian u16 header length, a Python dict literal padded with
  // spaces and ended by '\n' so that the data starts at a multiple of 64 bytes.
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + std::to_string(rows) + ", " +
                       std::to_string(cols) + "), }";
  const size_t preamble = 10;  // magic (6) + version (2) + header length (2)
  header.append((64 - (preamble + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>((header.size() >> 8) & 0xff);
  out += header;
  const size_t data = out.size();
  out.resize(data + values.size() * sizeof(float));
  std::memcpy(out.data() + data, values.data(), values.size() * sizeof(float));  // x86-64 and aarch64: little-endian
  return out;
}

}  // namespace rkv
