// Judge checks in fixture.yaml and a suite's judges: what valid input becomes, every problem at
// its FILE:LINE:COL, and check_judges (unknown judge, missing key variable, never its value).
#include <gtest/gtest.h>

#include <cstring>

#include "harness/config/judges.h"
#include "harness/config/parse.h"

namespace evalbox::harness {
namespace {

TEST(judge_parse, a_judge_check_with_every_kind_of_evidence) {
  std::vector<config_error> errors;
  auto f = parse_fixture_yaml(R"y(schema: evalbox.fixture.v1
id: j
prompt: explain
checks:
  - id: explains-cause
    weight: 2
    judge:
      propositions:
        - The final message names the off-by-one as the cause.
        - It does not claim tests pass that were not run.
      evidence: [final_message, diff, commands, "file:NOTES.md"]
      judge: strict
  - id: plain
    judge: {propositions: [x]}
)y",
                              "fixture.yaml", errors);
  ASSERT_TRUE(errors.empty()) << join_messages(errors);
  ASSERT_EQ(f.checks.size(), 2u);
  const auto& c = f.checks[0];
  EXPECT_EQ(c.kind, check_kind::judge);
  EXPECT_EQ(c.judge.propositions.size(), 2u);
  ASSERT_EQ(c.judge.evidence.size(), 4u);
  EXPECT_EQ(c.judge.evidence[3].kind, judge_check::evidence_kind::file);
  EXPECT_EQ(c.judge.evidence[3].label(), "file:NOTES.md");
  EXPECT_EQ(c.judge.judge, "strict");
  EXPECT_EQ(c.judge.judge_where.line, 12);
  EXPECT_EQ(f.checks[1].judge.judge, "default");
  EXPECT_TRUE(f.checks[1].judge.evidence.empty());
  EXPECT_EQ(c.to_json()["judge"]["evidence"][3], "file:NOTES.md");
  EXPECT_EQ(proposition_id(1), "p2");
}

TEST(judge_parse, bad_judge_checks_are_reported_where_they_are) {
  std::vector<config_error> errors;
  parse_fixture_yaml(R"y(schema: evalbox.fixture.v1
id: j
prompt: explain
checks:
  - id: a
    judge: {propositions: []}
  - id: b
    judge: {propositions: [x], evidence: [final_message, screenshot, "file:../etc/passwd"]}
  - id: c
    judge: {evidence: [diff, diff], propositions: [x], tone: strict}
)y",
                     "fixture.yaml", errors);
  const std::string all = join_messages(errors);
  EXPECT_NE(all.find("fixture.yaml:6:27: checks.a.judge.propositions must not be empty"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("fixture.yaml:8:58: checks.b.judge.evidence[1] 'screenshot' is not a kind "
                     "of evidence"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("checks.b.judge.evidence[2] 'file:../etc/passwd' must name a relative "
                     "path"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("checks.c.judge.evidence names 'diff' twice"), std::string::npos) << all;
  EXPECT_NE(all.find("unknown key 'tone' in checks.c.judge"), std::string::npos) << all;
  EXPECT_EQ(errors.size(), 5u) << all;
}

suite_spec parse_suite(std::string_view text, std::vector<config_error>& errors) {
  static const std::vector<std::string> adapters{"noop", "oracle"};
  return parse_suite_yaml(text, "suite.yaml", "/suites", adapters, errors);
}

TEST(judge_parse, suite_judges_with_defaults) {
  std::vector<config_error> errors;
  auto s = parse_suite(R"y(schema: evalbox.suite.v1
name: s
fixtures: [fx]
candidates: [{id: noop, adapter: noop}]
judges:
  default: {adapter: openai-responses, model: gpt-5-mini, votes: 3}
  claude:
    adapter: anthropic-messages
    model: claude-haiku
    base_url: http://127.0.0.1:8080/
    api_key_env: MY_KEY
    timeout: 30s
    retries: 0
    max_evidence: 8KiB
  local: {adapter: command, argv: [judges/judge.sh, --strict]}
)y",
                       errors);
  ASSERT_TRUE(errors.empty()) << join_messages(errors);
  ASSERT_EQ(s.judges.size(), 3u);
  const auto& d = s.judges.at("default");
  EXPECT_EQ(d.base_url, "https://api.openai.com");
  EXPECT_EQ(d.api_key_env, "OPENAI_API_KEY");
  EXPECT_EQ(d.votes, 3);
  EXPECT_EQ(d.retries, 2);
  const auto& c = s.judges.at("claude");
  EXPECT_EQ(c.base_url, "http://127.0.0.1:8080");
  EXPECT_EQ(c.api_key_env, "MY_KEY");
  EXPECT_EQ(c.timeout_ms, 30000u);
  EXPECT_EQ(c.retries, 0);
  EXPECT_EQ(c.max_evidence_bytes, 8192u);
  const auto& l = s.judges.at("local");
  EXPECT_EQ(l.adapter, judge_spec::adapter_kind::command);
  EXPECT_EQ(l.argv[0], "/suites/judges/judge.sh");
  EXPECT_TRUE(l.api_key_env.empty());
  EXPECT_EQ(l.to_json()["adapter"], "command");
}

TEST(judge_parse, bad_judges_are_reported_where_they_are) {
  std::vector<config_error> errors;
  parse_suite(R"y(schema: evalbox.suite.v1
name: s
fixtures: [fx]
candidates: [{id: noop, adapter: noop}]
judges:
  a: {adapter: gemini, model: m}
  b: {adapter: openai-responses}
  c: {adapter: openai-responses, model: m, base_url: "ftp://x", api_key_env: "sk-abc", votes: 20}
  d: {adapter: command}
  e: {adapter: anthropic-messages, model: m, argv: [x], timeout: soon}
)y",
              errors);
  const std::string all = join_messages(errors);
  EXPECT_NE(all.find("suite.yaml:6:16: judges.a.adapter 'gemini' is not a judge adapter"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("judges.b is missing 'model'"), std::string::npos) << all;
  EXPECT_NE(all.find("judges.c.base_url 'ftp://x' must start with http:// or https://"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("judges.c.api_key_env 'sk-abc' is not a variable name"), std::string::npos)
      << all;
  EXPECT_NE(all.find("judges.c.votes is more than 9"), std::string::npos) << all;
  EXPECT_NE(all.find("judges.d is missing 'argv'"), std::string::npos) << all;
  EXPECT_NE(all.find("judges.e.argv is for `adapter: command`"), std::string::npos) << all;
  EXPECT_NE(all.find("judges.e.timeout: 'soon' is not a duration"), std::string::npos) << all;
  EXPECT_EQ(errors.size(), 8u) << all;
}

// A judge's timeout and max_evidence are read as a fixture's limits are (reader::duration_ms,
// reader::size_bytes): the parser's own words, the units as the hint, zero refused; and
// max_evidence has its own upper bound.
TEST(judge_parse, durations_and_sizes_are_reported_as_limits_are) {
  std::vector<config_error> errors;
  parse_suite(R"y(schema: evalbox.suite.v1
name: s
fixtures: [fx]
candidates: [{id: noop, adapter: noop}]
limits: {wall: 10 fortnights}
judges:
  a: {adapter: command, argv: [j], timeout: 10 fortnights, max_evidence: 0B}
  b: {adapter: command, argv: [j], timeout: 0s, max_evidence: 2MiB}
  c: {adapter: command, argv: [j], timeout: [1m], max_evidence: 3 parsecs}
  ok: {adapter: command, argv: [j], timeout: 1h30m, max_evidence: " 1MiB "}
)y",
              errors);
  const std::string all = join_messages(errors);
  EXPECT_EQ(all,
            "suite.yaml:5:16: limits.wall: '10 fortnights': a number needs a unit here (hint: "
            "units: ms, s, m, h, d (e.g. 10m, 1h30m))\n"
            "suite.yaml:7:45: judges.a.timeout: '10 fortnights': a number needs a unit here "
            "(hint: units: ms, s, m, h, d (e.g. 10m, 1h30m))\n"
            "suite.yaml:7:74: judges.a.max_evidence must be greater than zero\n"
            "suite.yaml:8:45: judges.b.timeout must be greater than zero\n"
            "suite.yaml:8:63: judges.b.max_evidence is more than 1MiB (hint: at most 1MiB per "
            "evidence item; the default is 32KiB)\n"
            "suite.yaml:9:45: judges.c.timeout must be a value like 10m or 90s\n"
            "suite.yaml:9:65: judges.c.max_evidence: '3 parsecs' has an unknown size unit "
            "'parsecs' (use B, KiB, MiB, GiB, TiB, KB, MB, GB) (hint: units: B, KiB, MiB, GiB, "
            "TiB (or K, M, G, T in powers of 1000))");
}

TEST(judge_parse, a_judge_with_mixed_units_and_spaces) {
  std::vector<config_error> errors;
  auto s = parse_suite(R"y(schema: evalbox.suite.v1
name: s
fixtures: [fx]
candidates: [{id: noop, adapter: noop}]
judges:
  ok: {adapter: command, argv: [j], timeout: 1h30m, max_evidence: " 1MiB "}
)y",
                       errors);
  ASSERT_TRUE(errors.empty()) << join_messages(errors);
  EXPECT_EQ(s.judges.at("ok").timeout_ms, 5'400'000u);
  EXPECT_EQ(s.judges.at("ok").max_evidence_bytes, 1u << 20);
}

TEST(judge_parse, check_judges_finds_unknown_judges_and_unset_keys) {
  fixture_spec f;
  check_spec c;
  c.id = "explains";
  c.kind = check_kind::judge;
  c.judge.propositions = {"x"};
  c.judge.judge = "strict";
  c.judge.judge_where = {"fx/fixture.yaml", 9, 14};
  f.checks = {c};
  std::map<std::string, judge_spec> judges;
  judge_spec j;
  j.name = "default";
  j.api_key_env = "TEST_JUDGE_UNSET_KEY";
  j.where = {"suite.yaml", 6, 3};
  judges["default"] = j;
  const std::vector<fixture_spec> fixtures{f};
  auto none = [](const char*) -> const char* { return nullptr; };
  auto errors = check_judges(judges, fixtures, none);
  const std::string all = join_messages(errors);
  ASSERT_EQ(errors.size(), 2u) << all;
  EXPECT_NE(all.find("fx/fixture.yaml:9:14: check explains uses judge 'strict', which the suite "
                     "does not define (hint: the suite's judges are: default)"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("suite.yaml:6:3: judge default: the key variable TEST_JUDGE_UNSET_KEY is "
                     "not set"),
            std::string::npos)
      << all;
  // Set: no problem, and the value never appears anywhere.
  auto set = [](const char* name) -> const char* {
    return std::strcmp(name, "TEST_JUDGE_UNSET_KEY") == 0 ? "sk-very-secret" : nullptr;
  };
  f.checks[0].judge.judge = "default";
  const std::vector<fixture_spec> ok{f};
  EXPECT_TRUE(check_judges(judges, ok, set).empty());
  // No judges at all (a fixture tested without --suite).
  auto alone = check_judges({}, ok, set);
  ASSERT_EQ(alone.size(), 1u);
  EXPECT_NE(alone[0].hint.find("--suite"), std::string::npos);
}

}  // namespace
}  // namespace evalbox::harness
