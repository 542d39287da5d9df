// safetensors reader over a read-only memory mapping.
//
// Format (huggingface/safetensors README): u64 little-endian header size N, then N bytes of UTF-8 JSON
// {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ..., "__metadata__": {str: str}},
// then the data section; offsets are relative to the start of the data section (byte 8 + N).
// Checked here: N inside the file, the JSON parses and has the right field types, every dtype is known, every shape
// matches its byte range, every range lies inside the data section, no two ranges overlap. Violations are
// rkv::InputError naming the file and the tensor.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "model/mapped_file.hpp"

namespace rkv {

/// One tensor of a safetensors file. `shape` is PyTorch order (row-major, last dimension contiguous).
struct SafetensorsTensor {
  std::string name;
  std::string dtype;           ///< "F32", "F16", "BF16", "F64", "I64", ... as written in the file
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  ///< byte range inside the data section
  int64_t n_elements() const;
};

/// Bytes per element of a safetensors dtype string, or 0 when unknown.
int64_t safetensors_dtype_size(const std::string& dtype);

/// A parsed safetensors file. Move-only; const methods are thread-safe.
class SafetensorsFile {
 public:
  /// Opens and validates `path`. Throws rkv::InputError (message starts with the path) when anything is malformed.
  explicit SafetensorsFile(const std::string& path);
  SafetensorsFile(SafetensorsFile&&) noexcept = default;
  SafetensorsFile& operator=(SafetensorsFile&&) noexcept = default;

  const std::string& path() const { return map_.path(); }
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  const SafetensorsTensor* find(const std::string& name) const;
  /// First byte of a tensor's data (inside the mapping; valid while this object lives).
  const uint8_t* data(const SafetensorsTensor& t) const { return map_.data() + data_start_ + t.begin; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  /// Throws rkv::InputError naming the file when it was truncated since it was opened (MappedFile::check_unchanged);
  /// `during` says what was being read. Call after reading tensor data.
  void check_unchanged(const std::string& during) const { map_.check_unchanged(during); }

 private:
  void parse();
  MappedFile map_;
  uint64_t data_start_ = 0;
  std::vector<SafetensorsTensor> tensors_;
  std::unordered_map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

/// Reads tensor `t` of file `f` as float32 (dtype F32, F16 or BF16), row-major. Throws InputError naming the tensor
/// and the file for any other dtype.
std::vector<float> safetensors_to_f32(const SafetensorsFile& f, const SafetensorsTensor& t);

/// Throws the InputError safetensors_to_f32 throws for a dtype it cannot read (not F32, F16 or BF16), from the
/// tensor's header entry alone (no data read).
void check_weight_dtype(const SafetensorsFile& f, const SafetensorsTensor& t);

}  // namespace rkv
