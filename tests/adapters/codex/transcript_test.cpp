#include "adapters/codex/transcript.h"

#include <gtest/gtest.h>

#include "base/fs.h"
#include "tests/harness/transcripts/golden.h"

namespace evalbox::adapters::codex {
namespace {

using harness::transcript;

transcript parse_scenario(const std::string& scenario) {
  auto dir = evalbox::testing::transcript_data_dir() / "codex" / scenario;
  auto events = read_file(dir / "events.jsonl");
  EXPECT_TRUE(events) << dir;
  auto t = parse_codex_exec_json(events.value_or(""));
  EXPECT_TRUE(t);
  return t.value_or(transcript{});
}

void expect_scenario_golden(const std::string& scenario) {
  transcript t = parse_scenario(scenario);
  evalbox::testing::expect_golden(
      harness::to_jsonl(t),
      evalbox::testing::transcript_data_dir() / "codex" / scenario / "normalized.jsonl");
}

transcript parse(std::string_view jsonl) {
  auto t = parse_codex_exec_json(jsonl);
  EXPECT_TRUE(t);
  return t.value_or(transcript{});
}

// --- The real captures -----------------------------------------------------------------------

TEST(CodexGolden, Single) { expect_scenario_golden("single"); }
TEST(CodexGolden, Multi) { expect_scenario_golden("multi"); }
TEST(CodexGolden, ModelError) { expect_scenario_golden("model-error"); }
TEST(CodexGolden, Interrupted) { expect_scenario_golden("interrupted"); }

TEST(CodexGolden, EveryGoldenFileReadsBackAsTheParsedTranscript) {
  for (const char* scenario : {"single", "multi", "model-error", "interrupted"}) {
    auto back = harness::read_transcript(evalbox::testing::transcript_data_dir() / "codex" /
                                         scenario / "normalized.jsonl");
    ASSERT_TRUE(back) << scenario << ": " << back.error().message;
    EXPECT_EQ(*back, parse_scenario(scenario)) << scenario;
  }
}

TEST(CodexSingle, RecordsTheCommandItsExitCodeAndTheFinalMessage) {
  transcript t = parse_scenario("single");
  EXPECT_EQ(t.session_id, "01a22d69-3a5e-77b2-a24c-41c5bc61a964");
  EXPECT_EQ(harness::commands(t), std::vector<std::string>{"echo hello > result.txt"});
  ASSERT_EQ(t.steps.size(), 2u);
  ASSERT_EQ(t.steps[0].observations.size(), 1u);
  EXPECT_EQ(t.steps[0].observations[0].exit_code, 0);
  EXPECT_FALSE(t.steps[0].observations[0].is_error);
  EXPECT_EQ(t.final_message, "Created result.txt containing hello.");
  EXPECT_TRUE(t.completed);
  EXPECT_FALSE(t.error);
}

TEST(CodexSingle, UsageComesFromTurnCompletedAndCostStaysUnknown) {
  transcript t = parse_scenario("single");
  EXPECT_EQ(t.total.input_tokens, 20u);
  EXPECT_EQ(t.total.output_tokens, 10u);
  EXPECT_EQ(t.total.cached_input_tokens, 0u);
  EXPECT_EQ(t.total.reasoning_tokens, 0u);
  EXPECT_FALSE(t.total.cost_usd);
}

TEST(CodexMulti, KeepsTheFailingCommandTheEditAndTheSecondCommandInOrder) {
  transcript t = parse_scenario("multi");
  ASSERT_EQ(t.steps.size(), 4u);
  EXPECT_EQ(harness::commands(t),
            (std::vector<std::string>{"python3 -c 'import sys; sys.exit(3)'", "cat notes.md"}));
  EXPECT_EQ(t.steps[0].observations.at(0).exit_code, 3);
  EXPECT_TRUE(t.steps[0].observations.at(0).is_error);
  EXPECT_EQ(t.steps[1].tool_calls.at(0).tool, "edit");
  EXPECT_EQ(t.steps[1].tool_calls.at(0).input["changes"][0]["path"], "/workspace/notes.md");
  EXPECT_EQ(t.steps[2].observations.at(0).output,
            "# Notes\nThe check exited with code 3; recorded here.\n");
  EXPECT_EQ(harness::tools_used(t), (std::vector<std::string>{"edit", "shell"}));
  EXPECT_EQ(t.total.input_tokens, 40u);
  EXPECT_EQ(t.total.output_tokens, 20u);
  EXPECT_EQ(harness::step_count(t), 4);
}

TEST(CodexModelError, IsAnErrorWithTheClientsMessageAndNoFinalMessage) {
  transcript t = parse_scenario("model-error");
  ASSERT_TRUE(t.error);
  EXPECT_EQ(*t.error,
            "We\u2019re currently experiencing high demand, which may cause temporary errors.");
  EXPECT_TRUE(t.completed);  // turn.failed is a final event
  EXPECT_FALSE(t.final_message);
  EXPECT_TRUE(t.total.unknown());
  EXPECT_EQ(harness::step_count(t), 0);
}

TEST(CodexInterrupted, IsIncompleteButKeepsTheCommandThatRan) {
  transcript t = parse_scenario("interrupted");
  EXPECT_FALSE(t.completed);
  EXPECT_EQ(t.error, "interrupted: no final event");
  EXPECT_EQ(harness::commands(t), std::vector<std::string>{"python3 -c 'import sys; sys.exit(3)'"});
  EXPECT_EQ(t.steps.at(0).observations.at(0).exit_code, 3);
  EXPECT_FALSE(t.final_message);
  EXPECT_TRUE(t.total.unknown());
}

// --- Robustness --------------------------------------------------------------------------------

TEST(CodexParser, CountsUnknownEventTypesAndKeepsGoing) {
  transcript t = parse(R"({"type":"thread.started","thread_id":"t"}
{"type":"turn.started"}
{"type":"session.configured","x":1}
{"type":"session.configured"}
{"type":"item.completed","item":{"id":"item_0","type":"agent_message","text":"hi"}}
{"type":"turn.completed","usage":{"input_tokens":1,"output_tokens":2}}
)");
  EXPECT_EQ(t.unknown_events, (std::map<std::string, int>{{"session.configured", 2}}));
  EXPECT_EQ(t.final_message, "hi");
  EXPECT_TRUE(t.completed);
}

TEST(CodexParser, CountsUnknownItemTypesOncePerItem) {
  transcript t = parse(R"({"type":"turn.started"}
{"type":"item.started","item":{"id":"item_0","type":"collab_call"}}
{"type":"item.completed","item":{"id":"item_0","type":"collab_call"}}
{"type":"turn.completed","usage":{}}
)");
  EXPECT_EQ(t.unknown_events, (std::map<std::string, int>{{"item:collab_call", 1}}));
  EXPECT_TRUE(t.steps.empty());
}

TEST(CodexParser, CountsMalformedLines) {
  transcript t = parse(
      "not json\n{\"type\":\"turn.started\"}\n[1,2]\n{\"type\":\n\n"
      "{\"type\":\"turn.completed\"}\n");
  EXPECT_EQ(t.malformed_lines, 3);
  EXPECT_TRUE(t.completed);
}

TEST(CodexParser, PairsInterleavedItemsById) {
  transcript t = parse(R"({"type":"turn.started"}
{"type":"item.started","item":{"id":"a","type":"command_execution","command":"sleep 1","exit_code":null,"status":"in_progress"}}
{"type":"item.started","item":{"id":"b","type":"command_execution","command":"false","exit_code":null,"status":"in_progress"}}
{"type":"item.completed","item":{"id":"b","type":"command_execution","command":"false","aggregated_output":"","exit_code":1,"status":"failed"}}
{"type":"item.completed","item":{"id":"a","type":"command_execution","command":"sleep 1","aggregated_output":"ok","exit_code":0,"status":"completed"}}
{"type":"turn.completed","usage":{}}
)");
  ASSERT_EQ(t.steps.size(), 2u);
  EXPECT_EQ(t.steps[0].tool_calls.at(0).command, "sleep 1");
  EXPECT_EQ(t.steps[0].observations.at(0).call_id, "a");
  EXPECT_EQ(t.steps[0].observations.at(0).exit_code, 0);
  EXPECT_EQ(t.steps[0].observations.at(0).output, "ok");
  EXPECT_EQ(t.steps[1].observations.at(0).call_id, "b");
  EXPECT_EQ(t.steps[1].observations.at(0).exit_code, 1);
}

TEST(CodexParser, AStartedItemWithoutCompletionHasNoObservation) {
  transcript t = parse(R"({"type":"turn.started"}
{"type":"item.started","item":{"id":"a","type":"command_execution","command":"make","exit_code":null,"status":"in_progress"}}
)");
  ASSERT_EQ(t.steps.size(), 1u);
  EXPECT_EQ(harness::commands(t), std::vector<std::string>{"make"});
  EXPECT_TRUE(t.steps[0].observations.empty());
  EXPECT_FALSE(t.completed);
}

TEST(CodexParser, SumsUsageOverTurnsAndKeepsUnreportedFieldsNull) {
  transcript t = parse(R"({"type":"turn.started"}
{"type":"turn.completed","usage":{"input_tokens":10,"output_tokens":5}}
{"type":"turn.started"}
{"type":"turn.completed","usage":{"input_tokens":7,"output_tokens":1,"cached_input_tokens":3}}
)");
  EXPECT_EQ(t.total.input_tokens, 17u);
  EXPECT_EQ(t.total.output_tokens, 6u);
  EXPECT_EQ(t.total.cached_input_tokens, 3u);
  EXPECT_FALSE(t.total.reasoning_tokens);
  EXPECT_FALSE(t.total.cost_usd);
}

TEST(CodexParser, ATopLevelErrorFollowedByACompletedTurnIsNotTheRunsError) {
  transcript t = parse(R"({"type":"turn.started"}
{"type":"error","message":"Reconnecting... 1/5"}
{"type":"item.completed","item":{"id":"i","type":"agent_message","text":"done"}}
{"type":"turn.completed","usage":{}}
)");
  EXPECT_FALSE(t.error);
  EXPECT_EQ(t.steps.at(0).source, "system");
  EXPECT_EQ(t.final_message, "done");
}

TEST(CodexParser, NormalizesMcpWebSearchTodoAndReasoningItems) {
  transcript t = parse(R"({"type":"turn.started"}
{"type":"item.completed","item":{"id":"r","type":"reasoning","text":"thinking"}}
{"type":"item.started","item":{"id":"m","type":"mcp_tool_call","server":"docs","tool":"lookup","arguments":{"q":"x"},"status":"in_progress"}}
{"type":"item.completed","item":{"id":"m","type":"mcp_tool_call","server":"docs","tool":"lookup","arguments":{"q":"x"},"result":{"content":[{"type":"text","text":"found"}]},"status":"completed"}}
{"type":"item.completed","item":{"id":"w","type":"web_search","query":"fmt docs"}}
{"type":"item.started","item":{"id":"t","type":"todo_list","items":[{"text":"a","completed":false}]}}
{"type":"item.updated","item":{"id":"t","type":"todo_list","items":[{"text":"a","completed":true}]}}
{"type":"turn.completed","usage":{}}
)");
  ASSERT_EQ(t.steps.size(), 4u);
  EXPECT_EQ(t.steps[0].reasoning, "thinking");
  EXPECT_EQ(t.steps[1].tool_calls.at(0).tool, "mcp:docs/lookup");
  EXPECT_EQ(t.steps[1].observations.at(0).output, "found");
  EXPECT_EQ(t.steps[2].tool_calls.at(0).input["query"], "fmt docs");
  EXPECT_EQ(t.steps[3].tool_calls.at(0).tool, "todo");
  EXPECT_EQ(t.steps[3].tool_calls.at(0).input["items"][0]["completed"], true);
  EXPECT_TRUE(t.steps[3].observations.empty());  // never completed
  EXPECT_EQ(harness::tools_used(t),
            (std::vector<std::string>{"mcp:docs/lookup", "todo", "web_search"}));
}

TEST(CodexParser, SurvivesEveryPrefixOfARealStream) {
  auto events = read_file(evalbox::testing::transcript_data_dir() / "codex/multi/events.jsonl");
  ASSERT_TRUE(events);
  for (size_t n = 0; n <= events->size(); n += 13) {
    auto t = parse_codex_exec_json(std::string_view(*events).substr(0, n));
    ASSERT_TRUE(t) << n;
    if (n < events->size() - 2) {
      EXPECT_FALSE(t->completed) << n;
    }
  }
}

TEST(CodexParser, ToleratesFieldsOfTheWrongType) {
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

TEST(CodexParser, PassesASecretInACommandThroughUnchanged) {
  transcript t = parse(R"({"type":"turn.started"}
{"type":"item.completed","item":{"id":"a","type":"command_execution","command":"/bin/bash -lc 'curl -H \"Authorization: Bearer sk-proj-SECRET123\" x'","aggregated_output":"","exit_code":0,"status":"completed"}}
{"type":"turn.completed","usage":{}}
)");
  EXPECT_EQ(harness::commands(t),
            std::vector<std::string>{"curl -H \"Authorization: Bearer sk-proj-SECRET123\" x"});
  EXPECT_NE(harness::to_jsonl(t).find("sk-proj-SECRET123"), std::string::npos);
}

TEST(UnwrapShellCommand, RemovesTheBashWrapperAndOneLevelOfQuoting) {
  EXPECT_EQ(unwrap_shell_command("/bin/bash -lc 'echo hello > result.txt'"),
            "echo hello > result.txt");
  EXPECT_EQ(unwrap_shell_command(R"(/bin/bash -lc "python3 -c 'import sys; sys.exit(3)'")"),
            "python3 -c 'import sys; sys.exit(3)'");
  EXPECT_EQ(unwrap_shell_command(R"(/bin/bash -lc 'it'\''s')"), "it's");
  EXPECT_EQ(unwrap_shell_command(R"(bash -lc "a \"b\" \$HOME")"), R"(a "b" $HOME)");
}

TEST(UnwrapShellCommand, RemovesTheShLoginShellWrapperCodexUsesInTheSandbox) {
  EXPECT_EQ(unwrap_shell_command("/bin/sh -lc 'echo hello > out.txt'"), "echo hello > out.txt");
  EXPECT_EQ(unwrap_shell_command("/usr/bin/bash -lc 'ls /grader'"), "ls /grader");
}

TEST(UnwrapShellCommand, LeavesOtherShapesAlone) {
  EXPECT_FALSE(unwrap_shell_command("ls -la"));
  EXPECT_FALSE(unwrap_shell_command("/bin/bash -lc 'a' 'b'"));
  EXPECT_FALSE(unwrap_shell_command("/bin/bash -lc 'unterminated"));
}

// --- Commands missing from the stream, recovered from the rollout ---------------------------

std::string read_data(const std::filesystem::path& path) {
  auto text = read_file(path);
  EXPECT_TRUE(text) << path;
  return text.value_or("");
}

TEST(AddUnreportedCommands, RecoversTheCommandCodexsSandboxDeniedInItsPlace) {
  const auto dir =
      std::filesystem::path(EVALBOX_SOURCE_DIR) / "tests/adapters/codex/data/sandbox-denied";
  transcript t = parse(read_data(dir / "events.jsonl"));
  ASSERT_EQ(harness::commands(t), (std::vector<std::string>{"echo hello > out.txt", "ls"}));
  EXPECT_EQ(add_unreported_commands(t, read_data(dir / "native.jsonl")), 1);
  ASSERT_EQ(
      harness::commands(t),
      (std::vector<std::string>{"echo hello > out.txt", "touch /home/agent/outside.txt", "ls"}));
  const auto& denied = t.steps[1];
  EXPECT_EQ(denied.index, 1);
  ASSERT_EQ(denied.observations.size(), 1u);
  EXPECT_EQ(denied.observations[0].call_id, denied.tool_calls[0].id);
  EXPECT_EQ(denied.observations[0].exit_code, 1);
  EXPECT_TRUE(denied.observations[0].is_error);
  EXPECT_EQ(denied.observations[0].output,
            "touch: cannot touch '/home/agent/outside.txt': Read-only file system\n");
  EXPECT_EQ(t.final_message, "Done.");
  // Applying it again finds every command already there.
  EXPECT_EQ(add_unreported_commands(t, read_data(dir / "native.jsonl")), 0);
}

TEST(AddUnreportedCommands, AddsNothingWhereTheStreamReportedEveryCommand) {
  for (const char* scenario : {"single", "multi", "model-error", "interrupted"}) {
    transcript t = parse_scenario(scenario);
    const transcript before = t;
    auto dir = evalbox::testing::transcript_data_dir() / "codex" / scenario;
    EXPECT_EQ(add_unreported_commands(t, read_data(dir / "native.jsonl")), 0) << scenario;
    EXPECT_EQ(t, before) << scenario;
  }
}

// Unmatched calls are placed where the conversation had them: before the next matched one,
// after the last, in rollout order (built in one pass: inserting each was quadratic).
TEST(AddUnreportedCommands, PlacesEachUnreportedCallBetweenItsNeighbours) {
  transcript t = parse(
      R"({"type":"item.completed","item":{"id":"i1","type":"command_execution","command":"/bin/bash -lc 'a'","exit_code":0,"status":"completed"}}
{"type":"item.completed","item":{"id":"i2","type":"command_execution","command":"/bin/bash -lc 'c'","exit_code":0,"status":"completed"}}
{"type":"turn.completed","usage":{}}
)");
  auto call = [](const std::string& id, const std::string& cmd) {
    return fmt::format(
               R"({{"type":"response_item","payload":{{"type":"function_call","name":"exec_command","arguments":"{{\"cmd\":\"{}\"}}","call_id":"{}"}}}})",
               cmd, id) +
           "\n";
  };
  std::string rollout = call("r0", "z") + call("r1", "a") + call("r2", "b1") + call("r3", "b2") +
                        call("r4", "c") + call("r5", "d") + call("r6", "a");
  EXPECT_EQ(add_unreported_commands(t, rollout), 5);
  EXPECT_EQ(harness::commands(t), (std::vector<std::string>{"z", "a", "b1", "b2", "c", "d", "a"}));
  for (size_t i = 0; i < t.steps.size(); ++i) EXPECT_EQ(t.steps[i].index, static_cast<int>(i));
}

// Found by fuzzing: "Process exited with code 99999999999" overflowed an int (undefined
// behaviour). An exit code out of range is unknown.
TEST(AddUnreportedCommands, AnExitCodeOutOfRangeIsUnknown) {
  transcript t = parse(R"({"type":"turn.completed","usage":{}}
)");
  std::string rollout =
      R"({"type":"response_item","payload":{"type":"function_call","name":"exec_command","arguments":"{\"cmd\":\"x\"}","call_id":"c1"}}
{"type":"response_item","payload":{"type":"function_call_output","call_id":"c1","output":"Process exited with code 99999999999\nOutput:\nboom"}}
)";
  EXPECT_EQ(add_unreported_commands(t, rollout), 1);
  ASSERT_EQ(t.steps.at(0).observations.size(), 1u);
  EXPECT_FALSE(t.steps[0].observations[0].exit_code);
  EXPECT_EQ(t.steps[0].observations[0].output, "boom");
}

TEST(AddUnreportedCommands, IgnoresOtherThreadsAndGarbage) {
  transcript t = parse(R"({"type":"thread.started","thread_id":"mine"}
{"type":"turn.started"}
{"type":"turn.completed","usage":{}}
)");
  std::string rollout = R"({"type":"session_meta","payload":{"id":"other"}}
{"type":"response_item","payload":{"type":"function_call","name":"exec_command","arguments":"{\"cmd\":\"rm -rf x\"}","call_id":"c1"}}
not json
{"type":"session_meta","payload":{"id":"mine"}}
{"type":"response_item","payload":{"type":"function_call","name":"exec_command","arguments":"not json","call_id":"c2"}}
{"type":"response_item","payload":{"type":"function_call","name":"shell","arguments":"{\"command\":[\"bash\",\"-lc\",\"make\"]}","call_id":"c3"}}
)";
  EXPECT_EQ(add_unreported_commands(t, rollout), 1);
  ASSERT_EQ(harness::commands(t), std::vector<std::string>{"make"});
  EXPECT_TRUE(t.steps[0].observations.empty());  // no output recorded: none invented
}

}  // namespace
}  // namespace evalbox::adapters::codex
