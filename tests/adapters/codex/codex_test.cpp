// The codex adapter without a network or a real client: settings validation, the generated
// CODEX_HOME (config.toml, auth lease), argv and env, follow-up argv, and transcript assembly.
#include "adapters/codex/codex.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "base/fs.h"
#include "base/log.h"

namespace evalbox::adapters {
namespace {

namespace fs = std::filesystem;

class CodexAdapter : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(make_dirs(dir_.path() / "prefix/bin"));
    ASSERT_TRUE(write_file(dir_.path() / "prefix/bin/codex", "#!/bin/sh\n", 0755));
    c_.id = "codex";
    c_.adapter = "codex";
    c_.where = {(dir_.path() / "suite.yaml").string(), 3, 5};
    set("binary", (dir_.path() / "prefix/bin/codex").string(), 4);
    f_.id = "fx";
    f_.prompt = "-fix it";
    creds_["login"] = dir_.path() / "auth.json";
  }
  void set(const std::string& key, json value, int line = 5) {
    c_.settings[key] = {std::move(value), {c_.where.file, line, 7}};
  }
  harness::run_context ctx() { return {f_, c_, 0, "r", creds_}; }
  harness::agent_plan plan() {
    auto p = codex::make_adapter()->plan(ctx());
    EXPECT_TRUE(p) << (p ? "" : p.error().message);
    return p ? *p : harness::agent_plan{};
  }
  static std::string config_of(const harness::agent_plan& p) {
    for (const auto& f : p.home.files)
      if (f.path == ".codex/config.toml") return f.content;
    return "<none>";
  }
  std::vector<harness::config_error> validate() { return codex::make_adapter()->validate(c_); }
  static bool has_error(const std::vector<harness::config_error>& errors, std::string_view text,
                        int line) {
    return std::any_of(errors.begin(), errors.end(), [&](const auto& e) {
      return e.message().find(text) != std::string::npos && e.where.line == line;
    });
  }
  temp_dir dir_;
  harness::candidate_spec c_;
  harness::fixture_spec f_;
  std::map<std::string, fs::path> creds_;
};

// Skills in $HOME/.agents/skills/ (read-only), MCP servers as [mcp_servers.NAME] tables of
// config.toml whose tools are approved (codex exec's approval policy "never" refuses a tool that
// needs approval); hooks refused (Codex runs only hooks it has trusted).
TEST_F(CodexAdapter, PlacesSkillsAndServersAndRefusesHooks) {
  const fs::path d = dir_.path();
  ASSERT_TRUE(make_dirs(d / "skills/pdf-tools"));
  ASSERT_TRUE(write_file(d / "skills/pdf-tools/SKILL.md", "x"));
  ASSERT_TRUE(write_file(d / "search.py", "print()\n"));
  c_.skills.push_back({"pdf-tools", d / "skills/pdf-tools", {}});
  harness::mcp_server_spec m;
  m.name = "search";
  m.command = {"python3", "search.py", "--quote\"d"};
  m.files[1] = d / "search.py";
  m.env = {{"INDEX", "/data/idx"}};
  c_.mcp_servers.push_back(m);
  EXPECT_TRUE(validate().empty()) << harness::join_messages(validate());
  auto p = plan();
  std::map<fs::path, fs::path> bundles;
  for (const auto& b : p.bundles) bundles[b.target] = b.source;
  EXPECT_EQ(bundles.size(), 2u);
  EXPECT_EQ(bundles["/home/agent/.agents/skills/pdf-tools"], d / "skills/pdf-tools");
  EXPECT_EQ(bundles["/evalbox/mcp/search/search.py"], d / "search.py");
  const std::string config = config_of(p);
  EXPECT_NE(config.find("\n[mcp_servers.\"search\"]\ncommand = \"python3\"\n"
                        "args = [\"/evalbox/mcp/search/search.py\", \"--quote\\\"d\"]\n"
                        "default_tools_approval_mode = \"approve\"\n"
                        "env = { \"INDEX\" = \"/data/idx\" }\n"),
            std::string::npos)
      << config;

  c_.hooks.push_back({"PreToolUse", "", "h", d / "search.py", {}});
  c_.hooks_where = {c_.where.file, 14, 5};
  c_.home_files[".codex/config.toml"] = d / "search.py";
  c_.mcp_servers_where = {c_.where.file, 12, 5};
  auto errors = validate();
  EXPECT_TRUE(has_error(errors, "adapter codex cannot take hooks", 14))
      << harness::join_messages(errors);
  EXPECT_TRUE(has_error(errors, "which home_files gives as a file of its own", 12))
      << harness::join_messages(errors);
}

