// Normalizes Codex CLI's `codex exec --json` stream (observed: codex-cli 0.171.0).
#include "adapters/codex/transcript.h"
#include "base/json_checks.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <map>
#include <utility>

namespace evalbox::adapters::codex {
namespace {

using harness::observation;
using harness::step;
using harness::tool_call;
using harness::transcript;

// One POSIX shell word (quotes and backslashes removed), or nullopt when `s` is not exactly
// one word. Enough for the argv that Codex shell-quotes back into a string.
std::optional<std::string> unquote_word(std::string_view s) {
  std::string out;
  size_t i = 0;
  if (s.empty()) return std::nullopt;
  while (i < s.size()) {
    char c = s[i];
    if (c == '\'') {
      size_t end = s.find('\'', i + 1);
      if (end == std::string_view::npos) return std::nullopt;
      out.append(s.substr(i + 1, end - i - 1));
      i = end + 1;
    } else if (c == '"') {
      ++i;
      bool closed = false;
      while (i < s.size()) {
        char d = s[i];
        if (d == '"') {
          closed = true;
          ++i;
          break;
        }
        if (d == '\\' && i + 1 < s.size() &&
            std::string_view("$`\"\\\n").find(s[i + 1]) != std::string_view::npos) {
          out += s[i + 1];
          i += 2;
          continue;
        }
        out += d;
        ++i;
      }
      if (!closed) return std::nullopt;
    } else if (c == '\\') {
      if (i + 1 >= s.size()) return std::nullopt;
      out += s[i + 1];
      i += 2;
    } else if (c == ' ' || c == '\t' || c == '\n') {
      return std::nullopt;  // a second word
    } else {
      out += c;
      ++i;
    }
  }
  return out;
}

// Joins the text blocks of an MCP result's `content`.
std::string mcp_output(const json& item) {
  std::string out;
  const json& res = json_member(item, "result");
  const json& content = json_member(res, "content");
  if (content.is_array()) {
    for (const json& block : content) {
      if (auto text = json_find<std::string>(block, "text")) {
        if (!out.empty()) out += '\n';
        out += *text;
      }
    }
  }
  if (auto msg = json_find<std::string>(json_member(item, "error"), "message")) {
    if (!out.empty()) out += '\n';
    out += *msg;
  }
  return out;
}

class parser {
 public:
  transcript finish() && {
    // A turn that never reached turn.completed/turn.failed means the client died mid-run
    // (SIGTERM writes no final event).
    bool interrupted = turn_open_ || !saw_terminal_;
    if (failed_message_) {
      t_.error = failed_message_;
    } else if (interrupted) {
      t_.error = last_error_
                     ? fmt::format("interrupted: no final event (last error: {})", *last_error_)
                     : "interrupted: no final event";
    }
    t_.completed = saw_terminal_ && !turn_open_;
    if (t_.completed && !t_.error) t_.final_message = last_agent_message_;
    harness::renumber_steps(t_);
    return std::move(t_);
  }

  void on_event(const json& e) {
    std::string type = json_find<std::string>(e, "type").value_or("");
    if (type == "thread.started") {
      t_.session_id = json_find<std::string>(e, "thread_id").value_or("");
      items_.clear();  // a resumed session (follow-up) counts item ids from 0 again
    } else if (type == "turn.started") {
      turn_open_ = true;
    } else if (type == "turn.completed") {
      turn_open_ = false;
      saw_terminal_ = true;
      const json& u = json_member(e, "usage");
      harness::usage turn;
      turn.input_tokens = json_find<uint64_t>(u, "input_tokens");
      turn.cached_input_tokens = json_find<uint64_t>(u, "cached_input_tokens");
      turn.output_tokens = json_find<uint64_t>(u, "output_tokens");
      turn.reasoning_tokens = json_find<uint64_t>(u, "reasoning_output_tokens");
      t_.total += turn;  // Codex reports no cost: cost_usd stays null
    } else if (type == "turn.failed") {
      turn_open_ = false;
      saw_terminal_ = true;
      failed_message_ =
          json_find<std::string>(json_member(e, "error"), "message").value_or("turn failed");
    } else if (type == "error") {
      // A top-level error is not fatal by itself (Codex also reports retries this way); it
      // becomes the run's error only through turn.failed or an unfinished stream.
      std::string message = json_find<std::string>(e, "message").value_or("error");
      new_step("system").message = message;
      last_error_ = std::move(message);
    } else if (type == "item.started" || type == "item.updated" || type == "item.completed") {
      on_item(json_member(e, "item"), type == "item.completed");
    } else {
      ++t_.unknown_events[harness::unknown_event_key(type)];
    }
  }

