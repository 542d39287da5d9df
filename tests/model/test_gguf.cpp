// GGUF reader: metadata of every type, tensor infos and data, alignment; every malformed input is an InputError.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "core/errors.hpp"
#include "gguf_writer.hpp"
#include "model/gguf.hpp"

namespace {

using rkv::GgufFile;
using rkv_test::GgufWriter;

std::string temp_path(const std::string& name) {
  return (std::filesystem::path(testing::TempDir()) / ("rkv_gguf_" + name + ".gguf")).string();
}

/// Expects opening `bytes` to throw an InputError whose message contains `needle` (and the path).
void expect_error(const std::vector<uint8_t>& bytes, const std::string& needle, const std::string& name) {
  const std::string p = temp_path(name);
  GgufWriter::write_file(p, bytes);
  try {
    GgufFile f(p);
    FAIL() << "expected an InputError containing '" << needle << "'";
  } catch (const rkv::InputError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(needle), std::string::npos) << msg;
    EXPECT_NE(msg.find(p), std::string::npos) << msg;
  }
}

GgufWriter sample_writer() {
  GgufWriter w;
  w.add_string("general.architecture", "llama");
  w.add_u32("llama.block_count", 30);
  w.add_i32("neg", -7);
  w.add_u8("u8", 200);
  w.add_i16("i16", -300);
  w.add_u64("u64", 1ull << 40);
  w.add_f32("llama.rope.freq_base", 100000.0f);
  w.add_f64("f64", 0.25);
  w.add_bool("flag", true);
  w.add_string_array("tokenizer.ggml.tokens", {"<s>", "a", "", "hello world"});
  w.add_f32_array("tokenizer.ggml.scores", {0.0f, -1.5f, 2.25f, 3.0f});
  w.add_i32_array("tokenizer.ggml.token_type", {3, 1, 1, -1});
  // A 2x3 f32 matrix (ne = {3, 2}) and a 5-element vector.
  w.add_tensor_f32("m", {3, 2}, {1, 2, 3, 4, 5, 6});
  w.add_tensor_f32("v", {5}, {10, 20, 30, 40, 50});
  return w;
}

TEST(Gguf, ReadsMetadataOfEveryType) {
  const std::string p = temp_path("meta");
  sample_writer().write(p);
  GgufFile f(p);
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 32u);
  ASSERT_EQ(f.keys().size(), 12u);
  EXPECT_EQ(f.keys()[0], "general.architecture");
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_u32("llama.block_count"), 30u);
  EXPECT_EQ(f.get_i64("neg"), -7);
  EXPECT_EQ(f.get_u32("u8"), 200u);
  EXPECT_EQ(f.get_i64("i16"), -300);
  EXPECT_EQ(f.get_i64("u64"), int64_t{1} << 40);
  EXPECT_FLOAT_EQ(*f.get_f32("llama.rope.freq_base"), 100000.0f);
  EXPECT_DOUBLE_EQ(*f.get_f64("f64"), 0.25);
  EXPECT_EQ(f.get_bool("flag"), true);
  EXPECT_EQ(f.get_string_array("tokenizer.ggml.tokens"), (std::vector<std::string>{"<s>", "a", "", "hello world"}));
  EXPECT_EQ(f.get_f32_array("tokenizer.ggml.scores"), (std::vector<float>{0.0f, -1.5f, 2.25f, 3.0f}));
  EXPECT_EQ(f.get_i32_array("tokenizer.ggml.token_type"), (std::vector<int32_t>{3, 1, 1, -1}));
  const rkv::GgufValue* v = f.find("tokenizer.ggml.tokens");
  ASSERT_NE(v, nullptr);
  EXPECT_TRUE(v->is_array());
  EXPECT_EQ(v->elem_type, rkv::GgufType::STRING);
  EXPECT_EQ(v->array_size(), 4u);
  // Absent keys.
  EXPECT_EQ(f.find("nope"), nullptr);
  EXPECT_FALSE(f.get_u32("nope").has_value());
  EXPECT_EQ(f.get_string_or("nope", "dflt"), "dflt");
  EXPECT_THROW(f.get_string("nope"), rkv::InputError);
  EXPECT_THROW(f.get_string_array("nope"), rkv::InputError);
  // Wrong types and ranges.
  EXPECT_THROW(f.get_u32("general.architecture"), rkv::InputError);
  EXPECT_THROW(f.get_u32("neg"), rkv::InputError);
  EXPECT_THROW(f.get_u32("u64"), rkv::InputError);
  EXPECT_THROW(f.get_string("llama.block_count"), rkv::InputError);
  EXPECT_THROW(f.get_bool("u8"), rkv::InputError);
  EXPECT_THROW(f.get_string_array("tokenizer.ggml.scores"), rkv::InputError);
  EXPECT_THROW(f.get_i32_array("tokenizer.ggml.tokens"), rkv::InputError);
  try {
    f.get_string("llama.block_count");
  } catch (const rkv::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("llama.block_count"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("uint32"), std::string::npos);
  }
}

