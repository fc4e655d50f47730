// Normalizes Gemini CLI's stream-json output (see transcript.h).
#include "adapters/gemini/transcript.h"

#include <map>

namespace evalbox::adapters::gemini {
namespace {

// Gemini CLI's built-in tool names -> evalbox's normalized ones.
std::string tool_name(const std::string& name) {
  static const std::map<std::string, std::string> names = {
      {"run_shell_command", "shell"}, {"replace", "edit"},
      {"write_file", "write"},        {"read_file", "read"},
      {"read_many_files", "read"},    {"google_web_search", "web_search"},
      {"write_todos", "todo"},
  };
  auto it = names.find(name);
  return it != names.end() ? it->second : harness::normalize_tool_name(name);
}

class parser {
 public:
  void on_event(const json& e) {
    const std::string type = json_find<std::string>(e, "type").value_or("");
    const std::string ts = json_find<std::string>(e, "timestamp").value_or("");
    if (type == "init") {
      if (auto id = json_find<std::string>(e, "session_id")) t_.session_id = *id;
      if (auto m = json_find<std::string>(e, "model")) t_.model = *m;
    } else if (type == "message") {
      if (json_find<std::string>(e, "role").value_or("") != "assistant")
        return;  // the prompt echoed
      harness::step& s = open_step(ts);
      s.message += json_find<std::string>(e, "content").value_or("");
    } else if (type == "tool_use") {
      harness::step& s = open_step(ts);
      harness::tool_call c;
      c.id = json_find<std::string>(e, "tool_id").value_or("");
      c.tool = tool_name(json_find<std::string>(e, "tool_name").value_or(""));
      const json& params = json_member(e, "parameters");
      c.input = params.is_object() ? params : json::object();
      if (c.tool == "shell") c.command = json_find<std::string>(c.input, "command");
      calls_.add(c.id, static_cast<size_t>(&s - t_.steps.data()), s.tool_calls.size());
      s.tool_calls.push_back(std::move(c));
    } else if (type == "tool_result") {
      harness::observation o;
      o.call_id = json_find<std::string>(e, "tool_id").value_or("");
      o.is_error = json_find<std::string>(e, "status").value_or("") != "success";
      std::string out = json_find<std::string>(e, "output").value_or("");
      if (auto msg = json_find<std::string>(json_member(e, "error"), "message")) {
        out += (out.empty() ? "" : "\n") + *msg;
        o.is_error = true;
      }
      o.output = harness::truncate_output(std::move(out));
      harness::step* owner = calls_.owner(t_, o.call_id);
      if (!owner) owner = &new_step(ts);
      owner->observations.push_back(std::move(o));
    } else if (type == "result") {
      on_result(e);
    } else if (type == "error") {
      // A non-fatal warning from the client; the run's outcome comes from `result`.
      last_error_ = json_find<std::string>(e, "message").value_or("error");
    } else {
      ++t_.unknown_events[harness::unknown_event_key(type)];
    }
  }

  harness::transcript finish() && {
    if (!saw_result_) {
      t_.completed = false;
      t_.error = last_error_ ? "interrupted: no final event (last error: " + *last_error_ + ")"
                             : "interrupted: no final event";
      t_.final_message.reset();
    }
    harness::renumber_steps(t_);
    return std::move(t_);
  }

 private:
  // The step that new assistant output belongs to: the last agent step while no tool result
  // has come back since, else a new one.
  harness::step& open_step(const std::string& ts) {
    if (!t_.steps.empty() && t_.steps.back().source == "agent" &&
        t_.steps.back().observations.empty())
      return t_.steps.back();
    return new_step(ts);
  }

  harness::step& new_step(const std::string& ts) {
    harness::step& s = harness::append_step(t_, "agent");
    s.timestamp = ts;
    return s;
  }

  void on_result(const json& e) {
    saw_result_ = true;
    t_.completed = true;
    const json& stats = json_member(e, "stats");
    harness::usage u;
    u.input_tokens = json_find<uint64_t>(stats, "input_tokens");
    u.output_tokens = json_find<uint64_t>(stats, "output_tokens");
    u.cached_input_tokens = json_find<uint64_t>(stats, "cached");
    t_.total += u;
    if (auto ms = json_find<uint64_t>(stats, "duration_ms"))
      t_.duration_ms = t_.duration_ms.value_or(0) + *ms;
    const std::string status = json_find<std::string>(e, "status").value_or("");
    t_.error.reset();
    t_.final_message.reset();
    if (status == "success") {
      for (auto it = t_.steps.rbegin(); it != t_.steps.rend(); ++it)
        if (it->source == "agent" && !it->message.empty()) {
          t_.final_message = it->message;
          break;
        }
      return;
    }
    auto msg = json_find<std::string>(json_member(e, "error"), "message");
    t_.error = msg ? *msg : "gemini: " + (status.empty() ? std::string("error") : status);
  }

  harness::transcript t_;
  harness::call_index calls_;  // tool_id -> where it is, for tool_result events
  bool saw_result_ = false;
  std::optional<std::string> last_error_;
};

}  // namespace

result<harness::transcript> parse_gemini_stream_json(std::string_view jsonl) {
  parser p;
  int malformed = 0;
  std::optional<std::string> too_long;
  harness::for_each_jsonl_object(
      jsonl, malformed, [&](const json& e) { p.on_event(e); }, &too_long);
  harness::transcript t = std::move(p).finish();
  t.agent = "gemini";
  t.malformed_lines = malformed;
  if (too_long && !t.error) t.error = std::move(too_long);  // what it said is unknown
  return t;
}

}  // namespace evalbox::adapters::gemini