 private:
  step& new_step(std::string source) { return harness::append_step(t_, std::move(source)); }

  void on_item(const json& item, bool completed) {
    std::string id = json_find<std::string>(item, "id").value_or("");
    std::string type = json_find<std::string>(item, "type").value_or("");
    auto it = items_.find(id);
    bool first = it == items_.end();
    if (first) {
      if (!known_item(type)) {
        ++t_.unknown_events["item:" + harness::unknown_event_key(type)];
        items_.emplace(id, -1);
        return;
      }
      new_step(type == "error" ? "system" : "agent");
      it = items_.emplace(id, t_.steps.size() - 1).first;
    }
    if (it->second < 0) return;  // an unknown item, counted once
    step& s = t_.steps[it->second];

    if (type == "agent_message") {
      s.message = json_find<std::string>(item, "text").value_or("");
      if (completed) last_agent_message_ = s.message;
    } else if (type == "reasoning") {
      s.reasoning = json_find<std::string>(item, "text").value_or("");
    } else if (type == "error") {
      s.message = json_find<std::string>(item, "message").value_or("error");
    } else {
      update_tool(s, id, type, item, completed);
    }
  }

  static bool known_item(std::string_view type) {
    static constexpr std::array<std::string_view, 8> known = {
        "command_execution", "file_change",   "mcp_tool_call", "web_search",
        "todo_list",         "agent_message", "reasoning",     "error"};
    for (auto k : known) {
      if (k == type) return true;
    }
    return false;
  }

  void update_tool(step& s, const std::string& id, const std::string& type, const json& item,
                   bool completed) {
    tool_call call;
    call.id = id;
    std::string status = json_find<std::string>(item, "status").value_or("");
    observation obs;
    obs.call_id = id;
    obs.is_error = status == "failed" || status == "declined";
    if (type == "command_execution") {
      std::string command = json_find<std::string>(item, "command").value_or("");
      call.tool = "shell";
      call.input = json{{"command", command}};
      call.command = unwrap_shell_command(command).value_or(command);
      obs.exit_code = json_find<int>(item, "exit_code");
      obs.output =
          harness::truncate_output(json_find<std::string>(item, "aggregated_output").value_or(""));
      if (obs.exit_code && *obs.exit_code != 0) obs.is_error = true;
    } else if (type == "file_change") {
      const json& changes = json_member(item, "changes");
      call.tool = "edit";
      call.input = json{{"changes", changes.is_array() ? changes : json::array()}};
      std::string summary;
      for (const json& c : call.input["changes"]) {
        if (!summary.empty()) summary += '\n';
        summary += json_find<std::string>(c, "kind").value_or("?") + " " +
                   json_find<std::string>(c, "path").value_or("?");
      }
      obs.output = std::move(summary);
    } else if (type == "mcp_tool_call") {
      call.tool = fmt::format("mcp:{}/{}", json_find<std::string>(item, "server").value_or(""),
                              json_find<std::string>(item, "tool").value_or(""));
      const json& args = json_member(item, "arguments");
      call.input = args.is_null() ? json::object() : args;
      obs.output = harness::truncate_output(mcp_output(item));
      if (!json_member(item, "error").is_null()) obs.is_error = true;
    } else if (type == "web_search") {
      call.tool = "web_search";
      call.input = json{{"query", json_find<std::string>(item, "query").value_or("")}};
    } else if (type == "todo_list") {
      const json& items = json_member(item, "items");
      call.tool = "todo";
      call.input = json{{"items", items.is_array() ? items : json::array()}};
    }
    // The latest event carries the fullest picture of the call (item.updated refines a todo
    // list); keep one call per item.
    s.tool_calls.assign(1, std::move(call));
    if (completed) s.observations.assign(1, std::move(obs));
  }

