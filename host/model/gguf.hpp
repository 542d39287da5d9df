// GGUF reader (format versions 2 and 3) over a read-only memory mapping.
//
// Format (llama.cpp ggml/docs/gguf.md): little-endian
//   u32 magic "GGUF", u32 version, u64 tensor_count, u64 metadata_kv_count,
//   metadata_kv_count x { string key, u32 value_type, value },
//   tensor_count x { string name, u32 n_dims, u64 ne[n_dims], u32 ggml_type, u64 offset },
//   padding to `general.alignment` (default 32), tensor data; each tensor at data_start + offset.
// A string is u64 length + bytes (no terminator). An array is u32 element type + u64 count + elements.
// Version 1 (u32 counts) and big-endian files are rejected with a clear error.
//
// Every offset, length and count read from the file is bounds-checked: a truncated file, a wrong magic or version,
// a tensor outside the file, an absurd count or an unknown type is an rkv::InputError naming the file and what is wrong.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "model/mapped_file.hpp"

namespace rkv {

/// GGUF metadata value types (gguf_type in ggml).
enum class GgufType : uint32_t {
  UINT8 = 0,
  INT8 = 1,
  UINT16 = 2,
  INT16 = 3,
  UINT32 = 4,
  INT32 = 5,
  FLOAT32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  UINT64 = 10,
  INT64 = 11,
  FLOAT64 = 12,
};

/// Name of a metadata type ("uint32", "string", ...).
const char* gguf_type_name(GgufType type);

/// One metadata value. Scalars keep their exact value in the member for their kind (unsigned in `u`, signed in `i`,
/// floating in `f`, bool in `u` as 0/1, string in `str`). Arrays keep their element type in `elem_type` and their
/// elements in exactly one of the vectors: `arr_str` (STRING), `arr_int` (all integer types and BOOL, widened to
/// int64; a UINT64 above INT64_MAX is rejected at read time), `arr_float` (FLOAT32/FLOAT64 as double) or
/// `arr_nested` (ARRAY of arrays).
struct GgufValue {
  GgufType type = GgufType::UINT8;
  uint64_t u = 0;
  int64_t i = 0;
  double f = 0.0;
  std::string str;
  GgufType elem_type = GgufType::UINT8;
  std::vector<std::string> arr_str;
  std::vector<int64_t> arr_int;
  std::vector<double> arr_float;
  std::vector<GgufValue> arr_nested;
  /// A string array not kept (GgufStrings::skip_arrays): its element count; arr_str stays empty.
  uint64_t skipped_strings = 0;
  bool strings_skipped = false;

  bool is_array() const { return type == GgufType::ARRAY; }
  bool is_integer() const;  ///< any of the integer scalar types (not BOOL)
  bool is_float() const { return type == GgufType::FLOAT32 || type == GgufType::FLOAT64; }
  /// Number of elements of an array (0 for scalars).
  size_t array_size() const;
};

/// One tensor info. `ne` follows ggml order: ne[0] is the innermost (contiguous) dimension, so a matrix with
/// `rows` rows of `cols` elements has ne = {cols, rows} (PyTorch shape [rows, cols]).
struct GgufTensorInfo {
  std::string name;
  std::vector<int64_t> ne;  ///< 1..4 dimensions, each >= 0
  uint32_t type = 0;        ///< ggml_type id (see model/ggml_types.hpp)
  uint64_t offset = 0;      ///< relative to the start of the tensor data section
  uint64_t n_bytes = 0;     ///< bytes the tensor occupies (checked to lie inside the file)
  int64_t n_elements() const;
};

/// A parsed GGUF file. Metadata and tensor infos are parsed eagerly and copied into memory; tensor data stay in the
/// mapping, which lives as long as this object. Move-only. Thread rules: const methods may be called concurrently.
class GgufFile {
 public:
  /// What to keep of string arrays (the vocabulary, the merges: ~100k strings, several MB).
  enum class Strings {
    keep,         ///< every value is parsed and held
    skip_arrays,  ///< string arrays are checked (every length inside the file) but not held: their value keeps only
                  ///< the element count, and string_array_ref() on them throws. For readers of the headers only
                  ///< (describe_model), which never need the tokenizer's arrays.
  };
  /// Opens and parses `path`. Throws rkv::InputError (message starts with the path) on any malformed content.
  explicit GgufFile(const std::string& path, Strings strings = Strings::keep);
  GgufFile(GgufFile&&) noexcept = default;
  GgufFile& operator=(GgufFile&&) noexcept = default;

