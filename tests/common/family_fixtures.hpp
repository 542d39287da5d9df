// The committed model-family fixtures (tests/fixtures/families/<family>/, made by
// tests/reference/make_family_fixtures.sh): a small random model per family in three files (a Hugging Face folder of
// float32 safetensors, llama.cpp's converter's f32 and q8_0 GGUFs) and transformers' float64 logits of a fixed
// 80-token prompt and 8 greedy steps after it. Shared by the CPU test (tests/model/test_families.cpp) and the CUDA
// one (tests/gpu/test_families.cpp, also under the emulator).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace rkv_test {

/// One family's fixture.
struct FamilyFixture {
  std::string name;                  ///< "llama3", "mistral", "qwen3", "olmo2"
  std::filesystem::path dir;         ///< tests/fixtures/families/<name>
  std::vector<int32_t> ids;          ///< the prompt [T]
  std::vector<int32_t> greedy;       ///< transformers' 8 greedy ids of the Hugging Face model
  std::vector<int32_t> greedy_gguf;  ///< those of the model the GGUFs hold (differs where the converter drops part of
                                     ///< the config: Mistral's window, Gemma 3's layer types)
  int64_t vocab = 0;
  std::string hf_logits, gguf_logits;  ///< the logits file each format is compared with

  std::filesystem::path hf() const { return dir / "hf"; }
  std::filesystem::path gguf_f32() const { return dir / "model-f32.gguf"; }
  std::filesystem::path gguf_q8_0() const { return dir / "model-q8_0.gguf"; }

  /// float32 [T + 8, V] of `file`: the prompt's rows, then the logits after each greedy step.
  std::vector<float> logits(const std::string& file) const {
    std::ifstream in(dir / file, std::ios::binary);
    std::vector<float> v(static_cast<size_t>((ids.size() + greedy.size()) * vocab));
    in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(float)));
    if (!in) v.clear();
    return v;
  }
};

/// Every family under tests/fixtures/families, sorted by name.
inline std::vector<FamilyFixture> family_fixtures() {
  const std::filesystem::path root = std::filesystem::path(RKV_TEST_SOURCE_DIR) / "tests" / "fixtures" / "families";
  std::vector<FamilyFixture> out;
  for (const auto& e : std::filesystem::directory_iterator(root)) {
    if (!std::filesystem::exists(e.path() / "reference.json")) continue;
    nlohmann::json j;
    std::ifstream(e.path() / "reference.json") >> j;
    FamilyFixture f;
    f.name = j["family"].get<std::string>();
    f.dir = e.path();
    f.ids = j["ids"].get<std::vector<int32_t>>();
    f.greedy = j["greedy_ids"].get<std::vector<int32_t>>();
    f.greedy_gguf = j.contains("greedy_ids_gguf") ? j["greedy_ids_gguf"].get<std::vector<int32_t>>() : f.greedy;
    f.vocab = j["vocab_size"].get<int64_t>();
    f.hf_logits = j["hf_logits"].get<std::string>();
    f.gguf_logits = j["gguf_logits"].get<std::string>();
    out.push_back(std::move(f));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return out;
}

/// max_i |got_i - want_i| / max_i |want_i| over rows [r0, r1) of [rows, V] logits.
inline double max_relative_error(const std::vector<float>& got, const std::vector<float>& want, int64_t V, int64_t r0,
                                 int64_t r1) {
  double diff = 0, scale = 0;
  for (int64_t i = r0 * V; i < r1 * V; ++i) {
    diff = std::max(diff, std::fabs(static_cast<double>(got[i]) - want[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(want[i])));
  }
  return diff / scale;
}

/// Mean over rows of KL(softmax(want) || softmax(got)), in double.
inline double mean_kl(const std::vector<float>& got, const std::vector<float>& want, int64_t V) {
  const int64_t rows = static_cast<int64_t>(want.size()) / V;
  double total = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const float* p = want.data() + r * V;
    const float* q = got.data() + r * V;
    const double mp = *std::max_element(p, p + V), mq = *std::max_element(q, q + V);
    double sp = 0, sq = 0;
    for (int64_t v = 0; v < V; ++v) sp += std::exp(p[v] - mp), sq += std::exp(q[v] - mq);
    for (int64_t v = 0; v < V; ++v) {
      const double lp = p[v] - mp - std::log(sp), lq = q[v] - mq - std::log(sq);
      total += std::exp(lp) * (lp - lq);
    }
  }
  return total / static_cast<double>(rows);
}

/// The greedy ids the logits give: argmax of the prompt's last row and of each step's row but the last.
inline std::vector<int32_t> greedy_of(const std::vector<float>& logits, int64_t T, int64_t steps, int64_t V) {
  std::vector<int32_t> ids;
  for (int64_t s = 0; s < steps; ++s) {
    const float* row = logits.data() + (T - 1 + s) * V;
    ids.push_back(static_cast<int32_t>(std::max_element(row, row + V) - row));
  }
  return ids;
}

}  // namespace rkv_test
