// core/format.hpp: printable_message on hand-made messages.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

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

TEST(NaturalLess, NumbersInMessagesCompareByValue) {
  const rkv::NaturalLess less;
  EXPECT_TRUE(less("layer 2: x", "layer 10: x"));
  EXPECT_FALSE(less("layer 10: x", "layer 2: x"));
  EXPECT_TRUE(less("layers 0-9", "layers 0-17"));
  EXPECT_TRUE(less("a", "b"));
  EXPECT_TRUE(less("layer 7", "layer 7 and more"));
  EXPECT_FALSE(less("layer 7", "layer 7"));
  EXPECT_TRUE(less("x 7", "x 007"));  // equal values: fewer leading zeros first, so the order stays strict
  EXPECT_FALSE(less("x 007", "x 7"));
  std::vector<std::string> v = {"layer 10", "layer 1", "layer 2", "layer 0", "layer 11"};
  std::sort(v.begin(), v.end(), less);
  EXPECT_EQ(v, (std::vector<std::string>{"layer 0", "layer 1", "layer 2", "layer 10", "layer 11"}));
}

}  // namespace
