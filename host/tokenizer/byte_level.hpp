// The byte-to-character map of byte-level BPE (GPT-2's bytes_to_unicode): every byte 0..255 is shown as one printable
// code point, so a vocabulary of strings can hold arbitrary bytes. Printable bytes '!'..'~', U+00A1..U+00AC and
// U+00AE..U+00FF map to themselves; the other 68 bytes map, in increasing order, to U+0100, U+0101, ... (so the space
// 0x20 becomes U+0120 'Ġ' and the newline 0x0A becomes U+010A 'Ċ').
//
// Reference: openai/gpt-2 src/encoder.py bytes_to_unicode(); HF tokenizers pre_tokenizers/byte_level.rs.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace rkv::byte_level {

/// The code point that stands for byte `b`.
char32_t char_of_byte(uint8_t b);

/// `bytes` with every byte replaced by the UTF-8 encoding of its code point (1 byte in, 1 or 2 bytes out).
std::string encode(std::string_view bytes);

/// Inverse of encode(): each code point of the UTF-8 string `text` that stands for a byte becomes that byte. A code
/// point outside the map (text that was not made by encode(), e.g. a hand-written vocabulary entry) is copied through as
/// its own UTF-8 bytes, and so is every invalid byte. Returns the decoded bytes; never fails.
std::string decode(std::string_view text);

}  // namespace rkv::byte_level
