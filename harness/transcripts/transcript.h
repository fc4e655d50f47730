// The normalized transcript (schema evalbox.transcript.v1): the types every adapter produces
// from its agent's native output, their JSON form, transcript.jsonl I/O, and the queries that
// grading asks of a transcript. docs/transcript.md documents every field.
//
// Lifecycle: an adapter parses the agent's native stream into a `transcript` after the agent
// exits; the runner writes it next to the raw stream (`runs/<id>/transcript.jsonl` beside
// `native/`); grading reads it back. Parsers never fail on garbage lines or unknown events:
// they count them (`malformed_lines`, `unknown_events`) so a newer client degrades, not breaks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "base/json.h"
#include "base/json_get.h"  // the accessor every event parser reads fields with

namespace evalbox::harness {
inline namespace transcripts {

inline constexpr std::string_view transcript_schema = "evalbox.transcript.v1";

// Observation output beyond this many bytes is cut (at a UTF-8 boundary) and ends with
// `truncation_marker(omitted)`: a transcript stays small enough to grade and diff even when an
// agent cats a log file.
inline constexpr size_t observation_output_cap = 64 * 1024;

// Token and cost counts. Unknown stays nullopt (JSON null), never 0: a client that does not
// report cost must not look free. `input_tokens` counts every input token including cached
// ones; `cached_input_tokens` is the part served from a prompt cache.
struct usage {
  std::optional<uint64_t> input_tokens;
  std::optional<uint64_t> output_tokens;
  std::optional<uint64_t> cached_input_tokens;
  std::optional<uint64_t> reasoning_tokens;
  std::optional<double> cost_usd;

  // Field-wise sum; a field stays null only where both sides are null.
  usage& operator+=(const usage& other);
  friend usage operator+(usage a, const usage& b) { return a += b; }
  // True when every field is null.
  [[nodiscard]] bool unknown() const;
  friend bool operator==(const usage&, const usage&) = default;
};

// One tool invocation by the agent. `tool` is normalized: "shell", "edit", "read", "write",
// "web_search", "todo", "mcp:<server>/<tool>", else the client's own name.
struct tool_call {
  std::string id;
  std::string tool;
  json input = json::object();         // the arguments as the client reported them
  std::optional<std::string> command;  // shell calls: the command line the agent asked for
  friend bool operator==(const tool_call&, const tool_call&) = default;
};

// What a tool call returned, paired to its call by `call_id`.
struct observation {
  std::string call_id;
  std::optional<int> exit_code;  // shell calls when known
  std::string output;            // capped at observation_output_cap, see truncate_output()
  bool is_error = false;
  friend bool operator==(const observation&, const observation&) = default;
};

// One turn of the conversation: what one party said or did.
struct step {
  int index = 0;                 // 0-based position in `transcript::steps`
  std::string source = "agent";  // "agent" | "user" | "system"
  std::string message;
  std::string reasoning;
  std::vector<tool_call> tool_calls;
  std::vector<observation> observations;
  std::optional<usage> metrics;  // this step's usage when the client reports it per step
  std::string timestamp;         // RFC 3339 when the client reports one, else empty
  friend bool operator==(const step&, const step&) = default;
};

struct transcript {
  std::string agent;       // "codex", "claude-code", "command", ...
  std::string session_id;  // the client's own thread or session id
  std::string model;
  std::vector<step> steps;
  usage total;
  std::optional<std::string> final_message;  // the agent's last answer, when it gave one
  // An upstream or client failure (HTTP 500, "interrupted: no final event"). Set => the run is
  // an execution error, not a task failure.
  std::optional<std::string> error;
  bool completed = false;                     // a final event (turn end, result) was seen
  std::optional<uint64_t> duration_ms;        // as reported by the client
  std::optional<int> num_turns;               // as reported by the client
  std::map<std::string, int> unknown_events;  // event type -> count, kept and counted
  int malformed_lines = 0;                    // lines that were not a JSON object
  friend bool operator==(const transcript&, const transcript&) = default;
};

// --- JSON form ------------------------------------------------------------------------------

json to_json(const usage& u);
json to_json(const tool_call& c);
json to_json(const observation& o);
json to_json(const step& s);  // one "step" line, with "type":"step"

result<usage> usage_from_json(const json& j);
result<step> step_from_json(const json& j);

// The whole transcript.jsonl text: a header line, one line per step, a summary line. Keys
// are sorted and lines compact, so equal transcripts serialize to equal bytes.
std::string to_jsonl(const transcript& t);
result<transcript> from_jsonl(std::string_view text);

// Replaces `path` atomically (temporary file, rename) without an fsync: a run's transcript is
// made durable with its run.json when the run is recorded (results_dir::record).
status write_transcript(const std::filesystem::path& path, const transcript& t);
result<transcript> read_transcript(const std::filesystem::path& path);

// --- Building (used by parsers) -------------------------------------------------------------

// Cuts `output` to observation_output_cap bytes at a UTF-8 boundary and appends the marker
// "\n[evalbox: output truncated, <n> bytes omitted]".
std::string truncate_output(std::string output);

// The normalized tool name for a client-specific one ("Bash" -> "shell",
// "mcp__srv__tool" -> "mcp:srv/tool", "TodoWrite" -> "todo", ...); unknown names pass through.
std::string normalize_tool_name(std::string_view client_tool);

// Calls `fn` with each non-blank line of `jsonl` that parses as a JSON object; every other
// non-blank line adds one to `malformed`. Bytes that are not UTF-8 in a line are read as
// U+FFFD (sanitize_json_text): the event is kept. A line longer than max_native_line_bytes
// (read_limits.h) is not parsed: it is malformed, and the first one sets `*too_long` (when
// given) to a message naming it, which parsers make the transcript's error — what it said
// (a command, the final answer) is unknown, so the run cannot be graded on it.
void for_each_jsonl_object(std::string_view jsonl, int& malformed,
                           const std::function<void(const json&)>& fn,
                           std::optional<std::string>* too_long = nullptr);

// Appends a step said by `source` ("agent", "user" or "system") with the next index.
step& append_step(transcript& t, std::string source);

// The key an event of a type the parser does not know is counted under in unknown_events:
// the type itself, or "<no type>" for an event without one.
std::string unknown_event_key(std::string_view type);

// Renumbers step indexes 0..n-1 (after a parser inserted or merged steps).
void renumber_steps(transcript& t);

// The step holding the call with this id, or nullptr.
step* find_step_with_call(transcript& t, std::string_view call_id);

// Where each tool call id is, for parsers that attach results to calls while they only append
// steps and calls: find_step_with_call per result scans every step, so a stream of n results
// took O(n^2) (100,000 unmatched results, 5 MB, ran for minutes).
class call_index {
 public:
  // Call `call` of step `step` has `id`. The first call with an id wins, as with a scan.
  void add(const std::string& id, size_t step, size_t call) { where_.try_emplace(id, step, call); }
  // The step holding the call with `id` in `t`, or nullptr.
  [[nodiscard]] step* owner(transcript& t, std::string_view id) const;
  // The call with `id` in `t`, or nullptr.
  [[nodiscard]] const tool_call* call(const transcript& t, std::string_view id) const;

 private:
  std::map<std::string, std::pair<size_t, size_t>, std::less<>> where_;
};

// --- Queries for grading --------------------------------------------------------------------

// Every shell command the agent issued, in order (tool "shell": `command`, else
// input["command"] when it is a string).
std::vector<std::string> commands(const transcript& t);
// Distinct normalized tool names used, sorted.
std::vector<std::string> tools_used(const transcript& t);
std::optional<std::string> final_message(const transcript& t);
// The number of agent steps.
int step_count(const transcript& t);

}  // namespace transcripts
}  // namespace evalbox::harness
