// transcript → ATIF v1.4 trajectory (see atif.h).
#include "harness/transcripts/atif.h"

#include <set>

namespace evalbox::harness {
inline namespace transcripts {

namespace {

// ATIF's MetricsSchema: prompt_tokens includes the cached ones, as evalbox's input_tokens does.
json metrics_json(const usage& u) {
  json m = json::object();
  if (u.input_tokens) m["prompt_tokens"] = *u.input_tokens;
  if (u.output_tokens) m["completion_tokens"] = *u.output_tokens;
  if (u.cached_input_tokens) m["cached_tokens"] = *u.cached_input_tokens;
  if (u.cost_usd) m["cost_usd"] = *u.cost_usd;
  if (u.reasoning_tokens) m["extra"] = {{"reasoning_tokens", *u.reasoning_tokens}};
  return m;
}

json step_json(const step& s, int step_id) {
  json j = {{"step_id", step_id}, {"source", s.source}, {"message", s.message}};
  if (!s.timestamp.empty()) j["timestamp"] = s.timestamp;
  const bool agent = s.source == "agent";
  json extra = json::object();
  // ATIF allows reasoning, tool calls and metrics on agent steps only: on another step they
  // are kept in its extra.
  if (!s.reasoning.empty()) (agent ? j["reasoning_content"] : extra["reasoning"]) = s.reasoning;
  std::set<std::string> call_ids;
  if (!s.tool_calls.empty()) {
    json calls = json::array();
    for (const auto& c : s.tool_calls) {
      call_ids.insert(c.id);
      // arguments must be an object: a client that reported something else is wrapped.
      calls.push_back({{"tool_call_id", c.id},
                       {"function_name", c.tool},
                       {"arguments", c.input.is_object() ? c.input : json{{"input", c.input}}}});
    }
    (agent ? j["tool_calls"] : extra["tool_calls"]) = std::move(calls);
  }
  if (!s.observations.empty()) {
    json results = json::array();
    json status = json::array();
    for (const auto& o : s.observations) {
      json r = {{"content", o.output}};
      // source_call_id names a call of this step; a result paired to another step's call
      // keeps its id in extra only.
      if (call_ids.count(o.call_id)) r["source_call_id"] = o.call_id;
      results.push_back(std::move(r));
      status.push_back({{"call_id", o.call_id},
                        {"exit_code", o.exit_code ? json(*o.exit_code) : json(nullptr)},
                        {"is_error", o.is_error}});
    }
    if (s.source == "user")
      extra["observation"] = {{"results", std::move(results)}};
    else
      j["observation"] = {{"results", std::move(results)}};
    extra["observations"] = std::move(status);
  }
  if (s.metrics && !s.metrics->unknown()) {
    (agent ? j["metrics"] : extra["metrics"]) = metrics_json(*s.metrics);
  }
  if (!extra.empty()) j["extra"] = std::move(extra);
  return j;
}

}  // namespace

json to_atif(const transcript& t, const atif_context& context) {
  json steps = json::array();
  int id = 0;
  if (!context.prompt.empty() && (t.steps.empty() || t.steps.front().source != "user"))
    steps.push_back({{"step_id", ++id},
                     {"source", "user"},
                     {"message", context.prompt},
                     {"extra", {{"from", "the fixture's prompt"}}}});
  for (const auto& s : t.steps) steps.push_back(step_json(s, ++id));

  json agent = {{"name", t.agent.empty() ? context.agent_name : t.agent},
                {"version", context.agent_version.empty() ? "unknown" : context.agent_version}};
  if (!t.model.empty()) agent["model_name"] = t.model;
  if (!context.candidate.empty()) agent["extra"] = {{"candidate", context.candidate}};

  json final_metrics = metrics_json(t.total);
  // metrics_json's names are per step; the trajectory's totals are named total_*.
  json totals = json::object();
  for (const auto& [from, to] : {std::pair{"prompt_tokens", "total_prompt_tokens"},
                                 {"completion_tokens", "total_completion_tokens"},
                                 {"cached_tokens", "total_cached_tokens"},
                                 {"cost_usd", "total_cost_usd"}})
    if (final_metrics.contains(from)) totals[to] = final_metrics[from];
  totals["total_steps"] = static_cast<int>(steps.size());
  json totals_extra = {{"completed", t.completed}};
  if (t.total.reasoning_tokens) totals_extra["reasoning_tokens"] = *t.total.reasoning_tokens;
  if (t.duration_ms) totals_extra["duration_ms"] = *t.duration_ms;
  if (t.num_turns) totals_extra["num_turns"] = *t.num_turns;
  totals["extra"] = std::move(totals_extra);

  json extra = {{"evalbox", {{"run_id", context.run_id}, {"transcript", transcript_schema}}}};
  if (t.final_message) extra["final_message"] = *t.final_message;
  if (t.error) extra["error"] = *t.error;
  if (!t.unknown_events.empty()) extra["unknown_events"] = t.unknown_events;
  if (t.malformed_lines) extra["malformed_lines"] = t.malformed_lines;

  return {{"schema_version", atif_schema_version},
          {"session_id", t.session_id.empty() ? context.run_id : t.session_id},
          {"agent", std::move(agent)},
          {"steps", std::move(steps)},
          {"notes",
           "written by evalbox from its normalized transcript (runs/<id>/transcript.jsonl, "
           "evalbox.transcript.v1); the client's own output is in runs/<id>/native/"},
          {"final_metrics", std::move(totals)},
          {"extra", std::move(extra)}};
}

}  // namespace transcripts
}  // namespace evalbox::harness
