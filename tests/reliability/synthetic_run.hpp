// Test helper: a tiny self-contained model folder for end-to-end runs without the real assets: a seeded random
// llama-style GGUF (2 layers, 4 heads / 2 KV heads, d = 8, context length 256) that carries a byte-level BPE
// tokenizer (ids 0..255 the bytes, 256 "ab", 257 "<|endoftext|>"), and two text files for calibration and evaluation.
#pragma once
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "model/model_writers.hpp"
#include "tokenizer/byte_level.hpp"

namespace rkv_test {

/// Writes model.gguf, cal.txt and eval.txt into `dir` (created).
/// `arch` "llama" (2 layers) or "gemma3" (3 layers: 0 and 1 with a sliding window of 16, layer 2 global).
/// `head_dim` 8 by default; the CUDA backend (and its emulator) needs 64 or 128. `layers` > 0 replaces the layer count.
inline void write_synthetic_run_folder(const std::filesystem::path& dir, const std::string& arch = "llama",
                                       int64_t head_dim = 8, int64_t layers = 0) {
  std::filesystem::create_directories(dir);
  rkv::ModelConfig c =
      rkv::synthetic_config(arch, 4, 2, head_dim, layers > 0 ? layers : arch == "gemma3" ? 3 : 2);
  c.vocab_size = 258;
  c.context_length = 256;
  const rkv::Model m = rkv::synthetic_model(c, 21);
  GgufWriter w = gguf_writer_for(m);
  w.add_string("tokenizer.ggml.model", "gpt2");
  w.add_string("tokenizer.ggml.pre", "gpt-2");
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.push_back(rkv::byte_level::encode(std::string(1, static_cast<char>(b))));
  tokens.push_back("ab");
  tokens.push_back("<|endoftext|>");
  w.add_string_array("tokenizer.ggml.tokens", tokens);
  std::vector<int32_t> types(tokens.size(), 1);
  types.back() = 3;
  w.add_i32_array("tokenizer.ggml.token_type", types);
  w.add_string_array("tokenizer.ggml.merges", {"a b"});
  w.add_u32("tokenizer.ggml.eos_token_id", 257);
  w.write((dir / "model.gguf").string());
  auto text = [](const std::string& seed_word) {
    std::string t;
    for (int i = 0; i < 120; ++i)
      t += "The " + seed_word + " number " + std::to_string(i * 37 % 101) + " walked to the abbey and back. ";
    return t;
  };
  std::ofstream(dir / "cal.txt") << text("calibration");
  std::ofstream(dir / "eval.txt") << text("evaluation");
}

}  // namespace rkv_test
