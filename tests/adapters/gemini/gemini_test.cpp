// The gemini adapter without a network or a real client: the stream-json normalizer on a real
// capture, settings validation, settings.json / env / argv, follow-up argv, and outcomes.
#include "adapters/gemini/gemini.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "adapters/gemini/transcript.h"
#include "base/fs.h"
#include "base/log.h"

namespace evalbox::adapters {
namespace {

namespace fs = std::filesystem;

// Captured from @google/gemini-cli 0.61.0 against tests/agents/stub_model.py (one shell
// command, then a final message).
constexpr std::string_view single_capture =
    R"({"type":"init","timestamp":"2026-11-30T19:01:54.714Z","session_id":"1e21e4ec-b2e3-4f66-803a-74b8fa5bc231","model":"gemini-2.5-flash"}
{"type":"message","timestamp":"2026-11-30T19:01:54.715Z","role":"user","content":"Create out.txt"}
{"type":"tool_use","timestamp":"2026-11-30T19:01:54.821Z","tool_name":"run_shell_command","tool_id":"run_shell_command__run_shell_command_1796065314753_0","parameters":{"command":"echo hello > out.txt","description":"scripted command"}}
{"type":"tool_result","timestamp":"2026-11-30T19:01:54.989Z","tool_id":"run_shell_command__run_shell_command_1796065314753_0","status":"success","output":""}
{"type":"message","timestamp":"2026-11-30T19:01:55.006Z","role":"assistant","content":"Wrote out.txt.","delta":true}
{"type":"result","timestamp":"2026-11-30T19:01:55.016Z","status":"success","stats":{"total_tokens":30,"input_tokens":20,"output_tokens":10,"cached":0,"input":20,"duration_ms":302,"tool_calls":1,"models":{"stub":{"total_tokens":30,"input_tokens":20,"output_tokens":10,"cached":0,"input":20}}}}
)";

TEST(GeminiStreamJson, NormalizesARealCapture) {
  auto t = gemini::parse_gemini_stream_json(single_capture);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->agent, "gemini");
  EXPECT_EQ(t->session_id, "1e21e4ec-b2e3-4f66-803a-74b8fa5bc231");
  EXPECT_EQ(t->model, "gemini-2.5-flash");
  ASSERT_EQ(t->steps.size(), 2u);
  ASSERT_EQ(t->steps[0].tool_calls.size(), 1u);
  EXPECT_EQ(t->steps[0].tool_calls[0].tool, "shell");
  EXPECT_EQ(t->steps[0].tool_calls[0].command, "echo hello > out.txt");
  ASSERT_EQ(t->steps[0].observations.size(), 1u);
  EXPECT_EQ(t->steps[0].observations[0].call_id, t->steps[0].tool_calls[0].id);
  EXPECT_FALSE(t->steps[0].observations[0].exit_code);  // Gemini CLI reports none
  EXPECT_FALSE(t->steps[0].observations[0].is_error);
  EXPECT_EQ(t->steps[1].message, "Wrote out.txt.");
  EXPECT_EQ(t->final_message, "Wrote out.txt.");
  EXPECT_TRUE(t->completed);
  EXPECT_FALSE(t->error);
  EXPECT_EQ(t->total.input_tokens, 20u);
  EXPECT_EQ(t->total.output_tokens, 10u);
  EXPECT_EQ(t->total.cached_input_tokens, 0u);
  EXPECT_FALSE(t->total.cost_usd);
  EXPECT_EQ(t->duration_ms, 302u);
  EXPECT_TRUE(t->unknown_events.empty());
}

