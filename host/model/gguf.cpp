#include "model/gguf.hpp"

#include <cstring>
#include <limits>

#include "core/errors.hpp"
#include "model/ggml_types.hpp"

namespace rkv {

const char* gguf_type_name(GgufType type) {
  switch (type) {
    case GgufType::UINT8: return "uint8";
    case GgufType::INT8: return "int8";
    case GgufType::UINT16: return "uint16";
    case GgufType::INT16: return "int16";
    case GgufType::UINT32: return "uint32";
    case GgufType::INT32: return "int32";
    case GgufType::FLOAT32: return "float32";
    case GgufType::BOOL: return "bool";
    case GgufType::STRING: return "string";
    case GgufType::ARRAY: return "array";
    case GgufType::UINT64: return "uint64";
    case GgufType::INT64: return "int64";
    case GgufType::FLOAT64: return "float64";
  }
  return "unknown";
}

static bool is_integer_type(GgufType type) {
  switch (type) {
    case GgufType::UINT8:
    case GgufType::INT8:
    case GgufType::UINT16:
    case GgufType::INT16:
    case GgufType::UINT32:
    case GgufType::INT32:
    case GgufType::UINT64:
    case GgufType::INT64: return true;
    default: return false;
  }
}

bool GgufValue::is_integer() const { return is_integer_type(type); }

size_t GgufValue::array_size() const {
  if (type != GgufType::ARRAY) return 0;
  if (strings_skipped) return static_cast<size_t>(skipped_strings);
  return arr_str.size() + arr_int.size() + arr_float.size() + arr_nested.size();
}

int64_t GgufTensorInfo::n_elements() const {
  int64_t n = 1;
  for (int64_t d : ne) n *= d;  // overflow excluded at parse time
  return n;
}

namespace {

constexpr int kMaxArrayDepth = 8;   // nested arrays deeper than this are rejected (no stack exhaustion)
constexpr uint32_t kMaxDims = 4;    // GGML_MAX_DIMS

/// Bounds-checked little-endian cursor over the mapping.
class Cursor {
 public:
  Cursor(const uint8_t* data, size_t size, const std::string& path) : data_(data), size_(size), path_(path) {}

  size_t pos() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }

  [[noreturn]] void fail(const std::string& what) const {
    throw InputError(path_ + ": invalid GGUF: " + what + " (at byte " + std::to_string(pos_) + " of " +
                     std::to_string(size_) + ")");
  }

  void need(size_t n, const char* what) const {
    if (n > remaining()) {
      fail(std::string("file is truncated while reading ") + what + " (needs " + std::to_string(n) +
           " bytes, " + std::to_string(remaining()) + " left)");
    }
  }

