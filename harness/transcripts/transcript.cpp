// The normalized transcript: JSON form, transcript.jsonl I/O, parser helpers and queries.
#include "harness/transcripts/transcript.h"

#include <algorithm>
#include <limits>
#include <set>
#include <type_traits>
#include <utility>

#include "base/fs.h"
#include "base/json_checks.h"
#include "base/units.h"
#include "harness/transcripts/read_limits.h"

namespace evalbox::harness {
inline namespace transcripts {
namespace {

// Saturating: counts come from the agent, and 2^64 - 1 tokens plus one must not read as 0.
void add_opt(std::optional<uint64_t>& a, const std::optional<uint64_t>& b) {
  if (!b) return;
  uint64_t sum = 0;
  a = __builtin_add_overflow(a.value_or(0), *b, &sum) ? UINT64_MAX : sum;
}

template <class T>
json opt_json(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

// Throwing accessors, used only inside the try blocks of the readers below: our own format
// is strict (a wrong type is corruption), unlike the native formats the parsers tolerate.
template <class T>
std::optional<T> opt_at(const json& j, const char* key) {
  const json& v = j.at(key);
  if (v.is_null()) return std::nullopt;
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    return checked_integer<T>(v);  // not 1e300 as an int
  }
  return v.get<T>();
}

usage usage_at(const json& j) {
  if (!j.is_object()) throw json::type_error::create(302, "usage must be an object", &j);
  usage u;
  u.input_tokens = opt_at<uint64_t>(j, "input_tokens");
  u.output_tokens = opt_at<uint64_t>(j, "output_tokens");
  u.cached_input_tokens = opt_at<uint64_t>(j, "cached_input_tokens");
  u.reasoning_tokens = opt_at<uint64_t>(j, "reasoning_tokens");
  u.cost_usd = opt_at<double>(j, "cost_usd");
  return u;
}

step step_at(const json& j) {
  step s;
  s.index = checked_integer<int>(j.at("index"));
  s.source = j.at("source").get<std::string>();
  s.message = j.at("message").get<std::string>();
  s.reasoning = j.at("reasoning").get<std::string>();
  for (const json& c : j.at("tool_calls")) {
    tool_call call;
    call.id = c.at("id").get<std::string>();
    call.tool = c.at("tool").get<std::string>();
    call.input = c.at("input");
    call.command = opt_at<std::string>(c, "command");
    s.tool_calls.push_back(std::move(call));
  }
  for (const json& o : j.at("observations")) {
    observation obs;
    obs.call_id = o.at("call_id").get<std::string>();
    obs.exit_code = opt_at<int>(o, "exit_code");
    obs.output = o.at("output").get<std::string>();
    obs.is_error = o.at("is_error").get<bool>();
    s.observations.push_back(std::move(obs));
  }
  if (!j.at("metrics").is_null()) s.metrics = usage_at(j.at("metrics"));
  s.timestamp = j.at("timestamp").get<std::string>();
  return s;
}

}  // namespace

usage& usage::operator+=(const usage& other) {
  add_opt(input_tokens, other.input_tokens);
  add_opt(output_tokens, other.output_tokens);
  add_opt(cached_input_tokens, other.cached_input_tokens);
  add_opt(reasoning_tokens, other.reasoning_tokens);
  if (other.cost_usd) {
    // 1e308 + 1e308 is infinity, which JSON cannot hold (it would be written as null: unknown).
    cost_usd =
        std::clamp(cost_usd.value_or(0.0) + *other.cost_usd, std::numeric_limits<double>::lowest(),
                   std::numeric_limits<double>::max());
  }
  return *this;
}

bool usage::unknown() const {
  return !input_tokens && !output_tokens && !cached_input_tokens && !reasoning_tokens && !cost_usd;
}

json to_json(const usage& u) {
  return json{{"input_tokens", opt_json(u.input_tokens)},
              {"output_tokens", opt_json(u.output_tokens)},
              {"cached_input_tokens", opt_json(u.cached_input_tokens)},
              {"reasoning_tokens", opt_json(u.reasoning_tokens)},
              {"cost_usd", opt_json(u.cost_usd)}};
}

json to_json(const tool_call& c) {
  return json{{"id", c.id}, {"tool", c.tool}, {"input", c.input}, {"command", opt_json(c.command)}};
}

json to_json(const observation& o) {
  return json{{"call_id", o.call_id},
              {"exit_code", opt_json(o.exit_code)},
              {"output", o.output},
              {"is_error", o.is_error}};
}

json to_json(const step& s) {
  json calls = json::array();
  for (const auto& c : s.tool_calls) calls.push_back(to_json(c));
  json observations = json::array();
  for (const auto& o : s.observations) observations.push_back(to_json(o));
  return json{{"type", "step"},
              {"index", s.index},
              {"source", s.source},
              {"message", s.message},
              {"reasoning", s.reasoning},
              {"tool_calls", std::move(calls)},
              {"observations", std::move(observations)},
              {"metrics", s.metrics ? to_json(*s.metrics) : json(nullptr)},
              {"timestamp", s.timestamp}};
}

result<usage> usage_from_json(const json& j) {
  try {
    return usage_at(j);
  } catch (const json::exception& e) {
    return make_error(error_kind::invalid_argument, "usage: {}", e.what());
  }
}

result<step> step_from_json(const json& j) {
  try {
    return step_at(j);
  } catch (const json::exception& e) {
    return make_error(error_kind::invalid_argument, "step: {}", e.what());
  }
}

std::string to_jsonl(const transcript& t) {
  std::string out;
  out += canonical_json(json{{"type", "header"},
                             {"schema", transcript_schema},
                             {"agent", t.agent},
                             {"session_id", t.session_id},
                             {"model", t.model}});
  out += '\n';
  for (const auto& s : t.steps) {
    out += canonical_json(to_json(s));
    out += '\n';
  }
  json unknown = json::object();
  for (const auto& [type, count] : t.unknown_events) unknown[type] = count;
  out += canonical_json(json{{"type", "summary"},
                             {"steps", t.steps.size()},
                             {"total", to_json(t.total)},
                             {"final_message", opt_json(t.final_message)},
                             {"error", opt_json(t.error)},
                             {"completed", t.completed},
                             {"duration_ms", opt_json(t.duration_ms)},
                             {"num_turns", opt_json(t.num_turns)},
                             {"unknown_events", std::move(unknown)},
                             {"malformed_lines", t.malformed_lines}});
  out += '\n';
  return out;
}

result<transcript> from_jsonl(std::string_view text) {
  transcript t;
  bool seen_header = false;
  bool seen_summary = false;
  size_t expected_steps = 0;
  int lineno = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++lineno;
    if (line.empty()) continue;
    json j = EB_TRY_CTX(parse_json(line, fmt::format("line {}", lineno)), "transcript");
    try {
      std::string type = j.at("type").get<std::string>();
      if (!seen_header) {
        if (type != "header") throw std::invalid_argument("the first line is not a header");
        std::string schema = j.at("schema").get<std::string>();
        if (schema != transcript_schema) {
          return make_error(error_kind::invalid_argument, "transcript: schema \"{}\" is not {}",
                            schema, transcript_schema);
        }
        t.agent = j.at("agent").get<std::string>();
        t.session_id = j.at("session_id").get<std::string>();
        t.model = j.at("model").get<std::string>();
        seen_header = true;
      } else if (seen_summary) {
        throw std::invalid_argument("a line follows the summary");
      } else if (type == "step") {
        t.steps.push_back(step_at(j));
      } else if (type == "summary") {
        expected_steps = checked_integer<size_t>(j.at("steps"));
        t.total = usage_at(j.at("total"));
        t.final_message = opt_at<std::string>(j, "final_message");
        t.error = opt_at<std::string>(j, "error");
        t.completed = j.at("completed").get<bool>();
        t.duration_ms = opt_at<uint64_t>(j, "duration_ms");
        t.num_turns = opt_at<int>(j, "num_turns");
        for (const auto& [type_name, count] : j.at("unknown_events").items()) {
          t.unknown_events[type_name] = checked_integer<int>(count);
        }
        t.malformed_lines = checked_integer<int>(j.at("malformed_lines"));
        seen_summary = true;
      } else {
        throw std::invalid_argument(fmt::format("unknown line type \"{}\"", type));
      }
    } catch (const std::exception& e) {
      return make_error(error_kind::invalid_argument, "transcript: line {}: {}", lineno, e.what());
    }
  }
  if (!seen_header) return make_error(error_kind::invalid_argument, "transcript: no header");
  if (!seen_summary) {
    return make_error(error_kind::invalid_argument, "transcript: no summary (truncated file?)");
  }
  if (expected_steps != t.steps.size()) {
    return make_error(error_kind::invalid_argument, "transcript: summary says {} steps, found {}",
                      expected_steps, t.steps.size());
  }
  return t;
}

status write_transcript(const std::filesystem::path& path, const transcript& t) {
  return write_file_replace(path, to_jsonl(t));
}

result<transcript> read_transcript(const std::filesystem::path& path) {
  std::string text = EB_TRY(read_file(path));
  return EB_TRY_CTX(from_jsonl(text), path.string());
}

std::string truncate_output(std::string output) {
  if (output.size() <= observation_output_cap) return output;
  size_t cut = observation_output_cap;
  // Back off over UTF-8 continuation bytes so the kept part stays valid UTF-8.
  while (cut > 0 && (static_cast<unsigned char>(output[cut]) & 0xC0) == 0x80) --cut;
  size_t omitted = output.size() - cut;
  output.resize(cut);
  output += fmt::format("\n[evalbox: output truncated, {} bytes omitted]", omitted);
  return output;
}

std::string normalize_tool_name(std::string_view name) {
  static const std::map<std::string_view, std::string_view> names = {
      {"Bash", "shell"},
      {"bash", "shell"},
      {"shell", "shell"},
      {"exec_command", "shell"},
      {"local_shell", "shell"},
      {"shell_command", "shell"},
      {"command_execution", "shell"},
      {"Edit", "edit"},
      {"MultiEdit", "edit"},
      {"NotebookEdit", "edit"},
      {"apply_patch", "edit"},
      {"file_change", "edit"},
      {"edit", "edit"},
      {"Read", "read"},
      {"read", "read"},
      {"read_file", "read"},
      {"Write", "write"},
      {"write", "write"},
      {"write_file", "write"},
      {"WebSearch", "web_search"},
      {"web_search", "web_search"},
      {"TodoWrite", "todo"},
      {"todo_list", "todo"},
      {"update_plan", "todo"},
      {"todo", "todo"},
  };
  if (auto it = names.find(name); it != names.end()) return std::string(it->second);
  // Claude Code names MCP tools mcp__<server>__<tool>.
  constexpr std::string_view mcp = "mcp__";
  if (name.starts_with(mcp)) {
    std::string_view rest = name.substr(mcp.size());
    size_t sep = rest.find("__");
    if (sep != std::string_view::npos && sep > 0 && sep + 2 < rest.size()) {
      return fmt::format("mcp:{}/{}", rest.substr(0, sep), rest.substr(sep + 2));
    }
  }
  return std::string(name);
}

void for_each_jsonl_object(std::string_view jsonl, int& malformed,
                           const std::function<void(const json&)>& fn,
                           std::optional<std::string>* too_long) {
  size_t pos = 0;
  int lineno = 0;
  while (pos < jsonl.size()) {
    size_t end = jsonl.find('\n', pos);
    if (end == std::string_view::npos) end = jsonl.size();
    std::string_view line = jsonl.substr(pos, end - pos);
    pos = end + 1;
    ++lineno;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    if (line.size() > max_native_line_bytes) {  // parsed, it would take several times that
      ++malformed;
      if (too_long && !*too_long)
        *too_long = fmt::format(
            "line {} of the agent's output is {} bytes, larger than {}: evalbox reads lines of "
            "at most that size, and what the line said is unknown",
            lineno, line.size(), format_bytes(max_native_line_bytes));
      continue;
    }
    if (json_too_deep(line)) {  // would overflow the stack when copied or written
      ++malformed;
      continue;
    }
    json j = json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) {
      // Bytes that are not UTF-8 (or escaped lone surrogates) in a message: the event is kept,
      // with U+FFFD where they were, rather than dropped with everything it said.
      const std::string clean = sanitize_json_text(line);
      if (clean != line)
        j = json::parse(clean.begin(), clean.end(), nullptr, /*allow_exceptions=*/false);
    }
    if (j.is_discarded() || !j.is_object()) {
      ++malformed;
      continue;
    }
    fn(j);
  }
}

