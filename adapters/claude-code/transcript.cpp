// Normalizes Claude Code's stream-json output (observed: Claude Code 2.1.197).
#include "adapters/claude-code/transcript.h"

#include <charconv>
#include <utility>

namespace evalbox::adapters::claude_code {
namespace {

using harness::observation;
using harness::step;
using harness::tool_call;
using harness::transcript;

// Anthropic's input_tokens excludes cache reads and writes; evalbox counts every input token
// and reports the cache reads as the cached part (docs/transcript.md, "usage").
harness::usage input_usage(const json& u) {
  harness::usage out;
  auto input = json_find<uint64_t>(u, "input_tokens");
  auto created = json_find<uint64_t>(u, "cache_creation_input_tokens");
  auto read = json_find<uint64_t>(u, "cache_read_input_tokens");
  if (input || created || read) {
    out.input_tokens = input.value_or(0) + created.value_or(0) + read.value_or(0);
  }
  out.cached_input_tokens = read;
  return out;
}

// A tool_result's content: a string, or blocks of which the text ones count.
std::string result_text(const json& content) {
  if (content.is_string()) return content.get<std::string>();
  std::string out;
  if (content.is_array()) {
    for (const json& block : content) {
      if (auto text = json_find<std::string>(block, "text")) {
        if (!out.empty()) out += '\n';
        out += *text;
      }
    }
  }
  return out;
}

// Claude Code's Bash reports a non-zero exit as an error result starting "Exit code N".
std::optional<int> exit_code_in(std::string_view text) {
  constexpr std::string_view prefix = "Exit code ";
  if (!text.starts_with(prefix)) return std::nullopt;
  text.remove_prefix(prefix.size());
  int code = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), code);
  if (ec != std::errc() || (end != text.data() + text.size() && *end != '\n')) {
    return std::nullopt;
  }
  return code;
}

class parser {
 public:
  transcript finish() && {
    if (!saw_result_) {
      // SIGTERM ends Claude Code without a result event. What the stream reported per
      // message is all there is: input tokens are final at message start, output is not.
      t_.completed = false;
      t_.error = "interrupted: no final event";
      t_.final_message.reset();
      for (size_t i = invocation_first_step_; i < t_.steps.size(); ++i) {
        if (t_.steps[i].metrics) t_.total += *t_.steps[i].metrics;
      }
    }
    harness::renumber_steps(t_);
    return std::move(t_);
  }

  void on_event(const json& e) {
    std::string type = json_find<std::string>(e, "type").value_or("");
    if (type == "system") {
      std::string subtype = json_find<std::string>(e, "subtype").value_or("");
      if (subtype == "init") {
        // A follow-up invocation appended to the stream starts over: it needs its own result.
        saw_result_ = false;
        invocation_first_step_ = t_.steps.size();
        t_.session_id = json_find<std::string>(e, "session_id").value_or(t_.session_id);
        t_.model = json_find<std::string>(e, "model").value_or(t_.model);
      } else {
        ++t_.unknown_events["system/" + subtype];
      }
    } else if (type == "assistant") {
      on_assistant(e);
    } else if (type == "user") {
      on_user(e);
    } else if (type == "result") {
      on_result(e);
    } else {
      ++t_.unknown_events[harness::unknown_event_key(type)];
    }
  }

 private:
  step& new_step(std::string source) { return harness::append_step(t_, std::move(source)); }

  void on_assistant(const json& e) {
    const json& message = json_member(e, "message");
    std::string id = json_find<std::string>(message, "id").value_or("");
    // A client-generated error reply ("API Error: 500 ...", model "<synthetic>") is not the
    // model speaking.
    bool synthetic = json_member(e, "error").is_string() ||
                     json_find<std::string>(message, "model").value_or("") == "<synthetic>";
    // Claude Code may send one assistant event per content block of the same message.
    bool same_message = !id.empty() && id == last_message_id_ && !t_.steps.empty();
    step& s = same_message ? t_.steps.back() : new_step(synthetic ? "system" : "agent");
    if (!same_message && !synthetic) {
      // The stream repeats message_start usage: input is final, output_tokens is a placeholder
      // (1), so per-step output stays unknown; the result event has the true totals.
      harness::usage u = input_usage(json_member(message, "usage"));
      if (!u.unknown()) s.metrics = u;
    }
    last_message_id_ = id;
    const json& content = json_member(message, "content");
    if (!content.is_array()) return;
    for (const json& block : content) {
      std::string kind = json_find<std::string>(block, "type").value_or("");
      if (kind == "text") {
        if (!s.message.empty()) s.message += '\n';
        s.message += json_find<std::string>(block, "text").value_or("");
      } else if (kind == "thinking") {
        if (!s.reasoning.empty()) s.reasoning += '\n';
        s.reasoning += json_find<std::string>(block, "thinking").value_or("");
      } else if (kind == "redacted_thinking") {
        // Encrypted; nothing readable to keep.
      } else if (kind == "tool_use" || kind == "server_tool_use") {
        tool_call call;
        call.id = json_find<std::string>(block, "id").value_or("");
        call.tool =
            harness::normalize_tool_name(json_find<std::string>(block, "name").value_or(""));
        const json& input = json_member(block, "input");
        call.input = input.is_null() ? json::object() : input;
        if (call.tool == "shell") call.command = json_find<std::string>(call.input, "command");
        calls_.add(call.id, static_cast<size_t>(&s - t_.steps.data()), s.tool_calls.size());
        s.tool_calls.push_back(std::move(call));
      } else {
        ++t_.unknown_events["assistant/" + kind];
      }
    }
  }

