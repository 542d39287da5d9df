// Loading models from GGUF files and Hugging Face folders: canonical layout (Q/K un-permuted), equal weights from
// both sources, configuration, and clear errors for every malformed input.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <fstream>

#include "core/errors.hpp"
#include "model/model.hpp"
#include "model/safetensors.hpp"
#include "core/sha256.hpp"
#include "model_writers.hpp"

namespace {

namespace fs = std::filesystem;
using rkv_test::GgufWriter;
using rkv_test::SafetensorsWriter;

fs::path tmp(const std::string& name) {
  fs::path p = fs::path(testing::TempDir()) / ("rkv_model_" + name);
  fs::remove_all(p);
  return p;
}

void expect_same_weights(const rkv::Model& a, const rkv::Model& b) {
  EXPECT_EQ(a.tok_embd, b.tok_embd);
  EXPECT_EQ(a.output_norm, b.output_norm);
  EXPECT_EQ(a.lm_head, b.lm_head);
  ASSERT_EQ(a.layers.size(), b.layers.size());
  for (size_t l = 0; l < a.layers.size(); ++l) {
    const auto &x = a.layers[l], &y = b.layers[l];
    EXPECT_EQ(x.wq, y.wq) << "layer " << l;
    EXPECT_EQ(x.wk, y.wk) << "layer " << l;
    EXPECT_EQ(x.wv, y.wv);
    EXPECT_EQ(x.bq, y.bq);
    EXPECT_EQ(x.bk, y.bk);
    EXPECT_EQ(x.bv, y.bv);
    EXPECT_EQ(x.wo, y.wo);
    EXPECT_EQ(x.attn_norm, y.attn_norm);
    EXPECT_EQ(x.ffn_norm, y.ffn_norm);
    EXPECT_EQ(x.w_gate, y.w_gate);
    EXPECT_EQ(x.w_up, y.w_up);
    EXPECT_EQ(x.w_down, y.w_down);
  }
}

/// Expects `fn` to throw an InputError whose message contains every needle.
template <typename F>
void expect_input_error(F fn, std::initializer_list<std::string> needles) {
  try {
    fn();
    ADD_FAILURE() << "expected an InputError";
  } catch (const rkv::InputError& e) {
    for (const auto& n : needles) EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what();
  }
}

TEST(UnpermuteQk, InvertsLlamaCppPermutationByHand) {
  // 1 head, d = 4, 1 column: HF rows [a0 a1 | b0 b1] (pairs (0,2), (1,3)); llama.cpp stores [a0 b0 a1 b1].
  std::vector<float> w = {10, 20, 11, 21};  // GGUF order: a0=10, b0=20, a1=11, b1=21
  rkv::unpermute_qk_rows(w, 1, 4, 1);
  EXPECT_EQ(w, (std::vector<float>{10, 11, 20, 21}));
}

TEST(ModelLoad, GgufLlamaUnpermutesQkAndMatchesTheOriginal) {
  rkv::ModelConfig c = rkv::synthetic_config("llama");
  const rkv::Model ref = rkv::synthetic_model(c, 7);
  const fs::path p = tmp("llama.gguf");
  rkv_test::gguf_writer_for(ref).write(p.string());
  const rkv::Model m = rkv::load_model(p.string());
  EXPECT_EQ(m.format, "gguf");
  EXPECT_EQ(m.config.architecture, "llama");
  EXPECT_EQ(m.config.n_layers, 2);
  EXPECT_EQ(m.config.n_heads, 4);
  EXPECT_EQ(m.config.n_kv_heads, 2);
  EXPECT_EQ(m.config.head_dim, 8);
  EXPECT_EQ(m.config.vocab_size, 40);
  EXPECT_TRUE(m.config.tied_embeddings);
  EXPECT_FALSE(m.config.qkv_bias);
  EXPECT_TRUE(m.lm_head.empty());
  EXPECT_EQ(m.lm_head_weights(), m.tok_embd.data());
  expect_same_weights(m, ref);
  ASSERT_NE(m.gguf, nullptr);
  EXPECT_EQ(m.gguf->get_string("general.architecture"), "llama");
  EXPECT_EQ(m.sha256, rkv::sha256_file(p.string()));
  EXPECT_EQ(m.config.kv_bytes_per_token(), 2 * 2 * 2 * 8 * 4);
  // 40*16 embd + 16 norm + 2 layers * (16 + 32*16 + 16*16 * 2 + 16*32 + 16 + 3 * 24*16)
  EXPECT_EQ(m.parameter_count(), 40 * 16 + 16 + 2 * (16 + 512 + 512 + 512 + 16 + 3 * 384));
}

TEST(ModelLoad, GgufQwen2KeepsQkOrderAndLoadsBiases) {
  rkv::ModelConfig c = rkv::synthetic_config("qwen2", 4, 1, 8, 1);
  c.tied_embeddings = false;
  const rkv::Model ref = rkv::synthetic_model(c, 8);
  const fs::path p = tmp("qwen2.gguf");
  rkv_test::gguf_writer_for(ref).write(p.string());
  const rkv::Model m = rkv::load_model(p.string());
  EXPECT_EQ(m.config.architecture, "qwen2");
  EXPECT_TRUE(m.config.qkv_bias);
  EXPECT_FALSE(m.config.tied_embeddings);
  expect_same_weights(m, ref);
}

TEST(ModelLoad, HfFolderGivesTheSameWeightsAsGguf) {
  for (const std::string arch : {"llama", "qwen2"}) {
    rkv::ModelConfig c = rkv::synthetic_config(arch);
    c.tied_embeddings = arch == "llama";
    const rkv::Model ref = rkv::synthetic_model(c, 9);
    const fs::path g = tmp(arch + "_hf.gguf"), d = tmp(arch + "_hf");
    rkv_test::gguf_writer_for(ref).write(g.string());
    rkv_test::write_hf_folder(ref, d);
    const rkv::Model a = rkv::load_model(g.string()), b = rkv::load_model(d.string());
    EXPECT_EQ(b.format, "safetensors");
    EXPECT_EQ(b.config.architecture, arch);
    EXPECT_EQ(b.config.tied_embeddings, c.tied_embeddings);
    EXPECT_EQ(b.gguf, nullptr);
    EXPECT_EQ(b.sha256.size(), 64u);
    expect_same_weights(a, b);
    EXPECT_EQ(a.rope_inv_freq, b.rope_inv_freq);
  }
}

TEST(ModelLoad, HfBf16AndShardedFolders) {
  rkv::ModelConfig c = rkv::synthetic_config("llama");
  const rkv::Model ref = rkv::synthetic_model(c, 10);
  // BF16: each weight is the bf16 rounding of the original.
  const fs::path d16 = tmp("bf16");
  rkv_test::write_hf_folder(ref, d16, "BF16");
  const rkv::Model b = rkv::load_model(d16.string());
  ASSERT_EQ(b.layers[1].w_up.size(), ref.layers[1].w_up.size());
  for (size_t i = 0; i < ref.layers[1].w_up.size(); ++i) {
    ASSERT_EQ(b.layers[1].w_up[i], rkv::bf16_to_fp32(rkv::fp32_to_bf16(ref.layers[1].w_up[i])));
  }
  // Two shards listed in model.safetensors.index.json.
  const fs::path ds = tmp("sharded");
  fs::create_directories(ds);
  std::ofstream(ds / "config.json") << rkv_test::hf_config(c).dump();
  SafetensorsWriter s1, s2;
  rkv_test::add_hf_tensors(s1, ref, "F32", 0, 1, true);
  rkv_test::add_hf_tensors(s2, ref, "F32", 1, 2, false);
  s1.write((ds / "model-00001-of-00002.safetensors").string());
  s2.write((ds / "model-00002-of-00002.safetensors").string());
  nlohmann::json idx;
  for (auto it = s1.header.begin(); it != s1.header.end(); ++it) idx["weight_map"][it.key()] = "model-00001-of-00002.safetensors";
  for (auto it = s2.header.begin(); it != s2.header.end(); ++it) idx["weight_map"][it.key()] = "model-00002-of-00002.safetensors";
  std::ofstream(ds / "model.safetensors.index.json") << idx.dump();
  const rkv::Model m = rkv::load_model(ds.string());
  expect_same_weights(m, ref);
}

TEST(ModelLoad, ConfigFromHfJsonIncludingLlama3RopeScaling) {
  rkv::ModelConfig c = rkv::synthetic_config("llama");
  const rkv::Model ref = rkv::synthetic_model(c, 11);
  const fs::path d = tmp("llama3");
  rkv_test::write_hf_folder(ref, d);
  nlohmann::json cfg = rkv_test::hf_config(c);
  cfg["rope_theta"] = 500000.0;
  cfg["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0},
                         {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 8192}};
  std::ofstream(d / "config.json") << cfg.dump();
  const rkv::Model m = rkv::load_model(d.string());
  EXPECT_EQ(m.config.rope_scaling.type, "llama3");
  ASSERT_EQ(m.rope_inv_freq.size(), 4u);
  // Hand-computed (see test_rope): theta = 5e5, d = 8.
  EXPECT_NEAR(m.rope_inv_freq[0], 1.0, 1e-12);
  EXPECT_NEAR(m.rope_inv_freq[1], 0.0376060309, 1e-9);
  EXPECT_NEAR(m.rope_inv_freq[2], 5.2484616e-4, 1e-11);
  EXPECT_NEAR(m.rope_inv_freq[3], 6.6478699e-6, 1e-12);
}

TEST(ModelLoad, GgufRopeFreqFactorsAndLinearScaling) {
  rkv::ModelConfig c = rkv::synthetic_config("llama");  // d = 8, theta = 1e4: inv_freq = 1, 0.1, 0.01, 0.001
  const rkv::Model ref = rkv::synthetic_model(c, 14);
  {  // llama3-style factors stored by llama.cpp as rope_freqs.weight: inv_freq / factor
    GgufWriter w = rkv_test::gguf_writer_for(ref);
    w.add_tensor_f32("rope_freqs.weight", {4}, {1.0f, 2.0f, 4.0f, 8.0f});
    const fs::path p = tmp("ropefreqs.gguf");
    w.write(p.string());
    const rkv::Model m = rkv::load_model(p.string());
    EXPECT_TRUE(m.config.rope_freq_factors);
    EXPECT_NEAR(m.rope_inv_freq[0], 1.0, 1e-15);
    EXPECT_NEAR(m.rope_inv_freq[1], 0.05, 1e-15);
    EXPECT_NEAR(m.rope_inv_freq[2], 0.0025, 1e-16);
    EXPECT_NEAR(m.rope_inv_freq[3], 0.000125, 1e-17);
  }
  {  // linear scaling from GGUF metadata: inv_freq / 2
    GgufWriter w = rkv_test::gguf_writer_for(ref);
    w.add_string("llama.rope.scaling.type", "linear");
    w.add_f32("llama.rope.scaling.factor", 2.0f);
    const fs::path p = tmp("ropelinear.gguf");
    w.write(p.string());
    const rkv::Model m = rkv::load_model(p.string());
    EXPECT_EQ(m.config.rope_scaling.type, "linear");
    EXPECT_NEAR(m.rope_inv_freq[1], 0.05, 1e-15);
  }
  {  // a scaling llama.cpp names but this loader does not implement
    GgufWriter w = rkv_test::gguf_writer_for(ref);
    w.add_string("llama.rope.scaling.type", "yarn");
    const fs::path p = tmp("ropeyarn.gguf");
    w.write(p.string());
    expect_input_error([&] { rkv::load_model(p.string()); }, {"unsupported rope scaling type 'yarn'"});
  }
}

// Every error reaches `model info` too: describe_model runs the checks load_model runs before it reads weights.
TEST(ModelLoad, ErrorsNameTheProblem) {
  rkv::ModelConfig c = rkv::synthetic_config("llama");
  const rkv::Model ref = rkv::synthetic_model(c, 12);
  const std::vector<std::pair<std::string, std::function<void(const std::string&)>>> readers = {
      {"load_model", [](const std::string& p) { rkv::load_model(p); }},
      {"describe_model", [](const std::string& p) { rkv::describe_model(p); }}};
  for (const auto& reader : readers) {
    SCOPED_TRACE(reader.first);
    const std::function<void(const std::string&)>& read_model = reader.second;
    expect_input_error([&] { read_model("/nonexistent/x.gguf"); }, {"/nonexistent/x.gguf", "no such file"});
    {  // unknown architecture (GGUF)
      GgufWriter w;
      w.add_string("general.architecture", "mamba");
      const fs::path p = tmp("mamba.gguf");
      w.write(p.string());
      expect_input_error([&] { read_model(p.string()); }, {"unsupported architecture 'mamba'", "llama, qwen2"});
    }
    {  // unknown architecture (HF)
      const fs::path d = tmp("gpt2");
      rkv_test::write_hf_folder(ref, d);
      nlohmann::json cfg = rkv_test::hf_config(c);
      cfg["model_type"] = "gpt2";
      cfg["architectures"] = {"GPT2LMHeadModel"};
      std::ofstream(d / "config.json") << cfg.dump();
      expect_input_error([&] { read_model(d.string()); }, {"unsupported architecture 'gpt2 / GPT2LMHeadModel'"});
    }
    {  // a missing tensor: blk.1.ffn_up.weight renamed in the file
      const fs::path p = tmp("missing.gguf");
      std::vector<uint8_t> b = rkv_test::gguf_writer_for(ref).bytes();
      const std::string needle = "blk.1.ffn_up.weight";
      auto it = std::search(b.begin(), b.end(), needle.begin(), needle.end());
      ASSERT_NE(it, b.end());
      *(it + 8) = 'X';  // "blk.1.ffX_up.weight"
      GgufWriter::write_file(p.string(), b);
      expect_input_error([&] { read_model(p.string()); },
                         {"missing tensor 'blk.1.ffn_up.weight'", "expected shape [24, 16]"});
    }
    {  // a tensor of the wrong shape (GGUF): patch blk.0.attn_k.weight's row count from 16 to 8
      std::vector<uint8_t> b = rkv_test::gguf_writer_for(ref).bytes();
      const std::string needle = "blk.0.attn_k.weight";
      auto it = std::search(b.begin(), b.end(), needle.begin(), needle.end());
      ASSERT_NE(it, b.end());
      // after the name: u32 n_dims, u64 ne0 (= 16 inputs), u64 ne1 (= 16 rows): set ne1 = 8
      const size_t ne1_at = static_cast<size_t>(it - b.begin()) + needle.size() + 4 + 8;
      ASSERT_EQ(b[ne1_at], 16);
      b[ne1_at] = 8;
      const fs::path p = tmp("shape.gguf");
      GgufWriter::write_file(p.string(), b);
      expect_input_error([&] { read_model(p.string()); },
                         {"tensor 'blk.0.attn_k.weight' has shape [8, 16], expected [16, 16]"});
    }
    {  // a tensor of the wrong shape (HF)
      const fs::path d = tmp("hfshape");
      fs::create_directories(d);
      std::ofstream(d / "config.json") << rkv_test::hf_config(c).dump();
      SafetensorsWriter w;
      rkv_test::add_hf_tensors(w, ref, "F32", 0, 2, true);
      w.header["model.layers.1.mlp.down_proj.weight"]["shape"] = {24, 16};  // transposed: same bytes, wrong shape
      w.write((d / "model.safetensors").string());
      expect_input_error([&] { read_model(d.string()); },
                         {"model.layers.1.mlp.down_proj.weight", "has shape [24, 16], expected [16, 24]"});
    }
    {  // HF folder without config.json
      const fs::path d = tmp("noconfig");
      fs::create_directories(d);
      expect_input_error([&] { read_model(d.string()); }, {"no config.json"});
    }
    {  // HF: head count not divisible by KV heads
      const fs::path d = tmp("badheads");
      rkv_test::write_hf_folder(ref, d);
      nlohmann::json cfg = rkv_test::hf_config(c);
      cfg["num_key_value_heads"] = 3;
      std::ofstream(d / "config.json") << cfg.dump();
      expect_input_error([&] { read_model(d.string()); }, {"not a multiple of the KV head count 3"});
    }
    {  // HF: unsupported rope scaling
      const fs::path d = tmp("yarn");
      rkv_test::write_hf_folder(ref, d);
      nlohmann::json cfg = rkv_test::hf_config(c);
      cfg["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
      std::ofstream(d / "config.json") << cfg.dump();
      expect_input_error([&] { read_model(d.string()); }, {"unsupported rope_scaling type 'yarn'"});
    }
    {  // a tensor type that is not a weight type: output_norm.weight relabelled as i32 (same size as f32)
      std::vector<uint8_t> bytes = rkv_test::gguf_writer_for(ref).bytes();
      const std::string needle = "output_norm.weight";
      auto it = std::search(bytes.begin(), bytes.end(), needle.begin(), needle.end());
      ASSERT_NE(it, bytes.end());
      const size_t type_at = static_cast<size_t>(it - bytes.begin()) + needle.size() + 4 + 8;  // after n_dims, ne0
      ASSERT_EQ(bytes[type_at], 0);  // f32
      bytes[type_at] = 26;           // i32
      const fs::path p = tmp("i32.gguf");
      GgufWriter::write_file(p.string(), bytes);
      expect_input_error([&] { read_model(p.string()); }, {"output_norm.weight", "type i32", "cannot dequantize"});
    }
    {  // a weight of a dtype that is not a float type (HF): relabelled I32, same size as F32
      const fs::path d = tmp("hfi32");
      fs::create_directories(d);
      std::ofstream(d / "config.json") << rkv_test::hf_config(c).dump();
      rkv_test::SafetensorsWriter w;
      rkv_test::add_hf_tensors(w, ref, "F32", 0, 2, true);
      w.header["model.layers.0.mlp.up_proj.weight"]["dtype"] = "I32";
      w.write((d / "model.safetensors").string());
      expect_input_error([&] { read_model(d.string()); },
                         {"model.safetensors: tensor 'model.layers.0.mlp.up_proj.weight' has dtype I32",
                          "must be F32, F16 or BF16"});
    }
  }
}

TEST(Safetensors, MalformedFilesAreClearErrors) {
  SafetensorsWriter w;
  w.add("a", {2, 3}, {1, 2, 3, 4, 5, 6});
  w.add("b", {2}, {7, 8});
  const fs::path p = tmp("st.safetensors");
  auto write = [&](const std::vector<uint8_t>& b) { GgufWriter::write_file(p.string(), b); };
  write(w.bytes());
  {
    rkv::SafetensorsFile f(p.string());
    ASSERT_EQ(f.tensors().size(), 2u);
    const auto* a = f.find("a");
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(a->shape, (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(rkv::safetensors_to_f32(f, *a)[5], 6.0f);
    EXPECT_EQ(rkv::safetensors_to_f32(f, *f.find("b"))[1], 8.0f);
  }
  {  // header size beyond the file
    std::vector<uint8_t> b = w.bytes();
    b[5] = 1;  // huge
    write(b);
    expect_input_error([&] { rkv::SafetensorsFile f(p.string()); }, {p.string(), "header size", "beyond the end"});
  }
  {  // too short
    write({1, 2, 3});
    expect_input_error([&] { rkv::SafetensorsFile f(p.string()); }, {"too short"});
  }
  {  // malformed JSON
    write(w.bytes("{\"a\": {\"dtype\": \"F32\", "));
    expect_input_error([&] { rkv::SafetensorsFile f(p.string()); }, {"does not parse"});
  }
  {  // data range beyond the data section
    nlohmann::json h = w.header;
    h["b"]["data_offsets"] = {24, 4000};
    h["b"]["shape"] = {994};
    write(w.bytes(h.dump()));
    expect_input_error([&] { rkv::SafetensorsFile f(p.string()); }, {"tensor 'b'", "outside the data section"});
  }
  {  // shape does not match the byte range
    nlohmann::json h = w.header;
    h["a"]["shape"] = {2, 2};
    write(w.bytes(h.dump()));
    expect_input_error([&] { rkv::SafetensorsFile f(p.string()); }, {"tensor 'a'", "shape [2, 2]", "holds 24 bytes"});
  }
  {  // overlapping ranges
    nlohmann::json h = w.header;
    h["b"]["data_offsets"] = {16, 24};
    write(w.bytes(h.dump()));
    expect_input_error([&] { rkv::SafetensorsFile f(p.string()); }, {"overlapping"});
  }
  {  // unknown dtype, negative shape, missing fields
    nlohmann::json h = w.header;
    h["a"]["dtype"] = "F7";
    write(w.bytes(h.dump()));
    expect_input_error([&] { rkv::SafetensorsFile f(p.string()); }, {"unknown dtype 'F7'"});
    h = w.header;
    h["a"]["shape"] = {-2, 3};
    write(w.bytes(h.dump()));
    expect_input_error([&] { rkv::SafetensorsFile f(p.string()); }, {"not a non-negative integer"});
    h = w.header;
    h["a"].erase("data_offsets");
    write(w.bytes(h.dump()));
    expect_input_error([&] { rkv::SafetensorsFile f(p.string()); }, {"data_offsets"});
  }
  {  // a model folder whose shard header points outside the file
    rkv::ModelConfig c = rkv::synthetic_config("llama");
    const rkv::Model ref = rkv::synthetic_model(c, 13);
    const fs::path d = tmp("hfbad");
    rkv_test::write_hf_folder(ref, d);
    std::vector<uint8_t> b;
    {
      std::ifstream in(d / "model.safetensors", std::ios::binary);
      b.assign(std::istreambuf_iterator<char>(in), {});
    }
    b.resize(b.size() - 100);  // truncate the data section
    GgufWriter::write_file((d / "model.safetensors").string(), b);
    expect_input_error([&] { rkv::load_model(d.string()); }, {"model.safetensors", "outside the data section"});
  }
}

TEST(Sha256, KnownVectors) {
  // FIPS 180-4 examples.
  EXPECT_EQ(rkv::sha256_hex("", 0), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(rkv::sha256_hex("abc", 3), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  const std::string m = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  EXPECT_EQ(rkv::sha256_hex(m.data(), m.size()), "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  const std::string million(1000000, 'a');
  EXPECT_EQ(rkv::sha256_hex(million.data(), million.size()),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  rkv::Sha256 inc;  // incremental in odd pieces
  for (size_t i = 0; i < m.size(); i += 7) inc.update(m.data() + i, std::min<size_t>(7, m.size() - i));
  EXPECT_EQ(inc.hex_digest(), "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

}  // namespace
