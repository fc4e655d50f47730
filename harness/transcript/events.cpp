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

  for_each_jsonl_object(jsonl, t.malformed_lines, [&](const json& e) {
    std::string type = get_string(e, "type").value_or("");
    std::string timestamp = get_string(e, "timestamp").value_or("");
    if (type == "header") {
      std::string schema = get_string(e, "schema").value_or("");
      if (schema != events_schema && !bad_schema) {
        bad_schema = error{error_kind::invalid_argument,
                           fmt::format("events: schema \"{}\" is not {}", schema, events_schema)};
      }
      if (auto v = get_string(e, "session_id")) t.session_id = *v;
      if (auto v = get_string(e, "model")) t.model = *v;
      if (auto v = get_string(e, "agent")) t.agent = *v;
    } else if (type == "message") {
      std::string role = get_string(e, "role").value_or("assistant");
      step& s = new_step(role == "user" ? "user" : role == "system" ? "system" : "agent");
      s.message = get_string(e, "text").value_or("");
      s.timestamp = timestamp;
    } else if (type == "reasoning") {
      step& s = new_step("agent");
      s.reasoning = get_string(e, "text").value_or("");
      s.timestamp = timestamp;
    } else if (type == "tool_call") {
      tool_call call;
      call.id = get_string(e, "id").value_or("");
      call.tool = normalize_tool_name(get_string(e, "tool").value_or(""));
      const json& input = get_field(e, "input");
      call.input = input.is_null() ? json::object() : input;
      if (call.tool == "shell") call.command = get_string(call.input, "command");
      step& s = new_step("agent");
      calls.add(call.id, t.steps.size() - 1, 0);
      s.tool_calls.push_back(std::move(call));
      s.timestamp = timestamp;
    } else if (type == "tool_result") {
      observation obs;
      obs.call_id = get_string(e, "id").value_or("");
      obs.exit_code = get_int(e, "exit_code");
      obs.output = truncate_output(get_string(e, "output").value_or(""));
      // Without an explicit flag, a non-zero exit is the error signal.
      obs.is_error = get_bool(e, "is_error").value_or(obs.exit_code.value_or(0) != 0);
      step* owner = calls.owner(t, obs.call_id);
      if (owner == nullptr) {
        // A result for a call never announced: keep it on a step of its own, not lost.
        owner = &new_step("agent");
        owner->timestamp = timestamp;
      }
      owner->observations.push_back(std::move(obs));
    } else if (type == "usage") {
      usage u;
      u.input_tokens = get_u64(e, "input_tokens");
      u.output_tokens = get_u64(e, "output_tokens");
      u.cached_input_tokens = get_u64(e, "cached_input_tokens");
      u.reasoning_tokens = get_u64(e, "reasoning_tokens");
      u.cost_usd = get_double(e, "cost_usd");
      t.total += u;
      if (!t.steps.empty()) {
        auto& metrics = t.steps.back().metrics;
        metrics = metrics.value_or(usage{}) + u;
      }
    } else if (type == "error") {
      std::string message = get_string(e, "message").value_or("error");
      step& s = new_step("system");
      s.message = message;
      s.timestamp = timestamp;
      t.error = std::move(message);
    } else if (type == "final") {
      seen_final = true;
      if (auto text = get_string(e, "text")) t.final_message = *text;
    } else {
      ++t.unknown_events[unknown_event_key(type)];
    }
  });
  if (bad_schema) return std::unexpected(std::move(*bad_schema));

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