  transcript t_;
  std::map<std::string, long> items_;  // item id -> step index (-1: unknown item type)
  bool turn_open_ = false;
  bool saw_terminal_ = false;
  std::optional<std::string> failed_message_;
  std::optional<std::string> last_error_;
  std::optional<std::string> last_agent_message_;
};

}  // namespace

std::optional<std::string> unwrap_shell_command(std::string_view command) {
  // The login shell Codex picks is the user's: /bin/sh where /etc/passwd says so (the sandbox).
  static constexpr std::array<std::string_view, 12> wrappers = {
      "/bin/bash -lc ", "/bin/bash -c ",    "bash -lc ", "bash -c ", "/usr/bin/bash -lc ",
      "/bin/sh -lc ",   "/bin/sh -c ",      "sh -lc ",   "sh -c ",   "/bin/zsh -lc ",
      "zsh -lc ",       "/usr/bin/zsh -lc "};
  for (auto prefix : wrappers) {
    if (command.starts_with(prefix)) return unquote_word(command.substr(prefix.size()));
  }
  return std::nullopt;
}

namespace {

struct rollout_call {
  std::string call_id;
  std::string command;
  json input;
  std::optional<int> exit_code;
  std::string output;
  bool has_output = false;
};

// The command of an exec_command ({"cmd": "..."}) or shell ({"command": [argv]}) call.
std::optional<std::string> rollout_command(const std::string& name, const json& args) {
  if (name == "exec_command") return json_find<std::string>(args, "cmd");
  if (name == "shell" || name == "local_shell") {
    const json& argv = json_member(args, "command");
    if (!argv.is_array() || argv.empty()) return std::nullopt;
    // ["bash", "-lc", script] -> script, like unwrap_shell_command does for the stream.
    if (argv.size() == 3 && argv.at(1).is_string() &&
        (argv.at(1).get<std::string>() == "-lc" || argv.at(1).get<std::string>() == "-c") &&
        argv.at(2).is_string())
      return argv.at(2).get<std::string>();
    std::string joined;
    for (const json& a : argv) {
      if (!a.is_string()) return std::nullopt;
      joined += (joined.empty() ? "" : " ") + a.get<std::string>();
    }
    return joined;
  }
  return std::nullopt;
}

// "...Process exited with code 1\n...Output:\n<text>" -> (1, "<text>").
void parse_function_output(std::string_view text, rollout_call& call) {
  constexpr std::string_view exited = "Process exited with code ";
  if (auto pos = text.find(exited); pos != std::string_view::npos) {
    // from_chars, not a digit loop: "code 99999999999" is out of range, not a signed overflow.
    std::string_view digits = text.substr(pos + exited.size());
    int code = 0;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), code);
    if (ec == std::errc() && end != digits.data()) call.exit_code = code;
  }
  constexpr std::string_view marker = "Output:\n";
  auto pos = text.find(marker);
  call.output =
      std::string(pos == std::string_view::npos ? text : text.substr(pos + marker.size()));
}

}  // namespace

