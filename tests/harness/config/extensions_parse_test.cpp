// A candidate's skills, MCP servers and hooks: what valid input becomes (absolute host paths,
// the files an MCP server's command names and where the sandbox sees them), and each problem at
// its FILE:LINE:COL (no SKILL.md, two skills of one name, a missing server file, a hook that is
// not executable).
#include <gtest/gtest.h>

#include "base/fs.h"
#include "harness/config/parse.h"

namespace evalbox::harness {
namespace {

namespace fs = std::filesystem;

class ExtensionsParse : public ::testing::Test {
 protected:
  void SetUp() override {
    const fs::path d = dir_.path();
    ASSERT_TRUE(make_dirs(d / "skills/pdf-tools"));
    ASSERT_TRUE(
        write_file(d / "skills/pdf-tools/SKILL.md", "---\nname: pdf-tools\n---\nUse it.\n"));
    ASSERT_TRUE(make_dirs(d / "other/pdf-tools"));
    ASSERT_TRUE(write_file(d / "other/pdf-tools/SKILL.md", "x"));
    ASSERT_TRUE(make_dirs(d / "empty-skill"));
    ASSERT_TRUE(make_dirs(d / "mcp"));
    ASSERT_TRUE(write_file(d / "mcp/search.py", "print()\n"));
    ASSERT_TRUE(make_dirs(d / "hooks"));
    ASSERT_TRUE(write_file(d / "hooks/deny-rm.sh", "#!/bin/sh\n", 0755));
    ASSERT_TRUE(write_file(d / "hooks/not-exec.sh", "#!/bin/sh\n", 0644));
  }
  suite_spec parse(std::string_view text) {
    static const std::vector<std::string> adapters = {"claude-code", "codex"};
    return parse_suite_yaml(text, "suite.yaml", dir_.path(), adapters, errors_);
  }
  bool mentions(std::string_view what, int line) const {
    for (const auto& e : errors_)
      if (e.message().find(what) != std::string::npos && e.where.line == line) return true;
    return false;
  }
  temp_dir dir_;
  std::vector<config_error> errors_;
};

TEST_F(ExtensionsParse, SkillsServersAndHooksBecomeHostPathsAndSandboxPaths) {
  auto s = parse(R"y(schema: evalbox.suite.v1
name: s
fixtures: [fx]
candidates:
  - id: with-skill
    adapter: claude-code
    skills: [skills/pdf-tools]
    mcp_servers:
      search: {command: [python3, mcp/search.py, --index, /usr/share/idx], env: {INDEX: /data/idx}}
      plain: {command: [my-server]}
    hooks: {PreToolUse: [{matcher: Bash, command: hooks/deny-rm.sh}], Stop: [{command: hooks/deny-rm.sh}]}
)y");
  ASSERT_TRUE(errors_.empty()) << join_messages(errors_);
  ASSERT_EQ(s.candidates.size(), 1u);
  const auto& c = s.candidates[0];
  ASSERT_EQ(c.skills.size(), 1u);
  EXPECT_EQ(c.skills[0].name, "pdf-tools");
  EXPECT_EQ(c.skills[0].dir, dir_.path() / "skills/pdf-tools");
  EXPECT_EQ(c.skills_where.line, 7);
  ASSERT_EQ(c.mcp_servers.size(), 2u);  // sorted by name
  EXPECT_EQ(c.mcp_servers[0].name, "plain");
  EXPECT_TRUE(c.mcp_servers[0].files.empty());
  EXPECT_EQ(c.mcp_servers[0].sandbox_command(), std::vector<std::string>{"my-server"});
  const auto& search = c.mcp_servers[1];
  // Only the host file is carried in: python3 is a bare name, /usr/... the sandbox's own.
  ASSERT_EQ(search.files.size(), 1u);
  EXPECT_EQ(search.files.at(1), dir_.path() / "mcp/search.py");
  EXPECT_EQ(search.sandbox_command(),
            (std::vector<std::string>{"python3", "/evalbox/mcp/search/search.py", "--index",
                                      "/usr/share/idx"}));
  EXPECT_EQ(search.env.at("INDEX"), "/data/idx");
  ASSERT_EQ(c.hooks.size(), 2u);
  EXPECT_EQ(c.hooks[0].event, "PreToolUse");
  EXPECT_EQ(c.hooks[0].matcher, "Bash");
  EXPECT_EQ(c.hooks[0].script, dir_.path() / "hooks/deny-rm.sh");
  EXPECT_EQ(c.hooks[1].event, "Stop");
  EXPECT_EQ(c.hooks[1].matcher, "");
  EXPECT_EQ(c.sandbox_hook(0), fs::path("/evalbox/hooks/0/deny-rm.sh"));
  EXPECT_EQ(c.sandbox_hook(1), fs::path("/evalbox/hooks/1/deny-rm.sh"));
  // What defines the candidate names no host path: the content enters its digest instead.
  const std::string j = c.to_json().dump();
  EXPECT_EQ(j.find(dir_.path().string()), std::string::npos) << j;
  EXPECT_NE(j.find("pdf-tools"), std::string::npos) << j;
}

TEST_F(ExtensionsParse, ACandidateWithoutThemDefinesItselfAsBefore) {
  auto s = parse(R"y(schema: evalbox.suite.v1
name: s
fixtures: [fx]
candidates:
  - {id: plain, adapter: codex}
)y");
  ASSERT_TRUE(errors_.empty()) << join_messages(errors_);
  const json j = s.candidates[0].to_json();
  EXPECT_FALSE(j.contains("skills"));
  EXPECT_FALSE(j.contains("mcp_servers"));
  EXPECT_FALSE(j.contains("hooks"));
}

TEST_F(ExtensionsParse, EveryProblemIsReportedWhereItIsWritten) {
  parse(R"y(schema: evalbox.suite.v1
name: s
fixtures: [fx]
candidates:
  - id: a
    adapter: claude-code
    skills: [empty-skill, missing, skills/pdf-tools, other/pdf-tools]
  - id: b
    adapter: claude-code
    skills: skills/pdf-tools
    mcp_servers:
      "bad name": {command: [x]}
      nocmd: {env: {A: b}}
      gone: {command: [python3, mcp/gone.py]}
      badenv: {command: [x], env: {"1X": y}, cwd: /}
  - id: c
    adapter: claude-code
    hooks:
      PreToolUse: [{matcher: Bash, command: hooks/not-exec.sh}, {command: hooks/nothing.sh}]
      "Pre Tool": [{command: hooks/deny-rm.sh}]
      Stop: []
      PostToolUse: [{command: hooks/deny-rm.sh, timeout: 5}]
)y");
  EXPECT_TRUE(mentions("skill 'empty-skill' has no SKILL.md", 7)) << join_messages(errors_);
  EXPECT_TRUE(mentions("skill 'missing' is not a directory", 7)) << join_messages(errors_);
  EXPECT_TRUE(mentions("two skills are named 'pdf-tools'", 7)) << join_messages(errors_);
  EXPECT_TRUE(mentions("skills must be a list of directories", 10)) << join_messages(errors_);
  EXPECT_TRUE(mentions("MCP server name 'bad name' is not valid", 12)) << join_messages(errors_);
  EXPECT_TRUE(mentions("command", 13)) << join_messages(errors_);
  EXPECT_TRUE(mentions("'mcp/gone.py' does not exist", 14)) << join_messages(errors_);
  EXPECT_TRUE(mentions("'1X' is not a variable name", 15)) << join_messages(errors_);
  EXPECT_TRUE(mentions("cwd", 15)) << join_messages(errors_);
  EXPECT_TRUE(mentions("'hooks/not-exec.sh' is not executable", 19)) << join_messages(errors_);
  EXPECT_TRUE(mentions("'hooks/nothing.sh' is not a file", 19)) << join_messages(errors_);
  EXPECT_TRUE(mentions("hook event 'Pre Tool' is not an event name", 20)) << join_messages(errors_);
  EXPECT_TRUE(mentions("must be a non-empty list", 21)) << join_messages(errors_);
  EXPECT_TRUE(mentions("timeout", 22)) << join_messages(errors_);
}

}  // namespace
}  // namespace evalbox::harness
