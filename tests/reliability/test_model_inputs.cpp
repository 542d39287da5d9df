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
      {"llama.block_count", 4, 0, "llama.block_count must be in [1, 4096], got 0"},
      {"llama.block_count", 4, 2000000000u, "llama.block_count must be in [1, 4096], got 2000000000"},
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
  EXPECT_NE(e.find("'num_hidden_layers' must be in [1, 4096], got -2"), std::string::npos) << e;
  e = with([](nlohmann::json& c) { c["num_hidden_layers"] = 2000000000; });  // before a window pattern is sized by it
  EXPECT_NE(e.find("'num_hidden_layers' must be in [1, 4096]"), std::string::npos) << e;
  e = with([](nlohmann::json& c) { c["model_type"] = 3; });
  EXPECT_NE(e.find("'model_type' must be a string, got 3"), std::string::npos) << e;
  e = with([](nlohmann::json& c) { c["rope_scaling"] = "linear"; });
  EXPECT_NE(e.find("'rope_scaling' must be an object or null"), std::string::npos) << e;
  e = with([](nlohmann::json& c) { c["rope_scaling"] = {{"rope_type", 7}}; });
  EXPECT_NE(e.find("'rope_scaling.rope_type' must be a string, got 7"), std::string::npos) << e;
  e = with([](nlohmann::json& c) { c["rope_parameters"] = {{"rope_theta", 1e6}}; });
  EXPECT_NE(e.find("'rope_parameters' (the transformers 5 layout) is not supported"), std::string::npos) << e;
  e = with([](nlohmann::json& c) { c["partial_rotary_factor"] = 0.5; });
  EXPECT_NE(e.find("'partial_rotary_factor' 0.5 is not supported"), std::string::npos) << e;
  e = with([](nlohmann::json& c) { c["max_position_embeddings"] = -5; });
  EXPECT_NE(e.find("'max_position_embeddings' must not be negative"), std::string::npos) << e;
  e = with([](nlohmann::json& c) { c["num_attention_heads"] = 0; });
  EXPECT_NE(e.find("'num_attention_heads' must be positive"), std::string::npos) << e;
  e = with([](nlohmann::json& c) { c = nlohmann::json::array({1, 2}); });
  EXPECT_NE(e.find("not a JSON object"), std::string::npos) << e;
  std::ofstream(d / "config.json", std::ios::trunc) << "{\"hidden_size\": 16,";
  e = error_of([&] { rkv::load_model(d.string()); });
  EXPECT_NE(e.find("invalid JSON"), std::string::npos) << e;
  fs::remove_all(d);
}

/// A tensor the architecture does not read (here a Q bias in a llama model) means the file is another model than its
/// config or metadata says: refused by name in both formats, as llama.cpp refuses it.
TEST(ModelInputs, ATensorTheArchitectureDoesNotReadIsRefused) {
  const rkv::Model& m = ref();
  const int64_t Hd = m.config.n_heads * m.config.head_dim;
  const fs::path d = tmp("extra-hf");
  rkv_test::write_hf_folder(m, d);
  rkv_test::SafetensorsWriter w;
  rkv_test::add_hf_tensors(w, m, "F32", 0, m.config.n_layers, true);
  w.add("model.layers.0.self_attn.q_proj.bias", {Hd}, std::vector<float>(static_cast<size_t>(Hd), 0.5f));
  w.write((d / "model.safetensors").string());
  std::string e = error_of([&] { rkv::describe_model(d.string()); });
  EXPECT_NE(e.find("tensor 'model.layers.0.self_attn.q_proj.bias' (in model.safetensors) is not part of a llama model"),
            std::string::npos) << e;
  w.header.erase("model.layers.0.self_attn.q_proj.bias");  // and old checkpoints' RoPE buffers are fine
  w.add("model.layers.0.self_attn.rotary_emb.inv_freq", {2}, {1.0f, 0.5f});
  w.write((d / "model.safetensors").string());
  EXPECT_EQ(error_of([&] { rkv::describe_model(d.string()); }), "(no error)");
  fs::remove_all(d);

  rkv_test::GgufWriter g = rkv_test::gguf_writer_for(m);
  g.add_tensor_f32("blk.0.attn_q.bias", {static_cast<uint64_t>(Hd)}, std::vector<float>(static_cast<size_t>(Hd), 0.5f));
  const fs::path p = tmp("extra.gguf");
  rkv_test::GgufWriter::write_file(p.string(), g.bytes());
  e = error_of([&] { rkv::describe_model(p.string()); });
  EXPECT_NE(e.find("tensor 'blk.0.attn_q.bias' is not part of a llama model"), std::string::npos) << e;
  // llama3's rope_freqs.weight is read for llama only: in a gemma3 file it is another model's tensor
  const rkv::Model g3 = rkv::synthetic_model(rkv::synthetic_config("gemma3", 2, 1, 8, 3), 5);
  rkv_test::GgufWriter gw = rkv_test::gguf_writer_for(g3);
  gw.add_tensor_f32("rope_freqs.weight", {4}, {1.0f, 1.0f, 2.0f, 4.0f});
  rkv_test::GgufWriter::write_file(p.string(), gw.bytes());
  e = error_of([&] { rkv::describe_model(p.string()); });
  EXPECT_NE(e.find("tensor 'rope_freqs.weight' is not part of a gemma3 model"), std::string::npos) << e;
  fs::remove(p);
}

