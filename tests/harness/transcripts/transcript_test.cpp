#include "harness/transcripts/transcript.h"

#include <gtest/gtest.h>

#include "base/fs.h"

namespace evalbox::harness {
namespace {

transcript sample() {
  transcript t;
  t.agent = "codex";
  t.session_id = "s-1";
  t.model = "gpt-x";
  step s0;
  s0.index = 0;
  s0.reasoning = "look first";
  tool_call call{"c1", "shell", json{{"command", "ls -la"}}, "ls -la"};
  s0.tool_calls.push_back(call);
  s0.observations.push_back(observation{"c1", 0, "a\nb\n", false});
  s0.metrics = usage{10, std::nullopt, 2, std::nullopt, 0.125};
  s0.timestamp = "2026-11-30T17:03:36.423Z";
  step s1;
  s1.index = 1;
  s1.message = "done \u2014 caf\u00e9";
  t.steps = {s0, s1};
  t.total = usage{10, 5, std::nullopt, std::nullopt, std::nullopt};
  t.final_message = "done";
  t.completed = true;
  t.duration_ms = 1234;
  t.num_turns = 2;
  t.unknown_events = {{"x.y", 3}};
  t.malformed_lines = 1;
  return t;
}

TEST(Usage, SumKeepsNullOnlyWhereBothSidesAreNull) {
  usage a{10, std::nullopt, std::nullopt, std::nullopt, std::nullopt};
  usage b{5, 3, std::nullopt, std::nullopt, 0.5};
  usage sum = a + b;
  EXPECT_EQ(sum.input_tokens, 15u);
  EXPECT_EQ(sum.output_tokens, 3u);
  EXPECT_FALSE(sum.cached_input_tokens);
  EXPECT_FALSE(sum.reasoning_tokens);
  EXPECT_EQ(sum.cost_usd, 0.5);
}

// Counts come from the agent: a sum that overflows stays at the largest value, not 0 or null.
TEST(Usage, SumSaturatesInsteadOfWrapping) {
  usage a{UINT64_MAX, 5, std::nullopt, std::nullopt, 1e308};
  usage b{1, 5, std::nullopt, std::nullopt, 1e308};
  a += b;
  EXPECT_EQ(a.input_tokens, UINT64_MAX);
  EXPECT_EQ(a.output_tokens, 10u);
  EXPECT_EQ(a.cost_usd, std::numeric_limits<double>::max());
}

TEST(Usage, UnknownIsSerializedAsNullNotZero) {
  json j = to_json(usage{});
  for (const char* key :
       {"input_tokens", "output_tokens", "cached_input_tokens", "reasoning_tokens", "cost_usd"}) {
    EXPECT_TRUE(j.at(key).is_null()) << key;
  }
  EXPECT_TRUE(usage{}.unknown());
  EXPECT_FALSE((usage{0, std::nullopt, std::nullopt, std::nullopt, std::nullopt}).unknown());
}

TEST(TranscriptJsonl, HasHeaderStepsAndSummaryLines) {
  std::string text = to_jsonl(sample());
  std::vector<json> lines;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    lines.push_back(json::parse(text.substr(pos, end - pos)));
    pos = end + 1;
  }
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0]["type"], "header");
  EXPECT_EQ(lines[0]["schema"], "evalbox.transcript.v1");
  EXPECT_EQ(lines[1]["type"], "step");
  EXPECT_EQ(lines[2]["type"], "step");
  EXPECT_EQ(lines[3]["type"], "summary");
  EXPECT_EQ(lines[3]["steps"], 2);
  EXPECT_TRUE(lines[3]["error"].is_null());
}

TEST(TranscriptJsonl, WriteThenReadRoundTripsExactly) {
  temp_dir dir("evalbox-transcript");
  transcript t = sample();
  ASSERT_TRUE(write_transcript(dir.path() / "transcript.jsonl", t));
  auto back = read_transcript(dir.path() / "transcript.jsonl");
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(*back, t);
  EXPECT_EQ(to_jsonl(*back), to_jsonl(t));
}

TEST(TranscriptJsonl, EmptyTranscriptRoundTrips) {
  transcript t;
  auto back = from_jsonl(to_jsonl(t));
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(*back, t);
}

TEST(TranscriptJsonl, RejectsAnotherSchema) {
  std::string text = to_jsonl(sample());
  text.replace(text.find("evalbox.transcript.v1"), 21, "evalbox.transcript.v9");
  auto r = from_jsonl(text);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("evalbox.transcript.v9"), std::string::npos);
}

TEST(TranscriptJsonl, RejectsAFileCutBeforeItsSummary) {
  std::string text = to_jsonl(sample());
  text.resize(text.rfind("{\"completed\""));
  auto r = from_jsonl(text);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("no summary"), std::string::npos);
}

TEST(TranscriptJsonl, RejectsAWrongTypeWithItsLineNumber) {
  std::string text = to_jsonl(sample());
  text.replace(text.find("\"index\":1"), 9, "\"index\":\"1\"");
  auto r = from_jsonl(text);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("line 3"), std::string::npos) << r.error().message;
}

