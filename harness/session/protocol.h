// The session protocol, evalbox.session.v1 (docs/sessions.md): newline-delimited JSON over a
// Unix stream socket. This file owns its grammar — the requests a client may send, checked
// field by field (an unknown field is an error, so that a typo is not silently ignored), and
// the lines the server sends back. Every byte a client sends is hostile input: parse_request is
// fuzzed (tests/fuzz/session_request_fuzz.cpp).
#pragma once

#include <cstdint>
#include <expected>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "base/json.h"

namespace evalbox::harness {
inline namespace sessions {

inline constexpr std::string_view protocol_name = "evalbox.session.v1";

// What a server accepts; sent in its greeting.
struct protocol_limits {
  uint64_t max_message_bytes = 64ull << 20;  // one line, base64 included
  uint64_t max_file_bytes = 32ull << 20;     // read_file and write_file
  uint64_t max_output_bytes = 16ull << 20;   // an exec's default output cap
  uint64_t max_output_cap = 256ull << 20;    // the largest max_output an exec may ask for
  int max_execs = 256;                       // execs running at once in one session
  int max_connections = 128;                 // clients connected at once to one session
  int max_fork = 256;                        // sessions one fork makes
};

json greeting(std::string_view session_id, const protocol_limits& limits);

enum class op_kind {
  ping,
  info,
  exec,
  input,
  resize,
  cancel,
  read_file,
  write_file,
  ls,
  snapshot,
  reset,
  fork,
  grade,
  stop,
};
std::string_view to_string(op_kind op) noexcept;

// A request that could not be read, as its error reply says it.
struct protocol_error {
  std::string kind;  // invalid_request, unknown_op, too_large
  std::string message;
};

struct request {
  json id;  // a string or an integer (null when the line had none)
  op_kind op = op_kind::ping;
  json body;  // the whole object
};

// One line (without its newline). On error, `id` is set when the line had a usable one.
std::expected<request, protocol_error> parse_request(std::string_view line, json* id = nullptr);

// The fields of each op, checked (types, ranges, no unknown field).
struct exec_params {
  std::vector<std::string> argv;
  std::string cwd;
  std::map<std::string, std::string> env;
  std::optional<std::string> stdin_data;  // decoded
  bool stdin_open = false;
  std::optional<uint64_t> timeout_ms;
  bool tty = false;
  uint16_t rows = 0, cols = 0;
  uint64_t max_output = 0;  // 0: the limits' default
  bool stream = true;
};
struct read_params {
  std::string path;
  uint64_t max_bytes = 0;
};
struct write_params {
  std::string path;
  std::string data;  // decoded
  uint32_t mode = 0644;
  bool append = false;
  bool parents = false;
};
struct input_params {
  std::string data;
  bool eof = false;
};
struct resize_params {
  uint16_t rows = 0, cols = 0;
};
struct fork_params {
  std::optional<std::string> from;
  int count = 1;
};

std::expected<exec_params, protocol_error> exec_of(const request& r, const protocol_limits& l);
std::expected<read_params, protocol_error> read_of(const request& r, const protocol_limits& l);
std::expected<write_params, protocol_error> write_of(const request& r, const protocol_limits& l);
std::expected<std::string, protocol_error> path_of(const request& r);  // ls
std::expected<input_params, protocol_error> input_of(const request& r);
std::expected<resize_params, protocol_error> resize_of(const request& r);
std::expected<std::string, protocol_error> snapshot_of(const request& r);  // its name
std::expected<std::optional<std::string>, protocol_error> reset_of(const request& r);
std::expected<fork_params, protocol_error> fork_of(const request& r, const protocol_limits& l);
// Ops without fields (ping, info, cancel, grade, stop): none may be given.
std::expected<void, protocol_error> no_fields(const request& r);

// A snapshot's name: [A-Za-z0-9._-]{1,64}, not "." or "..".
bool valid_snapshot_name(std::string_view name) noexcept;

// The lines a server sends, each ending in '\n'.
std::string ok_line(const json& id, json fields = json::object());
std::string error_line(const json& id, std::string_view kind, std::string_view message);
std::string error_line(const json& id, const error& e);
std::string frame_line(const json& id, std::string_view stream, std::string_view bytes);

// The protocol's error kind for an evalbox error.
std::string_view protocol_kind(error_kind kind) noexcept;

}  // namespace sessions
}  // namespace evalbox::harness
