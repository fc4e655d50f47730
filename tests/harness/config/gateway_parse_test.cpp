// A candidate's model gateway and the budgets in suites and fixtures: what valid input becomes
// (counts like 200k, the suite's budget under each gateway candidate's, cache prices), and every
// problem at its FILE:LINE:COL (a key in the URL, plain http off loopback, a budget nothing can
// enforce).
#include <gtest/gtest.h>

#include "harness/config/parse.h"

namespace evalbox::harness {
namespace {

suite_spec parse_suite(std::string_view text, std::vector<config_error>& errors) {
  static const std::vector<std::string> adapters = {"noop", "claude-code", "codex"};
  return parse_suite_yaml(text, "suite.yaml", "/suites", adapters, errors);
}

bool mentions(const std::vector<config_error>& errors, std::string_view what, int line) {
  for (const auto& e : errors)
    if (e.what.find(what) != std::string::npos && e.where.line == line) return true;
  return false;
}

TEST(gateway_parse, a_gateway_candidate_with_budgets_from_the_suite_and_its_own) {
  std::vector<config_error> errors;
  auto s = parse_suite(R"y(schema: evalbox.suite.v1
name: s
fixtures: [fx]
credentials: {anthropic-key: keys/anthropic}
candidates:
  - id: claude
    adapter: claude-code
    credential: anthropic-key
    gateway: {upstream: "https://api.anthropic.com/", key_env: MY_KEY}
    budget: {output_tokens: 200k, requests: 400}
  - {id: noop, adapter: noop}
budget: {cost: 2.00, output_tokens: 1.5M, tokens: 3M, input_tokens: 900}
suite_budget: {cost: 150}
prices:
  claude-sonnet-4-5: {input_per_mtok: 3, output_per_mtok: 15, cached_input_per_mtok: 0.3,
                      cache_write_per_mtok: 3.75}
)y",
                       errors);
  ASSERT_TRUE(errors.empty()) << join_messages(errors);
  const auto& c = s.candidates[0];
  ASSERT_TRUE(c.gateway);
  EXPECT_EQ(c.gateway->upstream, "https://api.anthropic.com");
  EXPECT_EQ(c.gateway->key_env, "MY_KEY");
  ASSERT_TRUE(c.budget);
  EXPECT_EQ(c.budget->cost, 2.0);                // the suite's
  EXPECT_EQ(c.budget->output_tokens, 200'000u);  // its own wins
  EXPECT_EQ(c.budget->tokens, 3'000'000u);
  EXPECT_EQ(c.budget->input_tokens, 900u);
  EXPECT_EQ(c.budget->requests, 400u);
  // A candidate without a gateway has no budget (nothing could enforce it) and keeps the
  // digest input it had: no gateway or budget key.
  EXPECT_FALSE(s.candidates[1].budget);
  EXPECT_FALSE(s.candidates[1].to_json().contains("gateway"));
  EXPECT_FALSE(s.candidates[1].to_json().contains("budget"));
  EXPECT_EQ(c.to_json()["gateway"]["upstream"], "https://api.anthropic.com");
  EXPECT_EQ(c.to_json()["budget"]["requests"], 400);
  ASSERT_TRUE(s.suite_budget);
  EXPECT_EQ(s.suite_budget->cost, 150.0);
  const price_spec& p = s.prices.at("claude-sonnet-4-5");
  EXPECT_EQ(p.cached_input_per_mtok, 0.3);
  // 1M input of which 200k cache reads and 100k cache writes, and 10k output.
  EXPECT_DOUBLE_EQ(p.cost(1'000'000, 200'000, 100'000, 10'000),
                   (700'000 * 3 + 200'000 * 0.3 + 100'000 * 3.75 + 10'000 * 15) / 1e6);
  EXPECT_EQ(s.price_for(c, "claude-sonnet-4-5"), &p);
  EXPECT_EQ(s.price_for(c, "claude-haiku"), nullptr);
}

TEST(gateway_parse, bad_gateways_and_budgets_are_reported_where_they_are) {
  std::vector<config_error> errors;
  parse_suite(R"y(schema: evalbox.suite.v1
name: s
fixtures: [fx]
candidates:
  - id: a
    adapter: codex
    gateway: {upstream: "http://api.openai.com/v1"}
  - id: b
    adapter: codex
    gateway: {upstream: "https://sk-secret@api.openai.com"}
  - id: c
    adapter: codex
    gateway: {upstream: "ftp://x", key_env: "not a name", ca_files: [missing.pem]}
  - id: d
    adapter: codex
    budget: {requests: 10}
  - id: e
    adapter: codex
    gateway: {upstream: "http://127.0.0.1:9/v1"}
    budget: {requests: 0, output_tokens: 2.5, cost: -1, tokens: lots, wall: 10m}
  - id: f
    adapter: codex
    gateway: {}
)y",
              errors);
  EXPECT_TRUE(mentions(errors, "plain http only to a loopback address", 7))
      << join_messages(errors);
  EXPECT_TRUE(mentions(errors, "must not carry credentials", 10)) << join_messages(errors);
  EXPECT_TRUE(mentions(errors, "must start with https://", 13)) << join_messages(errors);
  EXPECT_TRUE(mentions(errors, "is not a variable name", 13)) << join_messages(errors);
  EXPECT_TRUE(mentions(errors, "missing.pem is not a file", 13)) << join_messages(errors);
  EXPECT_TRUE(mentions(errors, "budget needs a gateway", 16)) << join_messages(errors);
  EXPECT_TRUE(mentions(errors, "requests must be a whole number from 1", 20))
      << join_messages(errors);
  EXPECT_TRUE(mentions(errors, "output_tokens must be a whole number from 1", 20))
      << join_messages(errors);
  EXPECT_TRUE(mentions(errors, "cost must be more than 0", 20)) << join_messages(errors);
  EXPECT_TRUE(mentions(errors, "tokens must be a whole number, e.g. 400", 20))
      << join_messages(errors);
  EXPECT_TRUE(mentions(errors, "unknown key 'wall'", 20)) << join_messages(errors);
  EXPECT_TRUE(mentions(errors, "upstream", 23)) << join_messages(errors);
  // What is before the @ may be a key: never repeated.
  EXPECT_EQ(join_messages(errors).find("sk-secret"), std::string::npos);
}

TEST(gateway_parse, a_suite_budget_needs_a_gateway_candidate) {
  std::vector<config_error> errors;
  parse_suite(R"y(schema: evalbox.suite.v1
name: s
fixtures: [fx]
candidates: [{id: noop, adapter: noop}]
budget: {requests: 3}
suite_budget: {cost: 10}
)y",
              errors);
  EXPECT_TRUE(mentions(errors, "budget needs a candidate with a gateway", 5))
      << join_messages(errors);
  EXPECT_TRUE(mentions(errors, "suite_budget needs a candidate with a gateway", 6))
      << join_messages(errors);
}

TEST(gateway_parse, a_fixture_budget_is_read_and_is_part_of_its_task) {
  std::vector<config_error> errors;
  auto f = parse_fixture_yaml(R"y(schema: evalbox.fixture.v1
id: t
prompt: do it
budget: {cost: 0.5, requests: 20}
checks: [{id: c, shell: "true"}]
)y",
                              "fixture.yaml", errors);
  ASSERT_TRUE(errors.empty()) << join_messages(errors);
  ASSERT_TRUE(f.budget);
  EXPECT_EQ(f.budget->cost, 0.5);
  EXPECT_EQ(f.budget->requests, 20u);
  EXPECT_NE(fixture_task_text("budget: {cost: 0.5}\nprompt: x\n").find("budget"),
            std::string::npos);
}

}  // namespace
}  // namespace evalbox::harness