  const std::string& path() const { return map_.path(); }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  /// Byte offset of the tensor data section inside the file.
  uint64_t data_offset() const { return data_offset_; }
  uint64_t file_size() const { return map_.size(); }
  /// Drops the resident pages of bytes [p, p + n) of the mapping (MappedFile::drop_pages): for tensors copied at load.
  void drop_pages(const uint8_t* p, size_t n) const { map_.drop_pages(p, n); }
  /// The whole mapped file (file_size() bytes), e.g. for hashing.
  const uint8_t* file_data() const { return map_.data(); }
  /// Throws rkv::InputError naming the file when it changed since it was opened (truncated, written in place or
  /// replaced: MappedFile::check_unchanged); `during` says what was being read. Call after reading tensor data.
  void check_unchanged(const std::string& during) const { map_.check_unchanged(during); }

  // ---- metadata ----
  /// Keys in file order.
  const std::vector<std::string>& keys() const { return keys_; }
  /// The value of `key`, or nullptr when absent.
  const GgufValue* find(const std::string& key) const;
  bool has(const std::string& key) const { return find(key) != nullptr; }

  /// String value of `key`. Throws InputError when absent or not a string.
  std::string get_string(const std::string& key) const;
  /// String value of `key`, or `fallback` when absent; throws InputError when present but not a string.
  std::string get_string_or(const std::string& key, const std::string& fallback) const;
  /// Integer value of `key` as uint32 (any integer type whose value fits), nullopt when absent.
  /// Throws InputError when present but not an integer, or out of range.
  std::optional<uint32_t> get_u32(const std::string& key) const;
  /// Integer value of `key` as int64 (any integer type whose value fits), nullopt when absent; throws as get_u32.
  std::optional<int64_t> get_i64(const std::string& key) const;
  /// Floating value of `key` (FLOAT32/FLOAT64; integers are accepted and converted), nullopt when absent.
  /// Throws InputError when present with another type.
  std::optional<double> get_f64(const std::string& key) const;
  std::optional<float> get_f32(const std::string& key) const;
  /// Bool value of `key`, nullopt when absent; throws InputError when present with another type.
  std::optional<bool> get_bool(const std::string& key) const;

  /// Array getters: throw InputError when the key is absent, is not an array, or has the wrong element kind.
  std::vector<std::string> get_string_array(const std::string& key) const;
  /// Elements of a FLOAT32/FLOAT64 (or integer) array, as float.
  std::vector<float> get_f32_array(const std::string& key) const;
  /// Elements of an integer (or BOOL) array as int32; throws when an element does not fit.
  std::vector<int32_t> get_i32_array(const std::string& key) const;
  /// Elements of an integer (or BOOL) array as int64.
  std::vector<int64_t> get_i64_array(const std::string& key) const;
  /// Read-only reference to a string array without copying (e.g. the 50k-token vocabulary).
  const std::vector<std::string>& string_array_ref(const std::string& key) const;

  // ---- tensors ----
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  /// The tensor named `name`, or nullptr.
  const GgufTensorInfo* find_tensor(const std::string& name) const;
  /// Pointer to the first byte of a tensor's data inside the mapping (valid while this object lives); the
  /// n_bytes bytes from there are inside the file (checked at parse time).
  const uint8_t* tensor_data(const GgufTensorInfo& info) const { return map_.data() + data_offset_ + info.offset; }

 private:
  void parse();
  const GgufValue& require(const std::string& key, const char* what) const;

  MappedFile map_;
  Strings strings_ = Strings::keep;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<std::string> keys_;
  std::unordered_map<std::string, GgufValue> values_;
  std::vector<GgufTensorInfo> tensors_;
  std::unordered_map<std::string, size_t> tensor_index_;
};

}  // namespace rkv
