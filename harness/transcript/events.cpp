// Parser of the evalbox.events.v1 stream that `command` agents print.
#include "harness/transcript/events.h"

#include <utility>

namespace evalbox::harness {

result<transcript> parse_evalbox_events(std::string_view jsonl, events_options options) {
  transcript t;
  t.agent = "command";
  bool seen_final = false;
  std::optional<error> bad_schema;
  call_index calls;

  auto new_step = [&](std::string source) -> step& { return append_step(t, std::move(source)); };

  auto on_event = [&](const json& e) {
    std::string type = json_find<std::string>(e, "type").value_or("");
    std::string timestamp = json_find<std::string>(e, "timestamp").value_or("");
    if (type == "header") {
      std::string schema = json_find<std::string>(e, "schema").value_or("");
      if (schema != events_schema && !bad_schema) {
        bad_schema = error{error_kind::invalid_argument,
                           fmt::format("events: schema \"{}\" is not {}", schema, events_schema)};
      }
      if (auto v = json_find<std::string>(e, "session_id")) t.session_id = *v;
      if (auto v = json_find<std::string>(e, "model")) t.model = *v;
      if (auto v = json_find<std::string>(e, "agent")) t.agent = *v;
    } else if (type == "message") {
      std::string role = json_find<std::string>(e, "role").value_or("assistant");
      step& s = new_step(role == "user" ? "user" : role == "system" ? "system" : "agent");
      s.message = json_find<std::string>(e, "text").value_or("");
      s.timestamp = timestamp;
    } else if (type == "reasoning") {
      step& s = new_step("agent");
      s.reasoning = json_find<std::string>(e, "text").value_or("");
      s.timestamp = timestamp;
    } else if (type == "tool_call") {
      tool_call call;
      call.id = json_find<std::string>(e, "id").value_or("");
      call.tool = normalize_tool_name(json_find<std::string>(e, "tool").value_or(""));
      const json& input = json_member(e, "input");
      call.input = input.is_null() ? json::object() : input;
      if (call.tool == "shell") call.command = json_find<std::string>(call.input, "command");
      step& s = new_step("agent");
      calls.add(call.id, t.steps.size() - 1, 0);
      s.tool_calls.push_back(std::move(call));
      s.timestamp = timestamp;
    } else if (type == "tool_result") {
      observation obs;
      obs.call_id = json_find<std::string>(e, "id").value_or("");
      obs.exit_code = json_find<int>(e, "exit_code");
      obs.output = truncate_output(json_find<std::string>(e, "output").value_or(""));
      // Without an explicit flag, a non-zero exit is the error signal.
      obs.is_error = json_find<bool>(e, "is_error").value_or(obs.exit_code.value_or(0) != 0);
      step* owner = calls.owner(t, obs.call_id);
      if (owner == nullptr) {
        // A result for a call never announced: keep it on a step of its own, not lost.
        owner = &new_step("agent");
        owner->timestamp = timestamp;
      }
      owner->observations.push_back(std::move(obs));
    } else if (type == "usage") {
      usage u;
      u.input_tokens = json_find<uint64_t>(e, "input_tokens");
      u.output_tokens = json_find<uint64_t>(e, "output_tokens");
      u.cached_input_tokens = json_find<uint64_t>(e, "cached_input_tokens");
      u.reasoning_tokens = json_find<uint64_t>(e, "reasoning_tokens");
      u.cost_usd = json_find<double>(e, "cost_usd");
      t.total += u;
      if (!t.steps.empty()) {
        auto& metrics = t.steps.back().metrics;
        metrics = metrics.value_or(usage{}) + u;
      }
    } else if (type == "error") {
      std::string message = json_find<std::string>(e, "message").value_or("error");
      step& s = new_step("system");
      s.message = message;
      s.timestamp = timestamp;
      t.error = std::move(message);
    } else if (type == "final") {
      seen_final = true;
      if (auto text = json_find<std::string>(e, "text")) t.final_message = *text;
    } else {
      ++t.unknown_events[unknown_event_key(type)];
    }
  };
  std::optional<std::string> too_long;
  for_each_jsonl_object(jsonl, t.malformed_lines, on_event, &too_long);
  if (bad_schema) return std::unexpected(std::move(*bad_schema));
  // A line too long to read may have held anything, the final answer included.
  if (too_long && !t.error) t.error = std::move(too_long);

  // A "final" event without text ends on the last thing the agent said; an unfinished stream
  // has no final message (an answer cut off mid-run is not one).
  if (seen_final && !t.final_message) {
    for (auto it = t.steps.rbegin(); it != t.steps.rend(); ++it) {
      if (it->source == "agent" && !it->message.empty()) {
        t.final_message = it->message;
        break;
      }
    }
  }
  t.completed = seen_final;
  if (!seen_final && options.require_final && !t.error) {
    t.error = "interrupted: no final event";
  }
  return t;
}

}  // namespace evalbox::harness