  void on_user(const json& e) {
    last_message_id_.clear();
    const json& message = json_member(e, "message");
    const json& content = json_member(message, "content");
    std::string timestamp = json_find<std::string>(e, "timestamp").value_or("");
    if (content.is_string()) {
      step& s = new_step("user");
      s.message = content.get<std::string>();
      s.timestamp = timestamp;
      return;
    }
    if (!content.is_array()) return;
    for (const json& block : content) {
      std::string kind = json_find<std::string>(block, "type").value_or("");
      if (kind == "tool_result") {
        on_tool_result(block, json_member(e, "tool_use_result"), timestamp);
      } else if (kind == "text") {
        step& s = new_step("user");
        s.message = json_find<std::string>(block, "text").value_or("");
        s.timestamp = timestamp;
      } else {
        ++t_.unknown_events["user/" + kind];
      }
    }
  }

  void on_tool_result(const json& block, const json& tool_use_result,
                      const std::string& timestamp) {
    observation obs;
    obs.call_id = json_find<std::string>(block, "tool_use_id").value_or("");
    std::string text = result_text(json_member(block, "content"));
    // Write results carry no is_error key at all: missing means success.
    obs.is_error = json_find<bool>(block, "is_error").value_or(false);
    step* owner = calls_.owner(t_, obs.call_id);
    const tool_call* call = calls_.call(t_, obs.call_id);
    bool shell = call != nullptr && call->tool == "shell";
    if (shell) {
      // Claude Code reports no exit status; Bash marks exactly the non-zero exits as errors,
      // with "Exit code N" first. An interrupted command has no status to report.
      if (obs.is_error) {
        obs.exit_code = exit_code_in(text);
      } else if (!json_find<bool>(tool_use_result, "interrupted").value_or(false)) {
        obs.exit_code = 0;
      }
    }
    obs.output = harness::truncate_output(std::move(text));
    if (owner == nullptr) {
      // A result for a call the stream never showed: keep it on a step of its own.
      owner = &new_step("agent");
      owner->timestamp = timestamp;
    }
    owner->observations.push_back(std::move(obs));
  }

  void on_result(const json& e) {
    saw_result_ = true;
    t_.completed = true;
    std::string subtype = json_find<std::string>(e, "subtype").value_or("");
    // A follow-up prompt resumes the session in a second invocation whose stream the adapter
    // appends: counts add up, and the last result decides the outcome.
    if (auto n = json_find<int>(e, "num_turns")) t_.num_turns = t_.num_turns.value_or(0) + *n;
    if (auto ms = json_find<uint64_t>(e, "duration_ms")) {
      t_.duration_ms = t_.duration_ms.value_or(0) + *ms;
    }
    if (auto id = json_find<std::string>(e, "session_id")) t_.session_id = *id;

    const json& u = json_member(e, "usage");
    harness::usage total = input_usage(u);
    total.output_tokens = json_find<uint64_t>(u, "output_tokens");
    total.cost_usd = json_find<double>(e, "total_cost_usd");
    t_.total += total;
    t_.error.reset();
    t_.final_message.reset();

    // subtype "success" with is_error true is how an upstream HTTP error arrives.
    bool failed = json_find<bool>(e, "is_error").value_or(false) || subtype != "success";
    std::optional<std::string> text = json_find<std::string>(e, "result");
    if (!failed) {
      t_.final_message = text;
      for (auto it = t_.steps.rbegin(); !t_.final_message && it != t_.steps.rend(); ++it) {
        if (it->source == "agent" && !it->message.empty()) t_.final_message = it->message;
      }
      return;
    }
    if (text && !text->empty()) {
      t_.error = *text;
    } else {
      t_.error = fmt::format("claude-code: {}", subtype.empty() ? "error" : subtype);
      if (auto status = json_find<int>(e, "api_error_status")) {
        *t_.error += fmt::format(" (api_error_status {})", *status);
      }
    }
  }

  transcript t_;
  harness::call_index calls_;  // tool_use id -> where it is, for tool_result blocks
  std::string last_message_id_;
  bool saw_result_ = false;
  size_t invocation_first_step_ = 0;  // first step of the current invocation
};

}  // namespace

result<harness::transcript> parse_claude_stream_json(std::string_view jsonl) {
  parser p;
  int malformed = 0;
  std::optional<std::string> too_long;
  harness::for_each_jsonl_object(
      jsonl, malformed, [&](const json& e) { p.on_event(e); }, &too_long);
  transcript t = std::move(p).finish();
  t.agent = "claude-code";
  t.malformed_lines = malformed;
  if (too_long && !t.error) t.error = std::move(too_long);  // what it said is unknown
  return t;
}

}  // namespace evalbox::adapters::claude_code
