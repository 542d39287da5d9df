// libFuzzer target: the safetensors reader and the Hugging Face model loader on top of it.
//
// The input bytes become `model.safetensors` in a per-process temp folder that also holds a fixed config.json of a
// tiny llama (the one fuzz/make_seeds.py builds its seed files for), then go through
//   1. rkv::SafetensorsFile (header size, JSON header, dtypes, shapes, ranges, overlaps), a check that every tensor's
//      byte range lies inside the mapping, and safetensors_to_f32 on every tensor;
//   2. load_hf_model on the folder (names, shapes, F32/F16/BF16 conversion, hashing).
// rkv::InputError is the expected outcome for bad input at each step.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "core/errors.hpp"
#include "fuzz_support.hpp"
#include "model/model.hpp"
#include "model/safetensors.hpp"

namespace {

// The tiny llama of fuzz/make_seeds.py: V 16, D 8, H 2, H_kv 1, d 4, F 16, one layer, untied LM head.
const char kConfigJson[] = R"({
  "architectures": ["LlamaForCausalLM"], "model_type": "llama",
  "vocab_size": 16, "hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 1,
  "num_attention_heads": 2, "num_key_value_heads": 1, "max_position_embeddings": 64,
  "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": false, "hidden_act": "silu"
})";

const std::filesystem::path& model_dir() {
  static const std::filesystem::path dir = [] {
    const std::filesystem::path d = rkv_fuzz::process_temp_dir("safetensors") / "model";
    std::filesystem::create_directories(d);
    rkv_fuzz::write_file(d / "config.json", kConfigJson, sizeof(kConfigJson) - 1);
    return d;
  }();
  return dir;
}

/// `data_start`: 8 + the header size the file declares (the reader accepted it, so it is <= file_size).
void check_file(const rkv::SafetensorsFile& f, uint64_t data_start, uint64_t file_size) {
  for (const rkv::SafetensorsTensor& t : f.tensors()) {
    if (f.find(t.name) != &t) rkv_fuzz::fuzz_fail("safetensors tensor '" + t.name + "' is not found by its name");
    if (t.begin > t.end) rkv_fuzz::fuzz_fail("safetensors tensor '" + t.name + "' has begin > end");
    const int64_t es = rkv::safetensors_dtype_size(t.dtype);
    if (es <= 0) rkv_fuzz::fuzz_fail("safetensors tensor '" + t.name + "' has unknown dtype '" + t.dtype + "'");
    if (static_cast<uint64_t>(t.n_elements()) * static_cast<uint64_t>(es) != t.end - t.begin)
      rkv_fuzz::fuzz_fail("safetensors tensor '" + t.name + "' has a byte range that does not match its shape");
    if (t.end > file_size - data_start) rkv_fuzz::fuzz_fail("safetensors tensor '" + t.name + "' ends beyond the file");
    try {
      const std::vector<float> v = rkv::safetensors_to_f32(f, t);
      if (v.size() != static_cast<size_t>(t.n_elements()))
        rkv_fuzz::fuzz_fail("safetensors_to_f32 returned the wrong element count for '" + t.name + "'");
    } catch (const rkv::InputError&) {
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::filesystem::path file = model_dir() / "model.safetensors";
  rkv_fuzz::write_file(file, data, size);
  try {
    const rkv::SafetensorsFile f(file.string());
    uint64_t header_size = 0;
    std::memcpy(&header_size, data, 8);  // a file the reader accepts has at least 8 bytes
    check_file(f, 8 + header_size, size);
  } catch (const rkv::InputError& e) {
    rkv_fuzz::note_rejection("SafetensorsFile", e);
    return 0;  // the model loader reparses the file; nothing more to learn from a file the reader rejects
  }
  try {
    rkv::load_hf_model(model_dir().string());
  } catch (const rkv::InputError& e) {
    rkv_fuzz::note_rejection("load_hf_model", e);
  }
  return 0;
}
