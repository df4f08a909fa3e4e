#include <gtest/gtest.h>

#include <initializer_list>
#include <string>

#include "fencekit/common/clock.h"
#include "fencekit/common/names.h"
#include "fencekit/common/text.h"
#include "fencekit/common/token.h"
#include "fencekit/common/units.h"

namespace fencekit {
namespace {

TEST(FencingTokenTest, ParsesDecimalInRange) {
  EXPECT_EQ(FencingToken::Parse("1")->value(), 1);
  EXPECT_EQ(FencingToken::Parse("9223372036854775807")->value(), INT64_MAX);
}

TEST(FencingTokenTest, RefusesLeadingZerosSoEachValueHasOneSpelling) {
  for (const char* bad : {"007", "01", "00", "09223372036854775807"}) {
    auto t = FencingToken::Parse(bad);
    EXPECT_FALSE(t.ok()) << bad;
    EXPECT_NE(t.status().message().find("leading zero"), std::string::npos) << bad;
  }
  EXPECT_EQ(FencingToken::Parse("10")->value(), 10);
}

TEST(FencingTokenTest, RejectsEverythingElseWithoutClamping) {
  for (const char* bad : {"", "0", "-1", "+1", "1 2", " 1", "0x10", "1e3", "abc",
                          "9223372036854775808", "99999999999999999999", "1.0"}) {
    auto t = FencingToken::Parse(bad);
    EXPECT_FALSE(t.ok()) << bad;
    EXPECT_TRUE(t.status().IsInvalidArgument()) << bad;
  }
  EXPECT_FALSE(FencingToken::FromInt(0).ok());
  EXPECT_FALSE(FencingToken::FromInt(-5).ok());
}

// Each of `bad` is refused by `parse` with the durations' one message, naming `units`.
template <typename Parse>
void ExpectEachRefusedSaying(Parse parse, std::initializer_list<const char*> bad,
                             const std::string& units) {
  for (const char* text : bad) {
    auto d = parse(text);
    ASSERT_FALSE(d.ok()) << text;
    EXPECT_EQ(d.status().message(),
              "duration \"" + std::string(text) +
                  "\" is invalid: write seconds (10, 1.5) or a number with a unit, " + units);
  }
}

TEST(UnitsTest, ParsesDurationsAndSizes) {
  EXPECT_EQ(ParseDuration("250ms").value(), std::chrono::milliseconds(250));
  EXPECT_EQ(ParseDuration("10s").value(), std::chrono::seconds(10));
  EXPECT_EQ(ParseDuration("2m").value(), std::chrono::minutes(2));
  // A bare number is seconds, whole or not; a unit takes a fraction too; to the millisecond.
  EXPECT_EQ(ParseDuration("10").value(), std::chrono::seconds(10));
  EXPECT_EQ(ParseDuration("1.5").value(), std::chrono::milliseconds(1500));
  EXPECT_EQ(ParseDuration("0.5s").value(), std::chrono::milliseconds(500));
  EXPECT_EQ(ParseDuration("1.5m").value(), std::chrono::seconds(90));
  EXPECT_EQ(ParseDuration("2.0005").value(), std::chrono::milliseconds(2001));
  EXPECT_EQ(ParseDuration("0").value(), std::chrono::milliseconds(0));
  // One message for every flag, saying what to write.
  ExpectEachRefusedSaying(ParseDuration,
                          {"", "s", "-1s", "1.", ".5", "1.5.2", "10x", "1 s", "0.0000000001"},
                          "ms, s, m or h (500ms, 2m)");
  EXPECT_NE(ParseDuration("99999999999h").status().message().find("too long"), std::string::npos);
  EXPECT_FALSE(ParseDuration("300us").ok());  // a flag in milliseconds takes no microseconds
}

TEST(UnitsTest, FineDurationsTakeMicrosecondsAndTheSameGrammar) {
  EXPECT_EQ(ParseFineDuration("300us").value(), std::chrono::microseconds(300));
  EXPECT_EQ(ParseFineDuration("1.5ms").value(), std::chrono::microseconds(1500));
  EXPECT_EQ(ParseFineDuration("0.0025").value(), std::chrono::microseconds(2500));
  EXPECT_EQ(ParseFineDuration("2m").value(), std::chrono::minutes(2));
  EXPECT_EQ(ParseFineDuration("0.0000005").value(), std::chrono::microseconds(1));  // nearest
  EXPECT_EQ(ParseFineDuration("0").value(), std::chrono::microseconds(0));
  ExpectEachRefusedSaying(ParseFineDuration,
                          {"", "us", "-1us", "1.us", "10x", "1 us", "0.0000000001"},
                          "us, ms, s, m or h (300us, 1.5ms)");
  EXPECT_NE(ParseFineDuration("99999999999h").status().message().find("too long"),
            std::string::npos);
}

TEST(UnitsTest, ParsesSizes) {
  EXPECT_EQ(ParseSize("1MiB").value(), 1u << 20);
  EXPECT_EQ(ParseSize("512").value(), 512u);
  EXPECT_FALSE(ParseSize("1MB").ok());
}

TEST(FakeClockTest, SleepAdvancesTimeWithoutWaiting) {
  FakeClock clock;
  auto start = clock.Now();
  auto wall = clock.WallNow();
  clock.SleepFor(std::chrono::hours(5));
  EXPECT_EQ(clock.Now() - start, std::chrono::hours(5));
  EXPECT_EQ(clock.WallNow() - wall, std::chrono::hours(5));
  clock.Advance(std::chrono::seconds(1));
  EXPECT_EQ(clock.Now() - start, std::chrono::hours(5) + std::chrono::seconds(1));
}

TEST(Base64Test, EncodesWithPaddingAndDecodesBack) {
  // RFC 4648 test vectors.
  EXPECT_EQ(Base64Encode(""), "");
  EXPECT_EQ(Base64Encode("f"), "Zg==");
  EXPECT_EQ(Base64Encode("fo"), "Zm8=");
  EXPECT_EQ(Base64Encode("foo"), "Zm9v");
  EXPECT_EQ(Base64Encode("foobar"), "Zm9vYmFy");
  const std::string bytes("fencekit/lock/\0\xff\x80", 17);
  EXPECT_EQ(Base64Decode(Base64Encode(bytes)), bytes);
  EXPECT_EQ(Base64Decode("Zm8="), "fo");
}

TEST(Base64Test, RefusesTextThatIsNotBase64) {
  EXPECT_FALSE(Base64Decode("Zm9v!").has_value());
  EXPECT_FALSE(Base64Decode("not base64").has_value());
  // Lengths that leave bits over: once read past the end of the text (found by fuzzing).
  EXPECT_FALSE(Base64Decode("W").has_value());
  EXPECT_FALSE(Base64Decode("AB=").has_value());
  EXPECT_EQ(Base64Decode("Zm8"), "fo");
}

TEST(Utf8Test, AcceptsEveryWellFormedSequence) {
  for (std::string_view ok :
       {"", "plain ascii", "\x7F", "\xC2\x80", "\xDF\xBF", "\xE0\xA0\x80", "\xED\x9F\xBF",
        "\xEE\x80\x80", "\xEF\xBF\xBF", "\xF0\x90\x80\x80", "\xF0\x9F\x98\x80", "\xF4\x8F\xBF\xBF",
        "r\xC3\xA9sum\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC"}) {
    EXPECT_TRUE(IsValidUtf8(ok)) << PercentEncode(ok);
  }
}

TEST(Utf8Test, RefusesOverlongSurrogateAndOutOfRangeForms) {
  for (std::string_view bad : {
           "\xC0\xAF",          // overlong '/'
           "\xC1\xBF",          // overlong
           "\xE0\x80\xAF",      // overlong 3-byte
           "\xE0\x9F\xBF",      // overlong 3-byte, highest
           "\xF0\x80\x80\xAF",  // overlong 4-byte
           "\xF0\x8F\xBF\xBF",  // overlong 4-byte, highest
           "\xED\xA0\x80",      // U+D800, a surrogate
           "\xED\xBF\xBF",      // U+DFFF
           "\xF4\x90\x80\x80",  // U+110000
           "\xF5\x80\x80\x80",  // lead byte above F4
           "\xFF",
           "\x80",
           "\xC2",
           "\xE6\x97",
           "\xC2\x41",
           "a\xF0\x9F\x98",
       }) {
    EXPECT_FALSE(IsValidUtf8(bad)) << PercentEncode(bad);
    bool encoded = false;
    EXPECT_EQ(JsonSafeText(bad, &encoded), PercentEncode(bad));
    EXPECT_TRUE(encoded);
  }
}

TEST(NamesTest, RefusesControlCharactersEmptyAndOverlongNames) {
  EXPECT_TRUE(CheckName("key", "reports/q3.pdf").ok());
  EXPECT_TRUE(CheckName("key", "\xFF\xFE not utf-8, still a key").ok());
  EXPECT_TRUE(CheckName("key", std::string(kMaxNameBytes, 'k')).ok());
  EXPECT_FALSE(CheckName("key", std::string(kMaxNameBytes + 1, 'k')).ok());
  EXPECT_FALSE(CheckName("key", "").ok());
  for (char c : {'\0', '\r', '\n', '\t', '\x01', '\x1F', '\x7F'}) {
    auto s = CheckName("lock name", std::string("a") + c + "b");
    EXPECT_TRUE(s.IsInvalidArgument()) << int(c);
    EXPECT_NE(s.message().find("lock name contains"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("at byte 1"), std::string::npos) << s.message();
  }
}

TEST(TextTest, PluralSaysOneRunAndTwoRuns) {
  EXPECT_EQ(Plural(1, "run"), "1 run");
  EXPECT_EQ(Plural(0, "run"), "0 runs");
  EXPECT_EQ(Plural(2, "operation"), "2 operations");
}

TEST(TextTest, QuotedNameEscapesEveryByteOutsidePrintableAscii) {
  EXPECT_EQ(QuotedName("order-1"), "\"order-1\"");
  EXPECT_EQ(QuotedName(std::string("a\"\\\x00\x7f\xc3\xa9", 7)),
            "\"a\\x22\\x5c\\x00\\x7f\\xc3\\xa9\"");
  EXPECT_EQ(QuotedName(""), "\"\"");
}

}  // namespace
}  // namespace fencekit