  template <typename T>
  T read(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  std::string read_string(const char* what) {
    const uint64_t n = read<uint64_t>(what);
    if (n > remaining()) {
      fail("file is truncated or corrupt: " + std::string(what) + " has length " + std::to_string(n) + " but only " + std::to_string(remaining()) +
           " bytes remain in the file");
    }
    std::string s(reinterpret_cast<const char*>(data_ + pos_), static_cast<size_t>(n));
    pos_ += static_cast<size_t>(n);
    return s;
  }

  /// Moves past a string, with read_string's checks, without copying it.
  void skip_string(const char* what) {
    const uint64_t n = read<uint64_t>(what);
    if (n > remaining()) {
      fail("file is truncated or corrupt: " + std::string(what) + " has length " + std::to_string(n) + " but only " +
           std::to_string(remaining()) + " bytes remain in the file");
    }
    pos_ += static_cast<size_t>(n);
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  const std::string& path_;
};

/// Smallest encoding of one element of `type` (used to reject counts the rest of the file cannot hold).
size_t min_encoded_size(GgufType type) {
  switch (type) {
    case GgufType::UINT8:
    case GgufType::INT8:
    case GgufType::BOOL: return 1;
    case GgufType::UINT16:
    case GgufType::INT16: return 2;
    case GgufType::UINT32:
    case GgufType::INT32:
    case GgufType::FLOAT32: return 4;
    case GgufType::UINT64:
    case GgufType::INT64:
    case GgufType::FLOAT64:
    case GgufType::STRING: return 8;
    case GgufType::ARRAY: return 12;
  }
  return 1;
}

bool valid_type(uint32_t t) { return t <= static_cast<uint32_t>(GgufType::FLOAT64); }

/// Reads one scalar of `type` into `v` (type already validated, not ARRAY).
void read_scalar(Cursor& c, GgufType type, GgufValue& v, const std::string& key) {
  v.type = type;
  switch (type) {
    case GgufType::UINT8: v.u = c.read<uint8_t>("a uint8 value"); v.i = static_cast<int64_t>(v.u); break;
    case GgufType::INT8: v.i = c.read<int8_t>("an int8 value"); break;
    case GgufType::UINT16: v.u = c.read<uint16_t>("a uint16 value"); v.i = static_cast<int64_t>(v.u); break;
    case GgufType::INT16: v.i = c.read<int16_t>("an int16 value"); break;
    case GgufType::UINT32: v.u = c.read<uint32_t>("a uint32 value"); v.i = static_cast<int64_t>(v.u); break;
    case GgufType::INT32: v.i = c.read<int32_t>("an int32 value"); break;
    case GgufType::UINT64: v.u = c.read<uint64_t>("a uint64 value"); v.i = static_cast<int64_t>(v.u); break;
    case GgufType::INT64: v.i = c.read<int64_t>("an int64 value"); break;
    case GgufType::FLOAT32: v.f = c.read<float>("a float32 value"); break;
    case GgufType::FLOAT64: v.f = c.read<double>("a float64 value"); break;
    case GgufType::BOOL: {
      const uint8_t b = c.read<uint8_t>("a bool value");
      if (b > 1) c.fail("key '" + key + "': bool value " + std::to_string(b) + " is neither 0 nor 1");
      v.u = b;
      break;
    }
    case GgufType::STRING: v.str = c.read_string("a string value"); break;
    case GgufType::ARRAY: break;  // not reached
  }
  // Signed types: mirror into u only when non-negative (so range checks see the true value).
  if (type == GgufType::INT8 || type == GgufType::INT16 || type == GgufType::INT32 || type == GgufType::INT64) {
    v.u = v.i >= 0 ? static_cast<uint64_t>(v.i) : 0;
  }
}

void read_value(Cursor& c, GgufType type, GgufValue& v, const std::string& key, int depth, bool skip_strings);

void read_array(Cursor& c, GgufValue& v, const std::string& key, int depth, bool skip_strings) {
  if (depth > kMaxArrayDepth) c.fail("key '" + key + "': arrays nested deeper than " + std::to_string(kMaxArrayDepth));
  v.type = GgufType::ARRAY;
  const uint32_t et = c.read<uint32_t>("an array element type");
  if (!valid_type(et)) c.fail("key '" + key + "': unknown array element type " + std::to_string(et));
  v.elem_type = static_cast<GgufType>(et);
  const uint64_t n = c.read<uint64_t>("an array length");
  if (n > c.remaining() / min_encoded_size(v.elem_type)) {
    c.fail("key '" + key + "': array of " + std::to_string(n) + " " + gguf_type_name(v.elem_type) +
           " elements cannot fit in the " + std::to_string(c.remaining()) + " bytes left");
  }
  const size_t count = static_cast<size_t>(n);
  switch (v.elem_type) {
    case GgufType::STRING:
      if (skip_strings) {
        for (size_t k = 0; k < count; ++k) c.skip_string("a string array element");
        v.strings_skipped = true;
        v.skipped_strings = n;
        break;
      }
      v.arr_str.reserve(count);
      for (size_t k = 0; k < count; ++k) v.arr_str.push_back(c.read_string("a string array element"));
      break;
    case GgufType::FLOAT32:
    case GgufType::FLOAT64: {
      v.arr_float.reserve(count);
      GgufValue e;
      for (size_t k = 0; k < count; ++k) {
        read_scalar(c, v.elem_type, e, key);
        v.arr_float.push_back(e.f);
      }
      break;
    }
    case GgufType::ARRAY:
      v.arr_nested.resize(count);
      for (size_t k = 0; k < count; ++k) read_array(c, v.arr_nested[k], key, depth + 1, skip_strings);
      break;
    default: {  // integers and bool
      v.arr_int.reserve(count);
      GgufValue e;
      for (size_t k = 0; k < count; ++k) {
        read_scalar(c, v.elem_type, e, key);
        if (v.elem_type == GgufType::UINT64 && e.u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
          c.fail("key '" + key + "': uint64 array element " + std::to_string(e.u) + " does not fit in int64");
        }
        v.arr_int.push_back(v.elem_type == GgufType::BOOL ? static_cast<int64_t>(e.u) : e.i);
      }
      break;
    }
  }
}

void read_value(Cursor& c, GgufType type, GgufValue& v, const std::string& key, int depth, bool skip_strings) {
  if (type == GgufType::ARRAY) {
    read_array(c, v, key, depth, skip_strings);
  } else {
    read_scalar(c, type, v, key);
  }
}

}  // namespace

GgufFile::GgufFile(const std::string& path, Strings strings) : map_(path), strings_(strings) {
  // A file truncated while it is parsed reads as zeros past its new end (mapped_file.hpp): whatever error that
  // causes, report the truncation.
  try {
    parse();
  } catch (const InputError&) {
    map_.check_unchanged("reading the GGUF header");
    throw;
  }
  map_.check_unchanged("reading the GGUF header");
}

void GgufFile::parse() {
  const std::string& p = map_.path();
  Cursor c(map_.data(), map_.size(), p);
  if (map_.size() < 4) c.fail("file is " + std::to_string(map_.size()) + " bytes, too short for the GGUF magic");
  const uint32_t magic = c.read<uint32_t>("the magic");
  if (magic != 0x46554747u) {  // "GGUF" read little-endian
    char m[5] = {0, 0, 0, 0, 0};
    std::memcpy(m, map_.data(), 4);
    for (char& ch : m) {
      if (ch && (ch < 32 || ch > 126)) ch = '?';
    }
    throw InputError(p + ": not a GGUF file (magic '" + std::string(m) + "', expected 'GGUF')");
  }
  version_ = c.read<uint32_t>("the version");
  if (version_ == 1) throw InputError(p + ": GGUF version 1 is not supported (only versions 2 and 3)");
  if (version_ != 2 && version_ != 3) {
    if ((version_ & 0xFFFFu) == 0 && version_ != 0) {
      throw InputError(p + ": GGUF file is big-endian (version field " + std::to_string(version_) +
                       "); only little-endian files are supported");
    }
    throw InputError(p + ": unsupported GGUF version " + std::to_string(version_) + " (supported: 2, 3)");
  }
  const uint64_t n_tensors = c.read<uint64_t>("the tensor count");
  const uint64_t n_kv = c.read<uint64_t>("the metadata count");
  // Each key/value needs at least 8 (key length) + 4 (type) + 1 bytes; each tensor info at least 8+4+8+4+8.
  if (n_kv > c.remaining() / 13) {
    c.fail("metadata count " + std::to_string(n_kv) + " cannot fit in the " + std::to_string(c.remaining()) +
           " bytes left");
  }
  if (n_tensors > c.remaining() / 32) {
    c.fail("tensor count " + std::to_string(n_tensors) + " cannot fit in the " + std::to_string(c.remaining()) +
           " bytes left");
  }

  keys_.reserve(static_cast<size_t>(n_kv));
  for (uint64_t k = 0; k < n_kv; ++k) {
    std::string key = c.read_string("a metadata key");
    const uint32_t t = c.read<uint32_t>("a metadata value type");
    if (!valid_type(t)) c.fail("key '" + key + "' has unknown value type " + std::to_string(t));
    GgufValue v;
    read_value(c, static_cast<GgufType>(t), v, key, 0, strings_ == Strings::skip_arrays);
    if (values_.count(key)) c.fail("duplicate metadata key '" + key + "'");
    keys_.push_back(key);
    values_.emplace(std::move(key), std::move(v));
  }

  if (const GgufValue* a = find("general.alignment")) {
    if (!a->is_integer() || a->u == 0 || (a->u & (a->u - 1)) != 0 || a->u > (1u << 30)) {
      throw InputError(p + ": invalid GGUF: general.alignment must be a power-of-two integer, got " +
                       (a->is_integer() ? std::to_string(a->i) : std::string(gguf_type_name(a->type))));
    }
    alignment_ = a->u;
  }

  tensors_.reserve(static_cast<size_t>(n_tensors));
  for (uint64_t k = 0; k < n_tensors; ++k) {
    GgufTensorInfo ti;
    ti.name = c.read_string("a tensor name");
    const uint32_t n_dims = c.read<uint32_t>("a tensor's dimension count");
    if (n_dims == 0 || n_dims > kMaxDims) {
      c.fail("tensor '" + ti.name + "' has " + std::to_string(n_dims) + " dimensions (expected 1 to 4)");
    }
    int64_t n_elem = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t ne = c.read<uint64_t>("a tensor dimension");
      if (ne > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
          (ne != 0 && n_elem > std::numeric_limits<int64_t>::max() / static_cast<int64_t>(ne))) {
        c.fail("tensor '" + ti.name + "' has an impossible size (dimension " + std::to_string(ne) + ")");
      }
      ti.ne.push_back(static_cast<int64_t>(ne));
      n_elem *= static_cast<int64_t>(ne);
    }
    ti.type = c.read<uint32_t>("a tensor type");
    const GgmlTypeInfo* tt = ggml_type_info(ti.type);
    if (!tt) c.fail("tensor '" + ti.name + "' has unknown ggml type id " + std::to_string(ti.type));
    if (ti.ne[0] % tt->block_size != 0) {
      c.fail("tensor '" + ti.name + "' of type " + tt->name + " has rows of " + std::to_string(ti.ne[0]) +
             " elements, not a multiple of the block size " + std::to_string(tt->block_size));
    }
    ti.offset = c.read<uint64_t>("a tensor offset");
    if (ti.offset % alignment_ != 0) {
      c.fail("tensor '" + ti.name + "' offset " + std::to_string(ti.offset) + " is not a multiple of the alignment " +
             std::to_string(alignment_));
    }
    const uint64_t blocks = static_cast<uint64_t>(n_elem / tt->block_size);
    if (blocks > std::numeric_limits<uint64_t>::max() / static_cast<uint64_t>(tt->type_size)) {
      c.fail("tensor '" + ti.name + "' has an impossible byte size");
    }
    ti.n_bytes = blocks * static_cast<uint64_t>(tt->type_size);
    if (tensor_index_.count(ti.name)) c.fail("duplicate tensor name '" + ti.name + "'");
    tensor_index_.emplace(ti.name, tensors_.size());
    tensors_.push_back(std::move(ti));
  }