int add_unreported_commands(harness::transcript& t, std::string_view rollout_jsonl) {
  std::vector<rollout_call> calls;
  std::map<std::string, size_t> by_id;
  bool this_thread = t.session_id.empty();
  auto on_line = [&](const json& line) {
    const std::string type = json_find<std::string>(line, "type").value_or("");
    const json& payload = json_member(line, "payload");
    if (type == "session_meta") {
      this_thread = t.session_id.empty() || json_find<std::string>(payload, "id") == t.session_id;
      return;
    }
    if (!this_thread || type != "response_item") return;
    const std::string ptype = json_find<std::string>(payload, "type").value_or("");
    const std::string call_id = json_find<std::string>(payload, "call_id").value_or("");
    if (ptype == "function_call") {
      std::string text = json_find<std::string>(payload, "arguments").value_or("");
      json args = json_too_deep(text) ? json() : json::parse(text, nullptr, false);
      auto command = rollout_command(json_find<std::string>(payload, "name").value_or(""), args);
      if (!command || call_id.empty()) return;
      by_id[call_id] = calls.size();
      calls.push_back({call_id, *command, args.is_object() ? args : json::object(), {}, {}, false});
    } else if (ptype == "function_call_output") {
      auto it = by_id.find(call_id);
      if (it == by_id.end()) return;
      const json& out = json_member(payload, "output");
      parse_function_output(out.is_string() ? out.get<std::string>() : out.dump(),
                            calls[it->second]);
      calls[it->second].has_output = true;
    }
  };
  int malformed = 0;
  std::optional<std::string> too_long;
  harness::for_each_jsonl_object(rollout_jsonl, malformed, on_line, &too_long);
  // A line too long to read may have been a command the stream left out (forbid_command
  // would not see it): the transcript cannot be trusted.
  if (too_long && !t.error) t.error = std::move(too_long);

  // The stream's shell steps by command, in step order (a step once per shell call, named by
  // its first one's command), with how far the matching below has moved through each list.
  // Matching only moves forward, so this is linear where a scan per call and an insert per
  // unmatched call were quadratic (a rollout of many calls stalled the harness).
  std::map<std::string, std::pair<std::vector<size_t>, size_t>, std::less<>> shells;
  for (size_t i = 0; i < t.steps.size(); ++i) {
    const std::string* first = nullptr;
    for (const auto& c : t.steps[i].tool_calls) {
      if (c.tool != "shell") continue;
      static const std::string none;
      if (!first) first = c.command ? &*c.command : &none;
      shells[*first].first.push_back(i);
    }
  }

  int added = 0;
  size_t cursor = 0;                             // the stream step after the last matched call
  std::vector<std::pair<size_t, step>> inserts;  // (before which stream step, the new step)
  for (const auto& call : calls) {
    if (auto it = shells.find(call.command); it != shells.end()) {
      auto& [steps, next] = it->second;
      while (next < steps.size() && steps[next] < cursor) ++next;
      if (next < steps.size()) {
        cursor = steps[next++] + 1;
        continue;
      }
    }
    step s;
    s.source = "agent";
    tool_call tc;
    tc.id = call.call_id;
    tc.tool = "shell";
    tc.input = call.input;
    tc.command = call.command;
    s.tool_calls.push_back(std::move(tc));
    if (call.has_output) {
      observation o;
      o.call_id = call.call_id;
      o.exit_code = call.exit_code;
      o.output = harness::truncate_output(call.output);
      o.is_error = call.exit_code && *call.exit_code != 0;
      s.observations.push_back(std::move(o));
    }
    inserts.emplace_back(cursor, std::move(s));
    ++added;
  }
  if (!inserts.empty()) {
    std::vector<step> merged;
    merged.reserve(t.steps.size() + inserts.size());
    size_t next = 0;
    for (size_t i = 0; i <= t.steps.size(); ++i) {
      while (next < inserts.size() && inserts[next].first == i)
        merged.push_back(std::move(inserts[next++].second));
      if (i < t.steps.size()) merged.push_back(std::move(t.steps[i]));
    }
    t.steps = std::move(merged);
  }
  if (added) harness::renumber_steps(t);
  return added;
}

result<harness::transcript> parse_codex_exec_json(std::string_view jsonl) {
  parser p;
  int malformed = 0;
  std::optional<std::string> too_long;
  harness::for_each_jsonl_object(
      jsonl, malformed, [&](const json& e) { p.on_event(e); }, &too_long);
  transcript t = std::move(p).finish();
  t.agent = "codex";
  t.malformed_lines = malformed;
  if (too_long && !t.error) t.error = std::move(too_long);  // what it said is unknown
  return t;
}

}  // namespace evalbox::adapters::codex
