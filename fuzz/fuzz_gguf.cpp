// libFuzzer target: the GGUF reader and what reads a GGUF after it.
//
// The input bytes are written to a per-process temp file (GgufFile maps a path) and go through
//   1. rkv::GgufFile (header, metadata, tensor infos), then every typed getter on every key, and a check that each
//      tensor's data lies inside the mapping, as GgufFile promises;
//   2. dequantize_row on every tensor of a type it supports (memory stays below ~8x the input size);
//   3. Tokenizer::from_gguf, and when it loads, an encode/decode of a fixed text;
//   4. load_gguf_model (hyperparameters, shapes, dequantization, Q/K unpermutation).
// rkv::InputError is the expected outcome for bad input at each step.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/errors.hpp"
#include "fuzz_support.hpp"
#include "model/dequant.hpp"
#include "model/gguf.hpp"
#include "model/model.hpp"
#include "tokenizer/tokenizer.hpp"

namespace {

/// Calls every getter on `key`; each must return or throw InputError.
void exercise_getters(const rkv::GgufFile& f, const std::string& key) {
  auto quietly = [](auto&& fn) {
    try {
      fn();
    } catch (const rkv::InputError&) {
    }
  };
  quietly([&] { f.get_string(key); });
  quietly([&] { f.get_string_or(key, "x"); });
  quietly([&] { f.get_u32(key); });
  quietly([&] { f.get_i64(key); });
  quietly([&] { f.get_f64(key); });
  quietly([&] { f.get_f32(key); });
  quietly([&] { f.get_bool(key); });
  quietly([&] { f.get_string_array(key); });
  quietly([&] { f.get_f32_array(key); });
  quietly([&] { f.get_i32_array(key); });
  quietly([&] { f.get_i64_array(key); });
  quietly([&] { f.string_array_ref(key); });
}

void check_file(const rkv::GgufFile& f) {
  for (const std::string& key : f.keys()) {
    if (!f.find(key)) rkv_fuzz::fuzz_fail("GGUF key '" + key + "' is listed but find() does not return it");
    exercise_getters(f, key);
  }
  exercise_getters(f, "no.such.key");
  const uint8_t* begin = f.file_data();
  const uint8_t* end = begin + f.file_size();
  for (const rkv::GgufTensorInfo& t : f.tensors()) {
    if (f.find_tensor(t.name) != &t) rkv_fuzz::fuzz_fail("GGUF tensor '" + t.name + "' is not found by its name");
    const uint8_t* p = f.tensor_data(t);
    if (t.n_bytes > 0 && (p < begin || p > end || t.n_bytes > static_cast<uint64_t>(end - p)))
      rkv_fuzz::fuzz_fail("GGUF tensor '" + t.name + "' data lies outside the file");
    if (!rkv::can_dequantize(t.type)) continue;
    std::vector<float> out(static_cast<size_t>(t.n_elements()));
    try {
      rkv::dequantize_row(t.type, p, out.data(), t.n_elements());
    } catch (const rkv::InputError&) {
    }
  }
}

void check_tokenizer(const rkv::GgufFile& f) {
  const rkv::Tokenizer tok = rkv::Tokenizer::from_gguf(f);
  const std::string text = "Hello world! 123 \xC3\xA9t\xC3\xA9 <|im_start|>";
  for (bool special : {false, true}) {
    const std::vector<int32_t> ids = tok.encode(text, false, special);
    for (int32_t id : ids)
      if (id < 0 || id >= tok.n_vocab()) rkv_fuzz::fuzz_fail("encode returned id " + std::to_string(id));
    tok.decode(ids, special);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = (rkv_fuzz::process_temp_dir("gguf") / "input.gguf").string();
  rkv_fuzz::write_file(path, data, size);
  try {
    const rkv::GgufFile f(path);
    check_file(f);
    try {
      check_tokenizer(f);
    } catch (const rkv::InputError& e) {
      rkv_fuzz::note_rejection("Tokenizer::from_gguf", e);
    }
  } catch (const rkv::InputError& e) {
    rkv_fuzz::note_rejection("GgufFile", e);
    return 0;  // the model loader reparses the file; nothing more to learn from a file the reader rejects
  }
  try {
    rkv::load_gguf_model(path);
  } catch (const rkv::InputError& e) {
    rkv_fuzz::note_rejection("load_gguf_model", e);
  }
  return 0;
}
