// Python str operations the LongBench metrics rely on (eval/metrics_python_text.hpp). Expected values are Python 3's
// str behaviour, looked up in the Unicode tables (UnicodeData.txt lowercase column, PropList White_Space plus
// Python's U+001C..U+001F) and written out by hand.
#include <gtest/gtest.h>

#include "eval/metrics_python_text.hpp"

namespace {

using rkv::pytext::lower_code_point;
using rkv::pytext::python_isspace;
using rkv::pytext::python_lower;
using rkv::pytext::python_split;
using Words = std::vector<std::string>;

TEST(PythonText, LowerAsciiAndLatin) {
  EXPECT_EQ(python_lower("Hello, WORLD 42!"), "hello, world 42!");
  // À U+00C0 -> à U+00E0, É U+00C9 -> é U+00E9, Î U+00CE -> î U+00EE (delta +32 in Latin-1).
  EXPECT_EQ(python_lower("\xC3\x80\xC3\x89\xC3\x8E"), "\xC3\xA0\xC3\xA9\xC3\xAE");
  // ß U+00DF is already lowercase; × U+00D7 (inside the Latin-1 capital range) is not a letter and stays.
  EXPECT_EQ(python_lower("STRA\xC3\x9F" "E \xC3\x97"), "stra\xC3\x9F" "e \xC3\x97");
}

TEST(PythonText, LowerOtherScriptsAndSpecials) {
  // Ā U+0100 -> ā U+0101 (the stride-2 pairs of Latin Extended-A).
  EXPECT_EQ(lower_code_point(0x0100), 0x0101u);
  EXPECT_EQ(lower_code_point(0x0101), 0x0101u);
  // Ÿ U+0178 -> ÿ U+00FF (delta -121).
  EXPECT_EQ(lower_code_point(0x0178), 0x00FFu);
  // Titlecase ǅ U+01C5 -> ǆ U+01C6; Kelvin sign K U+212A -> k U+006B; Ohm sign U+2126 -> ω U+03C9.
  EXPECT_EQ(lower_code_point(0x01C5), 0x01C6u);
  EXPECT_EQ(lower_code_point(0x212A), 0x006Bu);
  EXPECT_EQ(lower_code_point(0x2126), 0x03C9u);
  // Cyrillic Д U+0414 -> д U+0434; Deseret 𐐀 U+10400 -> 𐐨 U+10428 (outside the BMP).
  EXPECT_EQ(lower_code_point(0x0414), 0x0434u);
  EXPECT_EQ(lower_code_point(0x10400), 0x10428u);
  // Σ alone lowers to σ U+03C3 (no cased letter before it, so not the final-sigma context).
  EXPECT_EQ(python_lower("\xCE\xA3"), "\xCF\x83");
  // İ U+0130 -> "i" + U+0307 COMBINING DOT ABOVE (the one multi-code-point mapping).
  EXPECT_EQ(python_lower("\xC4\xB0"), "i\xCC\x87");
  // Code points without a mapping: CJK, digits, the replacement for an invalid byte.
  EXPECT_EQ(lower_code_point(0x4E2D), 0x4E2Du);
  EXPECT_EQ(python_lower("A\xFF"), "a\xEF\xBF\xBD");
}

TEST(PythonText, Whitespace) {
  for (char32_t c : {0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x1C, 0x1D, 0x1E, 0x1F, 0x20, 0x85, 0xA0, 0x1680, 0x2000, 0x200A,
                     0x2028, 0x2029, 0x202F, 0x205F, 0x3000}) {
    EXPECT_TRUE(python_isspace(c)) << std::hex << static_cast<uint32_t>(c);
  }
  // Zero-width space U+200B, U+180E (no longer a space since Unicode 6.3), letters and NUL are not.
  for (char32_t c : {0x00, 0x41, 0x200B, 0x180E, 0xFEFF}) EXPECT_FALSE(python_isspace(c));
}

TEST(PythonText, SplitOnWhitespace) {
  // " a\u00A0 b\n\x1c c " -> ['a', 'b', 'c']
  EXPECT_EQ(python_split(" a\xC2\xA0 b\n\x1c c "), (Words{"a", "b", "c"}));
  // U+200B is not whitespace: one word.
  EXPECT_EQ(python_split("a\xE2\x80\x8B" "b"), (Words{"a\xE2\x80\x8B" "b"}));
  EXPECT_EQ(python_split(""), Words{});
  EXPECT_EQ(python_split(" \t\n"), Words{});
  EXPECT_EQ(rkv::pytext::python_collapse_whitespace("  x \u3000 y\t"), "x y");
}

TEST(PythonText, SplitOnSeparator) {
  EXPECT_EQ(python_split("a..b", "."), (Words{"a", "", "b"}));
  EXPECT_EQ(python_split("", "."), (Words{""}));
  EXPECT_EQ(python_split(".", "."), (Words{"", ""}));
  EXPECT_EQ(python_split("x = 1\n", "\n"), (Words{"x = 1", ""}));
  EXPECT_THROW(python_split("abc", ""), std::invalid_argument);
}

TEST(PythonText, CodePointsRoundTrip) {
  const std::string s = "a\xC3\xA9\xE4\xB8\xAD\xF0\x9F\x98\x80";  // a é 中 😀
  const std::u32string cps = rkv::pytext::to_code_points(s);
  EXPECT_EQ(cps, (std::u32string{U'a', 0xE9, 0x4E2D, 0x1F600}));
  EXPECT_EQ(rkv::pytext::to_utf8(cps), s);
  // Each invalid byte is one U+FFFD.
  EXPECT_EQ(rkv::pytext::to_code_points("\xE2\x82"), (std::u32string{0xFFFD, 0xFFFD}));
}

TEST(PythonText, LowerTableIsSortedAndDisjoint) {
  ASSERT_GT(rkv::pytext::kLowerRunCount, 100u);
  for (size_t i = 0; i < rkv::pytext::kLowerRunCount; ++i) {
    const auto& r = rkv::pytext::kLowerRuns[i];
    EXPECT_LE(r.first, r.last);
    EXPECT_TRUE(r.stride == 1 || r.stride == 2);
    if (i > 0) EXPECT_LT(rkv::pytext::kLowerRuns[i - 1].last, r.first);
  }
}

}  // namespace
