#include "adapters/claude-code/transcript.h"

#include <gtest/gtest.h>

#include "base/fs.h"
#include "tests/harness/transcripts/golden.h"

namespace evalbox::adapters::claude_code {
namespace {

using harness::transcript;

transcript parse_scenario(const std::string& scenario) {
  auto dir = evalbox::testing::transcript_data_dir() / "claude" / scenario;
  auto events = read_file(dir / "events.jsonl");
  EXPECT_TRUE(events) << dir;
  auto t = parse_claude_stream_json(events.value_or(""));
  EXPECT_TRUE(t);
  return t.value_or(transcript{});
}

void expect_scenario_golden(const std::string& scenario) {
  transcript t = parse_scenario(scenario);
  evalbox::testing::expect_golden(
      harness::to_jsonl(t),
      evalbox::testing::transcript_data_dir() / "claude" / scenario / "normalized.jsonl");
}

transcript parse(std::string_view jsonl) {
  auto t = parse_claude_stream_json(jsonl);
  EXPECT_TRUE(t);
  return t.value_or(transcript{});
}

// --- The real captures -----------------------------------------------------------------------

TEST(ClaudeGolden, Single) { expect_scenario_golden("single"); }
TEST(ClaudeGolden, Multi) { expect_scenario_golden("multi"); }
TEST(ClaudeGolden, ModelError) { expect_scenario_golden("model-error"); }
TEST(ClaudeGolden, Interrupted) { expect_scenario_golden("interrupted"); }

TEST(ClaudeGolden, EveryGoldenFileReadsBackAsTheParsedTranscript) {
  for (const char* scenario : {"single", "multi", "model-error", "interrupted"}) {
    auto back = harness::read_transcript(evalbox::testing::transcript_data_dir() / "claude" /
                                         scenario / "normalized.jsonl");
    ASSERT_TRUE(back) << scenario << ": " << back.error().message;
    EXPECT_EQ(*back, parse_scenario(scenario)) << scenario;
  }
}

TEST(ClaudeSingle, RecordsSessionModelCommandExitCodeAndFinalMessage) {
  transcript t = parse_scenario("single");
  EXPECT_EQ(t.session_id, "e1cd68c7-1098-4375-a892-2a4a6dafb574");
  EXPECT_EQ(t.model, "claude-opus-4-8[1m]");
  EXPECT_EQ(harness::commands(t), std::vector<std::string>{"echo hello > result.txt"});
  const auto& obs = t.steps.at(0).observations.at(0);
  EXPECT_EQ(obs.call_id, "toolu_stub000001");
  EXPECT_EQ(obs.exit_code, 0);
  EXPECT_FALSE(obs.is_error);
  EXPECT_EQ(t.final_message, "Created result.txt containing hello.");
  EXPECT_TRUE(t.completed);
  EXPECT_FALSE(t.error);
  EXPECT_EQ(t.num_turns, 2);
  EXPECT_EQ(t.duration_ms, 832u);
}

TEST(ClaudeSingle, TotalsComeFromTheResultEventWithCost) {
  transcript t = parse_scenario("single");
  EXPECT_EQ(t.total.input_tokens, 20u);
  EXPECT_EQ(t.total.output_tokens, 10u);
  EXPECT_EQ(t.total.cached_input_tokens, 0u);
  EXPECT_FALSE(t.total.reasoning_tokens);
  ASSERT_TRUE(t.total.cost_usd);
  EXPECT_DOUBLE_EQ(*t.total.cost_usd, 0.00035);
}

TEST(ClaudeSingle, PerStepOutputTokensStayUnknownBecauseTheStreamReportsAPlaceholder) {
  transcript t = parse_scenario("single");
  ASSERT_TRUE(t.steps.at(0).metrics);
  EXPECT_EQ(t.steps[0].metrics->input_tokens, 10u);
  EXPECT_FALSE(t.steps[0].metrics->output_tokens);
}

TEST(ClaudeMulti, PairsResultsToCallsAndReadsExitCodes) {
  transcript t = parse_scenario("multi");
  ASSERT_EQ(t.steps.size(), 4u);
  EXPECT_EQ(harness::commands(t),
            (std::vector<std::string>{"python3 -c 'import sys; sys.exit(3)'", "cat notes.md"}));
  EXPECT_EQ(t.steps[0].observations.at(0).exit_code, 3);
  EXPECT_TRUE(t.steps[0].observations.at(0).is_error);
  // Write results carry no is_error key, and Write is not a shell call: no exit code.
  EXPECT_EQ(t.steps[1].tool_calls.at(0).tool, "write");
  EXPECT_FALSE(t.steps[1].observations.at(0).is_error);
  EXPECT_FALSE(t.steps[1].observations.at(0).exit_code);
  EXPECT_EQ(t.steps[2].observations.at(0).exit_code, 0);
  EXPECT_EQ(t.steps[2].observations.at(0).output,
            "# Notes\nThe check exited with code 3; recorded here.");
  EXPECT_EQ(harness::tools_used(t), (std::vector<std::string>{"shell", "write"}));
  EXPECT_EQ(t.total.input_tokens, 40u);
  EXPECT_EQ(t.total.output_tokens, 20u);
  EXPECT_DOUBLE_EQ(t.total.cost_usd.value_or(-1), 0.0007);
  EXPECT_EQ(harness::step_count(t), 4);
}

TEST(ClaudeModelError, IsErrorEvenThoughSubtypeIsSuccess) {
  transcript t = parse_scenario("model-error");
  ASSERT_TRUE(t.error);
  EXPECT_TRUE(t.error->starts_with("API Error: 500 Internal server error."));
  EXPECT_FALSE(t.final_message);
  EXPECT_TRUE(t.completed);
  // The client-generated error text is not an agent step.
  ASSERT_EQ(t.steps.size(), 1u);
  EXPECT_EQ(t.steps[0].source, "system");
  EXPECT_EQ(harness::step_count(t), 0);
  // Reported as zero, so zero (not unknown).
  EXPECT_EQ(t.total.cost_usd, 0.0);
  EXPECT_EQ(t.total.input_tokens, 0u);
}

TEST(ClaudeInterrupted, IsIncompleteKeepsTheCommandAndOnlyTheKnownUsage) {
  transcript t = parse_scenario("interrupted");
  EXPECT_FALSE(t.completed);
  EXPECT_EQ(t.error, "interrupted: no final event");
  EXPECT_EQ(harness::commands(t), std::vector<std::string>{"python3 -c 'import sys; sys.exit(3)'"});
  EXPECT_EQ(t.steps.at(0).observations.at(0).exit_code, 3);
  EXPECT_FALSE(t.final_message);
  EXPECT_EQ(t.total.input_tokens, 10u);
  EXPECT_FALSE(t.total.output_tokens);
  EXPECT_FALSE(t.total.cost_usd);
}

// --- Robustness --------------------------------------------------------------------------------

TEST(ClaudeParser, CountsUnknownEventTypesSubtypesAndBlocks) {
  transcript t = parse(R"({"type":"system","subtype":"init","session_id":"s","model":"m"}
{"type":"stream_event","event":{}}
{"type":"system","subtype":"compact_boundary"}
{"type":"assistant","message":{"id":"m1","content":[{"type":"image"},{"type":"text","text":"hi"}]}}
{"type":"result","subtype":"success","is_error":false,"result":"hi"}
)");
  EXPECT_EQ(t.unknown_events,
            (std::map<std::string, int>{
                {"assistant/image", 1}, {"stream_event", 1}, {"system/compact_boundary", 1}}));
  EXPECT_EQ(t.final_message, "hi");
}

TEST(ClaudeParser, CountsMalformedLines) {
  transcript t = parse("garbage\n{\"type\":\"result\",\"subtype\":\"success\"}\n\"str\"\n{\n");
  EXPECT_EQ(t.malformed_lines, 3);
  EXPECT_TRUE(t.completed);
}

TEST(ClaudeParser, MergesEventsOfOneMessageIntoOneStep) {
  transcript t = parse(
      R"({"type":"assistant","message":{"id":"m1","content":[{"type":"thinking","thinking":"plan"}],"usage":{"input_tokens":5,"cache_read_input_tokens":7,"output_tokens":1}}}
{"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"ok"}],"usage":{"input_tokens":5,"output_tokens":1}}}
{"type":"assistant","message":{"id":"m1","content":[{"type":"tool_use","id":"t1","name":"Read","input":{"file_path":"/a"}}]}}
)");
  ASSERT_EQ(t.steps.size(), 1u);
  EXPECT_EQ(t.steps[0].reasoning, "plan");
  EXPECT_EQ(t.steps[0].message, "ok");
  EXPECT_EQ(t.steps[0].tool_calls.at(0).tool, "read");
  // Counted once per message; cache reads are part of the input.
  EXPECT_EQ(t.steps[0].metrics->input_tokens, 12u);
  EXPECT_EQ(t.steps[0].metrics->cached_input_tokens, 7u);
}

TEST(ClaudeParser, PairsToolResultsByIdNotByOrder) {
  transcript t = parse(
      R"({"type":"assistant","message":{"id":"m1","content":[{"type":"tool_use","id":"a","name":"Bash","input":{"command":"ls"}},{"type":"tool_use","id":"b","name":"Bash","input":{"command":"false"}}]}}
{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"b","content":"Exit code 1","is_error":true},{"type":"tool_result","tool_use_id":"a","content":[{"type":"text","text":"x.txt"}],"is_error":false}]}}
)");
  ASSERT_EQ(t.steps.size(), 1u);
  const auto& obs = t.steps[0].observations;
  ASSERT_EQ(obs.size(), 2u);
  EXPECT_EQ(obs[0].call_id, "b");
  EXPECT_EQ(obs[0].exit_code, 1);
  EXPECT_EQ(obs[1].call_id, "a");
  EXPECT_EQ(obs[1].exit_code, 0);
  EXPECT_EQ(obs[1].output, "x.txt");
}

