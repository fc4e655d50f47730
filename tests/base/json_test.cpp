#include "base/json.h"
#include "base/json_checks.h"

#include <gtest/gtest.h>

namespace evalbox {
namespace {

TEST(CanonicalJson, SortsKeysAndIsCompact) {
  json j = json::parse(R"({"b":1,"a":{"d":2,"c":[3,1]}})");
  EXPECT_EQ(canonical_json(j), R"({"a":{"c":[3,1],"d":2},"b":1})");
}

TEST(ParseJson, ReportsWhereItBroke) {
  auto r = parse_json("{\"a\": ", "plan.json");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, error_kind::invalid_argument);
  EXPECT_NE(r.error().message.find("plan.json"), std::string::npos);
}

TEST(JsonTooDeep, CountsNestingOutsideStrings) {
  EXPECT_FALSE(json_too_deep("[[[]]]", 3));
  EXPECT_TRUE(json_too_deep("[[[[]]]]", 3));
  EXPECT_TRUE(json_too_deep(R"({"a":{"b":{"c":[1]}}})", 3));
  EXPECT_FALSE(json_too_deep(R"(["[[[[[[", "\"[[[[[["])", 3)) << "brackets in strings";
  EXPECT_FALSE(json_too_deep("[][][][][][]", 1)) << "siblings are not depth";
}

// Found by fuzzing: one line of 200,000 '[' overflowed the stack when the value was copied.
TEST(ParseJson, RefusesNestingDeeperThanTheLimit) {
  std::string deep = std::string(max_json_depth + 1, '[') + std::string(max_json_depth + 1, ']');
  auto r = parse_json(deep, "record.json");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("nested deeper than 512 levels"), std::string::npos)
      << r.error().message;
  std::string ok = std::string(max_json_depth, '[') + std::string(max_json_depth, ']');
  EXPECT_TRUE(parse_json(ok, "record.json"));
}

TEST(CheckedInteger, ConvertsIntegersThatFit) {
  EXPECT_EQ(checked_integer<int>(json(-5)), -5);
  EXPECT_EQ(checked_integer<uint64_t>(json::parse("18446744073709551615")), UINT64_MAX);
  EXPECT_EQ(checked_integer<size_t>(json(0)), 0u);
}

// From a file, 1e300 as an int is undefined behaviour and -5 as a byte count wraps to 2^64-5:
// both must be rejected instead.
TEST(CheckedInteger, RejectsWhatTheTypeCannotHold) {
  EXPECT_THROW(checked_integer<int>(json::parse("1e300")), json::type_error);
  EXPECT_THROW(checked_integer<int>(json(1.5)), json::type_error);
  EXPECT_THROW(checked_integer<int>(json("7")), json::type_error);
  EXPECT_THROW(checked_integer<int>(json(int64_t{1} << 40)), json::out_of_range);
  EXPECT_THROW(checked_integer<uint64_t>(json(-5)), json::out_of_range);
  EXPECT_THROW(checked_integer<int>(json::parse("18446744073709551615")), json::out_of_range);
}

TEST(Utf8SequenceLength, AcceptsShortestFormsOnly) {
  EXPECT_EQ(utf8_sequence_length("a"), 1u);
  EXPECT_EQ(utf8_sequence_length("\xc3\xa9x"), 2u);         // é
  EXPECT_EQ(utf8_sequence_length("\xe2\x82\xac"), 3u);      // €
  EXPECT_EQ(utf8_sequence_length("\xf0\x9f\x98\x80"), 4u);  // 😀
  EXPECT_EQ(utf8_sequence_length("\xff"), 0u);
  EXPECT_EQ(utf8_sequence_length("\xc0\xaf"), 0u) << "overlong '/'";
  EXPECT_EQ(utf8_sequence_length("\xed\xa0\x80"), 0u) << "a surrogate";
  EXPECT_EQ(utf8_sequence_length("\xf4\x90\x80\x80"), 0u) << "past U+10FFFF";
  EXPECT_EQ(utf8_sequence_length("\xe2\x82"), 0u) << "cut short";
  EXPECT_EQ(utf8_sequence_length(""), 0u);
}

// An agent's event with a stray byte in its message parses after sanitizing, saying the rest.
TEST(SanitizeJsonText, ReplacesInvalidBytesAndLoneSurrogatesAndKeepsTheRest) {
  const std::string line = "{\"type\":\"final\",\"text\":\"done \xff with caf\xc3\xa9\"}";
  EXPECT_TRUE(json::parse(line, nullptr, false).is_discarded());
  const std::string clean = sanitize_json_text(line);
  EXPECT_EQ(clean, "{\"type\":\"final\",\"text\":\"done \xef\xbf\xbd with caf\xc3\xa9\"}");
  EXPECT_EQ(json::parse(clean)["text"], "done \xef\xbf\xbd with caf\xc3\xa9");

  // Python's json.dumps of an undecodable byte: "\udcff" (a lone low surrogate).
  const std::string py = R"({"text":"bad-\udcff-name \ud83d\ude00 \ud800x \\udcff"})";
  EXPECT_TRUE(json::parse(py, nullptr, false).is_discarded());
  const std::string fixed = sanitize_json_text(py);
  EXPECT_EQ(fixed, R"({"text":"bad-\ufffd-name \ud83d\ude00 \ufffdx \\udcff"})")
      << "a pair and an escaped backslash are kept";
  EXPECT_EQ(json::parse(fixed)["text"],
            "bad-\xef\xbf\xbd-name \xf0\x9f\x98\x80 \xef\xbf\xbdx \\udcff");

  const std::string valid = R"({"a":"b\"c","d":[1,2]})";
  EXPECT_EQ(sanitize_json_text(valid), valid);
}

}  // namespace
}  // namespace evalbox
