// The setting checks the agent adapters share: each problem at its setting's location, absent
// settings left alone, and the binary and api_key_env resolution.
#include "harness/agent/settings.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "base/fs.h"

namespace evalbox::harness {
namespace {

namespace fs = std::filesystem;

candidate_spec candidate(json settings) {
  candidate_spec c;
  c.id = "c";
  c.adapter = "agent";
  c.where = {"/suites/suite.yaml", 3, 5};
  int line = 4;
  for (auto& [k, v] : settings.items())
    c.settings[k] = setting{v, source_location{"/suites/suite.yaml", line++, 7}};
  return c;
}

TEST(SettingsChecker, AbsentSettingsAreFine) {
  auto c = candidate(json::object());
  settings_checker check(c);
  check.known_keys({"binary", "model"});
  check.binary("agent executable", "scripts/install-agents");
  EXPECT_EQ(check.non_empty_string("model", "a model"), nullptr);
  check.choice("mode", {"a", "b"});
  check.env_name("api_key_env", "KEY");
  check.credential("auth_file");
  check.url("base_url", "http://127.0.0.1:8080");
  EXPECT_TRUE(check.take().empty());
}

TEST(SettingsChecker, ReportsEachProblemWhereItWasWritten) {
  auto c = candidate({{"api_key_env", "1BAD"},
                      {"auth_file", "other"},
                      {"base_url", "ftp://x"},
                      {"mode", "c"},
                      {"model", ""},
                      {"typo", 1}});
  settings_checker check(c);
  check.known_keys({"api_key_env", "auth_file", "base_url", "mode", "model"});
  check.non_empty_string("model", "e.g. model: m");
  check.choice("mode", {"a", "b"});
  check.env_name("api_key_env", "KEY");
  check.credential("auth_file");
  check.url("base_url", "http://127.0.0.1:8080");
  auto errors = check.take();
  ASSERT_EQ(errors.size(), 6u);
  EXPECT_EQ(errors[0].message(),
            "/suites/suite.yaml:9:7: unknown setting 'typo' for adapter 'agent' (hint: known "
            "settings: api_key_env, auth_file, base_url, mode, model)");
  EXPECT_EQ(errors[1].message(),
            "/suites/suite.yaml:8:7: model must be a non-empty string (hint: e.g. model: m)");
  EXPECT_EQ(errors[2].message(), "/suites/suite.yaml:7:7: unknown mode 'c' (hint: one of: a, b)");
  EXPECT_EQ(errors[3].message(),
            "/suites/suite.yaml:4:7: api_key_env must be an environment variable name (hint: "
            "e.g. api_key_env: KEY (the value is read on the host))");
  EXPECT_EQ(errors[4].message(),
            "/suites/suite.yaml:5:7: auth_file 'other' is not one of this candidate's "
            "credentials (hint: add credential: other (a handle of the suite's credentials))");
  EXPECT_EQ(errors[5].message(),
            "/suites/suite.yaml:6:7: base_url must start with http:// or https://");
}

TEST(SettingsChecker, BinaryMustBeExecutable) {
  auto c = candidate({{"binary", "bin/agent"}});
  settings_checker check(c);
  check.binary("agent executable", "scripts/install-agents agent");
  auto errors = check.take();
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].what, "binary '/suites/bin/agent' is not an executable file");
  EXPECT_EQ(errors[0].hint,
            "give the agent executable (absolute or relative to the suite file), or omit binary "
            "and run scripts/install-agents agent");
}

TEST(Settings, ResolvesTheBinaryAgainstTheSuiteFile) {
  EXPECT_EQ(resolve_binary(candidate(json::object()), "/cache/agent"), "/cache/agent");
  EXPECT_EQ(resolve_binary(candidate({{"binary", "/opt/a/bin/a"}}), "/x"), "/opt/a/bin/a");
  EXPECT_EQ(resolve_binary(candidate({{"binary", "../tools/a"}}), "/x"), "/tools/a");
  EXPECT_EQ(install_prefix("/opt/a/bin/a"), "/opt/a");
  EXPECT_EQ(install_prefix("/opt/a/a"), "/opt/a");
  auto missing = installed_binary(candidate(json::object()), "/nonexistent/bin/a", "agent",
                                  "scripts/install-agents");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().kind, error_kind::not_found);
}

TEST(Settings, ApiKeyFromHostIsRequiredWhenNamed) {
  EXPECT_EQ(*api_key_from_host(candidate(json::object())), std::nullopt);
  auto c = candidate({{"api_key_env", "EVALBOX_SETTINGS_TEST_KEY"}});
  ::unsetenv("EVALBOX_SETTINGS_TEST_KEY");
  EXPECT_FALSE(api_key_from_host(c));
  ::setenv("EVALBOX_SETTINGS_TEST_KEY", "k-123", 1);
  EXPECT_EQ(*api_key_from_host(c), "k-123");
  ::unsetenv("EVALBOX_SETTINGS_TEST_KEY");
}

TEST(Settings, CredentialHandleDefaultsToTheOnlyOne) {
  auto c = candidate(json::object());
  c.credentials = {"login"};
  EXPECT_EQ(credential_handle(c, "auth_file"), "login");
  c.credentials = {"a", "b"};
  EXPECT_EQ(credential_handle(c, "auth_file"), std::nullopt);
  auto named = candidate({{"auth_file", "b"}});
  EXPECT_EQ(credential_handle(named, "auth_file"), "b");
}

}  // namespace
}  // namespace evalbox::harness