step& append_step(transcript& t, std::string source) {
  step s;
  s.index = static_cast<int>(t.steps.size());
  s.source = std::move(source);
  t.steps.push_back(std::move(s));
  return t.steps.back();
}

std::string unknown_event_key(std::string_view type) {
  return type.empty() ? std::string("<no type>") : std::string(type);
}

void renumber_steps(transcript& t) {
  for (size_t i = 0; i < t.steps.size(); ++i) t.steps[i].index = static_cast<int>(i);
}

step* find_step_with_call(transcript& t, std::string_view call_id) {
  for (auto& s : t.steps) {
    for (const auto& c : s.tool_calls) {
      if (c.id == call_id) return &s;
    }
  }
  return nullptr;
}

step* call_index::owner(transcript& t, std::string_view id) const {
  auto it = where_.find(id);
  if (it == where_.end() || it->second.first >= t.steps.size()) return nullptr;
  return &t.steps[it->second.first];
}

const tool_call* call_index::call(const transcript& t, std::string_view id) const {
  auto it = where_.find(id);
  if (it == where_.end() || it->second.first >= t.steps.size()) return nullptr;
  const auto& calls = t.steps[it->second.first].tool_calls;
  return it->second.second < calls.size() ? &calls[it->second.second] : nullptr;
}

std::vector<std::string> commands(const transcript& t) {
  std::vector<std::string> out;
  for (const auto& s : t.steps) {
    for (const auto& c : s.tool_calls) {
      if (c.tool != "shell") continue;
      if (c.command) {
        out.push_back(*c.command);
      } else if (auto cmd = json_find<std::string>(c.input, "command")) {
        out.push_back(*cmd);
      }
    }
  }
  return out;
}

std::vector<std::string> tools_used(const transcript& t) {
  std::set<std::string> names;
  for (const auto& s : t.steps) {
    for (const auto& c : s.tool_calls) names.insert(c.tool);
  }
  return {names.begin(), names.end()};
}

std::optional<std::string> final_message(const transcript& t) { return t.final_message; }

int step_count(const transcript& t) {
  return static_cast<int>(std::count_if(t.steps.begin(), t.steps.end(),
                                        [](const step& s) { return s.source == "agent"; }));
}

}  // namespace transcripts
}  // namespace evalbox::harness
