#include "certctl/util/duration.h"

#include <limits>

#include <gtest/gtest.h>

namespace certctl {
namespace duration_test {
namespace {

using std::chrono::seconds;

TEST(ParseDuration, AcceptsEveryUnit) {
  EXPECT_EQ(ParseDuration("90s").value(), seconds(90));
  EXPECT_EQ(ParseDuration("5m").value(), seconds(300));
  EXPECT_EQ(ParseDuration("720h").value(), seconds(720 * 3600));
  EXPECT_EQ(ParseDuration("30d").value(), seconds(30 * 86400));
  EXPECT_EQ(ParseDuration("10y").value(), seconds(10LL * 365 * 86400));
}

TEST(ParseDuration, AddsCombinedUnits) {
  EXPECT_EQ(ParseDuration("1h30m").value(), seconds(5400));
  EXPECT_EQ(ParseDuration("1y2d3h4m5s").value(),
            seconds(365 * 86400 + 2 * 86400 + 3 * 3600 + 4 * 60 + 5));
}

TEST(ParseDuration, RejectsMalformedInputWithReason) {
  for (const char* text : {"", "10", "h", "10x", "1.5h", "-5m", "5m3", " 5m", "5 m"}) {
    auto parsed = ParseDuration(text);
    ASSERT_FALSE(parsed.has_value()) << text;
    EXPECT_EQ(parsed.error().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(parsed.error().message().find("duration"), std::string::npos);
  }
  EXPECT_NE(ParseDuration("10x").error().message().find("unknown unit 'x'"), std::string::npos);
  EXPECT_NE(ParseDuration("10").error().message().find("missing unit"), std::string::npos);
}

TEST(ParseDuration, RefusesUnitsItDoesNotTakeByName) {
  const std::pair<const char*, const char*> cases[] = {
      {"90ms", "milliseconds (ms) are not supported"},
      {"1h500ms", "milliseconds (ms) are not supported"},
      {"10us", "microseconds (us) are not supported"},
      {"10ns", "nanoseconds (ns) are not supported"},
      {"2w", "weeks (w) are not a unit; write days, e.g. 14d"},
      {"6M", "months (M) are not a unit, and m is minutes"},
      {"1y6mo", "months (mo) are not a unit, and m is minutes"},
  };
  for (const auto& [text, reason] : cases) {
    auto parsed = ParseDuration(text);
    ASSERT_FALSE(parsed.has_value()) << text;
    EXPECT_EQ(parsed.error().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(parsed.error().message().find(reason), std::string::npos)
        << text << ": " << parsed.error().message();
  }
  // Minutes followed by seconds are still minutes and seconds.
  EXPECT_EQ(ParseDuration("5m3s").value(), seconds(303));
}

TEST(DurationAmbiguity, WarnsOfMinutesRightAfterYearsOrDays) {
  EXPECT_EQ(DurationAmbiguity("1y6m").value_or(""),
            "\"1y6m\" is 1 year and 6 minutes: m is minutes, not months; write months as days "
            "(e.g. 1y180d)");
  EXPECT_TRUE(DurationAmbiguity("30d2m").has_value());
  for (const char* clear : {"1h30m", "15m", "1y180d", "720h", "1d2h3m", "90s"}) {
    EXPECT_FALSE(DurationAmbiguity(clear).has_value()) << clear;
  }
}

TEST(ParseDuration, ZeroOnlyWhenAllowed) {
  EXPECT_FALSE(ParseDuration("0s").has_value());
  EXPECT_EQ(ParseDuration("0s", /*allow_zero=*/true).value(), seconds(0));
}

TEST(ParseDuration, RejectsOverflow) {
  EXPECT_FALSE(ParseDuration("99999999999999999y").has_value());
  EXPECT_FALSE(ParseDuration("9999999999999999999s").has_value());
}

TEST(ParseDuration, AcceptsUpToTheMaximumAndNamesItAbove) {
  EXPECT_EQ(ParseDuration("100y").value(), kMaxDuration);
  EXPECT_EQ(ParseDuration("99y365d").value(), kMaxDuration);
  for (const char* text :
       {"101y", "100y1s", "236y", "300y", "36501d", "99y366d", "99999999999999999999y"}) {
    auto parsed = ParseDuration(text);
    ASSERT_FALSE(parsed.has_value()) << text;
    EXPECT_EQ(parsed.error().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(parsed.error().message().find("longer than the maximum of 100y"), std::string::npos)
        << parsed.error().message();
  }
}

TEST(SaturatingAdd, AddsInRangeAndClampsAtTheEnds) {
  const TimePoint now{seconds(1800000000)};
  EXPECT_EQ(SaturatingAdd(now, seconds(90)), now + seconds(90));
  EXPECT_EQ(SaturatingAdd(now, seconds(-90)), now - seconds(90));
  // 236 years in nanoseconds past 2027 does not fit a 64-bit count: clamped, not wrapped.
  EXPECT_EQ(SaturatingAdd(now, Years(236)), TimePoint::max());
  EXPECT_EQ(SaturatingAdd(now, seconds(std::numeric_limits<std::int64_t>::max())),
            TimePoint::max());
  EXPECT_EQ(SaturatingAdd(now, seconds(std::numeric_limits<std::int64_t>::min())),
            TimePoint::min());
  EXPECT_GT(SaturatingAdd(now, kMaxDuration), now);
  const auto steady = std::chrono::steady_clock::now();
  EXPECT_EQ(SaturatingAdd(steady, Years(300)), std::chrono::steady_clock::time_point::max());
}

TEST(FormatDuration, UsesLargestUnitsAndRoundTrips) {
  EXPECT_EQ(FormatDuration(seconds(0)), "0s");
  EXPECT_EQ(FormatDuration(seconds(86400)), "1d");
  EXPECT_EQ(FormatDuration(seconds(5400)), "1h30m");
  EXPECT_EQ(FormatDuration(seconds(10LL * 365 * 86400)), "10y");
  EXPECT_EQ(FormatDuration(seconds(-90)), "-1m30s");
  for (long long value : {1LL, 59LL, 61LL, 3601LL, 90061LL, 31536001LL}) {
    EXPECT_EQ(ParseDuration(FormatDuration(seconds(value))).value(), seconds(value));
  }
}

TEST(Rfc3339, FormatsUtcAndParsesBack) {
  const TimePoint time{seconds(1800000000)};
  EXPECT_EQ(FormatRfc3339(time), "2027-01-15T08:00:00Z");
  EXPECT_EQ(ParseRfc3339("2027-01-15T08:00:00Z").value(), time);
  EXPECT_EQ(ParseRfc3339("2027-01-15T09:00:00+01:00").value(), time);
  EXPECT_EQ(ParseRfc3339("1970-01-01T00:00:00Z").value(), TimePoint{});
  EXPECT_EQ(ParseRfc3339("2027-01-15T08:00:00.500000Z").value(),
            time + std::chrono::milliseconds(500));
}

TEST(Rfc3339, RejectsMalformed) {
  for (const char* text : {"", "2027-01-15", "2027-01-15T08:00:00", "2027-13-01T00:00:00Z",
                           "2027-01-15T08:00:00Zjunk", "2027-01-15 08:00:00Z"}) {
    EXPECT_FALSE(ParseRfc3339(text).has_value()) << text;
  }
}

// Years past what a nanosecond TimePoint holds saturate instead of overflowing (found by
// fuzz/duration.cc); the ends format and parse back to themselves.
TEST(Rfc3339, TimesBeyondATimePointSaturateAtItsEnds) {
  const TimePoint last = std::chrono::floor<seconds>(TimePoint::max());
  const TimePoint first = std::chrono::ceil<seconds>(TimePoint::min());
  for (const char* text : {"9999-12-31T23:59:59Z", "2262-04-11T23:47:16-01:00",
                           "2262-04-11T23:47:16.999999999Z", "2262-04-11T23:47:16Z"}) {
    const auto parsed = ParseRfc3339(text);
    ASSERT_TRUE(parsed.has_value()) << text;
    EXPECT_EQ(*parsed, last) << text;
  }
  EXPECT_EQ(ParseRfc3339("2262-04-11T23:47:15.5Z").value(), last - std::chrono::milliseconds(500));
  for (const char* text :
       {"0000-01-01T00:00:00Z", "1677-09-21T00:12:43.999Z", "1677-09-21T00:12:44+00:01"}) {
    const auto parsed = ParseRfc3339(text);
    ASSERT_TRUE(parsed.has_value()) << text;
    EXPECT_EQ(*parsed, first) << text;
  }
  EXPECT_EQ(ParseRfc3339(FormatRfc3339(last)).value(), last);
  EXPECT_EQ(ParseRfc3339(FormatRfc3339(first)).value(), first);
}

}  // namespace
}  // namespace duration_test
}  // namespace certctl