/// Gemma 2 and the other families' config.json keys as transformers reads them: absent keys take the class defaults
/// (tie_word_embeddings: true for Gemma2Config, false for Qwen3Config; soft-caps 50 and 30; query_pre_attn_scalar
/// 256), and values that overflow float32 are refused naming the key.
TEST(ModelInputs, FamilyConfigKeysTakeTransformersDefaultsAndAreRangeChecked) {
  const fs::path fixtures = fs::path(RKV_TEST_SOURCE_DIR) / "tests" / "fixtures" / "families";
  auto edited = [&](const std::string& family, const std::function<void(nlohmann::json&)>& edit) {
    const fs::path d = tmp("fam-" + family);
    fs::copy(fixtures / family / "hf", d, fs::copy_options::recursive);
    nlohmann::json cfg;
    std::ifstream(d / "config.json") >> cfg;
    edit(cfg);
    std::ofstream(d / "config.json", std::ios::trunc) << cfg.dump();
    return d;
  };
  const fs::path q = edited("qwen3", [](nlohmann::json& c) { c.erase("tie_word_embeddings"); });
  EXPECT_FALSE(rkv::describe_model(q.string()).config.tied_embeddings) << "Qwen3Config's default";
  const fs::path g = edited("gemma2", [](nlohmann::json& c) {
    for (const char* k : {"attn_logit_softcapping", "final_logit_softcapping", "query_pre_attn_scalar"}) c.erase(k);
  });
  const rkv::ModelConfig gc = rkv::describe_model(g.string()).config;
  EXPECT_TRUE(gc.tied_embeddings) << "Gemma2Config's default (its save_pretrained leaves the key out)";
  EXPECT_EQ(gc.attn_logit_softcap, 50.0f);
  EXPECT_EQ(gc.final_logit_softcap, 30.0f);
  EXPECT_EQ(gc.attn_scale, 1.0f / 16.0f);
  const fs::path n = edited("gemma2", [](nlohmann::json& c) { c["attn_logit_softcapping"] = nullptr; });
  EXPECT_EQ(rkv::describe_model(n.string()).config.attn_logit_softcap, 0.0f) << "null: no cap";
  struct Bad {
    const char* key;
    nlohmann::json value;
    const char* expected;
  };
  const Bad bad[] = {
      {"attn_logit_softcapping", 1e300, "'attn_logit_softcapping' must be null, 0 or a positive number"},
      {"final_logit_softcapping", -1, "'final_logit_softcapping' must be null, 0 or a positive number"},
      {"query_pre_attn_scalar", 1e-300, "'query_pre_attn_scalar' must be positive"},
      {"layer_types", "sliding_attention", "'layer_types' must be an array"},
  };
  const fs::path g3 = edited("gemma3", [](nlohmann::json& c) { c.erase("rope_theta"); });
  EXPECT_EQ(rkv::describe_model(g3.string()).config.rope_theta, 1e6) << "Gemma3TextConfig's default";
  fs::remove_all(g3);
  const fs::path p3 = edited("phi3", [](nlohmann::json& c) { c.erase("rms_norm_eps"); });
  EXPECT_EQ(rkv::describe_model(p3.string()).config.rms_eps, 1e-5f) << "Phi3Config's default";
  fs::remove_all(p3);
  struct Other {
    const char* family;
    std::function<void(nlohmann::json&)> edit;
    const char* expected;
  };
  const Other others[] = {
      {"gemma3", [](nlohmann::json& c) { c.erase("layer_types"), c["sliding_window_pattern"] = 0; },
       "'sliding_window_pattern' must be a positive integer, got 0"},
      {"gemma3", [](nlohmann::json& c) { c.erase("layer_types"), c["sliding_window_pattern"] = -1; },
       "'sliding_window_pattern' must be a positive integer, got -1"},
      {"phi3", [](nlohmann::json& c) { c["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}}; },
       "rope_scaling type 'linear' is not supported for phi3"},
      {"phi3", [](nlohmann::json& c) { c["rope_scaling"] = {{"type", "longrope"}}; },
       "unsupported rope_scaling type 'longrope'"},
  };
  for (const Other& o : others) {
    const fs::path d = edited(o.family, o.edit);
    const std::string e = error_of([&] { rkv::describe_model(d.string()); });
    EXPECT_NE(e.find((d / "config.json").string()), std::string::npos) << o.expected << ": " << e;
    EXPECT_NE(e.find(o.expected), std::string::npos) << e;
    fs::remove_all(d);
  }
  for (const Bad& b : bad) {
    const fs::path d = edited("gemma2", [&](nlohmann::json& c) { c[b.key] = b.value; });
    const std::string e = error_of([&] { rkv::describe_model(d.string()); });
    EXPECT_NE(e.find((d / "config.json").string()), std::string::npos) << b.key << ": " << e;
    EXPECT_NE(e.find(b.expected), std::string::npos) << b.key << ": " << e;
    fs::remove_all(d);
  }
  for (const fs::path& d : {q, g, n}) fs::remove_all(d);
}

}  // namespace