// Found by fuzzing (tests/fuzz/regressions/transcript_jsonl): numbers beyond their field's
// type were converted with undefined behaviour (1e300 as a step index) or wrapped.
TEST(TranscriptJsonl, RejectsNumbersOutOfTheirRange) {
  for (auto [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"\"index\":1", "\"index\":1e300"},
           {"\"index\":1", "\"index\":4294967296"},
           {"\"malformed_lines\":1", "\"malformed_lines\":-1e30"},
           {"\"steps\":2", "\"steps\":-2"}}) {
    std::string text = to_jsonl(sample());
    ASSERT_NE(text.find(from), std::string::npos) << from;
    text.replace(text.find(from), from.size(), to);
    auto r = from_jsonl(text);
    ASSERT_FALSE(r) << to;
    EXPECT_NE(r.error().message.find("transcript: line"), std::string::npos) << r.error().message;
  }
}

TEST(TruncateOutput, LeavesShortOutputAlone) {
  EXPECT_EQ(truncate_output("abc"), "abc");
  std::string exact(observation_output_cap, 'x');
  EXPECT_EQ(truncate_output(exact), exact);
}

TEST(TruncateOutput, CutsAtTheCapWithAMarker) {
  std::string big(observation_output_cap + 100, 'x');
  std::string out = truncate_output(big);
  EXPECT_EQ(out.substr(0, observation_output_cap), std::string(observation_output_cap, 'x'));
  EXPECT_EQ(out.substr(observation_output_cap), "\n[evalbox: output truncated, 100 bytes omitted]");
}

TEST(TruncateOutput, NeverSplitsAUtf8Character) {
  // "é" is two bytes; place one across the cap.
  std::string big(observation_output_cap - 1, 'x');
  big += "\u00e9tail";
  std::string out = truncate_output(big);
  EXPECT_EQ(out.substr(0, observation_output_cap - 1),
            std::string(observation_output_cap - 1, 'x'));
  EXPECT_EQ(out.substr(observation_output_cap - 1),
            "\n[evalbox: output truncated, 6 bytes omitted]");
  EXPECT_NO_THROW((void)json(out).dump());
}

TEST(NormalizeToolName, MapsClientNamesAndPassesUnknownOnes) {
  EXPECT_EQ(normalize_tool_name("Bash"), "shell");
  EXPECT_EQ(normalize_tool_name("exec_command"), "shell");
  EXPECT_EQ(normalize_tool_name("MultiEdit"), "edit");
  EXPECT_EQ(normalize_tool_name("apply_patch"), "edit");
  EXPECT_EQ(normalize_tool_name("Read"), "read");
  EXPECT_EQ(normalize_tool_name("Write"), "write");
  EXPECT_EQ(normalize_tool_name("WebSearch"), "web_search");
  EXPECT_EQ(normalize_tool_name("TodoWrite"), "todo");
  EXPECT_EQ(normalize_tool_name("mcp__my_server__do__it"), "mcp:my_server/do__it");
  EXPECT_EQ(normalize_tool_name("mcp__broken"), "mcp__broken");
  EXPECT_EQ(normalize_tool_name("Glob"), "Glob");
}

TEST(ForEachJsonlObject, CountsNonObjectLinesAndSkipsBlankOnes) {
  int malformed = 0;
  int objects = 0;
  for_each_jsonl_object("{}\n\n  \nnull\n[1]\n{\"a\":1}\r\n{broken", malformed,
                        [&](const json&) { ++objects; });
  EXPECT_EQ(objects, 2);
  EXPECT_EQ(malformed, 3);
}

TEST(Queries, CommandsListEveryShellCommandInOrder) {
  transcript t = sample();
  step s;
  s.tool_calls.push_back(tool_call{"c2", "shell", json{{"command", "make test"}}, std::nullopt});
  s.tool_calls.push_back(tool_call{"c3", "read", json{{"command", "not a shell"}}, std::nullopt});
  t.steps.push_back(s);
  EXPECT_EQ(commands(t), (std::vector<std::string>{"ls -la", "make test"}));
}

TEST(Queries, ToolsUsedAreDistinctAndSorted) {
  transcript t = sample();
  step s;
  s.tool_calls.push_back(tool_call{"c2", "write", json::object(), std::nullopt});
  s.tool_calls.push_back(tool_call{"c3", "shell", json::object(), std::nullopt});
  t.steps.push_back(s);
  EXPECT_EQ(tools_used(t), (std::vector<std::string>{"shell", "write"}));
}

TEST(Queries, StepCountCountsOnlyAgentSteps) {
  transcript t = sample();
  step user;
  user.source = "user";
  t.steps.push_back(user);
  EXPECT_EQ(step_count(t), 2);
  EXPECT_EQ(final_message(t), "done");
}

}  // namespace
}  // namespace evalbox::harness
