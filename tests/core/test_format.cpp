// core/format.hpp: printable_message on hand-made messages.
#include <gtest/gtest.h>

#include <string>

#include "core/format.hpp"

namespace {

TEST(PrintableMessage, ControlBytesAreEscapedAndTextIsKept) {
  EXPECT_EQ(rkv::printable_message("plain text stays"), "plain text stays");
  // A newline, an ESC (a terminal colour code) and DEL become \xNN; UTF-8 stays as it is.
  EXPECT_EQ(rkv::printable_message("a\nb \x1b[31mred\x7f \xc3\xa9t\xc3\xa9"), "a\\x0ab \\x1b[31mred\\x7f \xc3\xa9t\xc3\xa9");
}

TEST(PrintableMessage, LongRunsAreCutAroundTheirMiddle) {
  // The run "'" + 100 'x' + "'" (102 bytes) with max_run 40: its first 20 and last 10 bytes kept, 72 left out;
  // the short words around it untouched.
  const std::string out = rkv::printable_message("key '" + std::string(100, 'x') + "' is bad", 40);
  EXPECT_EQ(out, "key '" + std::string(19, 'x') + "...[72 bytes]..." + std::string(9, 'x') + "' is bad");
  // A cut never splits a UTF-8 character: 30 two-byte characters (60 bytes), max_run 20: the head stops at byte 10
  // (a character boundary), the tail starts at byte 46 (60 - 5 = 55 is a continuation byte: moved to 56).
  std::string e;
  for (int i = 0; i < 30; ++i) e += "\xc3\xa9";
  const std::string cut = rkv::printable_message(e, 20);
  EXPECT_EQ(cut, e.substr(0, 10) + "...[46 bytes]..." + e.substr(56));
}

TEST(MarkdownCell, PipesAndControlBytesCannotBreakATable) {
  EXPECT_EQ(rkv::markdown_cell("uniform + snapkv @ f=0.2"), "uniform + snapkv @ f=0.2");
  EXPECT_EQ(rkv::markdown_cell("a|b\nc\x1b"), "a\\|b\\x0ac\\x1b");
}

}  // namespace
