// UTF-8 helpers (see utf8.hpp). Table 3-7 of the Unicode Standard gives the well-formed byte ranges.
#include "tokenizer/utf8.hpp"

namespace rkv::utf8 {

std::size_t sequence_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead < 0xC0) return 1;  // stray continuation byte: a piece of its own
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  return 4;
}

static bool is_continuation(unsigned char b) { return (b & 0xC0) == 0x80; }

std::size_t decode(std::string_view s, std::size_t pos, char32_t& cp) {
  const std::size_t left = s.size() - pos;
  const auto b0 = static_cast<unsigned char>(s[pos]);
  if (b0 < 0x80) {
    cp = b0;
    return 1;
  }
  if (b0 < 0xC2) return 0;  // continuation byte or overlong 2-byte lead (C0, C1)
  if (b0 < 0xE0) {
    if (left < 2 || !is_continuation(static_cast<unsigned char>(s[pos + 1]))) return 0;
    cp = (char32_t(b0 & 0x1F) << 6) | (static_cast<unsigned char>(s[pos + 1]) & 0x3F);
    return 2;
  }
  if (b0 < 0xF0) {
    if (left < 3) return 0;
    const auto b1 = static_cast<unsigned char>(s[pos + 1]);
    const auto b2 = static_cast<unsigned char>(s[pos + 2]);
    // E0 needs A0..BF (no overlong), ED needs 80..9F (no surrogates).
    const unsigned char lo = b0 == 0xE0 ? 0xA0 : 0x80;
    const unsigned char hi = b0 == 0xED ? 0x9F : 0xBF;
    if (b1 < lo || b1 > hi || !is_continuation(b2)) return 0;
    cp = (char32_t(b0 & 0x0F) << 12) | (char32_t(b1 & 0x3F) << 6) | (b2 & 0x3F);
    return 3;
  }
  if (b0 < 0xF5) {
    if (left < 4) return 0;
    const auto b1 = static_cast<unsigned char>(s[pos + 1]);
    const auto b2 = static_cast<unsigned char>(s[pos + 2]);
    const auto b3 = static_cast<unsigned char>(s[pos + 3]);
    // F0 needs 90..BF (no overlong), F4 needs 80..8F (nothing above U+10FFFF).
    const unsigned char lo = b0 == 0xF0 ? 0x90 : 0x80;
    const unsigned char hi = b0 == 0xF4 ? 0x8F : 0xBF;
    if (b1 < lo || b1 > hi || !is_continuation(b2) || !is_continuation(b3)) return 0;
    cp = (char32_t(b0 & 0x07) << 18) | (char32_t(b1 & 0x3F) << 12) | (char32_t(b2 & 0x3F) << 6) | (b3 & 0x3F);
    return 4;
  }
  return 0;  // F5..FF never appear in UTF-8
}

bool is_valid(std::string_view s) {
  char32_t cp;
  for (std::size_t pos = 0; pos < s.size();) {
    const std::size_t n = decode(s, pos, cp);
    if (n == 0) return false;
    pos += n;
  }
  return true;
}

std::string sanitize(std::string_view s) {
  if (is_valid(s)) return std::string(s);
  std::string out;
  out.reserve(s.size() + 16);
  char32_t cp;
  for (std::size_t pos = 0; pos < s.size();) {
    const std::size_t n = decode(s, pos, cp);
    if (n == 0) {
      append(out, kReplacement);
      pos += 1;
    } else {
      out.append(s.substr(pos, n));
      pos += n;
    }
  }
  return out;
}

void append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

}  // namespace rkv::utf8
