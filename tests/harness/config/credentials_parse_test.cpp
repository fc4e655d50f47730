// A suite's credentials: a path as before, or {path, max_concurrent, requests_per_minute}; every
// bad value at its FILE:LINE:COL (0, negative, not a whole number, too many, unknown keys), a
// shared credential refused where a candidate uses it as a login file, whose tokens rotate, and
// a rate refused where no gateway could honour it, or where the gateway's key is another.
#include <gtest/gtest.h>

#include "base/fs.h"
#include "harness/config/parse.h"

namespace evalbox::harness {
namespace {

class credentials_parse : public ::testing::Test {
 protected:
  suite_spec parse(const std::string& credentials, const std::string& candidates,
                   std::vector<config_error>& errors) {
    static const std::vector<std::string> adapters = {"noop", "claude-code", "codex", "gemini"};
    const std::string text = "schema: evalbox.suite.v1\nname: s\nfixtures: [fx]\ncredentials:\n" +
                             credentials + "candidates:\n" + candidates;
    return parse_suite_yaml(text, "suite.yaml", dir_.path(), adapters, errors);
  }
  // The one error, as the CLI prints it.
  std::string error_of(const std::string& credentials,
                       const std::string& candidates = "  - {id: n, adapter: noop}\n") {
    std::vector<config_error> errors;
    parse(credentials, candidates, errors);
    EXPECT_EQ(errors.size(), 1u) << join_messages(errors);
    return errors.empty() ? std::string() : errors[0].message();
  }
  temp_dir dir_{"evalbox-credentials-parse"};
};

TEST_F(credentials_parse, a_path_or_a_mapping_with_max_concurrent) {
  std::vector<config_error> errors;
  auto s = parse(
      "  openai-key: {path: keys/openai, max_concurrent: 8}\n"
      "  other-key: {path: keys/other}\n"
      "  codex-login: ~/.codex/auth.json\n",
      "  - {id: n, adapter: noop}\n", errors);
  ASSERT_TRUE(errors.empty()) << join_messages(errors);
  EXPECT_EQ(s.credentials.at("openai-key"), dir_.path() / "keys/openai");
  EXPECT_EQ(s.credentials.at("other-key"), dir_.path() / "keys/other");
  EXPECT_FALSE(s.credentials.at("codex-login").string().starts_with("~"));
  EXPECT_EQ(s.max_concurrent("openai-key"), 8);
  EXPECT_EQ(s.shared_credentials.at("openai-key").where.to_string(), "suite.yaml:5:51");
  EXPECT_EQ(s.max_concurrent("other-key"), 1) << "the default: one run at a time";
  EXPECT_EQ(s.max_concurrent("codex-login"), 1);
  EXPECT_EQ(s.max_concurrent("undefined"), 1);
}

TEST_F(credentials_parse, max_concurrent_zero_is_an_error_at_its_place) {
  EXPECT_EQ(error_of("  k: {path: keys/k, max_concurrent: 0}\n"),
            "suite.yaml:5:37: credentials.k.max_concurrent must be at least 1");
}

TEST_F(credentials_parse, negative_and_fractional_max_concurrent_are_errors) {
  EXPECT_EQ(error_of("  k: {path: keys/k, max_concurrent: -2}\n"),
            "suite.yaml:5:37: credentials.k.max_concurrent must be a whole number, found '-2'");
  EXPECT_EQ(error_of("  k: {path: keys/k, max_concurrent: 2.5}\n"),
            "suite.yaml:5:37: credentials.k.max_concurrent must be a whole number, found '2.5'");
  EXPECT_EQ(error_of("  k: {path: keys/k, max_concurrent: many}\n"),
            "suite.yaml:5:37: credentials.k.max_concurrent must be a whole number, found 'many'");
  EXPECT_EQ(error_of("  k: {path: keys/k, max_concurrent: [2]}\n"),
            "suite.yaml:5:37: credentials.k.max_concurrent must be a whole number, found a list");
}

TEST_F(credentials_parse, more_than_the_slot_limit_is_an_error) {
  auto e = error_of("  k: {path: keys/k, max_concurrent: 100000}\n");
  EXPECT_TRUE(
      e.starts_with("suite.yaml:5:37: credentials.k.max_concurrent 100000 is more "
                    "than 256"))
      << e;
}

TEST_F(credentials_parse, unknown_keys_and_a_missing_path_are_errors) {
  auto unknown = error_of("  k: {path: keys/k, max_concurent: 2}\n");
  EXPECT_TRUE(unknown.starts_with("suite.yaml:5:21: ")) << unknown;
  EXPECT_NE(unknown.find("max_concurent"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("max_concurrent"), std::string::npos) << "did you mean: " << unknown;
  auto missing = error_of("  k: {max_concurrent: 2}\n");
  EXPECT_TRUE(missing.starts_with("suite.yaml:5:6: ")) << missing;
  EXPECT_NE(missing.find("path"), std::string::npos) << missing;
}

// requests_per_minute: a whole number 1..1000000, honoured by the model gateway — so a candidate
// that uses the credential without a gateway is refused at the value's place.
TEST_F(credentials_parse, requests_per_minute_needs_the_gateway_in_front) {
  std::vector<config_error> errors;
  auto s = parse("  k: {path: keys/k, requests_per_minute: 60}\n",
                 "  - id: c\n    adapter: codex\n    credential: k\n"
                 "    gateway: {upstream: \"https://api.openai.com/v1\"}\n",
                 errors);
  ASSERT_TRUE(errors.empty()) << join_messages(errors);
  EXPECT_EQ(s.shared_credentials.at("k").requests_per_minute, 60u);
  EXPECT_EQ(s.shared_credentials.at("k").rate_where.to_string(), "suite.yaml:5:42");
  EXPECT_EQ(s.max_concurrent("k"), 1) << "a rate alone shares nothing";

  EXPECT_EQ(error_of("  k: {path: keys/k, requests_per_minute: 0}\n"),
            "suite.yaml:5:42: credentials.k.requests_per_minute must be at least 1");
  EXPECT_EQ(error_of("  k: {path: keys/k, requests_per_minute: 1.5}\n"),
            "suite.yaml:5:42: credentials.k.requests_per_minute must be a whole number, found "
            "'1.5'");
  EXPECT_EQ(error_of("  k: {path: keys/k, requests_per_minute: 2000000}\n"),
            "suite.yaml:5:42: credentials.k.requests_per_minute 2000000 is more than 1000000");
  auto bare = error_of("  k: {path: keys/k, requests_per_minute: 60}\n",
                       "  - {id: direct, adapter: codex, credential: k}\n");
  EXPECT_TRUE(
      bare.starts_with("suite.yaml:5:42: credentials.k.requests_per_minute is honoured "
                       "by the model gateway, and candidate 'direct' uses credential "
                       "'k' without one"))
      << bare;
}

// The rate holds the requests a gateway sends with the credential's key: a candidate that uses
// the credential while its gateway's key comes from elsewhere would not be limited, so it is
// refused — whether it names the credential as `credential(s):` or as a login setting.
TEST_F(credentials_parse, requests_per_minute_needs_the_gateway_to_send_that_key) {
  const std::string rated = "  k: {path: keys/k, requests_per_minute: 60}\n  o: keys/o\n";
  const std::string gateway = "    gateway: {upstream: \"https://api.openai.com/v1\"}\n";
  auto from_env = error_of(rated,
                           "  - id: e\n    adapter: codex\n    credential: k\n"
                           "    gateway: {upstream: \"https://api.openai.com/v1\", "
                           "key_env: MY_KEY}\n");
  EXPECT_TRUE(from_env.starts_with(
      "suite.yaml:5:42: credentials.k.requests_per_minute holds the requests a gateway sends "
      "with this credential, but candidate 'e' uses it and its gateway's key comes from the "
      "variable gateway.key_env names (MY_KEY)"))
      << from_env;
  auto two = error_of(rated, "  - id: t\n    adapter: codex\n    credentials: [o, k]\n" + gateway);
  EXPECT_NE(two.find("candidate 't' uses it and its gateway's key comes from the variable "
                     "api_key_env names"),
            std::string::npos)
      << two;
  auto login = error_of(rated,
                        "  - id: l\n    adapter: codex\n    credential: o\n"
                        "    auth_file: k\n" +
                            gateway);
  EXPECT_NE(login.find("candidate 'l' uses it and its gateway's key comes from credential 'o'"),
            std::string::npos)
      << login;
  auto bare_login = error_of(rated, "  - {id: b, adapter: codex, auth_file: k}\n");
  EXPECT_NE(bare_login.find("candidate 'b' uses credential 'k' without one"), std::string::npos)
      << bare_login;

  // Its login named by auth_file alone is where the gateway reads the key: limited, accepted.
  std::vector<config_error> errors;
  auto s = parse(rated, "  - id: a\n    adapter: codex\n    auth_file: k\n" + gateway, errors);
  EXPECT_TRUE(errors.empty()) << join_messages(errors);
  ASSERT_EQ(s.candidates.size(), 1u);
  EXPECT_EQ(s.candidates[0].gateway_key_handle(), "k");
}

TEST_F(credentials_parse, a_list_is_neither_a_path_nor_a_mapping) {
  auto e = error_of("  k: [keys/k]\n");
  EXPECT_TRUE(
      e.starts_with("suite.yaml:5:6: credentials.k must be a path or a mapping, found "
                    "a list"))
      << e;
}

TEST_F(credentials_parse, a_shared_credential_named_as_a_login_file_is_refused) {
  auto e = error_of("  k: {path: keys/k, max_concurrent: 2}\n",
                    "  - id: codex\n"
                    "    adapter: codex\n"
                    "    credential: k\n"
                    "    auth_file: k\n");
  EXPECT_TRUE(
      e.starts_with("suite.yaml:10:16: candidate 'codex' uses credential 'k' as its "
                    "auth_file, a login file"))
      << e;
  EXPECT_NE(e.find("fork the token chain"), std::string::npos) << e;
  auto claude = error_of("  k: {path: keys/k, max_concurrent: 3}\n",
                         "  - {id: c, adapter: claude-code, credential: k, credentials_file: k}\n");
  EXPECT_TRUE(
      claude.starts_with("suite.yaml:7:68: candidate 'c' uses credential 'k' as its "
                         "credentials_file"))
      << claude;
}

TEST_F(credentials_parse, a_shared_json_login_file_is_refused) {
  ASSERT_TRUE(make_dirs(dir_.path() / "keys"));
  ASSERT_TRUE(write_file(dir_.path() / "keys/auth.json",
                         R"({"tokens":{"refresh_token":"rt-secret-123"}})", 0600));
  auto e = error_of("  login: {path: keys/auth.json, max_concurrent: 2}\n",
                    "  - {id: codex, adapter: codex, credential: login}\n");
  EXPECT_TRUE(e.starts_with("suite.yaml:5:49: credential 'login' (")) << e;
  EXPECT_NE(e.find("is a JSON login file"), std::string::npos) << e;
  EXPECT_EQ(e.find("rt-secret"), std::string::npos) << "never the content";
}

TEST_F(credentials_parse, a_shared_api_key_and_an_exclusive_login_are_fine) {
  ASSERT_TRUE(make_dirs(dir_.path() / "keys"));
  ASSERT_TRUE(write_file(dir_.path() / "keys/openai", "sk-test-123\n", 0600));
  ASSERT_TRUE(write_file(dir_.path() / "keys/auth.json", R"({"tokens":{}})", 0600));
  std::vector<config_error> errors;
  parse(
      "  key: {path: keys/openai, max_concurrent: 4}\n"
      "  login: {path: keys/auth.json, max_concurrent: 1}\n",
      "  - {id: g, adapter: gemini, credential: key}\n"
      "  - {id: codex, adapter: codex, credential: login, auth_file: login}\n",
      errors);
  EXPECT_TRUE(errors.empty()) << join_messages(errors);
}

}  // namespace
}  // namespace evalbox::harness