// A reader of the headers only keeps no string array: the count is there, the strings are not, and asking for them
// is an error naming the key (describe_model opens files this way).
TEST(Gguf, SkippedStringArraysKeepTheirCountOnly) {
  const std::string p = temp_path("skip");
  sample_writer().write(p);
  const GgufFile f(p, GgufFile::Strings::skip_arrays);
  EXPECT_EQ(f.get_string("general.architecture"), "llama");  // scalars are read as before
  EXPECT_EQ(f.get_f32_array("tokenizer.ggml.scores"), (std::vector<float>{0.0f, -1.5f, 2.25f, 3.0f}));
  const rkv::GgufValue* tokens = f.find("tokenizer.ggml.tokens");
  ASSERT_NE(tokens, nullptr);
  EXPECT_EQ(tokens->array_size(), 4u);
  EXPECT_TRUE(tokens->arr_str.empty());
  try {
    f.string_array_ref("tokenizer.ggml.tokens");
    FAIL() << "a skipped array was returned";
  } catch (const rkv::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("'tokenizer.ggml.tokens' was not kept"), std::string::npos) << e.what();
  }
  EXPECT_EQ(GgufFile(p).get_string_array("tokenizer.ggml.tokens").size(), 4u);  // the default keeps them
}

TEST(Gguf, ReadsTensorInfosAndData) {
  const std::string p = temp_path("tensors");
  sample_writer().write(p);
  GgufFile f(p);
  ASSERT_EQ(f.tensors().size(), 2u);
  const rkv::GgufTensorInfo* m = f.find_tensor("m");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->ne, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(m->type, 0u);
  EXPECT_EQ(m->n_elements(), 6);
  EXPECT_EQ(m->n_bytes, 24u);
  EXPECT_EQ(f.data_offset() % 32, 0u);
  const float* md = reinterpret_cast<const float*>(f.tensor_data(*m));
  EXPECT_EQ(md[0], 1.0f);
  EXPECT_EQ(md[5], 6.0f);
  const rkv::GgufTensorInfo* v = f.find_tensor("v");
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->offset, 32u);  // 24 bytes of m, padded to 32
  float vd[5];
  std::memcpy(vd, f.tensor_data(*v), sizeof(vd));
  EXPECT_EQ(vd[4], 50.0f);
  EXPECT_EQ(f.find_tensor("missing"), nullptr);
}

