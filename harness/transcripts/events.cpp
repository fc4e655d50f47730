// Parser of the evalbox.events.v1 stream that `command` agents print.
#include "harness/transcripts/events.h"

#include <utility>

namespace evalbox::harness {
inline namespace transcripts {

namespace {

// The stream read one event at a time, a member per event type; `finish` ends the transcript.
class events_reader {
 public:
  void on_event(const json& e) {
    const std::string type = json_find<std::string>(e, "type").value_or("");
    const std::string timestamp = json_find<std::string>(e, "timestamp").value_or("");
    if (type == "header") {
      header(e);
    } else if (type == "message") {
      const std::string role = json_find<std::string>(e, "role").value_or("assistant");
      step& s = new_step(role == "user" ? "user" : role == "system" ? "system" : "agent");
      s.message = json_find<std::string>(e, "text").value_or("");
      s.timestamp = timestamp;
    } else if (type == "reasoning") {
      step& s = new_step("agent");
      s.reasoning = json_find<std::string>(e, "text").value_or("");
      s.timestamp = timestamp;
    } else if (type == "tool_call") {
      tool_call_event(e, timestamp);
    } else if (type == "tool_result") {
      tool_result_event(e, timestamp);
    } else if (type == "usage") {
      usage_event(e);
    } else if (type == "error") {
      std::string message = json_find<std::string>(e, "message").value_or("error");
      step& s = new_step("system");
      s.message = message;
      s.timestamp = timestamp;
      t_.error = std::move(message);
    } else if (type == "final") {
      seen_final_ = true;
      if (auto text = json_find<std::string>(e, "text")) t_.final_message = *text;
    } else {
      ++t_.unknown_events[unknown_event_key(type)];
    }
  }

  result<transcript> finish(std::string_view jsonl, const events_options& options) {
    std::optional<std::string> too_long;
    for_each_jsonl_object(
        jsonl, t_.malformed_lines, [this](const json& e) { on_event(e); }, &too_long);
    if (bad_schema_) return std::unexpected(std::move(*bad_schema_));
    // A line too long to read may have held anything, the final answer included.
    if (too_long && !t_.error) t_.error = std::move(too_long);
    // A "final" event without text ends on the last thing the agent said; an unfinished stream
    // has no final message (an answer cut off mid-run is not one).
    if (seen_final_ && !t_.final_message) {
      for (auto it = t_.steps.rbegin(); it != t_.steps.rend(); ++it) {
        if (it->source == "agent" && !it->message.empty()) {
          t_.final_message = it->message;
          break;
        }
      }
    }
    t_.completed = seen_final_;
    if (!seen_final_ && options.require_final && !t_.error)
      t_.error = "interrupted: no final event";
    return std::move(t_);
  }

 private:
  step& new_step(std::string source) { return append_step(t_, std::move(source)); }

  void header(const json& e) {
    const std::string schema = json_find<std::string>(e, "schema").value_or("");
    if (schema != events_schema && !bad_schema_) {
      bad_schema_ = error{error_kind::invalid_argument,
                          fmt::format("events: schema \"{}\" is not {}", schema, events_schema)};
    }
    if (auto v = json_find<std::string>(e, "session_id")) t_.session_id = *v;
    if (auto v = json_find<std::string>(e, "model")) t_.model = *v;
    if (auto v = json_find<std::string>(e, "agent")) t_.agent = *v;
  }

  void tool_call_event(const json& e, const std::string& timestamp) {
    tool_call call;
    call.id = json_find<std::string>(e, "id").value_or("");
    call.tool = normalize_tool_name(json_find<std::string>(e, "tool").value_or(""));
    const json& input = json_member(e, "input");
    call.input = input.is_null() ? json::object() : input;
    if (call.tool == "shell") call.command = json_find<std::string>(call.input, "command");
    step& s = new_step("agent");
    calls_.add(call.id, t_.steps.size() - 1, 0);
    s.tool_calls.push_back(std::move(call));
    s.timestamp = timestamp;
  }

  void tool_result_event(const json& e, const std::string& timestamp) {
    observation obs;
    obs.call_id = json_find<std::string>(e, "id").value_or("");
    obs.exit_code = json_find<int>(e, "exit_code");
    obs.output = truncate_output(json_find<std::string>(e, "output").value_or(""));
    // Without an explicit flag, a non-zero exit is the error signal.
    obs.is_error = json_find<bool>(e, "is_error").value_or(obs.exit_code.value_or(0) != 0);
    step* owner = calls_.owner(t_, obs.call_id);
    if (owner == nullptr) {
      // A result for a call never announced: keep it on a step of its own, not lost.
      owner = &new_step("agent");
      owner->timestamp = timestamp;
    }
    owner->observations.push_back(std::move(obs));
  }

  void usage_event(const json& e) {
    usage u;
    u.input_tokens = json_find<uint64_t>(e, "input_tokens");
    u.output_tokens = json_find<uint64_t>(e, "output_tokens");
    u.cached_input_tokens = json_find<uint64_t>(e, "cached_input_tokens");
    u.reasoning_tokens = json_find<uint64_t>(e, "reasoning_tokens");
    u.cost_usd = json_find<double>(e, "cost_usd");
    t_.total += u;
    if (!t_.steps.empty()) {
      auto& metrics = t_.steps.back().metrics;
      metrics = metrics.value_or(usage{}) + u;
    }
  }

  transcript t_ = [] {
    transcript t;
    t.agent = "command";
    return t;
  }();
  bool seen_final_ = false;
  std::optional<error> bad_schema_;
  call_index calls_;
};

}  // namespace

result<transcript> parse_evalbox_events(std::string_view jsonl, events_options options) {
  return events_reader{}.finish(jsonl, options);
}

}  // namespace transcripts
}  // namespace evalbox::harness
