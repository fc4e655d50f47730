#include "harness/transcripts/events.h"

#include <gtest/gtest.h>

#include "base/fs.h"
#include "harness/transcripts/read_limits.h"
#include "tests/harness/transcripts/golden.h"

namespace evalbox::harness {
namespace {

transcript parse(std::string_view jsonl, events_options options = {}) {
  auto t = parse_evalbox_events(jsonl, options);
  EXPECT_TRUE(t) << (t ? "" : t.error().message);
  return t.value_or(transcript{});
}

constexpr std::string_view full_run =
    R"({"type":"header","schema":"evalbox.events.v1","session_id":"r1","model":"scripted"}
{"type":"message","role":"assistant","text":"Running the tests."}
{"type":"tool_call","id":"c1","tool":"shell","input":{"command":"python3 test_sum.py"}}
{"type":"tool_result","id":"c1","exit_code":1,"output":"FAILED"}
{"type":"usage","input_tokens":120,"output_tokens":40,"cost_usd":0.01}
{"type":"tool_call","id":"c2","tool":"edit","input":{"path":"sum.py"}}
{"type":"tool_result","id":"c2","output":"ok"}
{"type":"usage","input_tokens":80,"output_tokens":10}
{"type":"final","text":"Fixed the off-by-one."}
)";

TEST(EvalboxEvents, SampleMatchesItsGoldenFile) {
  auto dir = evalbox::testing::transcript_data_dir() / "evalbox" / "sample";
  auto events = read_file(dir / "events.jsonl");
  ASSERT_TRUE(events);
  transcript t = parse(*events);
  EXPECT_EQ(t.malformed_lines, 1);
  EXPECT_EQ(t.unknown_events, (std::map<std::string, int>{{"progress", 1}}));
  EXPECT_EQ(commands(t), (std::vector<std::string>{"python3 test_sum.py", "python3 test_sum.py"}));
  evalbox::testing::expect_golden(to_jsonl(t), dir / "normalized.jsonl");
}

TEST(EvalboxEvents, ParsesAFullRun) {
  transcript t = parse(full_run);
  EXPECT_EQ(t.agent, "command");
  EXPECT_EQ(t.session_id, "r1");
  EXPECT_EQ(t.model, "scripted");
  ASSERT_EQ(t.steps.size(), 3u);
  EXPECT_EQ(t.steps[0].message, "Running the tests.");
  EXPECT_EQ(commands(t), std::vector<std::string>{"python3 test_sum.py"});
  EXPECT_EQ(t.steps[1].observations.at(0).exit_code, 1);
  EXPECT_TRUE(t.steps[1].observations.at(0).is_error);
  EXPECT_FALSE(t.steps[2].observations.at(0).is_error);
  EXPECT_EQ(t.final_message, "Fixed the off-by-one.");
  EXPECT_TRUE(t.completed);
  EXPECT_FALSE(t.error);
}

TEST(EvalboxEvents, SumsUsageAndKeepsCostOnlyWhereReported) {
  transcript t = parse(full_run);
  EXPECT_EQ(t.total.input_tokens, 200u);
  EXPECT_EQ(t.total.output_tokens, 50u);
  EXPECT_DOUBLE_EQ(t.total.cost_usd.value_or(-1), 0.01);
  EXPECT_FALSE(t.total.cached_input_tokens);
  // Usage lines also land on the step they follow.
  EXPECT_EQ(t.steps[1].metrics->cost_usd, 0.01);
  EXPECT_FALSE(t.steps[2].metrics->cost_usd);
}

TEST(EvalboxEvents, UsageIsNullWhenNeverReported) {
  transcript t = parse("{\"type\":\"message\",\"text\":\"hi\"}\n{\"type\":\"final\"}\n");
  EXPECT_TRUE(t.total.unknown());
  EXPECT_EQ(t.final_message, "hi");
}

TEST(EvalboxEvents, PairsResultsByIdAcrossOtherEvents) {
  transcript t = parse(R"({"type":"tool_call","id":"a","tool":"shell","input":{"command":"one"}}
{"type":"tool_call","id":"b","tool":"shell","input":{"command":"two"}}
{"type":"tool_result","id":"b","exit_code":2}
{"type":"tool_result","id":"a","exit_code":0}
{"type":"tool_result","id":"ghost","exit_code":0}
{"type":"final"}
)");
  ASSERT_EQ(t.steps.size(), 3u);
  EXPECT_EQ(t.steps[0].observations.at(0).exit_code, 0);
  EXPECT_EQ(t.steps[1].observations.at(0).exit_code, 2);
  // A result for an unknown call is kept on a step of its own.
  EXPECT_EQ(t.steps[2].observations.at(0).call_id, "ghost");
  EXPECT_TRUE(t.steps[2].tool_calls.empty());
}

// Found by fuzzing: a tool_call whose input nests 200,000 levels deep crashed the harness
// (stack overflow copying it). Such a line is malformed; the rest of the stream still counts.
TEST(EvalboxEvents, ALineNestedTooDeepIsMalformedNotACrash) {
  std::string deep = std::string(200000, '[') + std::string(200000, ']');
  transcript t =
      parse("{\"type\":\"tool_call\",\"id\":\"a\",\"tool\":\"x\",\"input\":" + deep +
            "}\n{\"type\":\"message\",\"text\":\"still here\"}\n" + "{\"type\":\"final\"}\n");
  EXPECT_EQ(t.malformed_lines, 1);
  ASSERT_EQ(t.steps.size(), 1u);
  EXPECT_EQ(t.steps[0].message, "still here");
}

// Results are paired through an index of call ids (a scan per result was quadratic): the
// first call with an id owns its results, and results of unknown calls stay apart.
// A stray byte that is not UTF-8 in a message dropped the whole event (the final answer with
// it); the event is kept, the byte read as U+FFFD, and the transcript writes as valid JSON.
TEST(EvalboxEvents, BytesThatAreNotUtf8KeepTheEvent) {
  const std::string jsonl =
      "{\"type\":\"header\",\"schema\":\"evalbox.events.v1\"}\n"
      "{\"type\":\"tool_call\",\"id\":\"c1\",\"tool\":\"shell\",\"input\":{\"command\":"
      "\"touch bad-\xff-name.txt\"}}\n"
      "{\"type\":\"final\",\"text\":\"made bad-\xff-name.txt\"}\n";
  transcript t = parse(jsonl);
  EXPECT_EQ(t.malformed_lines, 0);
  EXPECT_TRUE(t.completed);
  EXPECT_EQ(t.final_message, "made bad-\xef\xbf\xbd-name.txt");
  EXPECT_EQ(commands(t), std::vector<std::string>{"touch bad-\xef\xbf\xbd-name.txt"});
  auto back = from_jsonl(to_jsonl(t));
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(*back, t);
}

// A line past max_native_line_bytes is not parsed (it could take several times its size in
// memory): it is malformed, and the transcript's error says which line and why — it may have
// held the final answer or a forbidden command.
TEST(EvalboxEvents, ALineLongerThanTheCapIsTheRunsError) {
  std::string huge =
      "{\"type\":\"message\",\"text\":\"" + std::string(max_native_line_bytes, 'x') + "\"}";
  const std::string jsonl = "{\"type\":\"header\",\"schema\":\"evalbox.events.v1\"}\n" + huge +
                            "\n{\"type\":\"final\",\"text\":\"done\"}\n";
  transcript t = parse(jsonl);
  EXPECT_EQ(t.malformed_lines, 1);
  EXPECT_EQ(t.final_message, "done");
  ASSERT_TRUE(t.error);
  EXPECT_EQ(*t.error, fmt::format("line 2 of the agent's output is {} bytes, larger than 8MiB: "
                                  "evalbox reads lines of at most that size, and what the line "
                                  "said is unknown",
                                  huge.size()));
  huge.resize(max_native_line_bytes - 2);
  huge += "\"}";
  transcript at_cap = parse("{\"type\":\"header\",\"schema\":\"evalbox.events.v1\"}\n" + huge +
                            "\n{\"type\":\"final\"}\n");
  EXPECT_FALSE(at_cap.error) << "a line of exactly the cap is read";
  EXPECT_EQ(at_cap.malformed_lines, 0);
}

TEST(EvalboxEvents, ManyResultsPairWithTheirCalls) {
  std::string text;
  for (int i = 0; i < 2000; ++i)
    text += fmt::format("{{\"type\":\"tool_call\",\"id\":\"c{}\",\"tool\":\"shell\"}}\n", i);
  for (int i = 1999; i >= 0; --i)
    text += fmt::format("{{\"type\":\"tool_result\",\"id\":\"c{}\",\"exit_code\":{}}}\n", i, i % 7);
  text += "{\"type\":\"tool_result\",\"id\":\"nobody\"}\n{\"type\":\"final\"}\n";
  transcript t = parse(text);
  ASSERT_EQ(t.steps.size(), 2001u);
  for (int i = 0; i < 2000; ++i) {
    ASSERT_EQ(t.steps[i].observations.size(), 1u) << i;
    EXPECT_EQ(t.steps[i].observations[0].call_id, t.steps[i].tool_calls[0].id);
    EXPECT_EQ(t.steps[i].observations[0].exit_code, i % 7);
  }
  EXPECT_EQ(t.steps[2000].observations.at(0).call_id, "nobody");
}

TEST(EvalboxEvents, CountsUnknownTypesAndMalformedLines) {
  transcript t = parse(
      "{\"type\":\"telemetry\"}\n{\"type\":\"telemetry\"}\n{}\nnope\n"
      "{\"type\":\"final\"}\n");
  EXPECT_EQ(t.unknown_events, (std::map<std::string, int>{{"<no type>", 1}, {"telemetry", 2}}));
  EXPECT_EQ(t.malformed_lines, 1);
}

TEST(EvalboxEvents, WithoutAFinalEventTheRunIsInterrupted) {
  transcript t = parse("{\"type\":\"message\",\"text\":\"partial\"}\n");
  EXPECT_FALSE(t.completed);
  EXPECT_EQ(t.error, "interrupted: no final event");
  EXPECT_FALSE(t.final_message);
}

TEST(EvalboxEvents, FinalCanBeMadeOptional) {
  transcript t = parse("{\"type\":\"message\",\"text\":\"partial\"}\n", {.require_final = false});
  EXPECT_FALSE(t.completed);
  EXPECT_FALSE(t.error);
}

TEST(EvalboxEvents, AnErrorEventIsTheRunsError) {
  transcript t = parse("{\"type\":\"error\",\"message\":\"HTTP 500 from model\"}\n");
  EXPECT_EQ(t.error, "HTTP 500 from model");
  EXPECT_EQ(t.steps.at(0).source, "system");
}

TEST(EvalboxEvents, RejectsAnotherSchema) {
  auto t = parse_evalbox_events("{\"type\":\"header\",\"schema\":\"other.v2\"}\n");
  ASSERT_FALSE(t);
  EXPECT_NE(t.error().message.find("other.v2"), std::string::npos);
}

TEST(EvalboxEvents, PassesASecretInACommandThroughUnchanged) {
  transcript t = parse(
      R"({"type":"tool_call","id":"c","tool":"shell","input":{"command":"echo OPENAI_API_KEY=sk-live-SECRET"}}
{"type":"final"}
)");
  EXPECT_EQ(commands(t), std::vector<std::string>{"echo OPENAI_API_KEY=sk-live-SECRET"});
}

TEST(EvalboxEvents, NormalizesClientToolNames) {
  transcript t = parse(R"({"type":"tool_call","id":"c","tool":"Bash","input":{"command":"ls"}}
{"type":"final"}
)");
  EXPECT_EQ(tools_used(t), std::vector<std::string>{"shell"});
  EXPECT_EQ(commands(t), std::vector<std::string>{"ls"});
}

}  // namespace
}  // namespace evalbox::harness