TEST(ClaudeParser, NormalizesToolNames) {
  transcript t = parse(
      R"({"type":"assistant","message":{"id":"m1","content":[{"type":"tool_use","id":"1","name":"Edit","input":{}},{"type":"tool_use","id":"2","name":"mcp__github__create_issue","input":{}},{"type":"tool_use","id":"3","name":"TodoWrite","input":{}},{"type":"tool_use","id":"4","name":"WebSearch","input":{}},{"type":"tool_use","id":"5","name":"Grep","input":{}}]}}
)");
  EXPECT_EQ(
      harness::tools_used(t),
      (std::vector<std::string>{"Grep", "edit", "mcp:github/create_issue", "todo", "web_search"}));
}

TEST(ClaudeParser, AnErrorResultWithoutTextNamesItsSubtype) {
  transcript t =
      parse(R"({"type":"result","subtype":"error_max_turns","is_error":true,"num_turns":9}
)");
  EXPECT_EQ(t.error, "claude-code: error_max_turns");
  EXPECT_TRUE(t.completed);
}

TEST(ClaudeParser, FinalMessageFallsBackToTheLastAgentTextWhenResultHasNone) {
  transcript t = parse(
      R"({"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"all done"}]}}
{"type":"result","subtype":"success","is_error":false}
)");
  EXPECT_EQ(t.final_message, "all done");
  EXPECT_FALSE(t.error);
}

