#include "adapters/command/command.h"

#include <sys/stat.h>

#include <gtest/gtest.h>

#include "base/fs.h"

namespace evalbox::adapters {
namespace {

class CommandAdapter : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(make_dirs(dir_.path() / "agents"));
    ASSERT_TRUE(write_file(dir_.path() / "agents/agent.sh", "#!/bin/sh\n", 0755));
    c_.id = "scripted";
    c_.adapter = "command";
    c_.where = {(dir_.path() / "suite.yaml").string(), 3, 5};
    f_.id = "fx";
    f_.prompt = "fix it";
  }
  void set(const std::string& key, json value, int line = 4) {
    c_.settings[key] = {std::move(value), {c_.where.file, line, 7}};
  }
  harness::run_context ctx() { return {f_, c_, 0, "r", creds_}; }
  temp_dir dir_;
  harness::candidate_spec c_;
  harness::fixture_spec f_;
  std::map<std::string, std::filesystem::path> creds_;
};

TEST_F(CommandAdapter, ArgvIsRequired) {
  auto errors = command::make_adapter()->validate(c_);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].message().find("argv"), std::string::npos);
}

TEST_F(CommandAdapter, RejectsUnknownSettingsAndMissingPrograms) {
  set("argv", json::array({"agents/missing.sh"}));
  set("model", "gpt", 9);
  auto errors = command::make_adapter()->validate(c_);
  ASSERT_EQ(errors.size(), 2u);
  bool unknown = false, missing = false;
  for (const auto& e : errors) {
    unknown |=
        e.message().find("unknown setting 'model'") != std::string::npos && e.where.line == 9;
    missing |= e.message().find("not an executable") != std::string::npos;
  }
  EXPECT_TRUE(unknown);
  EXPECT_TRUE(missing);
}

TEST_F(CommandAdapter, ResolvesRelativeProgramsAgainstTheSuiteAndSubstitutesThePrompt) {
  set("argv", json::array({"agents/agent.sh", "--task={prompt}"}));
  EXPECT_TRUE(command::make_adapter()->validate(c_).empty());
  auto plan = command::make_adapter()->plan(ctx());
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->argv[0], (dir_.path() / "agents/agent.sh").string());
  EXPECT_EQ(plan->argv[1], "--task=fix it");
  EXPECT_EQ(plan->env.at("EVALBOX_PROMPT"), "fix it");
  EXPECT_EQ(plan->stdin_data, "fix it");
}

// A bare name stays bare: the sandbox finds it on its own PATH (the image's, or the host's
// system directories), not on the PATH of the shell that runs evalbox.
TEST_F(CommandAdapter, ABareProgramNameIsLeftForTheSandboxsPath) {
  ::setenv("PATH", (dir_.path() / "agents").c_str(), 1);  // agent.sh is on the caller's PATH
  set("argv", json::array({"agent.sh", "{prompt}"}));
  EXPECT_TRUE(command::make_adapter()->validate(c_).empty());
  auto plan = command::make_adapter()->plan(ctx());
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->argv[0], "agent.sh");
  set("argv", json::array({"python3", "-c", "pass"}));
  EXPECT_TRUE(command::make_adapter()->validate(c_).empty());
  EXPECT_EQ(command::make_adapter()->plan(ctx())->argv[0], "python3");
}

TEST_F(CommandAdapter, FollowUpRunsTheSameProgramWithTheFollowUpPrompt) {
  set("argv", json::array({"agents/agent.sh", "{prompt}"}));
  auto none = command::make_adapter()->plan_follow_up(ctx(), {});
  ASSERT_TRUE(none);
  EXPECT_FALSE(*none);
  f_.follow_up = "now add tests";
  auto next = command::make_adapter()->plan_follow_up(ctx(), {});
  ASSERT_TRUE(next && *next);
  EXPECT_EQ((**next).argv[1], "now add tests");
  EXPECT_EQ((**next).env.at("EVALBOX_FOLLOW_UP"), "1");
}

TEST_F(CommandAdapter, ReadsEvalboxEventsWhenAsked) {
  set("argv", json::array({"agents/agent.sh"}));
  set("transcript", "jsonl");
  ASSERT_TRUE(
      write_file(dir_.path() / "stdout",
                 R"({"type":"tool_call","id":"c1","tool":"shell","input":{"command":"make"}})"
                 "\n"
                 R"({"type":"tool_result","id":"c1","exit_code":2,"output":"error"})"
                 "\n"
                 R"({"type":"usage","input_tokens":10,"output_tokens":5})"
                 "\n"
                 "not json\n"));
  harness::agent_output out;
  out.stdout_path = dir_.path() / "stdout";
  auto t = command::make_adapter()->read_transcript(ctx(), {out});
  ASSERT_TRUE(t);
  ASSERT_EQ(harness::commands(*t), std::vector<std::string>{"make"});
  EXPECT_EQ(t->total.input_tokens, 10u);
  EXPECT_FALSE(t->total.cost_usd) << "cost the agent did not report stays unknown";
  EXPECT_EQ(t->malformed_lines, 1);
}

TEST_F(CommandAdapter, WithoutJsonlTheStdoutIsNotInterpreted) {
  set("argv", json::array({"agents/agent.sh"}));
  ASSERT_TRUE(write_file(dir_.path() / "stdout",
                         R"({"type":"message","role":"assistant","text":"hi"})"
                         "\n"));
  harness::agent_output out;
  out.stdout_path = dir_.path() / "stdout";
  auto t = command::make_adapter()->read_transcript(ctx(), {out});
  ASSERT_TRUE(t);
  EXPECT_TRUE(t->steps.empty());
}

}  // namespace
}  // namespace evalbox::adapters
