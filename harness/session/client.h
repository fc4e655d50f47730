// A client of the session protocol (protocol.h), for the command line's `evalbox session ...`:
// one connection, its greeting checked, one request at a time, an exec's frames handed to the
// caller as they come while the caller's input goes the other way.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "base/json.h"
#include "base/unique_fd.h"

namespace evalbox::harness {
inline namespace sessions {

// A reply's error, with the protocol's kind ("not_found") beside evalbox's.
struct client_error {
  std::string kind;
  std::string message;
};

class client {
 public:
  // Connects to the socket and reads the greeting (another protocol is an error).
  static result<client> connect(const std::filesystem::path& socket);

  [[nodiscard]] const json& greeting() const noexcept { return greeting_; }

  // Sends `request` (an object with "op"; the id is set here) and returns the final reply:
  // the reply object when ok, else its error.
  std::expected<json, client_error> call(json request);

  // An exec: `request` is sent; each frame goes to `on_frame(stream, bytes)`. While it runs,
  // `input_fd` (when >= 0) is read and sent as input (its end of file as eof), and `poll_hook`
  // is called at least every 100 ms (a resize, a cancel: it may call send()). Returns the
  // final reply, as call().
  std::expected<json, client_error> exec(
      json request, const std::function<void(std::string_view, std::string_view)>& on_frame,
      int input_fd = -1, const std::function<void()>& poll_hook = {});

  // Sends one message; while an exec runs (input, resize, cancel from `poll_hook`) it is
  // queued and goes out from the exec's loop.
  bool send(const json& message);

 private:
  client() = default;
  std::expected<json, client_error> read_reply(const json& id);
  bool read_line(std::string& line, bool wait);

  unique_fd fd_;
  std::string buf_;
  std::string outbox_;  // lines queued during an exec
  bool in_exec_ = false;
  json greeting_;
  uint64_t next_id_ = 0;
};

// What a copy into or out of a session did: files copied, and what it left out (links,
// special files: a session's files are regular files and directories to this).
struct copied {
  int files = 0;
  std::vector<std::string> left_out;
};
// A local file or directory into the session at `to` (directories made as needed; modes
// kept). Each file at most the session's file limit.
status copy_into_session(client& c, const std::filesystem::path& from, const std::string& to,
                         copied& out);
// A session's file or directory out to `to` (made as needed).
status copy_out_of_session(client& c, const std::string& from, const std::filesystem::path& to,
                           copied& out);

// How a reply's error kind reads as an evalbox error kind (for exit statuses).
error_kind error_kind_of(std::string_view protocol_kind) noexcept;

}  // namespace sessions
}  // namespace evalbox::harness