TEST(ClaudeParser, AKilledFollowUpInvocationIsInterruptedDespiteTheFirstResult) {
  transcript t = parse(R"({"type":"system","subtype":"init","session_id":"s"}
{"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"first"}],"usage":{"input_tokens":10}}}
{"type":"result","subtype":"success","is_error":false,"result":"first","usage":{"input_tokens":10,"output_tokens":5},"total_cost_usd":0.5}
{"type":"system","subtype":"init","session_id":"s"}
{"type":"assistant","message":{"id":"m2","content":[{"type":"tool_use","id":"t","name":"Bash","input":{"command":"make"}}],"usage":{"input_tokens":7}}}
)");
  EXPECT_FALSE(t.completed);
  EXPECT_EQ(t.error, "interrupted: no final event");
  EXPECT_FALSE(t.final_message);
  EXPECT_EQ(t.total.input_tokens, 17u);  // the first result plus what the second stream showed
  EXPECT_EQ(t.total.output_tokens, 5u);
  EXPECT_EQ(t.total.cost_usd, 0.5);
}

TEST(ClaudeParser, CostStaysUnknownWhenTheResultOmitsIt) {
  transcript t = parse(
      R"({"type":"result","subtype":"success","is_error":false,"usage":{"input_tokens":3,"output_tokens":2}}
)");
  EXPECT_FALSE(t.total.cost_usd);
  EXPECT_EQ(t.total.output_tokens, 2u);
}

TEST(ClaudeParser, SurvivesEveryPrefixOfARealStream) {
  auto events = read_file(evalbox::testing::transcript_data_dir() / "claude/multi/events.jsonl");
  ASSERT_TRUE(events);
  for (size_t n = 0; n <= events->size(); n += 13) {
    auto t = parse_claude_stream_json(std::string_view(*events).substr(0, n));
    ASSERT_TRUE(t) << n;
    if (n < events->size() - 2) {
      EXPECT_FALSE(t->completed) << n;
    }
  }
}

TEST(ClaudeParser, ToleratesFieldsOfTheWrongType) {
  transcript t = parse(R"({"type":5}
{"type":"item.completed","item":"oops"}
{"type":"item.completed","item":{"id":7,"type":["x"]}}
{"type":"assistant","message":"oops"}
{"type":"assistant","message":{"id":1,"content":[5,{"type":"tool_use","id":null,"name":3,"input":"x"}]}}
{"type":"user","message":{"content":[{"type":"tool_result","content":{"a":1},"is_error":"yes"}]}}
{"type":"result","usage":"none","num_turns":"two","total_cost_usd":"free"}
{"type":"turn.completed","usage":[1]}
)");
  EXPECT_EQ(t.malformed_lines, 0);
}

TEST(ClaudeParser, PassesASecretInACommandThroughUnchanged) {
  transcript t = parse(
      R"({"type":"assistant","message":{"id":"m1","content":[{"type":"tool_use","id":"a","name":"Bash","input":{"command":"export ANTHROPIC_API_KEY=sk-ant-api03-SECRET && env"}}]}}
)");
  EXPECT_EQ(harness::commands(t),
            std::vector<std::string>{"export ANTHROPIC_API_KEY=sk-ant-api03-SECRET && env"});
  EXPECT_NE(harness::to_jsonl(t).find("sk-ant-api03-SECRET"), std::string::npos);
}

}  // namespace
}  // namespace evalbox::adapters::claude_code
