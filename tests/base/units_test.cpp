#include "base/units.h"

#include <gtest/gtest.h>

#include <string>

namespace evalbox {
namespace {

TEST(ParseBytes, AcceptsBinaryAndDecimalUnits) {
  EXPECT_EQ(*parse_bytes("4096"), 4096u);
  EXPECT_EQ(*parse_bytes("2GiB"), 2ull << 30);
  EXPECT_EQ(*parse_bytes("512MiB"), 512ull << 20);
  EXPECT_EQ(*parse_bytes("1G"), 1'000'000'000u);
  EXPECT_EQ(*parse_bytes("8 MiB"), 8ull << 20);
  EXPECT_EQ(*parse_bytes("1.5KiB"), 1536u);
}

TEST(ParseBytes, RejectsGarbageWithAHint) {
  auto r = parse_bytes("lots");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("2GiB"), std::string::npos);
  EXPECT_FALSE(parse_bytes("3 parsecs"));
  EXPECT_FALSE(parse_bytes(""));
}

TEST(ParseDuration, AcceptsUnitsAndCombinations) {
  EXPECT_EQ(*parse_duration_ms("10m"), 600'000u);
  EXPECT_EQ(*parse_duration_ms("90s"), 90'000u);
  EXPECT_EQ(*parse_duration_ms("1h30m"), 5'400'000u);
  EXPECT_EQ(*parse_duration_ms("250ms"), 250u);
  EXPECT_EQ(*parse_duration_ms("5"), 5'000u);
}

TEST(ParseDuration, RejectsUnknownUnits) {
  EXPECT_FALSE(parse_duration_ms("10 fortnights"));
  EXPECT_FALSE(parse_duration_ms("m"));
  EXPECT_FALSE(parse_duration_ms(""));
}

// Found by fuzzing (tests/fuzz/regressions/suite_yaml): `wall: 11111111111111111111111111112m`
// converted 6.7e32 ms to uint64_t, which is undefined behaviour.
TEST(ParseDuration, RejectsDurationsTooLongToCount) {
  auto r = parse_duration_ms("11111111111111111111111111112m");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("too long"), std::string::npos) << r.error().message;
  EXPECT_FALSE(parse_duration_ms("300000000000000d"));
  EXPECT_EQ(parse_duration_ms("100000d"), uint64_t{100000} * 86'400'000);
}

// The edge cases both formats and the command line meet (harness/config reads every duration
// and size through these two parsers).
TEST(ParseBytes, EmptyAndBlankAreNotSizes) {
  for (auto text : {"", " ", "\t\n", "B", "MiB"}) {
    auto r = parse_bytes(text);
    ASSERT_FALSE(r) << "'" << text << "'";
    EXPECT_NE(r.error().message.find("is not a size"), std::string::npos) << r.error().message;
  }
}

TEST(ParseBytes, NegativeAndSignedAreNotSizes) {
  EXPECT_FALSE(parse_bytes("-1"));
  EXPECT_FALSE(parse_bytes("-1GiB"));
  EXPECT_FALSE(parse_bytes("+1GiB"));
}

TEST(ParseBytes, UnknownUnitsAreNamedAndUnitsAreCaseSensitive) {
  auto r = parse_bytes("5 kb");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("unknown size unit 'kb'"), std::string::npos)
      << r.error().message;
  EXPECT_FALSE(parse_bytes("5gib"));
  EXPECT_FALSE(parse_bytes("1e3"));       // no exponents
  EXPECT_FALSE(parse_bytes("1GiB2MiB"));  // one number, one unit
}

TEST(ParseBytes, SpacesAroundAndBeforeTheUnitAreAllowed) {
  EXPECT_EQ(*parse_bytes("  2GiB\n"), 2ull << 30);
  EXPECT_EQ(*parse_bytes("8 MiB"), 8ull << 20);
  EXPECT_EQ(*parse_bytes("0"), 0u);  // zero is a size; callers that need more say so
}

TEST(ParseBytes, SizesBeyondSixtyFourBitsAreTooLarge) {
  auto r = parse_bytes("20000000TiB");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("too large"), std::string::npos) << r.error().message;
  EXPECT_FALSE(parse_bytes("18446744073709551616"));
  EXPECT_FALSE(parse_bytes(std::string(400, '9')));  // beyond a double: not a number at all
  EXPECT_EQ(*parse_bytes("16777215TiB"), 16777215ull << 40);
}

TEST(ParseDuration, EmptyAndBlankAreNotDurations) {
  for (auto text : {"", " ", "\t\n"}) {
    auto r = parse_duration_ms(text);
    ASSERT_FALSE(r) << "'" << text << "'";
    EXPECT_NE(r.error().message.find("empty duration"), std::string::npos) << r.error().message;
  }
}

TEST(ParseDuration, NegativeAndSignedAreNotDurations) {
  auto r = parse_duration_ms("-5s");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("is not a duration"), std::string::npos) << r.error().message;
  EXPECT_FALSE(parse_duration_ms("+5s"));
  EXPECT_FALSE(parse_duration_ms("1h-30m"));
}

TEST(ParseDuration, UnknownUnitsAreNamed) {
  auto r = parse_duration_ms("10x");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("unknown time unit 'x'"), std::string::npos)
      << r.error().message;
  EXPECT_FALSE(parse_duration_ms("10S"));  // units are case-sensitive
  EXPECT_FALSE(parse_duration_ms("1w"));
  EXPECT_FALSE(parse_duration_ms("1e3s"));
}

TEST(ParseDuration, MixedUnitsAddUpAndEachNumberNeedsAUnit) {
  EXPECT_EQ(*parse_duration_ms("1d2h3m4s5ms"), 93'784'005u);
  EXPECT_EQ(*parse_duration_ms("1h30m15s250ms"), 5'415'250u);
  EXPECT_EQ(*parse_duration_ms("1.5h"), 5'400'000u);
  EXPECT_EQ(*parse_duration_ms("2min"), 120'000u);
  auto r = parse_duration_ms("1h30");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("needs a unit"), std::string::npos) << r.error().message;
}

// A duration is one word: spaces around it are trimmed, spaces inside it are refused (unlike a
// size's "8 MiB").
TEST(ParseDuration, SpacesAroundAreTrimmedAndInsideRefused) {
  EXPECT_EQ(*parse_duration_ms(" 10m\t"), 600'000u);
  EXPECT_FALSE(parse_duration_ms("1h 30m"));
  EXPECT_FALSE(parse_duration_ms("10 m"));
  EXPECT_EQ(*parse_duration_ms("0s"), 0u);  // zero is a duration; callers that need more say so
}

TEST(ParseDuration, OverflowIsTooLongNotAWrappedNumber) {
  EXPECT_FALSE(parse_duration_ms("213503982335d"));  // just past 2^64 ms
  EXPECT_FALSE(parse_duration_ms("99999999999999999999999h30m"));
  EXPECT_FALSE(parse_duration_ms(std::string(400, '9') + "s"));
}

TEST(Format, RoundTrips) {
  EXPECT_EQ(format_bytes(2ull << 30), "2GiB");
  EXPECT_EQ(format_duration_ms(5'400'000), "1h30m");
  EXPECT_EQ(*parse_duration_ms(format_duration_ms(90'000)), 90'000u);
}

}  // namespace
}  // namespace evalbox