TEST(GeminiStreamJson, JoinsAssistantDeltasAndCountsUnknownEventsAndGarbage) {
  auto t = gemini::parse_gemini_stream_json(
      "{\"type\":\"message\",\"role\":\"assistant\",\"content\":\"Hel\",\"delta\":true}\n"
      "{\"type\":\"message\",\"role\":\"assistant\",\"content\":\"lo\",\"delta\":true}\n"
      "{\"type\":\"thought\",\"content\":\"hm\"}\nnot json\n{\"content\":\"typeless\"}\n"
      "{\"type\":\"result\",\"status\":\"success\",\"stats\":{}}\n");
  ASSERT_TRUE(t);
  ASSERT_EQ(t->steps.size(), 1u);
  EXPECT_EQ(t->steps[0].message, "Hello");
  EXPECT_EQ(t->unknown_events.at("thought"), 1);
  // The same key as every other parser's (harness::unknown_event_key).
  EXPECT_EQ(t->unknown_events.at("<no type>"), 1);
  EXPECT_EQ(t->malformed_lines, 1);
}

TEST(GeminiStreamJson, AnErrorResultOrNoResultIsAnError) {
  auto failed = gemini::parse_gemini_stream_json(
      "{\"type\":\"result\",\"status\":\"error\",\"error\":{\"type\":\"x\",\"message\":\"quota\"}}"
      "\n");
  ASSERT_TRUE(failed);
  EXPECT_EQ(failed->error, "quota");
  EXPECT_FALSE(failed->final_message);
  auto cut = gemini::parse_gemini_stream_json("{\"type\":\"init\",\"session_id\":\"s\"}\n");
  ASSERT_TRUE(cut);
  EXPECT_EQ(cut->error, "interrupted: no final event");
  EXPECT_FALSE(cut->completed);
}

TEST(GeminiStreamJson, AFailedToolIsAnErrorObservation) {
  auto t = gemini::parse_gemini_stream_json(
      "{\"type\":\"tool_use\",\"tool_name\":\"write_file\",\"tool_id\":\"w1\",\"parameters\":{}}\n"
      "{\"type\":\"tool_result\",\"tool_id\":\"w1\",\"status\":\"error\",\"output\":\"\","
      "\"error\":{\"type\":\"io\",\"message\":\"denied\"}}\n");
  ASSERT_TRUE(t);
  ASSERT_EQ(t->steps.size(), 1u);
  EXPECT_EQ(t->steps[0].tool_calls[0].tool, "write");
  EXPECT_TRUE(t->steps[0].observations[0].is_error);
  EXPECT_EQ(t->steps[0].observations[0].output, "denied");
}

class GeminiAdapter : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(make_dirs(dir_.path() / "prefix/bin"));
    ASSERT_TRUE(write_file(dir_.path() / "prefix/bin/gemini", "#!/bin/sh\n", 0755));
    c_.id = "gemini";
    c_.adapter = "gemini";
    c_.where = {(dir_.path() / "suite.yaml").string(), 3, 5};
    set("binary", (dir_.path() / "prefix/bin/gemini").string(), 4);
    f_.id = "fx";
    f_.prompt = "-fix it";
  }
  void set(const std::string& key, json value, int line = 5) {
    c_.settings[key] = {std::move(value), {c_.where.file, line, 7}};
  }
  harness::run_context ctx() { return {f_, c_, 0, "r", creds_}; }
  harness::agent_plan plan() {
    auto p = gemini::make_adapter()->plan(ctx());
    EXPECT_TRUE(p) << (p ? "" : p.error().message);
    return p ? *p : harness::agent_plan{};
  }
  temp_dir dir_;
  harness::candidate_spec c_;
  harness::fixture_spec f_;
  std::map<std::string, fs::path> creds_;
};

TEST_F(GeminiAdapter, RejectsUnknownAndIllTypedSettingsAtTheirLines) {
  set("sandbox", true, 6);
  set("approval_mode", "always", 7);
  set("base_url", "localhost", 8);
  auto errors = gemini::make_adapter()->validate(c_);
  ASSERT_EQ(errors.size(), 3u) << harness::join_messages(errors);
  EXPECT_EQ(errors[0].where.line + errors[1].where.line + errors[2].where.line, 21);
  EXPECT_NE(harness::join_messages(errors).find("unknown setting 'sandbox'"), std::string::npos);
  EXPECT_NE(harness::join_messages(errors).find("unknown approval_mode 'always'"),
            std::string::npos);
}

