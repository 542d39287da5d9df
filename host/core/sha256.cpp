#include "core/sha256.hpp"

#include <openssl/evp.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <vector>

#include "core/cancel.hpp"
#include "core/errors.hpp"
#include "core/regular_file.hpp"

namespace rkv {

struct Sha256::Impl {
  EVP_MD_CTX* ctx = nullptr;
};

Sha256::Sha256() : impl_(std::make_unique<Impl>()) {
  impl_->ctx = EVP_MD_CTX_new();
  if (!impl_->ctx || EVP_DigestInit_ex(impl_->ctx, EVP_sha256(), nullptr) != 1)
    throw std::runtime_error("OpenSSL: cannot initialize SHA-256");
}

Sha256::~Sha256() { EVP_MD_CTX_free(impl_->ctx); }

void Sha256::update(const void* data, size_t n) {
  if (EVP_DigestUpdate(impl_->ctx, data, n) != 1) throw std::runtime_error("OpenSSL: SHA-256 update failed");
}

std::string Sha256::hex_digest() {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_DigestFinal_ex(impl_->ctx, md, &len) != 1) throw std::runtime_error("OpenSSL: SHA-256 final failed");
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < len; ++i) out += hex[md[i] >> 4], out += hex[md[i] & 15];
  return out;
}

std::string sha256_hex(const void* data, size_t n) {
  Sha256 h;
  h.update(data, n);
  return h.hex_digest();
}

std::string sha256_file(const std::string& path) {
  const int fd = open_regular_file(path, "file to hash");  // a FIFO or /dev/zero would never end
  Sha256 h;
  std::vector<char> buf(1 << 20);
  for (;;) {
    if (cancellation_requested()) {
      ::close(fd);
      throw Cancelled();
    }
    const ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      const std::string why = std::strerror(errno);
      ::close(fd);
      throw InputError("file to hash '" + path + "': cannot read: " + why);
    }
    h.update(buf.data(), static_cast<size_t>(n));
  }
  ::close(fd);
  return h.hex_digest();
}

}  // namespace rkv
