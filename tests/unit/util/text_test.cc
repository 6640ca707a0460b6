#include "certctl/util/text.h"

#include <string>

#include <gtest/gtest.h>

namespace certctl {
namespace text_test {
namespace {

TEST(OneLine, PlainTextIsUnchanged) {
  EXPECT_EQ(OneLine("secrets \"webhook-cert\" not found", 100),
            "secrets \"webhook-cert\" not found");
  EXPECT_EQ(OneLine("", 10), "");
}

TEST(OneLine, ControlCharactersAndNewlinesBecomeOneSpace) {
  EXPECT_EQ(OneLine("first\r\n\n  second\tthird", 100), "first second third");
  // An escape sequence loses its ESC, so a terminal shows it as text.
  EXPECT_EQ(OneLine("red \x1b[31mtext\x7f", 100), "red [31mtext");
  // C1 controls (U+009B is a one-character CSI) and no-break spaces count as spaces too.
  EXPECT_EQ(OneLine("a\xc2\x9b"
                    "31m b\xc2\xa0"
                    "c",
                    100),
            "a 31m b c");
}

TEST(OneLine, BidirectionalControlsAndLineSeparatorsAreSpaces) {
  // U+202E would show "txt.exe" as "exe.txt"; U+2028 is a line break to some viewers.
  EXPECT_EQ(OneLine("file\xe2\x80\xaetxt.exe", 100), "file txt.exe");
  EXPECT_EQ(OneLine("a\xe2\x81\xa6"
                    "b\xe2\x80\x8f"
                    "c\xe2\x80\xa8"
                    "d",
                    100),
            "a b c d");
  // Other three-byte characters are kept.
  EXPECT_EQ(OneLine("\xe2\x80\x94 \xe2\x82\xac", 100), "\xe2\x80\x94 \xe2\x82\xac");
}

TEST(OneLine, LeadingAndTrailingSpaceIsDropped) {
  EXPECT_EQ(OneLine("\n\n  message \n", 100), "message");
}

TEST(OneLine, BytesThatAreNotUtf8BecomeQuestionMarks) {
  EXPECT_EQ(OneLine("bad \xff\xfe end", 100), "bad ?? end");
  // Overlong form of '/', a UTF-16 surrogate, a truncated sequence.
  EXPECT_EQ(OneLine("\xc0\xaf", 100), "??");
  EXPECT_EQ(OneLine("\xed\xa0\x80", 100), "???");
  EXPECT_EQ(OneLine("end \xe2\x82", 100), "end ??");
  EXPECT_EQ(OneLine("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x94\x92", 100),
            "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x94\x92");
}

TEST(OneLine, LongTextIsClippedOnACharacterBoundary) {
  EXPECT_EQ(OneLine("abcdefghij", 4), "abcd...");
  EXPECT_EQ(OneLine("abcd", 4), "abcd");
  // A two-byte character that would straddle the limit is left out whole.
  EXPECT_EQ(OneLine("abc\xc3\xa9", 4), "abc...");
  const std::string huge(1 << 20, 'x');
  EXPECT_EQ(OneLine(huge, 400).size(), 403U);
}

TEST(AsciiLower, LowersAsciiLettersOnly) {
  EXPECT_EQ(AsciiLower("Hook.NS.SVC"), "hook.ns.svc");
  EXPECT_EQ(AsciiLower("RSA-2048"), "rsa-2048");
  // Bytes past ASCII are left as they are, whatever the locale.
  EXPECT_EQ(AsciiLower("CAF\xc3\x89"), "caf\xc3\x89");
}

TEST(Quoted, PutsDoubleQuotesAround) {
  EXPECT_EQ(Quoted("webhook-ca"), "\"webhook-ca\"");
  EXPECT_EQ(Quoted(""), "\"\"");
}

}  // namespace
}  // namespace text_test
}  // namespace certctl