TEST(Gguf, HonoursCustomAlignmentAndVersion2) {
  GgufWriter w;
  w.set_version(2);
  w.set_alignment(64);
  w.add_u32("general.alignment", 64);
  w.add_tensor_f32("a", {3}, {1, 2, 3});
  w.add_tensor_f32("b", {2}, {7, 8});
  const std::string p = temp_path("align");
  w.write(p);
  GgufFile f(p);
  EXPECT_EQ(f.version(), 2u);
  EXPECT_EQ(f.alignment(), 64u);
  EXPECT_EQ(f.data_offset() % 64, 0u);
  EXPECT_EQ(f.find_tensor("b")->offset, 64u);
  float b[2];
  std::memcpy(b, f.tensor_data(*f.find_tensor("b")), sizeof(b));
  EXPECT_EQ(b[1], 8.0f);
}

TEST(Gguf, RejectsWrongMagicAndVersion) {
  std::vector<uint8_t> b = sample_writer().bytes();
  auto bad_magic = b;
  bad_magic[0] = 'X';
  expect_error(bad_magic, "not a GGUF file", "magic");
  auto v1 = b;
  v1[4] = 1;
  expect_error(v1, "version 1 is not supported", "v1");
  auto v9 = b;
  v9[4] = 9;
  expect_error(v9, "unsupported GGUF version 9", "v9");
  auto be = b;  // version 3 written big-endian
  be[4] = 0; be[5] = 0; be[6] = 0; be[7] = 3;
  expect_error(be, "big-endian", "bigendian");
  expect_error({'G', 'G'}, "too short", "tiny");
}

TEST(Gguf, EveryTruncationIsAClearError) {
  const std::vector<uint8_t> b = sample_writer().bytes();
  const std::string p = temp_path("trunc");
  for (size_t n = 0; n < b.size(); ++n) {
    GgufWriter::write_file(p, std::vector<uint8_t>(b.begin(), b.begin() + static_cast<long>(n)));
    EXPECT_THROW(GgufFile f(p), rkv::InputError) << "prefix of " << n << " bytes";
  }
  expect_error(std::vector<uint8_t>(b.begin(), b.end() - 4), "lies outside the file", "trunc_data");
  expect_error(std::vector<uint8_t>(b.begin(), b.begin() + 200), "truncated", "trunc_meta");
}

