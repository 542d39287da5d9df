#include "eval/ruler_random.hpp"

#include <cstdio>

#include "core/errors.hpp"

namespace rkv {

int64_t ruler_uniform(RulerRng& rng, int64_t lo, int64_t hi) {
  return lo + static_cast<int64_t>(rng() % static_cast<uint64_t>(hi - lo + 1));
}

std::vector<int64_t> ruler_sample(RulerRng& rng, int64_t n, int64_t k) {
  if (k < 0 || k > n)
    throw InputError("ruler: cannot draw " + std::to_string(k) + " distinct items from " + std::to_string(n));
  std::vector<int64_t> pool(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) pool[static_cast<size_t>(i)] = i;
  for (int64_t i = 0; i < k; ++i)
    std::swap(pool[static_cast<size_t>(i)], pool[static_cast<size_t>(ruler_uniform(rng, i, n - 1))]);
  pool.resize(static_cast<size_t>(k));
  return pool;
}

std::string ruler_random_number(RulerRng& rng, int digits) {
  int64_t lo = 1;
  for (int i = 1; i < digits; ++i) lo *= 10;
  return std::to_string(ruler_uniform(rng, lo, lo * 10 - 1));
}

std::string ruler_uuid(RulerRng& rng) {
  uint64_t hi = rng(), lo = rng();
  hi = (hi & ~(uint64_t{0xF} << 12)) | (uint64_t{4} << 12);  // version 4 in bits 76..79 of the 128
  lo = (lo & ~(uint64_t{0x3} << 62)) | (uint64_t{2} << 62);  // variant 10 in bits 62..63
  char buf[37];
  std::snprintf(buf, sizeof buf, "%08x-%04x-%04x-%04x-%012llx", static_cast<unsigned>(hi >> 32),
                static_cast<unsigned>((hi >> 16) & 0xFFFF), static_cast<unsigned>(hi & 0xFFFF),
                static_cast<unsigned>(lo >> 48), static_cast<unsigned long long>(lo & 0xFFFFFFFFFFFFull));
  return buf;
}

std::string ruler_letters(RulerRng& rng, int64_t k, bool upper) {
  std::string s;
  for (int64_t i = 0; i < k; ++i) s += static_cast<char>((upper ? 'A' : 'a') + ruler_uniform(rng, 0, 25));
  return s;
}

}  // namespace rkv
