// Helpers of the real Gemma 3 270M tests (test_gemma3.cpp, test_gemma3_numpy.cpp): the model and tokenizer loaded
// once per program, an Austen prompt, the logits of a prompt's last rows. Test-only.
#pragma once
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/forward.hpp"
#include "common/assets.hpp"
#include "core/atomic_file.hpp"
#include "model/model.hpp"
#include "tokenizer/tokenizer.hpp"

// RKV_REQUIRE_ASSET's parameter is named `path`, so its argument must be a variable of that name.
#define REQUIRE_ASSET_AT(expr)                 \
  do {                                         \
    const std::filesystem::path path = (expr); \
    RKV_REQUIRE_ASSET(path);                   \
  } while (0)

namespace rkv_test {

namespace fs = std::filesystem;

inline fs::path gemma3_gguf() { return asset_cache_dir() / "models" / "gemma-3-270m-q4_k_m.gguf"; }
inline fs::path venv_python() { return asset_cache_dir() / "venv" / "bin" / "python"; }

/// The model, loaded once for the whole test program.
inline const rkv::Model& gemma() {
  static std::unique_ptr<rkv::Model> m;
  if (!m) m = std::make_unique<rkv::Model>(rkv::load_model(gemma3_gguf().string()));
  return *m;
}

inline const rkv::Tokenizer& gemma_tokenizer() {
  static std::unique_ptr<rkv::Tokenizer> t;
  if (!t) t = std::make_unique<rkv::Tokenizer>(rkv::Tokenizer::from_gguf(*gemma().gguf));
  return *t;
}

inline std::vector<float> read_f32(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::vector<float> v;
  float x;
  while (in.read(reinterpret_cast<char*>(&x), 4)) v.push_back(x);
  return v;
}

/// BOS + the first n - 1 tokens of Pride and Prejudice (n > 512 reaches past the sliding window).
inline std::vector<int32_t> austen_ids(size_t n) {
  const std::string text = rkv::read_file((austen_dir() / "prideprejudice.txt").string());
  std::vector<int32_t> ids = gemma_tokenizer().encode(text.substr(0, 20000), true, false);
  ids.resize(n);
  return ids;
}

/// Logits [rows.size(), V] at positions `rows` of `ids` after one prefill (only those rows go through the LM head).
inline std::vector<float> logits_at(const rkv::Model& m, const std::vector<int32_t>& ids,
                                    const std::vector<int64_t>& rows) {
  const int64_t n = static_cast<int64_t>(ids.size());
  rkv::cpu::Workspace ws;
  rkv::KVCache cache = rkv::cpu::make_cache(m, n);
  std::vector<float> x = rkv::cpu::embed(m, ids);
  std::vector<int64_t> pos(static_cast<size_t>(n));
  for (int64_t t = 0; t < n; ++t) pos[static_cast<size_t>(t)] = t;
  for (int64_t l = 0; l < m.config.n_layers; ++l)
    rkv::cpu::forward_layer(m, l, x.data(), n, pos.data(), cache.layers[static_cast<size_t>(l)], ws);
  return rkv::cpu::final_logits(m, x.data(), n, rows, ws);
}

/// Logits [rows, V] of the last `rows` tokens of `ids` after one prefill.
inline std::vector<float> last_logits(const rkv::Model& m, const std::vector<int32_t>& ids, int64_t rows) {
  std::vector<int64_t> want;
  for (int64_t t = static_cast<int64_t>(ids.size()) - rows; t < static_cast<int64_t>(ids.size()); ++t) want.push_back(t);
  return logits_at(m, ids, want);
}

}  // namespace rkv_test
