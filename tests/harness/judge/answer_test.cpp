// The strict answer parser (every malformed shape is an error, never a verdict) and the vote.
#include "harness/judge/answer.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace evalbox::harness {
namespace {

const std::vector<std::string> ids{"p1", "p2"};

const std::string good = R"({"checks":[{"id":"p1","verdict":"pass","reason":"it says so"},)"
                         R"({"id":"p2","verdict":"fail","reason":"tests were not run"}]})";

TEST(JudgeAnswer, RawJsonInDeclaredOrder) {
  auto v = parse_judge_answer(good, ids);
  ASSERT_TRUE(v) << v.error().message;
  ASSERT_EQ(v->size(), 2u);
  EXPECT_EQ((*v)[0].id, "p1");
  EXPECT_TRUE((*v)[0].pass);
  EXPECT_FALSE((*v)[1].pass);
  EXPECT_EQ((*v)[1].reason, "tests were not run");
  // Entries in another order are matched by id.
  auto r = parse_judge_answer(
      R"({"checks":[{"id":"p2","verdict":"pass","reason":"b"},{"id":"p1","verdict":"fail","reason":"a"}]})",
      ids);
  ASSERT_TRUE(r);
  EXPECT_FALSE((*r)[0].pass);
  EXPECT_TRUE((*r)[1].pass);
}

TEST(JudgeAnswer, OneFencedBlock) {
  EXPECT_TRUE(parse_judge_answer("```json\n" + good + "\n```", ids));
  EXPECT_TRUE(parse_judge_answer("\n  ```\n" + good + "\n```\n", ids));
}

void expect_error(const std::string& text, const std::string& says) {
  auto v = parse_judge_answer(text, ids);
  ASSERT_FALSE(v) << text;
  EXPECT_EQ(v.error().kind, error_kind::invalid_argument);
  EXPECT_NE(v.error().message.find(says), std::string::npos) << v.error().message;
}

TEST(JudgeAnswer, EveryMalformedShapeIsAnError) {
  expect_error("", "is empty");
  expect_error("PASS", "neither a JSON object nor one fenced block");
  expect_error("Sure! " + good, "neither a JSON object");
  expect_error("{\"checks\": [", "not valid JSON");
  expect_error(good + " trailing", "not valid JSON");
  expect_error("```json\n" + good + "\n```\nok?", "text after its fenced block");
  expect_error("```json\n" + good + "\n```\n```json\n" + good + "\n```", "more than one");
  expect_error("```python\n" + good + "\n```", "not json");
  expect_error("```json\n" + good, "never closes");
  expect_error("[]", "neither a JSON object");
  expect_error(R"({"checks":[],"extra":1})", "one key");
  expect_error(R"({"verdicts":[]})", "one key");
  expect_error(R"({"checks":{}})", "not a list");
  // Missing, extra and repeated ids.
  expect_error(R"({"checks":[{"id":"p1","verdict":"pass","reason":"a"}]})", "no entry for p2");
  expect_error(R"({"checks":[{"id":"p1","verdict":"pass","reason":"a"},)"
               R"({"id":"p2","verdict":"pass","reason":"b"},)"
               R"({"id":"p3","verdict":"pass","reason":"c"}]})",
               "not a proposition id");
  expect_error(R"({"checks":[{"id":"p1","verdict":"pass","reason":"a"},)"
               R"({"id":"p1","verdict":"pass","reason":"b"}]})",
               "twice");
  // Wrong types and values.
  expect_error(R"({"checks":[{"id":"p1","verdict":true,"reason":"a"},)"
               R"({"id":"p2","verdict":"pass","reason":"b"}]})",
               "not a string");
  expect_error(R"({"checks":[{"id":"p1","verdict":"PASS","reason":"a"},)"
               R"({"id":"p2","verdict":"pass","reason":"b"}]})",
               "not pass or fail");
  expect_error(R"({"checks":[{"id":"p1","verdict":"pass","reason":"  "},)"
               R"({"id":"p2","verdict":"pass","reason":"b"}]})",
               "no reason");
  expect_error(R"({"checks":[{"id":"p1","verdict":"pass"},)"
               R"({"id":"p2","verdict":"pass","reason":"b"}]})",
               "not exactly");
  expect_error(R"({"checks":[{"id":"p1","verdict":"pass","reason":"a","score":1},)"
               R"({"id":"p2","verdict":"pass","reason":"b"}]})",
               "not exactly");
  expect_error(R"({"checks":[{"id":"p1","verdict":"pass","reason":")" + std::string(3000, 'x') +
                   R"("},{"id":"p2","verdict":"pass","reason":"b"}]})",
               "longer than");
  expect_error(std::string(max_judge_answer_bytes + 1, ' '), "more than");
  expect_error("{" + std::string(100, '[') + "}", "nests deeper");
}

TEST(JudgeAnswer, MajorityOfThreeAndTiesFail) {
  auto vote = [](bool a, bool b) {
    return std::vector<judge_verdict>{{"p1", a, "r1"}, {"p2", b, "r2"}};
  };
  std::vector<std::vector<judge_verdict>> three{vote(true, false), vote(true, true),
                                                vote(false, false)};
  auto t = judge_majority(three, ids);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_TRUE(t[0].passed);
  EXPECT_EQ(t[0].pass, 2);
  EXPECT_EQ(t[0].fail, 1);
  EXPECT_FALSE(t[1].passed);
  EXPECT_EQ(t[1].reasons.size(), 3u);
  // Two votes split one each: a tie fails.
  std::vector<std::vector<judge_verdict>> two{vote(true, true), vote(false, true)};
  auto tie = judge_majority(two, ids);
  EXPECT_FALSE(tie[0].passed);
  EXPECT_TRUE(tie[1].passed);
}

}  // namespace
}  // namespace evalbox::harness
