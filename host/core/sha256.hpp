// SHA-256 digests (FIPS 180-4) through OpenSSL's EVP interface (Debian libssl-dev): model file hashes for cache
// keys and records, config hashes for run ids and --resume checks.
// Thread rules: the free functions are thread-safe; one Sha256 object belongs to one thread at a time.
#pragma once
#include <cstddef>
#include <memory>
#include <string>

namespace rkv {

/// Incremental SHA-256.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void update(const void* data, size_t n);
  /// Finishes and returns the digest as 64 lowercase hex characters; the object must not be updated afterwards.
  std::string hex_digest();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// SHA-256 of a byte range, 64 lowercase hex characters.
std::string sha256_hex(const void* data, size_t n);
/// SHA-256 of a file's bytes; throws rkv::InputError naming the file when it cannot be read or is not a regular file
/// (core/regular_file.hpp), rkv::Cancelled when the thread's CancelScope (core/cancel.hpp) is cancelled meanwhile.
std::string sha256_file(const std::string& path);

}  // namespace rkv