TEST_F(CodexAdapter, AcceptsEveryDocumentedSetting) {
  set("model", "gpt-5.5");
  set("effort", "high");
  set("codex_sandbox", "read-only");
  set("provider", json{{"base_url", "http://127.0.0.1:1/v1"},
                       {"env_key", "STUB_KEY"},
                       {"wire_api", "responses"}});
  set("api_key_env", "HOST_KEY");
  auto errors = validate();
  EXPECT_TRUE(errors.empty()) << harness::join_messages(errors);
}

TEST_F(CodexAdapter, RejectsUnknownSettingsWithTheirLocation) {
  set("modle", "gpt", 9);
  auto errors = validate();
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_TRUE(has_error(errors, "unknown setting 'modle'", 9)) << errors[0].message();
  EXPECT_NE(errors[0].message().find(":9:7:"), std::string::npos) << errors[0].message();
}

TEST_F(CodexAdapter, RejectsIllTypedAndUnknownValuesEachAtItsLine) {
  set("effort", "extreme", 6);
  set("codex_sandbox", "danger", 7);
  set("model", 5, 8);
  set("api_key_env", "NOT-A-NAME", 10);
  set("provider", json{{"env_key", "K"}, {"wire_api", "grpc"}, {"color", "red"}}, 11);
  auto errors = validate();
  EXPECT_TRUE(has_error(errors, "unknown effort 'extreme'", 6));
  EXPECT_TRUE(has_error(errors, "unknown codex_sandbox 'danger'", 7));
  EXPECT_TRUE(has_error(errors, "model must be a non-empty string", 8));
  EXPECT_TRUE(has_error(errors, "api_key_env must be an environment variable name", 10));
  EXPECT_TRUE(has_error(errors, "provider has no base_url", 11));
  EXPECT_TRUE(has_error(errors, "unknown provider.wire_api 'grpc'", 11));
  EXPECT_TRUE(has_error(errors, "unknown provider key 'color'", 11));
}

TEST_F(CodexAdapter, RejectsAMissingBinary) {
  set("binary", "nowhere/codex", 4);
  auto errors = validate();
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_TRUE(has_error(errors, "is not an executable file", 4)) << errors[0].message();
}

TEST_F(CodexAdapter, AuthFileMustBeOneOfTheCandidatesCredentials) {
  set("auth_file", "login", 6);
  EXPECT_TRUE(has_error(validate(), "auth_file 'login' is not one of this candidate's", 6));
  c_.credentials = {"login"};
  EXPECT_TRUE(validate().empty());
}

TEST_F(CodexAdapter, DefaultConfigTurnsOffApprovalsUpdatesAnalyticsAndPlugins) {
  auto p = plan();
  std::string config = config_of(p);
  EXPECT_NE(config.find("approval_policy = \"never\"\n"), std::string::npos) << config;
  EXPECT_NE(config.find("sandbox_mode = \"workspace-write\"\n"), std::string::npos) << config;
  EXPECT_NE(config.find("check_for_update_on_startup = false\n"), std::string::npos) << config;
  EXPECT_NE(config.find("[analytics]\nenabled = false\n"), std::string::npos) << config;
  EXPECT_NE(config.find("[features]\nplugins = false\napps = false\n"), std::string::npos)
      << config;
  EXPECT_EQ(config.find("model ="), std::string::npos) << config;
  EXPECT_EQ(config.find("model_provider"), std::string::npos) << config;
  EXPECT_EQ(p.home.adapter, "codex");
  EXPECT_EQ(p.env.at("CODEX_HOME"), "/home/agent/.codex");
  // TMPDIR stays the base /tmp: Codex refuses helper binaries below a TMPDIR holding CODEX_HOME.
  EXPECT_FALSE(p.env.count("TMPDIR"));
  EXPECT_TRUE(p.secrets.empty());
}

