// Test helper: reads llama.cpp's vocabulary test vectors (tests/test-tokenizer-0.cpp read_tests): the .inp file holds
// the cases separated by "\n__ggml_vocab_test__\n" (so each case is exactly the text between separators, trailing
// newline of the file's last separator included in nothing), the .out file one line of space-separated ids per case.
#pragma once
#include <cstdint>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace rkv_test {

struct VocabCase {
  std::string text;
  std::vector<int32_t> ids;
};

inline std::string read_file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline std::vector<VocabCase> read_vocab_cases(const std::string& gguf_path) {
  const std::string raw = read_file_bytes(gguf_path + ".inp");
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> inputs;
  for (std::size_t pos = 0; pos < raw.size();) {
    const std::size_t next = raw.find(sep, pos);
    if (next == std::string::npos) {
      inputs.push_back(raw.substr(pos));
      break;
    }
    inputs.push_back(raw.substr(pos, next - pos));
    pos = next + sep.size();
  }
  std::istringstream out(read_file_bytes(gguf_path + ".out"));
  std::vector<VocabCase> cases;
  std::string line;
  for (std::size_t i = 0; std::getline(out, line); ++i) {
    if (i >= inputs.size()) throw std::runtime_error(gguf_path + ": more .out lines than .inp cases");
    VocabCase c;
    c.text = inputs[i];
    std::istringstream ids(line);
    for (int64_t id; ids >> id;) c.ids.push_back(static_cast<int32_t>(id));
    cases.push_back(std::move(c));
  }
  if (cases.size() != inputs.size()) throw std::runtime_error(gguf_path + ": .inp and .out case counts differ");
  return cases;
}

}  // namespace rkv_test
