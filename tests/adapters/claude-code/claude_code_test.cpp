// The claude-code adapter without a network or a real client: settings validation, env and
// argv for each permission setting, the credentials lease, follow-up argv, and transcripts.
#include "adapters/claude-code/claude_code.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "base/fs.h"
#include "base/log.h"

namespace evalbox::adapters {
namespace {

namespace fs = std::filesystem;

class ClaudeCodeAdapter : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(make_dirs(dir_.path() / "prefix/bin"));
    ASSERT_TRUE(write_file(dir_.path() / "prefix/bin/claude", "#!/bin/sh\n", 0755));
    c_.id = "claude";
    c_.adapter = "claude-code";
    c_.where = {(dir_.path() / "suite.yaml").string(), 3, 5};
    set("binary", (dir_.path() / "prefix/bin/claude").string(), 4);
    f_.id = "fx";
    f_.prompt = "-fix it";
    creds_["login"] = dir_.path() / "creds.json";
  }
  void set(const std::string& key, json value, int line = 5) {
    c_.settings[key] = {std::move(value), {c_.where.file, line, 7}};
  }
  harness::run_context ctx() { return {f_, c_, 0, "r", creds_}; }
  harness::agent_plan plan() {
    auto p = claude_code::make_adapter()->plan(ctx());
    EXPECT_TRUE(p) << (p ? "" : p.error().message);
    return p ? *p : harness::agent_plan{};
  }
  std::vector<harness::config_error> validate() {
    return claude_code::make_adapter()->validate(c_);
  }
  static bool has_error(const std::vector<harness::config_error>& errors, std::string_view text,
                        int line) {
    return std::any_of(errors.begin(), errors.end(), [&](const auto& e) {
      return e.message().find(text) != std::string::npos && e.where.line == line;
    });
  }
  static bool has_arg(const harness::agent_plan& p, std::string_view a) {
    return std::find(p.argv.begin(), p.argv.end(), a) != p.argv.end();
  }
  temp_dir dir_;
  harness::candidate_spec c_;
  harness::fixture_spec f_;
  std::map<std::string, fs::path> creds_;
};

TEST_F(ClaudeCodeAdapter, AcceptsEveryDocumentedSetting) {
  set("model", "claude-sonnet-4-5");
  set("base_url", "http://127.0.0.1:9");
  set("api_key_env", "HOST_KEY");
  set("permission_mode", "acceptEdits");
  set("allowed_tools", json::array({"Bash", "Edit"}));
  auto errors = validate();
  EXPECT_TRUE(errors.empty()) << harness::join_messages(errors);
}

TEST_F(ClaudeCodeAdapter, RejectsUnknownSettingsWithTheirLocation) {
  set("permissions", "all", 12);
  auto errors = validate();
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_TRUE(has_error(errors, "unknown setting 'permissions'", 12)) << errors[0].message();
}

TEST_F(ClaudeCodeAdapter, RejectsIllTypedAndUnknownValuesEachAtItsLine) {
  set("permission_mode", "yolo", 6);
  set("allowed_tools", "Bash", 7);
  set("base_url", "127.0.0.1:9", 8);
  set("credentials_file", "login", 9);
  auto errors = validate();
  EXPECT_TRUE(has_error(errors, "unknown permission_mode 'yolo'", 6));
  EXPECT_TRUE(has_error(errors, "allowed_tools must be a non-empty list", 7));
  EXPECT_TRUE(has_error(errors, "base_url must start with http", 8));
  EXPECT_TRUE(has_error(errors, "credentials_file 'login' is not one of this candidate's", 9));
}

TEST_F(ClaudeCodeAdapter, AllowedToolsConflictWithBypass) {
  set("permission_mode", "bypass", 6);
  set("allowed_tools", json::array({"Bash"}), 7);
  EXPECT_TRUE(has_error(validate(), "allowed_tools has no effect", 7));
}