  // Tensor data starts at the next multiple of the alignment.
  const uint64_t pos = c.pos();
  data_offset_ = (pos + alignment_ - 1) / alignment_ * alignment_;
  const uint64_t size = map_.size();
  for (const auto& ti : tensors_) {
    if (data_offset_ > size || ti.offset > size - data_offset_ || ti.n_bytes > size - data_offset_ - ti.offset) {
      throw InputError(p + ": invalid GGUF: tensor '" + ti.name + "' data [" +
                       std::to_string(data_offset_ + ti.offset) + ", " +
                       std::to_string(data_offset_ + ti.offset + ti.n_bytes) + ") lies outside the file of " +
                       std::to_string(size) + " bytes (truncated file?)");
    }
  }
}

const GgufValue* GgufFile::find(const std::string& key) const {
  auto it = values_.find(key);
  return it == values_.end() ? nullptr : &it->second;
}

const GgufValue& GgufFile::require(const std::string& key, const char* what) const {
  const GgufValue* v = find(key);
  if (!v) throw InputError(path() + ": missing GGUF metadata key '" + key + "' (expected " + what + ")");
  return *v;
}

static std::string describe(const GgufValue& v) {
  if (v.type == GgufType::ARRAY) return std::string("array of ") + gguf_type_name(v.elem_type);
  return gguf_type_name(v.type);
}

std::string GgufFile::get_string(const std::string& key) const {
  const GgufValue& v = require(key, "a string");
  if (v.type != GgufType::STRING) {
    throw InputError(path() + ": GGUF metadata key '" + key + "' is " + describe(v) + ", expected a string");
  }
  return v.str;
}

std::string GgufFile::get_string_or(const std::string& key, const std::string& fallback) const {
  return has(key) ? get_string(key) : fallback;
}

std::optional<int64_t> GgufFile::get_i64(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (!v->is_integer()) {
    throw InputError(path() + ": GGUF metadata key '" + key + "' is " + describe(*v) + ", expected an integer");
  }
  if (v->type == GgufType::UINT64 && v->u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    throw InputError(path() + ": GGUF metadata key '" + key + "' value " + std::to_string(v->u) + " is too large");
  }
  return v->i;
}

std::optional<uint32_t> GgufFile::get_u32(const std::string& key) const {
  const auto i = get_i64(key);
  if (!i) return std::nullopt;
  if (*i < 0 || *i > static_cast<int64_t>(std::numeric_limits<uint32_t>::max())) {
    throw InputError(path() + ": GGUF metadata key '" + key + "' value " + std::to_string(*i) +
                     " is outside the uint32 range");
  }
  return static_cast<uint32_t>(*i);
}

std::optional<double> GgufFile::get_f64(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (v->is_float()) return v->f;
  if (v->is_integer()) return v->type == GgufType::UINT64 ? static_cast<double>(v->u) : static_cast<double>(v->i);
  throw InputError(path() + ": GGUF metadata key '" + key + "' is " + describe(*v) + ", expected a number");
}

std::optional<float> GgufFile::get_f32(const std::string& key) const {
  const auto d = get_f64(key);
  if (!d) return std::nullopt;
  return static_cast<float>(*d);
}

std::optional<bool> GgufFile::get_bool(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != GgufType::BOOL) {
    throw InputError(path() + ": GGUF metadata key '" + key + "' is " + describe(*v) + ", expected a bool");
  }
  return v->u != 0;
}

