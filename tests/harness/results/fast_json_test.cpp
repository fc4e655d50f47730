// sax_parse_fast against nlohmann's lexer (the reference): wherever the fast lexer accepts a
// text, nlohmann accepts it too and sends the same events; where they could differ, it declines.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/json_checks.h"
#include "harness/results/results.h"
#include "tests/harness/results/sax_events.h"

namespace evalbox::harness {
namespace {

using evalbox::testing::lex_fast;
using evalbox::testing::lex_nlohmann;

// Texts on the edges of JSON's grammar, and of the two lexers' number and string handling.
const std::vector<std::string>& edge_texts() {
  // clang-format off
  static const std::vector<std::string> texts = {
      // numbers: types, ranges, forms
      "0", "-0", "1", "-1", "0.0", "-0.0", "1e2", "1E2", "1e+2", "1e-2", "1.5e308", "1e309",
      "-1e309", "1e-400", "4.9e-324", "2.2250738585072014e-308", "0.1", "0.30000000000000004",
      "9007199254740993", "18446744073709551615", "18446744073709551616", "-9223372036854775808",
      "-9223372036854775809", "9223372036854775807", "9223372036854775808",
      "123456789012345678901234567890", "-123456789012345678901234567890", "1.0000000000000001",
      "179769313486231570000000000000000000000000000000000000000000000000000000000000000000000"
      "000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
      "000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
      "0000000000000000000000000000000000000000000000000000000000000000000",
      "01", "-01", "1.", ".5", "-", "+1", "1e", "1e+", "0x10", "1_000", "Infinity", "NaN", "-NaN",
      // literals and structure
      "true", "false", "null", "tru", "nul", "True", "{}", "[]", "{\"a\":1}", "{\"a\":1,}", "[1,]",
      "[,1]", "{\"a\" 1}", "{a:1}", "{'a':1}", "{\"a\":1}}", "[[[]]]", "[1 2]", "{\"a\":1,\"a\":2}",
      "{\"a\":{\"b\":[1,{\"c\":null}]}}", "  {\"a\" : [ 1 , 2 ] }  ", "\t{}\r\n", "{}\v", "{}\f",
      "{} {}", "{}x", "{}\n{}", "", " ", "/* c */{}", "{}//", "\xEF\xBB\xBF{}", "\xEF\xBB{}",
      // strings: escapes and UTF-8
      "\"\"", "\"a\\\"b\"", "\"\\\\\"", "\"\\/\"", "\"\\b\\f\\n\\r\\t\"", "\"\\x\"", "\"\\'\"",
      "\"\\u0041\"", "\"\\ud83d\\ude00\"", "\"\\ud83d\"", "\"\\ude00\"", "\"\\\\u0041\"",
      "\"a\tb\"", "\"a\nb\"", "\"a\x01\"", "\"\x7f\"", "\"caf\xC3\xA9\"", "\"\xF0\x9F\x98\x80\"",
      "\"\xC0\x80\"", "\"\xC1\xBF\"", "\"\xE0\x80\x80\"", "\"\xED\xA0\x80\"", "\"\xED\xBF\xBF\"",
      "\"\xF4\x90\x80\x80\"", "\"\xF5\x80\x80\x80\"", "\"\xF8\x88\x80\x80\x80\"", "\"\xFF\"",
      "\"\x80\"", "\"\xC3\"", "\"\xE2\x82\"", "\"unterminated", "\"a\"\"b\"",
      std::string("\"a\0b\"", 5), std::string("{}\0", 3), std::string("{\"a\":1\0}", 8),
      "{\"k\xC3\xA9y\":\"v\"}", "{\"\xFF\":1}",
      // a text that ends inside a UTF-8 sequence (under ASan: nothing is read past the text)
      "\"passed\xF3\xF3", "\"\xF3", "\"\xF4\x8F", "\"\xE2", "{\"a\":\"\xF0\x9F\x98", "{\"\xF0",
  };
  // clang-format on
  return texts;
}

TEST(FastJson, AcceptsOnlyWhatNlohmannAcceptsAndSendsTheSameEvents) {
  size_t accepted = 0;
  for (const std::string& text : edge_texts()) {
    SCOPED_TRACE(::testing::PrintToString(text));
    const auto fast = lex_fast(text);
    const auto reference = lex_nlohmann(text);
    if (!fast.accepted) continue;
    ++accepted;
    ASSERT_TRUE(reference.accepted) << "accepted where nlohmann refuses";
    EXPECT_EQ(fast.events, reference.events);
  }
  // The fast lexer is not declining everything: most valid texts above are its own.
  EXPECT_GT(accepted, 45u);
}

// A line that ends inside a UTF-8 sequence: RapidJSON's validation reads the bytes the lead
// byte announces before judging them. Longer than a megabyte, so that the lexer's copy is
// allocated to the line's exact size and a read past it is one ASan sees (scripts/sanitize).
TEST(FastJson, ALineCutInsideAUtf8SequenceIsRefusedWithoutReadingPastIt) {
  for (const char* tail : {"\xF3\xF3", "\xF4\x8F", "\xE2", "\xF0\x9F\x98"}) {
    const std::string text = "\"" + std::string(3 << 19, 'a') + tail;
    EXPECT_FALSE(lex_fast(text).accepted);
    EXPECT_FALSE(lex_nlohmann(text).accepted);
  }
}

TEST(FastJson, NumbersHaveNlohmannsTypesAndValues) {
  struct expect {
    const char* text;
    std::string event;
  };
  const std::vector<expect> cases = {
      {"5", "uint 5"},
      {"-0", "int 0"},
      {"-5", "int -5"},
      {"18446744073709551615", "uint 18446744073709551615"},
      {"-9223372036854775808", "int -9223372036854775808"},
      // Integers that do not fit 64 bits are doubles, as in nlohmann.
      {"18446744073709551616", "double 43f0000000000000"},
      {"-9223372036854775809", "double c3e0000000000000"},
      {"1.0", "double 3ff0000000000000"},
      {"-0.0", "double 8000000000000000"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.text);
    const auto fast = lex_fast(c.text);
    ASSERT_TRUE(fast.accepted);
    EXPECT_EQ(fast.events, std::vector<std::string>{c.event});
    EXPECT_EQ(lex_nlohmann(c.text).events, fast.events);
  }
  // Not finite: nlohmann refuses the text, and so does the fast lexer.
  EXPECT_FALSE(lex_fast("1e400").accepted);
  EXPECT_FALSE(lex_nlohmann("1e400").accepted);
}

TEST(FastJson, DeclinesWhatItLeavesToNlohmann) {
  // \u escapes (nlohmann decodes surrogate pairs and refuses lone ones), a byte-order mark
  // (nlohmann skips it), NUL bytes: declined, whatever nlohmann then says.
  for (const std::string& text : {std::string("\"\\u0041\""), std::string("\xEF\xBB\xBF{}"),
                                  std::string("{}\0", 3), std::string("[\"\\ud800\"]")})
    EXPECT_FALSE(lex_fast(text).accepted) << ::testing::PrintToString(text);
  // Deeper than any record (RapidJSON's parser recurses): declined; nlohmann takes it.
  const std::string deep = std::string(600, '[') + std::string(600, ']');
  EXPECT_FALSE(lex_fast(deep).accepted);
  EXPECT_TRUE(lex_nlohmann(deep).accepted);
  const std::string limit = std::string(max_json_depth, '[') + std::string(max_json_depth, ']');
  EXPECT_TRUE(lex_fast(limit).accepted);
  EXPECT_TRUE(lex_nlohmann("\"\\u0041\"").accepted);
  EXPECT_TRUE(lex_nlohmann("\xEF\xBB\xBF{}").accepted);
}

TEST(FastJson, ASaxThatRefusesStopsTheParse) {
  class refuses_arrays final : public evalbox::testing::sax_events {
   public:
    bool start_array(std::size_t) override { return false; }
  };
  refuses_arrays sax;
  EXPECT_FALSE(sax_parse_fast("{\"a\":[1,2,3],\"b\":1}", sax));
  EXPECT_EQ(sax.events, (std::vector<std::string>{"{ 18446744073709551615", "key a"}));
}

TEST(FastJson, ParseRecordReadsTheSameFieldsEitherWay) {
  // A record whose line the fast lexer takes, and the same record with a \u escape (declined:
  // read by nlohmann): the kept fields are equal.
  const record_fields keep{"schema", "run_id", "grading.checks[].id", "timings.wall_ms"};
  const std::string plain =
      R"({"schema":"evalbox.run.v1","run_id":"ab","grading":{"checks":[{"id":"x","passed":true}]},)"
      R"("timings":{"wall_ms":12.5},"other":[1,2,{"deep":null}]})";
  std::string escaped = plain;
  escaped.replace(escaped.find("\"ab\""), 4, "\"\\u0061b\"");
  const json a = parse_record(plain, &keep), b = parse_record(escaped, &keep);
  ASSERT_FALSE(a.is_null());
  EXPECT_EQ(a, b);
  EXPECT_EQ(a["run_id"], "ab");
  EXPECT_EQ(a["timings"]["wall_ms"], 12.5);
  EXPECT_EQ(a["grading"]["checks"][0], (json{{"id", "x"}}));
  EXPECT_FALSE(a.contains("other"));
}

}  // namespace
}  // namespace evalbox::harness
