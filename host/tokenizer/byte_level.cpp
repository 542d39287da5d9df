// GPT-2 byte-level map (see byte_level.hpp).
#include "tokenizer/byte_level.hpp"

#include <array>

#include "tokenizer/utf8.hpp"

namespace rkv::byte_level {
namespace {

struct Tables {
  std::array<char32_t, 256> to_char{};
  std::array<std::string, 256> to_text{};
  std::array<int16_t, 324> from_char{};  // code points 0..323 cover the whole image of the map; -1 = not a byte

  Tables() {
    from_char.fill(-1);
    auto printable = [](int b) { return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF); };
    int next = 0;
    for (int b = 0; b < 256; ++b) {
      const char32_t c = printable(b) ? char32_t(b) : char32_t(256 + next++);
      to_char[b] = c;
      utf8::append(to_text[b], c);
      from_char[c] = static_cast<int16_t>(b);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

char32_t char_of_byte(uint8_t b) { return tables().to_char[b]; }

std::string encode(std::string_view bytes) {
  const Tables& t = tables();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) out += t.to_text[static_cast<unsigned char>(c)];
  return out;
}

std::string decode(std::string_view text) {
  const Tables& t = tables();
  std::string out;
  out.reserve(text.size());
  char32_t cp;
  for (std::size_t pos = 0; pos < text.size();) {
    const std::size_t n = utf8::decode(text, pos, cp);
    if (n == 0) {  // invalid byte: copied through
      out += text[pos];
      pos += 1;
      continue;
    }
    if (cp < t.from_char.size() && t.from_char[cp] >= 0) {
      out += static_cast<char>(t.from_char[cp]);
    } else {
      out.append(text.substr(pos, n));
    }
    pos += n;
  }
  return out;
}

}  // namespace rkv::byte_level
