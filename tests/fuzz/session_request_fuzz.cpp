// Fuzzes the session protocol's reader (harness/session/protocol.h): every byte a client sends
// on a session's socket is hostile. Any line yields a request or an error of a known kind; a
// request goes through the field reader of every op, whose results stay within the limits; and
// every reply a server would make to it is one valid JSON line that echoes the request's id.
#include <string_view>

#include "harness/session/protocol.h"
#include "tests/fuzz/fuzz_support.h"

namespace {

using namespace evalbox;
using namespace evalbox::harness;

bool known_kind(std::string_view kind) {
  return kind == "invalid_request" || kind == "unknown_op" || kind == "too_large";
}

// A reply: one line, ending in its only newline, that reads back as JSON with the id.
void check_line(const std::string& line, const json& id) {
  fuzz::check(!line.empty() && line.back() == '\n', "a reply ends in a newline");
  fuzz::check(line.find('\n') == line.size() - 1, "a reply is one line");
  auto j = parse_json(line, "reply");
  fuzz::check(static_cast<bool>(j), "a reply is JSON");
  fuzz::check(j->is_object() && j->contains("id") && (*j)["id"] == id, "a reply echoes the id");
}

// What a field reader refused is answered with an error line.
template <class T>
void answer(const std::expected<T, protocol_error>& e, const json& id) {
  if (e) return;
  fuzz::check(known_kind(e.error().kind), "a refusal has a protocol kind");
  fuzz::check(!e.error().message.empty(), "a refusal says why");
  check_line(error_line(id, e.error().kind, e.error().message), id);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view line = fuzz::as_text(data, size);
  const protocol_limits limits;
  json id;
  auto r = parse_request(line, &id);
  if (!r) {
    fuzz::check(known_kind(r.error().kind), "a refusal has a protocol kind");
    fuzz::check(id.is_null() || id.is_string() || id.is_number_integer(),
                "only a usable id is kept");
    check_line(error_line(id, r.error().kind, r.error().message), id);
    return 0;
  }
  fuzz::check(r->id.is_null() || r->id.is_string() || r->id.is_number_integer(),
              "an id is a string or an integer");
  fuzz::check(r->body.is_object(), "a request is an object");

  // Every op's reader on every request, as if the op were any of them: none may crash.
  auto exec = exec_of(*r, limits);
  answer(exec, r->id);
  if (exec) {
    fuzz::check(!exec->argv.empty() && !exec->argv.front().empty(), "exec: a program");
    fuzz::check(exec->max_output >= 1 && exec->max_output <= limits.max_output_cap,
                "exec: max_output within the cap");
    fuzz::check(!exec->stdin_data || exec->stdin_data->size() <= limits.max_file_bytes,
                "exec: stdin within the file limit");
    fuzz::check(exec->rows <= 4096 && exec->cols <= 4096, "exec: a terminal's size");
    fuzz::check(!exec->timeout_ms || *exec->timeout_ms >= 1, "exec: a positive timeout");
    fuzz::check(!(exec->tty && !exec->stream), "exec: a terminal is streamed");
    for (const auto& [k, v] : exec->env)
      fuzz::check(!k.empty() && k.find('=') == std::string::npos, "exec: a variable's name");
  }
  auto read = read_of(*r, limits);
  answer(read, r->id);
  if (read) {
    fuzz::check(!read->path.empty(), "read_file: a path");
    fuzz::check(read->max_bytes <= limits.max_file_bytes, "read_file: within the file limit");
  }
  auto write = write_of(*r, limits);
  answer(write, r->id);
  if (write) {
    fuzz::check(!write->path.empty(), "write_file: a path");
    fuzz::check(write->data.size() <= limits.max_file_bytes, "write_file: within the file limit");
    fuzz::check(write->mode <= 07777, "write_file: permission bits");
  }
  auto path = path_of(*r);
  answer(path, r->id);
  if (path) fuzz::check(!path->empty(), "ls: a path");
  answer(input_of(*r), r->id);
  auto resize = resize_of(*r);
  answer(resize, r->id);
  if (resize)
    fuzz::check(
        resize->rows >= 1 && resize->rows <= 4096 && resize->cols >= 1 && resize->cols <= 4096,
        "resize: a terminal's size");
  auto snapshot = snapshot_of(*r);
  answer(snapshot, r->id);
  if (snapshot) fuzz::check(valid_snapshot_name(*snapshot), "snapshot: a valid name");
  auto reset = reset_of(*r);
  answer(reset, r->id);
  if (reset && *reset) fuzz::check(valid_snapshot_name(**reset), "reset: a valid name");
  auto fork = fork_of(*r, limits);
  answer(fork, r->id);
  if (fork) {
    fuzz::check(fork->count >= 1 && fork->count <= limits.max_fork, "fork: a count in range");
    fuzz::check(!fork->from || valid_snapshot_name(*fork->from), "fork: a valid name");
  }
  answer(no_fields(*r), r->id);

  // The lines a server sends for it: a reply with the request's own fields (whatever strings
  // they hold), and a frame of the raw line.
  check_line(ok_line(r->id, r->body), r->id);
  check_line(frame_line(r->id, "stdout", line), r->id);
  return 0;
}