TEST_F(GeminiAdapter, DefaultsToYoloWithApiKeyAuthAndNothingPhoningHome) {
  ::setenv("EVALBOX_TEST_GEMINI_KEY", "gem-unit-31337", 1);
  set("api_key_env", "EVALBOX_TEST_GEMINI_KEY");
  set("base_url", "http://127.0.0.1:9");
  set("model", "gemini-2.5-flash");
  auto p = plan();
  std::vector<std::string> want = {(dir_.path() / "prefix/bin/gemini").string(),
                                   "--output-format",
                                   "stream-json",
                                   "--skip-trust",
                                   "--model",
                                   "gemini-2.5-flash",
                                   "--approval-mode=yolo",
                                   "--prompt=-fix it"};
  EXPECT_EQ(p.argv, want);
  EXPECT_EQ(p.env.at("GEMINI_API_KEY"), "gem-unit-31337");
  EXPECT_EQ(p.env.at("GOOGLE_GEMINI_BASE_URL"), "http://127.0.0.1:9");
  EXPECT_EQ(log::scrub("gem-unit-31337").find("gem-unit-31337"), std::string::npos);
  ASSERT_EQ(p.home.files.size(), 1u);
  EXPECT_EQ(p.home.files[0].path, ".gemini/settings.json");
  auto settings = json::parse(p.home.files[0].content);
  EXPECT_EQ(settings["security"]["auth"]["selectedType"], "gemini-api-key");
  EXPECT_EQ(settings["telemetry"]["enabled"], false);
  EXPECT_EQ(settings["privacy"]["usageStatisticsEnabled"], false);
  EXPECT_EQ(settings["general"]["disableAutoUpdate"], true);
  EXPECT_EQ(p.home.files[0].content.find("gem-unit-31337"), std::string::npos);
  EXPECT_TRUE(p.landlock);
  EXPECT_FALSE(p.stdin_data);
  ::unsetenv("EVALBOX_TEST_GEMINI_KEY");
}

TEST_F(GeminiAdapter, FollowUpResumesTheLatestSession) {
  f_.follow_up = "more";
  harness::agent_output first{
      dir_.path() / "o", dir_.path() / "e", dir_.path(), dir_.path(), 0, true};
  auto p = gemini::make_adapter()->plan_follow_up(ctx(), first);
  ASSERT_TRUE(p && *p);
  const auto& argv = (*p)->argv;
  std::vector<std::string> tail(argv.end() - 3, argv.end());
  EXPECT_EQ(tail, (std::vector<std::string>{"--resume", "latest", "--prompt=more"}));
}

// The same explanation as codex and claude-code give (harness/agent/client_exit.h): the last
// stderr lines without the client's own chatter, else the status alone.
TEST_F(GeminiAdapter, AClientThatFailsBeforeItsFirstEventReportsItsStderr) {
  ASSERT_TRUE(write_file(dir_.path() / "out", ""));
  ASSERT_TRUE(write_file(dir_.path() / "err",
                         "YOLO mode is enabled. All tool calls will be automatically approved.\n"
                         "[STARTUP] Phase 'cli_startup' took 2ms\n"
                         "Error when talking to Gemini API\nFull report in /tmp/x.json\n"));
  std::vector<harness::agent_output> outs = {
      {dir_.path() / "out", dir_.path() / "err", dir_.path(), dir_.path(), 41, true}};
  auto t = gemini::make_adapter()->read_transcript(ctx(), outs);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->error,
            "gemini exited with status 41: Error when talking to Gemini API | Full report in "
            "/tmp/x.json");
  ASSERT_TRUE(write_file(dir_.path() / "err", "YOLO mode is enabled.\n"));
  t = gemini::make_adapter()->read_transcript(ctx(), outs);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->error, "interrupted: no final event");
}

