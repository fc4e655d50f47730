// A session's commands as a normalized transcript (commands.h).
#include "harness/session/commands.h"

#include <fmt/format.h>

#include "base/fs.h"
#include "base/json_get.h"

namespace evalbox::harness {
inline namespace sessions {
namespace {

// argv as a shell would read it back: words quoted only where they need it.
std::string command_line(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv) {
    if (!out.empty()) out += ' ';
    const bool plain =
        !a.empty() &&
        a.find_first_not_of(
            "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@%") ==
            std::string::npos;
    if (plain) {
      out += a;
      continue;
    }
    out += '\'';
    for (char c : a) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    out += '\'';
  }
  return out;
}

}  // namespace

result<transcript> transcript_of_commands(const std::filesystem::path& path) {
  transcript t;
  t.agent = "session";
  t.completed = true;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return t;
  const std::string text = EB_TRY(read_file(path, 64u << 20));
  size_t start = 0;
  int n = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string_view line(text.data() + start, end - start);
    start = end + 1;
    auto j = parse_json(line, "a session event");
    if (!j || !j->is_object()) {
      ++t.malformed_lines;
      continue;
    }
    if (json_value_or(*j, "op", std::string()) != "exec") continue;
    auto argv = json_find<std::vector<std::string>>(*j, "argv");
    if (!argv || argv->empty()) continue;
    step s;
    s.index = static_cast<int>(t.steps.size());
    s.timestamp = json_value_or(*j, "time", std::string());
    tool_call call;
    call.id = fmt::format("exec-{}", ++n);
    call.tool = "shell";  // a command in the sandbox, as transcript checks read them
    call.input = {{"argv", *argv}, {"cwd", json_value_or(*j, "cwd", std::string())}};
    call.command = command_line(*argv);
    s.tool_calls.push_back(std::move(call));
    observation o;
    o.call_id = s.tool_calls.back().id;
    if (const json& code = json_member(*j, "exit_code"); code.is_number_integer())
      o.exit_code = code.get<int>();
    o.is_error = !o.exit_code || *o.exit_code != 0;
    s.observations.push_back(std::move(o));
    t.steps.push_back(std::move(s));
  }
  return t;
}

}  // namespace sessions
}  // namespace evalbox::harness
