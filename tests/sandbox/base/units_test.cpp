#include "sandbox/base/units.h"

#include <gtest/gtest.h>

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

TEST(Format, RoundTrips) {
  EXPECT_EQ(format_bytes(2ull << 30), "2GiB");
  EXPECT_EQ(format_duration_ms(5'400'000), "1h30m");
  EXPECT_EQ(*parse_duration_ms(format_duration_ms(90'000)), 90'000u);
}

}  // namespace
}  // namespace evalbox