TEST_F(ClaudeCodeAdapter, DefaultsToBypassWithIsSandboxAndQuietEnvironment) {
  auto p = plan();
  std::vector<std::string> want = {(dir_.path() / "prefix/bin/claude").string(),
                                   "-p",
                                   "--output-format",
                                   "stream-json",
                                   "--verbose",
                                   "--dangerously-skip-permissions",
                                   "--",
                                   "-fix it"};
  EXPECT_EQ(p.argv, want);
  EXPECT_EQ(p.env.at("IS_SANDBOX"), "1");
  EXPECT_EQ(p.env.at("CLAUDE_CONFIG_DIR"), "/home/agent/.claude");
  for (const char* k : {"DISABLE_TELEMETRY", "DISABLE_AUTOUPDATER", "DISABLE_ERROR_REPORTING",
                        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"})
    EXPECT_EQ(p.env.at(k), "1") << k;
  EXPECT_FALSE(p.env.count("ANTHROPIC_BASE_URL"));
  EXPECT_FALSE(p.stdin_data);
  EXPECT_TRUE(p.landlock);
  EXPECT_EQ(p.home.adapter, "claude-code");
  ASSERT_FALSE(p.readonly_paths.empty());
  EXPECT_EQ(p.readonly_paths[0], dir_.path() / "prefix");
}

TEST_F(ClaudeCodeAdapter, AllowedToolsWithoutAModeUseDefaultPermissions) {
  set("allowed_tools", json::array({"Bash", "Edit"}));
  auto p = plan();
  EXPECT_FALSE(has_arg(p, "--dangerously-skip-permissions"));
  EXPECT_FALSE(p.env.count("IS_SANDBOX"));
  EXPECT_TRUE(has_arg(p, "--allowedTools=Bash,Edit"));
  auto mode = std::find(p.argv.begin(), p.argv.end(), "--permission-mode");
  ASSERT_NE(mode, p.argv.end());
  EXPECT_EQ(*(mode + 1), "default");
  // The prompt stays the last argument, after "--".
  EXPECT_EQ(p.argv[p.argv.size() - 2], "--");
}

TEST_F(ClaudeCodeAdapter, ModelBaseUrlAndApiKey) {
  ::setenv("EVALBOX_TEST_CLAUDE_KEY", "sk-ant-unit-0815", 1);
  set("model", "claude-x");
  set("base_url", "http://127.0.0.1:9");
  set("api_key_env", "EVALBOX_TEST_CLAUDE_KEY");
  auto p = plan();
  auto m = std::find(p.argv.begin(), p.argv.end(), "--model");
  ASSERT_NE(m, p.argv.end());
  EXPECT_EQ(*(m + 1), "claude-x");
  EXPECT_EQ(p.env.at("ANTHROPIC_BASE_URL"), "http://127.0.0.1:9");
  EXPECT_EQ(p.env.at("ANTHROPIC_API_KEY"), "sk-ant-unit-0815");
  EXPECT_EQ(log::scrub("sk-ant-unit-0815").find("sk-ant-unit-0815"), std::string::npos);
  for (const auto& a : p.argv) EXPECT_EQ(a.find("sk-ant-unit-0815"), std::string::npos);
  ::unsetenv("EVALBOX_TEST_CLAUDE_KEY");
}

TEST_F(ClaudeCodeAdapter, CredentialsFileIsLeasedInTheConfigDir) {
  c_.credentials = {"login"};
  set("credentials_file", "login");
  auto p = plan();
  ASSERT_EQ(p.secrets.size(), 1u);
  EXPECT_EQ(p.secrets[0].handle, "login");
  EXPECT_EQ(p.secrets[0].source, dir_.path() / "creds.json");
  EXPECT_EQ(p.secrets[0].target, ".claude/.credentials.json");
}

TEST_F(ClaudeCodeAdapter, FollowUpResumesTheFirstSession) {
  f_.follow_up = "more";
  fs::path out = dir_.path() / "stdout.jsonl";
  ASSERT_TRUE(
      write_file(out, "{\"type\":\"system\",\"subtype\":\"init\",\"session_id\":\"s-9\"}\n"));
  harness::agent_output first{out, dir_.path() / "e", dir_.path(), dir_.path(), 0, true};
  auto p = claude_code::make_adapter()->plan_follow_up(ctx(), first);
  ASSERT_TRUE(p && *p);
  const auto& argv = (*p)->argv;
  ASSERT_GE(argv.size(), 4u);
  std::vector<std::string> tail(argv.end() - 4, argv.end());
  std::vector<std::string> want = {"--resume", "s-9", "--", "more"};
  EXPECT_EQ(tail, want);
}

TEST_F(ClaudeCodeAdapter, FollowUpWithoutASessionIdContinues) {
  f_.follow_up = "more";
  harness::agent_output first{
      dir_.path() / "missing", dir_.path() / "e", dir_.path(), dir_.path(), 0, true};
  auto p = claude_code::make_adapter()->plan_follow_up(ctx(), first);
  ASSERT_TRUE(p && *p);
  const auto& argv = (*p)->argv;
  EXPECT_NE(std::find(argv.begin(), argv.end(), "--continue"), argv.end());
  EXPECT_EQ(argv.back(), "more");
}

TEST_F(ClaudeCodeAdapter, TranscriptKeepsProjectSessionFiles) {
  fs::path home = dir_.path() / "home", native = dir_.path() / "native";
  ASSERT_TRUE(make_dirs(home / ".claude/projects/-workspace"));
  ASSERT_TRUE(make_dirs(native));
  ASSERT_TRUE(write_file(home / ".claude/projects/-workspace/s-1.jsonl", "{}\n"));
  ASSERT_TRUE(write_file(
      dir_.path() / "out",
      "{\"type\":\"system\",\"subtype\":\"init\",\"session_id\":\"s-1\"}\n"
      "{\"type\":\"result\",\"subtype\":\"success\",\"is_error\":false,\"result\":\"ok\","
      "\"session_id\":\"s-1\",\"total_cost_usd\":0.5,\"usage\":{\"input_tokens\":3,"
      "\"output_tokens\":4}}\n"));
  std::vector<harness::agent_output> outs = {
      {dir_.path() / "out", dir_.path() / "err", home, native, 0, true}};
  auto t = claude_code::make_adapter()->read_transcript(ctx(), outs);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->agent, "claude-code");
  EXPECT_FALSE(t->error);
  EXPECT_EQ(t->final_message, "ok");
  EXPECT_EQ(t->total.cost_usd, 0.5);
  EXPECT_TRUE(fs::exists(native / "claude-projects/-workspace/s-1.jsonl"));
}

TEST_F(ClaudeCodeAdapter, AClientThatFailsBeforeItsFirstEventReportsItsStderr) {
  ASSERT_TRUE(write_file(dir_.path() / "out", ""));
  ASSERT_TRUE(write_file(dir_.path() / "err", "Invalid API key\n"));
  std::vector<harness::agent_output> outs = {
      {dir_.path() / "out", dir_.path() / "err", dir_.path(), dir_.path(), 1, true}};
  auto t = claude_code::make_adapter()->read_transcript(ctx(), outs);
  ASSERT_TRUE(t);
  ASSERT_TRUE(t->error);
  EXPECT_EQ(*t->error, "claude exited with status 1: Invalid API key");
}

TEST_F(ClaudeCodeAdapter, AKilledClientIsAnExecutionErrorSayingSo) {
  ASSERT_TRUE(write_file(dir_.path() / "out",
                         "{\"type\":\"system\",\"subtype\":\"init\",\"session_id\":\"s\"}\n"));
  std::vector<harness::agent_output> outs = {
      {dir_.path() / "out", dir_.path() / "err", dir_.path(), dir_.path(), 0, false}};
  auto t = claude_code::make_adapter()->read_transcript(ctx(), outs);
  ASSERT_TRUE(t);
  ASSERT_TRUE(t->error);
  EXPECT_EQ(*t->error, "claude was killed before it finished (interrupted: no final event)");
  EXPECT_FALSE(t->final_message);
}

// Skills, MCP servers and hooks where Claude Code reads them: each skill read-only in
// CLAUDE_CONFIG_DIR/skills/, the servers in the file --mcp-config names (their files at
// /evalbox/mcp/), the hooks in CLAUDE_CONFIG_DIR/settings.json running read-only copies.
TEST_F(ClaudeCodeAdapter, PlacesSkillsServersAndHooksWhereTheClientReadsThem) {
  const fs::path d = dir_.path();
  ASSERT_TRUE(make_dirs(d / "skills/pdf-tools"));
  ASSERT_TRUE(write_file(d / "skills/pdf-tools/SKILL.md", "---\nname: pdf-tools\n---\n"));
  ASSERT_TRUE(write_file(d / "search.py", "print()\n"));
  ASSERT_TRUE(write_file(d / "deny-rm.sh", "#!/bin/sh\n", 0755));
  c_.skills.push_back({"pdf-tools", d / "skills/pdf-tools", {}});
  harness::mcp_server_spec m;
  m.name = "search";
  m.command = {"python3", "search.py", "--fast"};
  m.files[1] = d / "search.py";
  m.env = {{"INDEX", "/data/idx"}};
  c_.mcp_servers.push_back(m);
  c_.hooks.push_back({"PreToolUse", "Bash", "deny-rm.sh", d / "deny-rm.sh", {}});
  c_.hooks.push_back({"PreToolUse", "Bash", "deny-rm.sh", d / "deny-rm.sh", {}});
  c_.hooks.push_back({"Stop", "", "deny-rm.sh", d / "deny-rm.sh", {}});
  EXPECT_TRUE(validate().empty()) << harness::join_messages(validate());
  auto p = plan();
  std::map<fs::path, fs::path> bundles;  // target -> source
  for (const auto& b : p.bundles) {
    EXPECT_EQ(b.sha256.size(), 64u);
    bundles[b.target] = b.source;
  }
  EXPECT_EQ(bundles["/home/agent/.claude/skills/pdf-tools"], d / "skills/pdf-tools");
  EXPECT_EQ(bundles["/evalbox/mcp/search/search.py"], d / "search.py");
  EXPECT_EQ(bundles["/evalbox/hooks/0/deny-rm.sh"], d / "deny-rm.sh");
  EXPECT_EQ(bundles["/evalbox/hooks/2/deny-rm.sh"], d / "deny-rm.sh");
  EXPECT_TRUE(has_arg(p, "--mcp-config=/home/agent/.claude/evalbox-mcp.json"));
  // Before the prompt's `--`, where a variadic option cannot take the prompt.
  auto mcp =
      std::find(p.argv.begin(), p.argv.end(), "--mcp-config=/home/agent/.claude/evalbox-mcp.json");
  auto dashes = std::find(p.argv.begin(), p.argv.end(), "--");
  EXPECT_LT(mcp, dashes);
  std::map<fs::path, std::string> files;
  for (const auto& f : p.home.files) files[f.path] = f.content;
  const json servers = json::parse(files[".claude/evalbox-mcp.json"]);
  EXPECT_EQ(servers, json::parse(R"({"mcpServers": {"search": {"type": "stdio",
      "command": "python3", "args": ["/evalbox/mcp/search/search.py", "--fast"],
      "env": {"INDEX": "/data/idx"}}}})"));
  const json settings = json::parse(files[".claude/settings.json"]);
  EXPECT_EQ(settings, json::parse(R"({"hooks": {
      "PreToolUse": [{"matcher": "Bash", "hooks": [
          {"type": "command", "command": "/evalbox/hooks/0/deny-rm.sh"},
          {"type": "command", "command": "/evalbox/hooks/1/deny-rm.sh"}]}],
      "Stop": [{"hooks": [{"type": "command", "command": "/evalbox/hooks/2/deny-rm.sh"}]}]}})"));
}

