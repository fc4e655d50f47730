// trajectory.json: the normalized transcript as an ATIF v1.4 trajectory, checked against the
// schema's fields (Harbor's RFC 0001: required fields and their types, no field outside the
// schema, step ids from 1, agent-only fields on agent steps, results paired to the step's
// calls) for every adapter's captured stream: Codex CLI, Claude Code, Gemini CLI and evalbox's
// own events (the command adapter), each parsed by its adapter as a run does.
#include "harness/transcripts/atif.h"

#include <gtest/gtest.h>

#include <set>

#include "adapters/claude-code/transcript.h"
#include "adapters/codex/transcript.h"
#include "adapters/gemini/transcript.h"
#include "base/fs.h"
#include "harness/transcripts/events.h"
#include "tests/harness/transcripts/golden.h"

namespace evalbox::harness {
namespace {

namespace fs = std::filesystem;

// Every problem of `t` as an ATIF v1.4 trajectory, one per line (empty: valid).
std::string atif_problems(const json& t) {
  std::string out;
  auto bad = [&](const std::string& what) { out += what + "\n"; };
  auto only = [&](const json& obj, const std::string& where, std::set<std::string> allowed) {
    if (!obj.is_object()) return bad(where + " is not an object");
    for (const auto& [k, v] : obj.items())
      if (!allowed.count(k)) bad(where + "." + k + " is not an ATIF field");
  };
  auto integer = [&](const json& obj, const char* key, const std::string& where) {
    if (obj.contains(key) && !(obj[key].is_number_integer() && obj[key].get<int64_t>() >= 0))
      bad(where + "." + key + " is not a non-negative integer");
  };
  auto number = [&](const json& obj, const char* key, const std::string& where) {
    if (obj.contains(key) && !obj[key].is_number()) bad(where + "." + key + " is not a number");
  };
  auto object = [&](const json& obj, const char* key, const std::string& where) {
    if (obj.contains(key) && !obj[key].is_object()) bad(where + "." + key + " is not an object");
  };
  only(t, "trajectory",
       {"schema_version", "session_id", "agent", "steps", "notes", "final_metrics", "extra"});
  if (t.value("schema_version", "") != "ATIF-v1.4") bad("schema_version is not ATIF-v1.4");
  if (!t.contains("session_id") || !t["session_id"].is_string() ||
      t["session_id"].get<std::string>().empty())
    bad("session_id is missing");
  const json& agent = t.value("agent", json());
  only(agent, "agent", {"name", "version", "model_name", "extra"});
  for (const char* k : {"name", "version"})
    if (!agent.contains(k) || !agent[k].is_string() || agent[k].get<std::string>().empty())
      bad(std::string("agent.") + k + " is missing");
  if (agent.contains("model_name") && !agent["model_name"].is_string())
    bad("agent.model_name is not a string");
  object(agent, "extra", "agent");
  if (t.contains("notes") && !t["notes"].is_string()) bad("notes is not a string");
  object(t, "extra", "trajectory");
  const json& steps = t.value("steps", json());
  if (!steps.is_array()) return out + "steps is not an array\n";
  for (size_t i = 0; i < steps.size(); ++i) {
    const json& s = steps[i];
    const std::string where = fmt::format("steps[{}]", i);
    only(s, where,
         {"step_id", "timestamp", "source", "model_name", "reasoning_effort", "message",
          "reasoning_content", "tool_calls", "observation", "metrics", "extra"});
    if (s.value("step_id", -1) != static_cast<int>(i) + 1)
      bad(where + ".step_id is not " + std::to_string(i + 1));
    const std::string source = s.value("source", "");
    if (source != "system" && source != "user" && source != "agent")
      bad(where + ".source is '" + source + "'");
    if (!s.contains("message") || !s["message"].is_string()) bad(where + ".message is missing");
    if (s.contains("timestamp") && !s["timestamp"].is_string()) bad(where + ".timestamp");
    for (const char* k :
         {"reasoning_content", "tool_calls", "metrics", "model_name", "reasoning_effort"})
      if (s.contains(k) && source != "agent") bad(where + "." + k + " on a " + source + " step");
    if (s.contains("observation") && source == "user") bad(where + ".observation on a user step");
    std::set<std::string> ids;
    if (s.contains("tool_calls")) {
      if (!s["tool_calls"].is_array()) bad(where + ".tool_calls is not an array");
      for (const auto& c : s["tool_calls"]) {
        only(c, where + ".tool_calls[]", {"tool_call_id", "function_name", "arguments"});
        if (!c.contains("tool_call_id") || !c["tool_call_id"].is_string())
          bad(where + ".tool_call_id is missing");
        else
          ids.insert(c["tool_call_id"].get<std::string>());
        if (!c.contains("function_name") || !c["function_name"].is_string() ||
            c["function_name"].get<std::string>().empty())
          bad(where + ".function_name is missing");
        if (!c.contains("arguments") || !c["arguments"].is_object())
          bad(where + ".arguments is not an object");
      }
    }
    if (s.contains("observation")) {
      only(s["observation"], where + ".observation", {"results"});
      const json& results = s["observation"].value("results", json());
      if (!results.is_array()) bad(where + ".observation.results is not an array");
      for (const auto& r : results) {
        only(r, where + ".observation.results[]",
             {"source_call_id", "content", "subagent_trajectory_ref"});
        if (r.contains("content") && !r["content"].is_string() && !r["content"].is_null())
          bad(where + ".content is not a string");
        if (r.contains("source_call_id") && !ids.count(r["source_call_id"].get<std::string>()))
          bad(where + ".source_call_id names no call of the step");
      }
    }
    if (s.contains("metrics")) {
      const json& m = s["metrics"];
      const std::string mw = where + ".metrics";
      only(m, mw,
           {"prompt_tokens", "completion_tokens", "cached_tokens", "cost_usd", "prompt_token_ids",
            "completion_token_ids", "logprobs", "extra"});
      for (const char* k : {"prompt_tokens", "completion_tokens", "cached_tokens"})
        integer(m, k, mw);
      number(m, "cost_usd", mw);
      object(m, "extra", mw);
    }
    object(s, "extra", where);
  }
  if (t.contains("final_metrics")) {
    const json& f = t["final_metrics"];
    only(f, "final_metrics",
         {"total_prompt_tokens", "total_completion_tokens", "total_cached_tokens", "total_cost_usd",
          "total_steps", "extra"});
    for (const char* k :
         {"total_prompt_tokens", "total_completion_tokens", "total_cached_tokens", "total_steps"})
      integer(f, k, "final_metrics");
    number(f, "total_cost_usd", "final_metrics");
    object(f, "extra", "final_metrics");
    if (f.value("total_steps", -1) != static_cast<int>(steps.size()))
      bad("final_metrics.total_steps is not the number of steps");
  }
  return out;
}

transcript parsed(result<transcript> t) {
  EXPECT_TRUE(t) << (t ? "" : t.error().message);
  return t ? std::move(*t) : transcript{};
}

std::string capture(const fs::path& p) {
  auto text = read_file(p);
  EXPECT_TRUE(text) << p;
  return text.value_or("");
}

const atif_context context{"0123456789abcdef", "adapter", "1.2.3", "cand", "Fix the bug."};

TEST(Atif, EveryCodexCaptureIsAValidTrajectory) {
  for (const char* scenario : {"single", "multi", "interrupted", "model-error"}) {
    const fs::path dir = testing::transcript_data_dir() / "codex" / scenario;
    transcript t = parsed(adapters::codex::parse_codex_exec_json(capture(dir / "events.jsonl")));
    json j = to_atif(t, context);
    EXPECT_EQ(atif_problems(j), "") << scenario << "\n" << j.dump(2);
    EXPECT_EQ(j["agent"]["name"], "codex");
    EXPECT_EQ(j["session_id"], t.session_id);
    // The prompt first, then one ATIF step per normalized step.
    EXPECT_EQ(j["steps"].size(), t.steps.size() + 1) << scenario;
  }
}

TEST(Atif, EveryClaudeCodeCaptureIsAValidTrajectory) {
  for (const char* scenario : {"single", "multi", "interrupted", "model-error"}) {
    const fs::path dir = testing::transcript_data_dir() / "claude" / scenario;
    transcript t =
        parsed(adapters::claude_code::parse_claude_stream_json(capture(dir / "events.jsonl")));
    json j = to_atif(t, context);
    EXPECT_EQ(atif_problems(j), "") << scenario << "\n" << j.dump(2);
    EXPECT_EQ(j["agent"]["name"], "claude-code");
  }
}

TEST(Atif, EveryGeminiCaptureIsAValidTrajectory) {
  const fs::path corpus = fs::path(EVALBOX_SOURCE_DIR) / "tests/fuzz/corpus/gemini_stream";
  for (const char* scenario : {"single", "error", "stopped"}) {
    transcript t = parsed(adapters::gemini::parse_gemini_stream_json(capture(corpus / scenario)));
    json j = to_atif(t, context);
    EXPECT_EQ(atif_problems(j), "") << scenario << "\n" << j.dump(2);
    EXPECT_EQ(j["agent"]["name"], "gemini");
  }
}

TEST(Atif, TheCommandAdaptersEventsAreAValidTrajectory) {
  const fs::path dir = testing::transcript_data_dir() / "evalbox" / "sample";
  transcript t = parsed(parse_evalbox_events(capture(dir / "events.jsonl")));
  json j = to_atif(t, context);
  EXPECT_EQ(atif_problems(j), "") << j.dump(2);
}

TEST(Atif, FieldsMapAsDocumented) {
  transcript t;
  t.agent = "codex";
  t.session_id = "thread-1";
  t.model = "gpt-x";
  step s;
  s.source = "agent";
  s.message = "listing";
  s.reasoning = "look first";
  s.timestamp = "2026-11-30T17:03:36.423Z";
  s.tool_calls.push_back({"c1", "shell", json{{"command", "ls"}}, "ls"});
  s.tool_calls.push_back({"c2", "odd", json("not an object"), std::nullopt});
  s.observations.push_back({"c1", 2, "a\n", true});
  s.observations.push_back({"elsewhere", std::nullopt, "?", false});
  s.metrics = usage{100, 20, 40, 5, 0.25};
  t.steps.push_back(s);
  step u;
  u.source = "user";
  u.message = "and now?";
  t.steps.push_back(u);
  t.total = usage{100, 20, std::nullopt, std::nullopt, std::nullopt};
  t.final_message = "done";
  t.completed = true;
  t.unknown_events = {{"x", 2}};
  json j = to_atif(t, context);
  ASSERT_EQ(atif_problems(j), "") << j.dump(2);
  EXPECT_EQ(j["agent"], (json{{"name", "codex"},
                              {"version", "1.2.3"},
                              {"model_name", "gpt-x"},
                              {"extra", {{"candidate", "cand"}}}}));
  ASSERT_EQ(j["steps"].size(), 3u);
  EXPECT_EQ(j["steps"][0], (json{{"step_id", 1},
                                 {"source", "user"},
                                 {"message", "Fix the bug."},
                                 {"extra", {{"from", "the fixture's prompt"}}}}));
  const json& a = j["steps"][1];
  EXPECT_EQ(a["timestamp"], "2026-11-30T17:03:36.423Z");
  EXPECT_EQ(a["reasoning_content"], "look first");
  EXPECT_EQ(a["tool_calls"][0], (json{{"tool_call_id", "c1"},
                                      {"function_name", "shell"},
                                      {"arguments", {{"command", "ls"}}}}));
  EXPECT_EQ(a["tool_calls"][1]["arguments"], (json{{"input", "not an object"}}));
  EXPECT_EQ(a["observation"]["results"][0], (json{{"source_call_id", "c1"}, {"content", "a\n"}}));
  EXPECT_FALSE(a["observation"]["results"][1].contains("source_call_id"));
  EXPECT_EQ(a["extra"]["observations"][0],
            (json{{"call_id", "c1"}, {"exit_code", 2}, {"is_error", true}}));
  EXPECT_EQ(a["metrics"], (json{{"prompt_tokens", 100},
                                {"completion_tokens", 20},
                                {"cached_tokens", 40},
                                {"cost_usd", 0.25},
                                {"extra", {{"reasoning_tokens", 5}}}}));
  // Unknown usage is left out, never 0.
  EXPECT_EQ(j["final_metrics"]["total_prompt_tokens"], 100);
  EXPECT_FALSE(j["final_metrics"].contains("total_cached_tokens"));
  EXPECT_FALSE(j["final_metrics"].contains("total_cost_usd"));
  EXPECT_EQ(j["final_metrics"]["total_steps"], 3);
  EXPECT_EQ(j["extra"]["final_message"], "done");
  EXPECT_EQ(j["extra"]["unknown_events"]["x"], 2);
}

TEST(Atif, AnEmptyTranscriptStillNamesItsRunAndAgent) {
  transcript t;
  json j = to_atif(t, {"run-1", "noop", "", "noop", ""});
  EXPECT_EQ(atif_problems(j), "") << j.dump(2);
  EXPECT_EQ(j["session_id"], "run-1");
  EXPECT_EQ(j["agent"]["name"], "noop");
  EXPECT_EQ(j["agent"]["version"], "unknown");
  EXPECT_TRUE(j["steps"].empty());
}

TEST(Atif, TheValidatorCatchesWhatIsNotAtif) {
  json j = to_atif(transcript{}, context);
  j["steps"][0]["step_id"] = 3;
  j["steps"][0]["tool_calls"] = json::array();
  j["bogus"] = 1;
  const std::string p = atif_problems(j);
  EXPECT_NE(p.find("step_id is not 1"), std::string::npos) << p;
  EXPECT_NE(p.find("tool_calls on a user step"), std::string::npos) << p;
  EXPECT_NE(p.find("trajectory.bogus is not an ATIF field"), std::string::npos) << p;
}

}  // namespace
}  // namespace evalbox::harness