TEST_F(CodexAdapter, WorkspaceWriteAndReadOnlyTurnLandlockOffBypassKeepsIt) {
  EXPECT_FALSE(plan().landlock);
  set("codex_sandbox", "read-only");
  EXPECT_FALSE(plan().landlock);
  EXPECT_NE(config_of(plan()).find("sandbox_mode = \"read-only\""), std::string::npos);
  set("codex_sandbox", "bypass");
  auto p = plan();
  EXPECT_TRUE(p.landlock);
  EXPECT_NE(config_of(p).find("sandbox_mode = \"danger-full-access\""), std::string::npos);
}

TEST_F(CodexAdapter, ModelEffortAndProviderGoIntoConfigToml) {
  set("model", "gpt-\"5\"");
  set("effort", "low");
  set("provider", json{{"base_url", "http://127.0.0.1:9/v1"}, {"env_key", "STUB_KEY"}});
  std::string config = config_of(plan());
  EXPECT_NE(config.find("model = \"gpt-\\\"5\\\"\"\n"), std::string::npos) << config;
  EXPECT_NE(config.find("model_reasoning_effort = \"low\"\n"), std::string::npos) << config;
  EXPECT_NE(config.find("model_provider = \"evalbox\"\n"), std::string::npos) << config;
  EXPECT_NE(config.find("[model_providers.\"evalbox\"]\nname = \"evalbox\"\n"
                        "base_url = \"http://127.0.0.1:9/v1\"\nwire_api = \"responses\"\n"
                        "env_key = \"STUB_KEY\"\n"),
            std::string::npos)
      << config;
  // Top-level keys must come before the first table.
  EXPECT_LT(config.find("model_provider ="), config.find("[analytics]")) << config;
}

TEST_F(CodexAdapter, ApiKeyFromTheHostEnvironmentGoesToTheProvidersEnvKeyAndIsRedacted) {
  ::setenv("EVALBOX_TEST_CODEX_KEY", "sk-unit-test-4711", 1);
  set("api_key_env", "EVALBOX_TEST_CODEX_KEY");
  set("provider", json{{"base_url", "http://127.0.0.1:9/v1"}, {"env_key", "STUB_KEY"}});
  auto p = plan();
  EXPECT_EQ(p.env.at("STUB_KEY"), "sk-unit-test-4711");
  EXPECT_EQ(log::scrub("key=sk-unit-test-4711").find("sk-unit-test-4711"), std::string::npos);
  EXPECT_EQ(config_of(p).find("sk-unit-test-4711"), std::string::npos);
  ::unsetenv("EVALBOX_TEST_CODEX_KEY");
}

TEST_F(CodexAdapter, AnUnsetApiKeyVariableIsAPlanError) {
  ::unsetenv("EVALBOX_TEST_CODEX_UNSET");
  set("api_key_env", "EVALBOX_TEST_CODEX_UNSET");
  auto p = codex::make_adapter()->plan(ctx());
  ASSERT_FALSE(p);
  EXPECT_NE(p.error().message.find("EVALBOX_TEST_CODEX_UNSET is not set"), std::string::npos);
}

TEST_F(CodexAdapter, AuthFileIsLeasedAtCodexHomeAuthJson) {
  c_.credentials = {"login"};
  auto p = plan();
  ASSERT_EQ(p.secrets.size(), 1u);
  EXPECT_EQ(p.secrets[0].handle, "login");
  EXPECT_EQ(p.secrets[0].source, dir_.path() / "auth.json");
  EXPECT_EQ(p.secrets[0].target, ".codex/auth.json");
}

TEST_F(CodexAdapter, RunsExecJsonWithThePromptAfterDashDashAndStdinClosed) {
  auto p = plan();
  std::vector<std::string> want = {(dir_.path() / "prefix/bin/codex").string(),
                                   "exec",
                                   "--json",
                                   "--skip-git-repo-check",
                                   "--",
                                   "-fix it"};
  EXPECT_EQ(p.argv, want);
  EXPECT_FALSE(p.stdin_data);
  ASSERT_FALSE(p.readonly_paths.empty());
  EXPECT_EQ(p.readonly_paths[0], dir_.path() / "prefix");
}