const std::vector<std::string>& GgufFile::string_array_ref(const std::string& key) const {
  const GgufValue& v = require(key, "an array of strings");
  if (v.type != GgufType::ARRAY || v.elem_type != GgufType::STRING) {
    throw InputError(path() + ": GGUF metadata key '" + key + "' is " + describe(v) + ", expected an array of strings");
  }
  if (v.strings_skipped)
    throw InputError(path() + ": GGUF metadata key '" + key + "' was not kept (the file was opened for its headers "
                     "only, GgufFile::Strings::skip_arrays)");
  return v.arr_str;
}

std::vector<std::string> GgufFile::get_string_array(const std::string& key) const { return string_array_ref(key); }

std::vector<float> GgufFile::get_f32_array(const std::string& key) const {
  const GgufValue& v = require(key, "an array of numbers");
  if (v.type != GgufType::ARRAY || v.elem_type == GgufType::STRING || v.elem_type == GgufType::ARRAY) {
    throw InputError(path() + ": GGUF metadata key '" + key + "' is " + describe(v) + ", expected an array of numbers");
  }
  std::vector<float> out;
  out.reserve(v.array_size());
  for (double d : v.arr_float) out.push_back(static_cast<float>(d));
  for (int64_t i : v.arr_int) out.push_back(static_cast<float>(i));
  return out;
}

std::vector<int64_t> GgufFile::get_i64_array(const std::string& key) const {
  const GgufValue& v = require(key, "an array of integers");
  if (v.type != GgufType::ARRAY || !(v.elem_type == GgufType::BOOL || is_integer_type(v.elem_type))) {
    throw InputError(path() + ": GGUF metadata key '" + key + "' is " + describe(v) + ", expected an array of integers");
  }
  return v.arr_int;
}

std::vector<int32_t> GgufFile::get_i32_array(const std::string& key) const {
  const std::vector<int64_t> a = get_i64_array(key);
  std::vector<int32_t> out;
  out.reserve(a.size());
  for (size_t k = 0; k < a.size(); ++k) {
    if (a[k] < std::numeric_limits<int32_t>::min() || a[k] > std::numeric_limits<int32_t>::max()) {
      throw InputError(path() + ": GGUF metadata key '" + key + "' element " + std::to_string(k) + " (" +
                       std::to_string(a[k]) + ") does not fit in int32");
    }
    out.push_back(static_cast<int32_t>(a[k]));
  }
  return out;
}

const GgufTensorInfo* GgufFile::find_tensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace rkv
