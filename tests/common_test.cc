#include <gtest/gtest.h>

#include "fencekit/common/clock.h"
#include "fencekit/common/text.h"
#include "fencekit/common/token.h"
#include "fencekit/common/units.h"

namespace fencekit {
namespace {

TEST(FencingTokenTest, ParsesDecimalInRange) {
  EXPECT_EQ(FencingToken::Parse("1")->value(), 1);
  EXPECT_EQ(FencingToken::Parse("9223372036854775807")->value(), INT64_MAX);
  EXPECT_EQ(FencingToken::Parse("007")->value(), 7);
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

TEST(UnitsTest, ParsesDurationsAndSizes) {
  EXPECT_EQ(ParseDuration("250ms").value(), std::chrono::milliseconds(250));
  EXPECT_EQ(ParseDuration("10s").value(), std::chrono::seconds(10));
  EXPECT_EQ(ParseDuration("2m").value(), std::chrono::minutes(2));
  EXPECT_FALSE(ParseDuration("10").ok());
  EXPECT_FALSE(ParseDuration("s").ok());
  EXPECT_FALSE(ParseDuration("-1s").ok());
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
}

}  // namespace
}  // namespace fencekit