TEST_F(CodexAdapter, HomeFilesReplaceTheGeneratedConfig) {
  c_.home_files[".codex/config.toml"] = dir_.path() / "mine.toml";
  auto p = plan();
  EXPECT_EQ(config_of(p), "<none>");
}

TEST_F(CodexAdapter, ADefaultBinaryThatIsNotInstalledIsAPlanErrorNamingTheInstaller) {
  c_.settings.erase("binary");
  ::setenv("EVALBOX_AGENT_CACHE", (dir_.path() / "empty-cache").c_str(), 1);
  auto p = codex::make_adapter()->plan(ctx());
  ::unsetenv("EVALBOX_AGENT_CACHE");
  ASSERT_FALSE(p);
  EXPECT_NE(p.error().message.find("scripts/install-agents"), std::string::npos);
  EXPECT_NE(p.error().message.find("empty-cache/codex-0.171.0/bin/codex"), std::string::npos);
}

TEST_F(CodexAdapter, FollowUpResumesTheFirstThreadById) {
  f_.follow_up = "and now";
  fs::path out = dir_.path() / "stdout.jsonl";
  ASSERT_TRUE(write_file(out, "{\"type\":\"thread.started\",\"thread_id\":\"t-123\"}\n"));
  harness::agent_output first{out, dir_.path() / "e", dir_.path(), dir_.path(), 0, true};
  auto p = codex::make_adapter()->plan_follow_up(ctx(), first);
  ASSERT_TRUE(p && *p);
  std::vector<std::string> tail((*p)->argv.begin() + 1, (*p)->argv.end());
  std::vector<std::string> want = {"exec", "resume", "--json", "--skip-git-repo-check",
                                   "--",   "t-123",  "and now"};
  EXPECT_EQ(tail, want);
}

TEST_F(CodexAdapter, FollowUpWithoutAThreadIdResumesTheLastSession) {
  f_.follow_up = "and now";
  harness::agent_output first{
      dir_.path() / "missing", dir_.path() / "e", dir_.path(), dir_.path(), 0, true};
  auto p = codex::make_adapter()->plan_follow_up(ctx(), first);
  ASSERT_TRUE(p && *p);
  auto& argv = (*p)->argv;
  EXPECT_NE(std::find(argv.begin(), argv.end(), "--last"), argv.end());
  EXPECT_EQ(argv.back(), "and now");
}

TEST_F(CodexAdapter, NoFollowUpPromptNoFollowUpLaunch) {
  harness::agent_output first{
      dir_.path() / "x", dir_.path() / "e", dir_.path(), dir_.path(), 0, true};
  auto p = codex::make_adapter()->plan_follow_up(ctx(), first);
  ASSERT_TRUE(p);
  EXPECT_FALSE(*p);
}

TEST_F(CodexAdapter, TranscriptKeepsRolloutFilesAndSumsBothLaunches) {
  fs::path home = dir_.path() / "home", native = dir_.path() / "native";
  ASSERT_TRUE(make_dirs(home / ".codex/sessions/2026/11/30"));
  ASSERT_TRUE(make_dirs(native));
  ASSERT_TRUE(write_file(home / ".codex/sessions/2026/11/30/rollout-x.jsonl", "{}\n"));
  ASSERT_TRUE(write_file(home / ".codex/sessions/2026/11/30/other.jsonl", "{}\n"));
  std::string turn =
      "{\"type\":\"thread.started\",\"thread_id\":\"t-1\"}\n{\"type\":\"turn.started\"}\n"
      "{\"type\":\"item.completed\",\"item\":{\"id\":\"item_0\",\"type\":\"agent_message\","
      "\"text\":\"hi\"}}\n"
      "{\"type\":\"turn.completed\",\"usage\":{\"input_tokens\":20,\"cached_input_tokens\":0,"
      "\"output_tokens\":10,\"reasoning_output_tokens\":0}}\n";
  ASSERT_TRUE(write_file(dir_.path() / "a.jsonl", turn));
  ASSERT_TRUE(write_file(dir_.path() / "b.jsonl", turn));
  std::vector<harness::agent_output> outs = {
      {dir_.path() / "a.jsonl", dir_.path() / "e", home, native, 0, true},
      {dir_.path() / "b.jsonl", dir_.path() / "e", home, native, 0, true}};
  auto t = codex::make_adapter()->read_transcript(ctx(), outs);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->agent, "codex");
  EXPECT_EQ(t->session_id, "t-1");
  EXPECT_EQ(t->total.input_tokens, 40u);
  EXPECT_EQ(t->total.output_tokens, 20u);
  EXPECT_FALSE(t->total.cost_usd);  // Codex reports no cost: null, never 0
  EXPECT_EQ(t->steps.size(), 2u);
  EXPECT_EQ(t->steps[1].index, 1);
  EXPECT_FALSE(t->error);
  EXPECT_TRUE(fs::exists(native / "codex-sessions/rollout-x.jsonl"));
  EXPECT_FALSE(fs::exists(native / "codex-sessions/other.jsonl"));
}

