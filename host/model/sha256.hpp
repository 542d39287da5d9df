// SHA-256 (FIPS 180-4), used for model identity in cache keys.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace rkv {

/// Incremental SHA-256. Not thread-safe per object; distinct objects are independent.
class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t n);
  /// Finishes and returns the digest as 64 lowercase hex characters. The object must not be updated afterwards.
  std::string hex_digest();

 private:
  void block(const uint8_t* p);
  uint32_t h_[8];
  uint8_t buf_[64];
  size_t buf_len_ = 0;
  uint64_t total_ = 0;
};

/// SHA-256 of a byte range, as lowercase hex.
std::string sha256_hex(const void* data, size_t n);
/// SHA-256 of a whole file, as lowercase hex. Throws rkv::InputError naming the path when it cannot be read.
std::string sha256_file(const std::string& path);

}  // namespace rkv
