// Test helper: writes small GGUF v2/v3 files byte by byte (format: llama.cpp ggml/docs/gguf.md), so tests can build
// well-formed files with known content and corrupt them on purpose. Not part of the library.
#pragma once
#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace rkv_test {

class GgufWriter {
 public:
  void add_u8(const std::string& k, uint8_t v) { key(k, 0); put(v); ++n_kv_; }
  void add_i8(const std::string& k, int8_t v) { key(k, 1); put(v); ++n_kv_; }
  void add_u16(const std::string& k, uint16_t v) { key(k, 2); put(v); ++n_kv_; }
  void add_i16(const std::string& k, int16_t v) { key(k, 3); put(v); ++n_kv_; }
  void add_u32(const std::string& k, uint32_t v) { key(k, 4); put(v); ++n_kv_; }
  void add_i32(const std::string& k, int32_t v) { key(k, 5); put(v); ++n_kv_; }
  void add_f32(const std::string& k, float v) { key(k, 6); put(v); ++n_kv_; }
  void add_bool(const std::string& k, bool v) { key(k, 7); put(static_cast<uint8_t>(v)); ++n_kv_; }
  void add_string(const std::string& k, const std::string& v) { key(k, 8); str(kv_, v); ++n_kv_; }
  void add_u64(const std::string& k, uint64_t v) { key(k, 10); put(v); ++n_kv_; }
  void add_i64(const std::string& k, int64_t v) { key(k, 11); put(v); ++n_kv_; }
  void add_f64(const std::string& k, double v) { key(k, 12); put(v); ++n_kv_; }
  void add_string_array(const std::string& k, const std::vector<std::string>& v) {
    key(k, 9); put(uint32_t{8}); put(static_cast<uint64_t>(v.size()));
    for (const auto& s : v) str(kv_, s);
    ++n_kv_;
  }
  void add_i32_array(const std::string& k, const std::vector<int32_t>& v) {
    key(k, 9); put(uint32_t{5}); put(static_cast<uint64_t>(v.size()));
    for (int32_t x : v) put(x);
    ++n_kv_;
  }
  void add_f32_array(const std::string& k, const std::vector<float>& v) {
    key(k, 9); put(uint32_t{6}); put(static_cast<uint64_t>(v.size()));
    for (float x : v) put(x);
    ++n_kv_;
  }
  /// Appends raw bytes to the metadata section (for hand-crafted corrupt values); counts as `kv` entries.
  void add_raw_kv(const std::vector<uint8_t>& bytes, uint64_t kv = 1) {
    kv_.insert(kv_.end(), bytes.begin(), bytes.end());
    n_kv_ += kv;
  }

  /// Adds a tensor: ne in ggml order (ne[0] innermost), ggml type id, raw data bytes (placed aligned).
  void add_tensor(const std::string& name, const std::vector<uint64_t>& ne, uint32_t type,
                  const std::vector<uint8_t>& data) {
    str(ti_, name);
    append(ti_, static_cast<uint32_t>(ne.size()));
    for (uint64_t d : ne) append(ti_, d);
    append(ti_, type);
    while (data_.size() % alignment_) data_.push_back(0);
    append(ti_, static_cast<uint64_t>(data_.size()));
    data_.insert(data_.end(), data.begin(), data.end());
    ++n_tensors_;
  }
  void add_tensor_f32(const std::string& name, const std::vector<uint64_t>& ne, const std::vector<float>& v) {
    std::vector<uint8_t> b(v.size() * 4);
    std::memcpy(b.data(), v.data(), b.size());
    add_tensor(name, ne, 0, b);
  }

  void set_version(uint32_t v) { version_ = v; }
  /// Alignment used for the data layout (write general.alignment yourself when it is not 32).
  void set_alignment(uint64_t a) { alignment_ = a; }

  std::vector<uint8_t> bytes() const {
    std::vector<uint8_t> out;
    append(out, uint32_t{0x46554747u});
    append(out, version_);
    append(out, n_tensors_);
    append(out, n_kv_);
    out.insert(out.end(), kv_.begin(), kv_.end());
    out.insert(out.end(), ti_.begin(), ti_.end());
    while (out.size() % alignment_) out.push_back(0);
    out.insert(out.end(), data_.begin(), data_.end());
    return out;
  }

  static void write_file(const std::string& path, const std::vector<uint8_t>& b) {
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  }
  void write(const std::string& path) const { write_file(path, bytes()); }

 private:
  template <typename T>
  static void append(std::vector<uint8_t>& out, T v) {
    uint8_t b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    out.insert(out.end(), b, b + sizeof(T));
  }
  template <typename T>
  void put(T v) { append(kv_, v); }
  static void str(std::vector<uint8_t>& out, const std::string& s) {
    append(out, static_cast<uint64_t>(s.size()));
    out.insert(out.end(), s.begin(), s.end());
  }
  void key(const std::string& k, uint32_t type) { str(kv_, k); put(type); }

  uint32_t version_ = 3;
  uint64_t alignment_ = 32;
  uint64_t n_kv_ = 0, n_tensors_ = 0;
  std::vector<uint8_t> kv_, ti_, data_;
};

}  // namespace rkv_test
