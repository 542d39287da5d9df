// UTF-8 helpers shared by the tokenizers: code point decoding and encoding, the strict validity check and the
// replacement of invalid bytes by U+FFFD, and the lead-byte length rule the merge algorithms use to cut text into
// characters.
//
// Reference: The Unicode Standard, chapter 3.9 (UTF-8, "well-formed code unit sequences", table 3-7).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace rkv::utf8 {

/// U+FFFD REPLACEMENT CHARACTER, the code point that stands in for each invalid byte.
inline constexpr char32_t kReplacement = 0xFFFD;

/// Length in bytes of the character that starts with byte `lead`, judged from its high bits only:
/// 0xxxxxxx -> 1, 110xxxxx -> 2, 1110xxxx -> 3, 1111xxxx -> 4, and 1 for a stray continuation byte 10xxxxxx.
/// This is the cut llama.cpp's merge loops use (unicode_len_utf8); callers clip it to the bytes that remain, so any
/// byte string, valid or not, splits into pieces of 1..4 bytes. Never fails.
std::size_t sequence_length(unsigned char lead);

/// Decodes the well-formed UTF-8 sequence at `s[pos]` (table 3-7: no overlong forms, no surrogates, nothing above
/// U+10FFFF). Returns the number of bytes it spans (1..4) and stores the code point in `cp`; returns 0 when the bytes
/// at `pos` do not start a well-formed sequence (then `cp` is unspecified). `pos < s.size()` is required.
std::size_t decode(std::string_view s, std::size_t pos, char32_t& cp);

/// True when every byte of `s` belongs to a well-formed UTF-8 sequence.
bool is_valid(std::string_view s);

/// Copy of `s` in which every byte that does not start a well-formed sequence is replaced by U+FFFD (EF BF BD) and
/// decoding resumes at the next byte (so "\xE2\x82" becomes two U+FFFD, like llama.cpp's unicode_cpts_from_utf8).
/// NUL bytes are valid U+0000 and kept. Returns `s` unchanged when it is already valid.
std::string sanitize(std::string_view s);

/// Appends the UTF-8 encoding of `cp` (must be <= 0x10FFFF) to `out`.
void append(std::string& out, char32_t cp);

}  // namespace rkv::utf8
