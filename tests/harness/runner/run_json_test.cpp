// The contract of run.json (evalbox.run.v1, docs/results.md): a fixed run state gives exactly
// the golden record; every state's name; unknown usage is null, never 0; a price table only
// estimates what the client did not report.
#include "harness/runner/run_json.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "base/log.h"
#include "tests/support/golden.h"

namespace evalbox::harness {
namespace {

const std::filesystem::path golden_dir =
    std::filesystem::path(EVALBOX_SOURCE_DIR) / "tests/harness/runner/golden";

class RunJson : public ::testing::Test {
 protected:
  void SetUp() override {
    fixture_spec f;
    f.id = "off-by-one";
    f.digest = "fd";
    f.threshold = 0.5;
    suite_.name = "examples";
    suite_.fixtures.push_back(f);
    candidate_spec c;
    c.id = "scripted";
    c.adapter = "command";
    c.settings["model"] = {json("gpt-x"), {}};
    suite_.candidates.push_back(c);
    run_.fixture = 0;
    run_.candidate = 0;
    run_.trial = 2;
    run_.run_id = "c4beda2ab9594906";
    run_.candidate_digest = "cd";
  }
  json record(const attempt_state& st) {
    return to_run_json(suite_, run_, st, {2, "2026-11-30T21:42:47Z", "2026-11-30T21:42:49Z", 1412});
  }
  suite_spec suite_;
  run_spec run_;
};

TEST_F(RunJson, AGradedRunMatchesTheGoldenRecord) {
  attempt_state st;
  st.session_id = "c4beda2ab9594906-1-0a0b0c0d";
  st.records["setup"] = {{"outcome", "exited"}, {"exit_code", 0}};
  st.records["agent"] = {{"outcome", "timed_out"}, {"exit_code", 124}};
  st.grading = {{"status", "completed"},
                {"checks", json::array({{{"id", "hidden-tests"}, {"passed", true}}})},
                {"score", 1.0},
                {"threshold", 0.5},
                {"error", nullptr}};
  st.verdict = run_verdict::passed;
  usage u;
  u.input_tokens = 1200;
  u.output_tokens = 300;
  u.cost_usd = 0.02;
  st.usage = usage_json(u, suite_.candidates[0], "gpt-x-2026", suite_);
  st.timings = {{"prepare_ms", 3}, {"setup_ms", 40}, {"agent_ms", 150}, {"grading_ms", 120}};
  evalbox::testing::expect_golden(pretty_json(record(st)), golden_dir / "run-graded.v1.json");
}

TEST_F(RunJson, AnExecutionErrorMatchesTheGoldenRecord) {
  attempt_state st;
  st.fail(run_error_kind::agent, "codex exited with status 1: Error: bad config.toml");
  st.records["agent"] = {{"outcome", "exited"}, {"exit_code", 1}};
  evalbox::testing::expect_golden(pretty_json(record(st)), golden_dir / "run-error.v1.json");
}

TEST_F(RunJson, ThreeStatesAreKeptApart) {
  attempt_state st;
  json j = record(st);
  EXPECT_EQ(j["execution"]["status"], "completed");
  EXPECT_EQ(j["execution"]["error"], nullptr);
  EXPECT_EQ(j["execution"]["error_kind"], nullptr);
  EXPECT_EQ(j["execution"]["session"], nullptr);
  EXPECT_EQ(j["execution"]["outcome"], nullptr);  // no agent launch
  EXPECT_EQ(j["grading"]["status"], "skipped");
  EXPECT_EQ(j["grading"]["threshold"], 0.5);
  EXPECT_EQ(j["verdict"], "not_assessed");
  EXPECT_EQ(j["attempts"], 2);
}

TEST_F(RunJson, EveryErrorKindAndVerdictHasItsDocumentedName) {
  const std::pair<run_error_kind, std::string_view> kinds[] = {
      {run_error_kind::setup, "setup"},
      {run_error_kind::sandbox, "sandbox"},
      {run_error_kind::host, "host"},
      {run_error_kind::agent, "agent"},
      {run_error_kind::adapter, "adapter"}};
  for (auto [kind, name] : kinds) {
    attempt_state st;
    st.fail(kind, "x");
    json j = record(st);
    EXPECT_EQ(j["execution"]["status"], "error");
    EXPECT_EQ(j["execution"]["error_kind"], name);
    // Only the sandbox's and the host's failures are worth another attempt.
    EXPECT_EQ(st.infrastructure(), kind != run_error_kind::agent && kind != run_error_kind::adapter)
        << name;
  }
  EXPECT_EQ(to_string(run_verdict::passed), "passed");
  EXPECT_EQ(to_string(run_verdict::failed), "failed");
  EXPECT_EQ(to_string(run_verdict::not_assessed), "not_assessed");
}

TEST_F(RunJson, AnErrorMessageIsScrubbedOfSecrets) {
  log::redact_secret("sk-run-json-424242");
  attempt_state st;
  st.fail(run_error_kind::agent, "401 for key sk-run-json-424242");
  EXPECT_EQ(record(st)["execution"]["error"], "401 for key <redacted>");
}

TEST_F(RunJson, UnknownUsageIsNullNeverZero) {
  json u = record(attempt_state{})["usage"];
  for (const char* k : {"input_tokens", "output_tokens", "cached_input_tokens", "reasoning_tokens",
                        "cost_usd", "cost_source"})
    EXPECT_TRUE(u[k].is_null()) << k;
}

TEST_F(RunJson, APriceTableEstimatesOnlyWhatTheClientDidNotReport) {
  usage u;
  u.input_tokens = 2'000'000;
  u.output_tokens = 100'000;
  suite_spec suite = suite_;
  suite.prices = {{"gpt-x", {1.25, 10}}};
  json by_setting = usage_json(u, suite.candidates[0], "", suite);
  EXPECT_DOUBLE_EQ(by_setting["cost_usd"].get<double>(), 2 * 1.25 + 0.1 * 10);
  EXPECT_EQ(by_setting["cost_source"], "price_table");
  // The candidate's id comes before its model setting; the model the client names first.
  suite.prices["scripted"] = {1, 1};
  EXPECT_DOUBLE_EQ(usage_json(u, suite.candidates[0], "", suite)["cost_usd"].get<double>(), 2.1);
  suite.prices["gpt-x-mini"] = {0.5, 0};
  EXPECT_DOUBLE_EQ(
      usage_json(u, suite.candidates[0], "gpt-x-mini", suite)["cost_usd"].get<double>(), 1.0);
  candidate_spec bare;
  bare.id = "other";
  EXPECT_TRUE(usage_json(u, bare, "unpriced", suite)["cost_usd"].is_null());
  // Cache reads priced at their own rate when the table has one.
  suite.prices["gpt-x-mini"].cached_input_per_mtok = 0.05;
  u.cached_input_tokens = 1'000'000;
  EXPECT_DOUBLE_EQ(
      usage_json(u, suite.candidates[0], "gpt-x-mini", suite)["cost_usd"].get<double>(),
      0.5 + 0.05);
  // A reported cost wins; unknown output tokens leave nothing to estimate from.
  u.cost_usd = 0.5;
  EXPECT_EQ(usage_json(u, suite.candidates[0], "", suite)["cost_source"], "client");
  u.cost_usd.reset();
  u.output_tokens.reset();
  EXPECT_TRUE(usage_json(u, suite.candidates[0], "", suite)["cost_usd"].is_null());
}

}  // namespace
}  // namespace evalbox::harness