TEST_F(GeminiAdapter, AKilledClientIsAnErrorSayingSo) {
  ASSERT_TRUE(write_file(dir_.path() / "out", "{\"type\":\"init\",\"session_id\":\"s\"}\n"));
  std::vector<harness::agent_output> outs = {
      {dir_.path() / "out", dir_.path() / "err", dir_.path(), dir_.path(), 0, false}};
  auto t = gemini::make_adapter()->read_transcript(ctx(), outs);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->error, "gemini was killed before it finished (interrupted: no final event)");
}

// MCP servers in settings.json's mcpServers, their files read-only at /evalbox/mcp/; skills
// read-only in ~/.gemini/skills/NAME; hooks in settings.json's hooks, their executables
// read-only at /evalbox/hooks/; an event Gemini CLI does not have refused where it is written.
TEST_F(GeminiAdapter, WritesMcpServersSkillsAndHooks) {
  ASSERT_TRUE(write_file(dir_.path() / "search.py", "print()\n"));
  harness::mcp_server_spec m;
  m.name = "search";
  m.command = {"python3", "search.py"};
  m.files[1] = dir_.path() / "search.py";
  m.env = {{"INDEX", "/data/idx"}};
  c_.mcp_servers.push_back(m);
  EXPECT_TRUE(gemini::make_adapter()->validate(c_).empty());
  auto p = plan();
  ASSERT_EQ(p.home.files.size(), 1u);
  const json settings = json::parse(p.home.files[0].content);
  EXPECT_EQ(settings["mcpServers"], json::parse(R"({"search": {"command": "python3",
      "args": ["/evalbox/mcp/search/search.py"], "env": {"INDEX": "/data/idx"}}})"));
  ASSERT_EQ(p.bundles.size(), 1u);
  EXPECT_EQ(p.bundles[0].target, fs::path("/evalbox/mcp/search/search.py"));
  EXPECT_EQ(p.bundles[0].source, dir_.path() / "search.py");

  ASSERT_TRUE(make_dirs(dir_.path() / "pdf"));
  ASSERT_TRUE(write_file(dir_.path() / "pdf" / "SKILL.md", "x"));
  c_.skills.push_back({"pdf", dir_.path() / "pdf", {}});
  c_.skills_where = {c_.where.file, 11, 5};
  EXPECT_TRUE(gemini::make_adapter()->validate(c_).empty());
  auto with_skill = plan();
  ASSERT_EQ(with_skill.bundles.size(), 2u);
  EXPECT_EQ(with_skill.bundles[0].target, fs::path("/home/agent/.gemini/skills/pdf"));
  EXPECT_EQ(with_skill.bundles[0].source, dir_.path() / "pdf");

  harness::hook_spec h;
  h.event = "BeforeTool";
  h.matcher = "run_shell_command";
  h.command = "hooks/record.sh";
  h.script = dir_.path() / "search.py";
  h.where = {c_.where.file, 12, 5};
  c_.hooks.push_back(h);
  EXPECT_TRUE(gemini::make_adapter()->validate(c_).empty());
  auto with_hook = plan();
  const json hooked = json::parse(with_hook.home.files[0].content);
  EXPECT_EQ(hooked["hooks"], json::parse(R"({"BeforeTool": [{"matcher": "run_shell_command",
      "hooks": [{"type": "command", "command": "/evalbox/hooks/0/search.py"}]}]})"))
      << hooked.dump(2);
  EXPECT_EQ(with_hook.bundles.back().target, fs::path("/evalbox/hooks/0/search.py"));

  c_.hooks.back().event = "PreToolUse";  // Claude Code's name, not Gemini's
  auto errors = gemini::make_adapter()->validate(c_);
  ASSERT_EQ(errors.size(), 1u) << harness::join_messages(errors);
  EXPECT_EQ(errors[0].where.line, 12);
  EXPECT_NE(errors[0].message().find("Gemini CLI has no hook event 'PreToolUse'"),
            std::string::npos)
      << errors[0].message();
}

}  // namespace
}  // namespace evalbox::adapters