TEST(Gguf, RejectsHugeCountsAndBadTensorInfos) {
  {  // metadata count far beyond the file
    std::vector<uint8_t> b = sample_writer().bytes();
    b[23] = 0x10;  // n_kv high byte
    expect_error(b, "metadata count", "hugekv");
  }
  {  // tensor count far beyond the file
    std::vector<uint8_t> b = sample_writer().bytes();
    b[15] = 0x10;
    expect_error(b, "tensor count", "hugetensors");
  }
  {  // an array claiming 2^60 elements
    GgufWriter w;
    std::vector<uint8_t> kv;
    auto put = [&](auto v) { const auto* p = reinterpret_cast<const uint8_t*>(&v); kv.insert(kv.end(), p, p + sizeof(v)); };
    put(uint64_t{3}); kv.insert(kv.end(), {'a', 'r', 'r'});
    put(uint32_t{9}); put(uint32_t{5}); put(uint64_t{1} << 60);
    w.add_raw_kv(kv);
    expect_error(w.bytes(), "cannot fit", "hugearray");
  }
  {  // a string length beyond the file
    GgufWriter w;
    std::vector<uint8_t> kv;
    auto put = [&](auto v) { const auto* p = reinterpret_cast<const uint8_t*>(&v); kv.insert(kv.end(), p, p + sizeof(v)); };
    put(uint64_t{1} << 50);
    kv.resize(kv.size() + 40, 'x');
    w.add_raw_kv(kv);
    expect_error(w.bytes(), "has length", "hugestring");
  }
  {  // unknown value type
    GgufWriter w;
    std::vector<uint8_t> kv;
    auto put = [&](auto v) { const auto* p = reinterpret_cast<const uint8_t*>(&v); kv.insert(kv.end(), p, p + sizeof(v)); };
    put(uint64_t{1}); kv.push_back('k'); put(uint32_t{77}); put(uint32_t{0});
    w.add_raw_kv(kv);
    expect_error(w.bytes(), "unknown value type 77", "badtype");
  }
  {  // unknown ggml tensor type
    GgufWriter w;
    w.add_tensor("t", {4}, 99, std::vector<uint8_t>(16));
    expect_error(w.bytes(), "unknown ggml type id 99", "badggml");
  }
  {  // a row width that is not a multiple of the block size
    GgufWriter w;
    w.add_tensor("q", {31}, 2 /*q4_0*/, std::vector<uint8_t>(18));
    expect_error(w.bytes(), "not a multiple of the block size", "badrow");
  }
  {  // five dimensions
    GgufWriter w;
    w.add_tensor("t", {1, 1, 1, 1, 1}, 0, std::vector<uint8_t>(4));
    expect_error(w.bytes(), "5 dimensions", "dims");
  }
  {  // dimensions whose product overflows
    GgufWriter w;
    w.add_tensor("t", {1ull << 40, 1ull << 40}, 0, std::vector<uint8_t>(4));
    expect_error(w.bytes(), "impossible size", "overflow");
  }
  {  // tensor data far outside the file
    GgufWriter w;
    w.add_tensor_f32("big", {1000}, std::vector<float>(4));
    expect_error(w.bytes(), "tensor 'big' data", "outside");
  }
  {  // misaligned offset: patch the offset of the second tensor to 4
    GgufWriter w;
    w.add_tensor_f32("a", {1}, {1});
    w.add_tensor_f32("b", {1}, {2});
    std::vector<uint8_t> b = w.bytes();
    // header (24) + "a" info (8+1+4+8+4+8) + "b" info up to its offset (8+1+4+8+4)
    const size_t off = 24 + 33 + 25;
    b[off] = 4;
    expect_error(b, "not a multiple of the alignment", "misaligned");
  }
  {  // bad alignment value
    GgufWriter w;
    w.add_u32("general.alignment", 3);
    expect_error(w.bytes(), "general.alignment", "badalign");
  }
  {  // duplicate key
    GgufWriter w;
    w.add_u32("k", 1);
    w.add_u32("k", 2);
    expect_error(w.bytes(), "duplicate metadata key 'k'", "dupkey");
  }
  {  // bool other than 0/1
    GgufWriter w;
    w.add_u8("b", 0);
    std::vector<uint8_t> b = w.bytes();
    b[24 + 8 + 1] = 7;  // value type byte: uint8 -> bool
    b[24 + 8 + 1 + 4] = 5;  // the value byte
    expect_error(b, "neither 0 nor 1", "badbool");
  }
}

TEST(Gguf, RandomCorruptionNeverCrashes) {
  const std::vector<uint8_t> good = sample_writer().bytes();
  const std::string p = temp_path("fuzz");
  uint32_t state = 12345;
  auto next = [&]() { state = state * 1664525u + 1013904223u; return state; };
  int errors = 0;
  for (int trial = 0; trial < 600; ++trial) {
    std::vector<uint8_t> b = good;
    const int flips = 1 + static_cast<int>(next() % 4);
    for (int k = 0; k < flips; ++k) b[next() % 400 % b.size()] = static_cast<uint8_t>(next() >> 24);
    GgufWriter::write_file(p, b);
    try {
      GgufFile f(p);
      for (const auto& t : f.tensors()) {  // touching every tensor byte must stay inside the mapping
        volatile uint8_t sink = 0;
        const uint8_t* d = f.tensor_data(t);
        for (uint64_t i = 0; i < t.n_bytes; ++i) sink ^= d[i];
      }
    } catch (const rkv::InputError&) {
      ++errors;
    }
  }
  EXPECT_GT(errors, 0);
}

TEST(Gguf, MissingFileIsAnInputError) {
  EXPECT_THROW(GgufFile f("/nonexistent/model.gguf"), rkv::InputError);
}

}  // namespace
