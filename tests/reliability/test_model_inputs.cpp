// Model files at the edges the existing loader tests leave out: GGUF hyperparameters of the wrong metadata
// type or of impossible values, and config.json with a required key missing, of the wrong type, or impossible, each
// a clear rkv::InputError naming the file and the key (never a crash, a division by zero or a huge allocation).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

#include "core/errors.hpp"
#include "model/model.hpp"
#include "model/model_writers.hpp"

namespace fs = std::filesystem;

namespace {

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const rkv::InputError& e) {
    return e.what();
  }
  return "(no error)";
}

fs::path tmp(const std::string& name) {
  const fs::path p = fs::temp_directory_path() / ("rkv-reliab-model-" + std::to_string(::getpid()) + "-" + name);
  fs::remove_all(p);
  return p;
}

const rkv::Model& ref() {
  static const rkv::Model m = rkv::synthetic_model(rkv::synthetic_config("llama"), 31);
  return m;
}

/// The reference model's GGUF with metadata key `key`'s type id replaced by `type` and its (4-byte) value by `value`.
std::vector<uint8_t> patched_gguf(const std::string& key, uint32_t type, uint32_t value) {
  std::vector<uint8_t> b = rkv_test::gguf_writer_for(ref()).bytes();
  auto it = std::search(b.begin(), b.end(), key.begin(), key.end());
  EXPECT_NE(it, b.end()) << key;
  const size_t at = static_cast<size_t>(it - b.begin()) + key.size();
  uint32_t old_type;
  std::memcpy(&old_type, &b[at], 4);
  EXPECT_EQ(old_type, 4u) << key;  // written as uint32
  std::memcpy(&b[at], &type, 4);
  std::memcpy(&b[at + 4], &value, 4);
  return b;
}

TEST(ModelInputs, GgufHyperparametersOfTheWrongTypeOrImpossibleValues) {
  struct Case {
    const char* key;
    uint32_t type, value;
    const char* expected;
  };
  const Case cases[] = {
      {"llama.block_count", 6 /*float32*/, 0x40000000 /*2.0f*/, "llama.block_count"},
      {"llama.attention.head_count", 6, 0x40800000 /*4.0f*/, "llama.attention.head_count"},
      {"llama.block_count", 4, 0, "must be positive"},
      {"llama.attention.head_count_kv", 4, 0, "must be positive"},
      {"llama.attention.head_count_kv", 4, 3, "not a multiple of the KV head count 3"},
      {"llama.embedding_length", 5 /*int32*/, 0xFFFFFFF0u /*-16*/, "must be positive"},
      {"llama.feed_forward_length", 4, 0xFFFFFFFFu, "blk.0.ffn_gate.weight"},  // 4e9 columns: the tensor does not match
  };
  int n = 0;
  for (const Case& c : cases) {
    const fs::path p = tmp("meta" + std::to_string(n++) + ".gguf");
    rkv_test::GgufWriter::write_file(p.string(), patched_gguf(c.key, c.type, c.value));
    const std::string e = error_of([&] { rkv::load_model(p.string()); });
    EXPECT_NE(e.find(p.string()), std::string::npos) << c.key << ": " << e;
    EXPECT_NE(e.find(c.expected), std::string::npos) << c.key << ": " << e;
    fs::remove(p);
  }
}

TEST(ModelInputs, ConfigJsonMissingWrongOrImpossibleKeys) {
  const fs::path d = tmp("hf");
  rkv_test::write_hf_folder(ref(), d);
  const nlohmann::json good = rkv_test::hf_config(ref().config);
  auto with = [&](const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json cfg = good;
    edit(cfg);
    std::ofstream(d / "config.json", std::ios::trunc) << cfg.dump();
    return error_of([&] { rkv::load_model(d.string()); });
  };
  for (const char* key : {"num_hidden_layers", "hidden_size", "intermediate_size", "num_attention_heads", "vocab_size"}) {
    const std::string e = with([&](nlohmann::json& c) { c.erase(key); });
    EXPECT_NE(e.find("config.json: missing '" + std::string(key) + "'"), std::string::npos) << e;
  }
  std::string e = with([](nlohmann::json& c) { c["hidden_size"] = "16"; });
  EXPECT_NE(e.find("'hidden_size' must be an integer"), std::string::npos) << e;
  e = with([](nlohmann::json& c) { c["rms_norm_eps"] = "tiny"; });
  EXPECT_NE(e.find("'rms_norm_eps' must be a number"), std::string::npos) << e;
  e = with([](nlohmann::json& c) { c["tie_word_embeddings"] = 1; });
  EXPECT_NE(e.find("'tie_word_embeddings' must be true or false"), std::string::npos) << e;
  e = with([](nlohmann::json& c) { c["num_key_value_heads"] = 0; });
  EXPECT_NE(e.find("must be positive"), std::string::npos) << e;
  e = with([](nlohmann::json& c) { c["num_hidden_layers"] = -2; });
  EXPECT_NE(e.find("must be positive"), std::string::npos) << e;
  e = with([](nlohmann::json& c) { c["num_attention_heads"] = 0; });
  EXPECT_NE(e.find("'num_attention_heads' must be positive"), std::string::npos) << e;
  e = with([](nlohmann::json& c) { c = nlohmann::json::array({1, 2}); });
  EXPECT_NE(e.find("not a JSON object"), std::string::npos) << e;
  std::ofstream(d / "config.json", std::ios::trunc) << "{\"hidden_size\": 16,";
  e = error_of([&] { rkv::load_model(d.string()); });
  EXPECT_NE(e.find("invalid JSON"), std::string::npos) << e;
  fs::remove_all(d);
}

}  // namespace