TEST_F(CodexAdapter, AClientThatFailsBeforeItsFirstEventReportsItsStderr) {
  ASSERT_TRUE(write_file(dir_.path() / "out", ""));
  ASSERT_TRUE(write_file(dir_.path() / "err",
                         "Reading additional input from stdin...\nError: bad config.toml\n"));
  std::vector<harness::agent_output> outs = {
      {dir_.path() / "out", dir_.path() / "err", dir_.path(), dir_.path(), 1, true}};
  auto t = codex::make_adapter()->read_transcript(ctx(), outs);
  ASSERT_TRUE(t);
  ASSERT_TRUE(t->error);
  EXPECT_EQ(*t->error, "codex exited with status 1: Error: bad config.toml");
}

TEST_F(CodexAdapter, AKilledClientIsAnExecutionError) {
  ASSERT_TRUE(write_file(dir_.path() / "out",
                         "{\"type\":\"thread.started\",\"thread_id\":\"t\"}\n"
                         "{\"type\":\"turn.started\"}\n"));
  std::vector<harness::agent_output> outs = {
      {dir_.path() / "out", dir_.path() / "err", dir_.path(), dir_.path(), 0, false}};
  auto t = codex::make_adapter()->read_transcript(ctx(), outs);
  ASSERT_TRUE(t);
  ASSERT_TRUE(t->error);
  EXPECT_EQ(*t->error, "codex was killed before it finished (interrupted: no final event)");
  EXPECT_FALSE(t->completed);
}

}  // namespace
}  // namespace evalbox::adapters

namespace evalbox::adapters {
namespace {

// In a fixture's image there may be no Node: the npm launcher (bin/codex -> codex.js) is passed
// by and its static native client is run directly, with the variables the launcher would set;
// without an image the launcher runs as installed.
TEST_F(CodexAdapter, InAnImageTheNativeClientRunsWithoutTheNodeLauncher) {
  const fs::path pkg = dir_.path() / "npm/lib/node_modules/@openai/codex";
#if defined(__aarch64__)
  const fs::path native =
      pkg / "node_modules/@openai/codex-linux-arm64/vendor/aarch64-unknown-linux-musl/bin/codex";
#else
  const fs::path native =
      pkg / "node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex";
#endif
  ASSERT_TRUE(make_dirs(pkg / "bin"));
  ASSERT_TRUE(make_dirs(native.parent_path()));
  ASSERT_TRUE(write_file(pkg / "bin/codex.js", "#!/usr/bin/env node\n", 0755));
  ASSERT_TRUE(write_file(native,
                         "\x7f"
                         "ELF",
                         0755));
  ASSERT_TRUE(make_dirs(dir_.path() / "npm/bin"));
  ASSERT_EQ(::symlink("../lib/node_modules/@openai/codex/bin/codex.js",
                      (dir_.path() / "npm/bin/codex").c_str()),
            0);
  set("binary", (dir_.path() / "npm/bin/codex").string(), 4);
  EXPECT_EQ(plan().argv.front(), (dir_.path() / "npm/bin/codex").string());
  f_.environment = harness::environment_spec{};
  auto p = plan();
  EXPECT_EQ(p.argv.front(), native.string());
  EXPECT_EQ(p.env.at("CODEX_MANAGED_BY_NPM"), "1");
  EXPECT_EQ(p.env.at("CODEX_MANAGED_PACKAGE_ROOT"), fs::canonical(pkg).string());
}

}  // namespace
}  // namespace evalbox::adapters