// A Harbor task's stdio MCP servers reach the client as the candidate's do; a candidate's own
// server of the same name wins.
TEST_F(ClaudeCodeAdapter, AddsAHarborTasksMcpServers) {
  f_.harbor.emplace();
  harness::mcp_server_spec task_search, task_db, own;
  task_search.name = "search";
  task_search.command = {"/opt/task/search"};
  task_db.name = "db";
  task_db.command = {"db-server", "--ro"};
  f_.harbor->mcp_servers = {task_db, task_search};
  own.name = "search";
  own.command = {"my-search"};
  c_.mcp_servers.push_back(own);
  auto p = plan();
  std::string text;
  for (const auto& f : p.home.files)
    if (f.path == ".claude/evalbox-mcp.json") text = f.content;
  ASSERT_FALSE(text.empty());
  const json servers = json::parse(text)["mcpServers"];
  EXPECT_EQ(servers.size(), 2u) << servers.dump();
  EXPECT_EQ(servers["search"]["command"], "my-search");
  EXPECT_EQ(servers["db"]["command"], "db-server");
  EXPECT_EQ(servers["db"]["args"], json::array({"--ro"}));
}

TEST_F(ClaudeCodeAdapter, WithoutThemNothingIsAdded) {
  auto p = plan();
  EXPECT_TRUE(p.bundles.empty());
  for (const auto& a : p.argv) EXPECT_FALSE(a.starts_with("--mcp-config")) << a;
  for (const auto& f : p.home.files) EXPECT_NE(f.path, ".claude/settings.json");
}

TEST_F(ClaudeCodeAdapter, RefusesAnUnknownHookEventAndSettingsGivenAsAHomeFile) {
  ASSERT_TRUE(write_file(dir_.path() / "h.sh", "#!/bin/sh\n", 0755));
  c_.hooks.push_back({"BeforeTool", "", "h.sh", dir_.path() / "h.sh", {c_.where.file, 9, 7}});
  c_.hooks_where = {c_.where.file, 8, 5};
  c_.home_files[".claude/settings.json"] = dir_.path() / "h.sh";
  auto errors = validate();
  EXPECT_TRUE(has_error(errors, "Claude Code has no hook event 'BeforeTool'", 9))
      << harness::join_messages(errors);
  EXPECT_TRUE(has_error(errors, "which home_files gives as a file of its own", 8))
      << harness::join_messages(errors);
}

}  // namespace
}  // namespace evalbox::adapters
