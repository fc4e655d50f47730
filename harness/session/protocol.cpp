// The session protocol's grammar (protocol.h).
#include "harness/session/protocol.h"

#include <cmath>
#include <initializer_list>
#include <set>

#include "base/base64.h"
#include "base/json_get.h"

namespace evalbox::harness {
inline namespace sessions {
namespace {

using bad = std::unexpected<protocol_error>;

bad invalid(std::string message) {
  return bad(protocol_error{"invalid_request", std::move(message)});
}

struct op_name {
  std::string_view name;
  op_kind op;
};
constexpr op_name ops[] = {
    {"ping", op_kind::ping},
    {"info", op_kind::info},
    {"exec", op_kind::exec},
    {"input", op_kind::input},
    {"resize", op_kind::resize},
    {"cancel", op_kind::cancel},
    {"read_file", op_kind::read_file},
    {"write_file", op_kind::write_file},
    {"ls", op_kind::ls},
    {"snapshot", op_kind::snapshot},
    {"reset", op_kind::reset},
    {"fork", op_kind::fork},
    {"grade", op_kind::grade},
    {"stop", op_kind::stop},
};

// Every field of the request is one `op` takes (besides id and op).
std::expected<void, protocol_error> only(const request& r,
                                         std::initializer_list<std::string_view> allowed) {
  for (const auto& [key, value] : r.body.items()) {
    if (key == "id" || key == "op") continue;
    bool known = false;
    for (std::string_view a : allowed) known = known || key == a;
    if (!known) return invalid(fmt::format("{}: unknown field '{}'", to_string(r.op), key));
  }
  return {};
}

// The field as a T, or its default when absent or null; a field of another type is an error
// naming it.
template <class T>
std::expected<std::optional<T>, protocol_error> field(const request& r, const char* key) {
  auto v = json_get_optional<T>(r.body, key);
  if (!v) return invalid(fmt::format("{}: {}", to_string(r.op), v.error().message));
  return *v;
}

std::expected<std::string, protocol_error> required_string(const request& r, const char* key) {
  auto v = field<std::string>(r, key);
  if (!v) return std::unexpected(v.error());
  if (!*v || (*v)->empty())
    return invalid(fmt::format("{}: '{}' is required (a non-empty string)", to_string(r.op), key));
  return **v;
}

// Base64 bytes at `key`, at most `max` once decoded.
std::expected<std::optional<std::string>, protocol_error> bytes_field(const request& r,
                                                                      const char* key,
                                                                      uint64_t max) {
  auto text = field<std::string>(r, key);
  if (!text) return std::unexpected(text.error());
  if (!*text) return std::optional<std::string>{};
  if ((*text)->size() / 4 * 3 > max + 3)
    return bad(protocol_error{
        "too_large", fmt::format("{}: '{}' is larger than {} bytes", to_string(r.op), key, max)});
  auto decoded = base64_decode(**text);
  if (!decoded)
    return invalid(fmt::format("{}: '{}' is not base64 (RFC 4648, padded)", to_string(r.op), key));
  if (decoded->size() > max)
    return bad(protocol_error{
        "too_large", fmt::format("{}: '{}' is larger than {} bytes", to_string(r.op), key, max)});
  return std::optional<std::string>(std::move(*decoded));
}

std::expected<uint16_t, protocol_error> dimension(const request& r, const char* key) {
  auto v = field<uint32_t>(r, key);
  if (!v) return std::unexpected(v.error());
  if (!*v) return uint16_t{0};
  if (**v > 4096)
    return invalid(fmt::format("{}: '{}' must be at most 4096", to_string(r.op), key));
  return static_cast<uint16_t>(**v);
}

}  // namespace

json greeting(std::string_view session_id, const protocol_limits& l) {
  return {{"protocol", protocol_name},
          {"session", session_id},
          {"limits",
           {{"max_message_bytes", l.max_message_bytes},
            {"max_file_bytes", l.max_file_bytes},
            {"max_output_bytes", l.max_output_bytes},
            {"max_execs", l.max_execs}}}};
}

std::string_view to_string(op_kind op) noexcept {
  for (const auto& o : ops)
    if (o.op == op) return o.name;
  return "?";
}

std::expected<request, protocol_error> parse_request(std::string_view line, json* id_out) {
  auto j = parse_json(line, "the request");
  if (!j) return invalid("the line is not JSON");
  if (!j->is_object()) return invalid("a request is a JSON object");
  request r;
  const json& id = json_member(*j, "id");
  if (id.is_string() || id.is_number_integer() || id.is_number_unsigned()) {
    r.id = id;
    if (id_out) *id_out = id;
  } else if (!id.is_null()) {
    return invalid("'id' must be a string or an integer");
  }
  const json& op = json_member(*j, "op");
  if (!op.is_string()) return invalid("'op' is required (a string)");
  const std::string name = op.get<std::string>();
  bool found = false;
  for (const auto& o : ops)
    if (o.name == name) {
      r.op = o.op;
      found = true;
    }
  if (!found)
    return bad(protocol_error{"unknown_op", fmt::format("unknown op '{}'", name.substr(0, 64))});
  r.body = std::move(*j);
  return r;
}

std::expected<exec_params, protocol_error> exec_of(const request& r, const protocol_limits& l) {
  if (auto o = only(r, {"argv", "cwd", "env", "stdin", "stdin_open", "timeout", "tty", "rows",
                        "cols", "max_output", "stream"});
      !o)
    return std::unexpected(o.error());
  exec_params p;
  auto argv = field<std::vector<std::string>>(r, "argv");
  if (!argv) return std::unexpected(argv.error());
  if (!*argv || (*argv)->empty() || (*argv)->front().empty())
    return invalid("exec: 'argv' is required (a non-empty list of strings)");
  p.argv = std::move(**argv);
  for (const auto& a : p.argv)
    if (a.find('\0') != std::string::npos) return invalid("exec: a NUL byte in 'argv'");
  auto cwd = field<std::string>(r, "cwd");
  if (!cwd) return std::unexpected(cwd.error());
  p.cwd = cwd->value_or("");
  auto env = field<std::map<std::string, std::string>>(r, "env");
  if (!env) return std::unexpected(env.error());
  if (*env) p.env = std::move(**env);
  for (const auto& [k, v] : p.env)
    if (k.empty() || k.find('=') != std::string::npos || k.find('\0') != std::string::npos ||
        v.find('\0') != std::string::npos)
      return invalid(fmt::format("exec: environment variable '{}' is not a valid name", k));
  auto in = bytes_field(r, "stdin", l.max_file_bytes);
  if (!in) return std::unexpected(in.error());
  p.stdin_data = std::move(*in);
  auto open = field<bool>(r, "stdin_open");
  if (!open) return std::unexpected(open.error());
  p.stdin_open = open->value_or(false);
  auto timeout = field<double>(r, "timeout");
  if (!timeout) return std::unexpected(timeout.error());
  if (*timeout) {
    const double s = **timeout;
    if (!std::isfinite(s) || s <= 0 || s > 7 * 24 * 3600.0)
      return invalid("exec: 'timeout' is seconds, more than 0 and at most a week");
    p.timeout_ms = static_cast<uint64_t>(std::ceil(s * 1000));
  }
  auto tty = field<bool>(r, "tty");
  if (!tty) return std::unexpected(tty.error());
  p.tty = tty->value_or(false);
  auto rows = dimension(r, "rows");
  if (!rows) return std::unexpected(rows.error());
  auto cols = dimension(r, "cols");
  if (!cols) return std::unexpected(cols.error());
  p.rows = *rows;
  p.cols = *cols;
  auto max = field<uint64_t>(r, "max_output");
  if (!max) return std::unexpected(max.error());
  p.max_output = max->value_or(l.max_output_bytes);
  if (p.max_output == 0 || p.max_output > l.max_output_cap)
    return invalid(
        fmt::format("exec: 'max_output' must be between 1 and {} bytes", l.max_output_cap));
  auto stream = field<bool>(r, "stream");
  if (!stream) return std::unexpected(stream.error());
  p.stream = stream->value_or(true);
  if (p.tty && !p.stream)
    return invalid("exec: a terminal's output is streamed ('tty' with 'stream': false)");
  return p;
}

std::expected<read_params, protocol_error> read_of(const request& r, const protocol_limits& l) {
  if (auto o = only(r, {"path", "max_bytes"}); !o) return std::unexpected(o.error());
  read_params p;
  auto path = required_string(r, "path");
  if (!path) return std::unexpected(path.error());
  p.path = std::move(*path);
  auto max = field<uint64_t>(r, "max_bytes");
  if (!max) return std::unexpected(max.error());
  p.max_bytes = std::min(max->value_or(l.max_file_bytes), l.max_file_bytes);
  return p;
}

std::expected<write_params, protocol_error> write_of(const request& r, const protocol_limits& l) {
  if (auto o = only(r, {"path", "data", "mode", "append", "parents"}); !o)
    return std::unexpected(o.error());
  write_params p;
  auto path = required_string(r, "path");
  if (!path) return std::unexpected(path.error());
  p.path = std::move(*path);
  auto data = bytes_field(r, "data", l.max_file_bytes);
  if (!data) return std::unexpected(data.error());
  if (!*data) return invalid("write_file: 'data' is required (base64)");
  p.data = std::move(**data);
  auto mode = field<uint32_t>(r, "mode");
  if (!mode) return std::unexpected(mode.error());
  p.mode = mode->value_or(0644);
  if (p.mode > 07777) return invalid("write_file: 'mode' is permission bits (at most 0o7777)");
  auto append = field<bool>(r, "append");
  if (!append) return std::unexpected(append.error());
  p.append = append->value_or(false);
  auto parents = field<bool>(r, "parents");
  if (!parents) return std::unexpected(parents.error());
  p.parents = parents->value_or(false);
  return p;
}

std::expected<std::string, protocol_error> path_of(const request& r) {
  if (auto o = only(r, {"path"}); !o) return std::unexpected(o.error());
  return required_string(r, "path");
}

std::expected<input_params, protocol_error> input_of(const request& r) {
  if (auto o = only(r, {"data", "eof"}); !o) return std::unexpected(o.error());
  input_params p;
  auto data = bytes_field(r, "data", 16u << 20);
  if (!data) return std::unexpected(data.error());
  p.data = data->value_or("");
  auto eof = field<bool>(r, "eof");
  if (!eof) return std::unexpected(eof.error());
  p.eof = eof->value_or(false);
  return p;
}

std::expected<resize_params, protocol_error> resize_of(const request& r) {
  if (auto o = only(r, {"rows", "cols"}); !o) return std::unexpected(o.error());
  auto rows = dimension(r, "rows");
  if (!rows) return std::unexpected(rows.error());
  auto cols = dimension(r, "cols");
  if (!cols) return std::unexpected(cols.error());
  if (*rows == 0 || *cols == 0) return invalid("resize: 'rows' and 'cols' are required");
  return resize_params{*rows, *cols};
}

bool valid_snapshot_name(std::string_view name) noexcept {
  if (name.empty() || name.size() > 64 || name == "." || name == "..") return false;
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-')
      return false;
  return true;
}

std::expected<std::string, protocol_error> snapshot_of(const request& r) {
  if (auto o = only(r, {"name"}); !o) return std::unexpected(o.error());
  auto name = required_string(r, "name");
  if (!name) return std::unexpected(name.error());
  if (!valid_snapshot_name(*name))
    return invalid("snapshot: 'name' is 1 to 64 of A-Z a-z 0-9 . _ -");
  return name;
}

std::expected<std::optional<std::string>, protocol_error> reset_of(const request& r) {
  if (auto o = only(r, {"to"}); !o) return std::unexpected(o.error());
  auto to = field<std::string>(r, "to");
  if (!to) return std::unexpected(to.error());
  if (*to && !valid_snapshot_name(**to))
    return invalid("reset: 'to' is a snapshot's name (1 to 64 of A-Z a-z 0-9 . _ -)");
  return *to;
}

std::expected<fork_params, protocol_error> fork_of(const request& r, const protocol_limits& l) {
  if (auto o = only(r, {"from", "count"}); !o) return std::unexpected(o.error());
  fork_params p;
  auto from = field<std::string>(r, "from");
  if (!from) return std::unexpected(from.error());
  if (*from && !valid_snapshot_name(**from))
    return invalid("fork: 'from' is a snapshot's name (1 to 64 of A-Z a-z 0-9 . _ -)");
  p.from = *from;
  auto count = field<int>(r, "count");
  if (!count) return std::unexpected(count.error());
  p.count = count->value_or(1);
  if (p.count < 1 || p.count > l.max_fork)
    return invalid(fmt::format("fork: 'count' must be between 1 and {}", l.max_fork));
  return p;
}

std::expected<void, protocol_error> no_fields(const request& r) { return only(r, {}); }

std::string ok_line(const json& id, json fields) {
  fields["id"] = id;
  fields["ok"] = true;
  return fields.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

std::string error_line(const json& id, std::string_view kind, std::string_view message) {
  json j{{"id", id}, {"ok", false}, {"error", {{"kind", kind}, {"message", message}}}};
  return j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

std::string error_line(const json& id, const error& e) {
  return error_line(id, protocol_kind(e.kind), e.message);
}

std::string frame_line(const json& id, std::string_view stream, std::string_view bytes) {
  json j{{"id", id}, {"stream", stream}, {"data", base64_encode(bytes)}};
  return j.dump() + "\n";
}

std::string_view protocol_kind(error_kind kind) noexcept {
  switch (kind) {
    case error_kind::invalid_argument:
      return "invalid_request";
    case error_kind::not_found:
      return "not_found";
    case error_kind::permission:
      return "permission";
    case error_kind::busy:
      return "busy";
    case error_kind::unsupported:
      return "unsupported";
    case error_kind::cancelled:
    case error_kind::expired:
      return "ended";
    case error_kind::io:
    case error_kind::internal:
      break;
  }
  return "internal";
}

}  // namespace sessions
}  // namespace evalbox::harness
