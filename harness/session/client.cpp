// The session protocol's client (client.h).
#include "harness/session/client.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

#include "base/base64.h"
#include "base/fs.h"
#include "base/json_get.h"
#include "harness/session/protocol.h"
#include "harness/session/unix_address.h"

namespace evalbox::harness {
inline namespace sessions {
namespace fs = std::filesystem;

namespace {
constexpr size_t max_line = 80u << 20;  // the server's limit, and base64's growth

bool send_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}
}  // namespace

result<client> client::connect(const std::filesystem::path& socket) {
  const std::string p = socket.string();
  auto addr = unix_address_of(socket);
  if (!addr && addr.error().kind == error_kind::not_found)
    return make_error(error_kind::not_found, "the session is not running (nothing answers at {})",
                      p);
  if (!addr) return std::unexpected(std::move(addr.error()));
  client c;
  c.fd_.reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!c.fd_) return sys_error(errno, "socket");
  if (::connect(c.fd_.get(), addr->get(), addr->size()) != 0) {
    const int err = errno;
    if (err == ENOENT || err == ECONNREFUSED)
      return make_error(error_kind::not_found, "the session is not running (nothing answers at {})",
                        p);
    return sys_error(err, fmt::format("connect {}", p));
  }
  std::string line;
  if (!c.read_line(line, true))
    return make_error(error_kind::io, "the session closed the connection before greeting");
  auto g = parse_json(line, "the session's greeting");
  if (!g || json_value_or(*g, "protocol", std::string()) != protocol_name) {
    // A refusal (busy) comes as an error line instead of a greeting.
    if (g && json_member(*g, "error").is_object())
      return make_error(error_kind::busy, "{}",
                        json_value_or(json_member(*g, "error"), "message", std::string("refused")));
    return make_error(error_kind::invalid_argument, "{} does not speak {}", p, protocol_name);
  }
  c.greeting_ = std::move(*g);
  return c;
}

bool client::read_line(std::string& line, bool wait) {
  for (;;) {
    const size_t nl = buf_.find('\n');
    if (nl != std::string::npos) {
      line = buf_.substr(0, nl);
      buf_.erase(0, nl + 1);
      return true;
    }
    if (buf_.size() > max_line) return false;
    char chunk[65536];
    const ssize_t n = ::recv(fd_.get(), chunk, sizeof chunk, wait ? 0 : MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return false;
    if (n <= 0) return false;
    buf_.append(chunk, static_cast<size_t>(n));
  }
}

bool client::send(const json& message) {
  if (!in_exec_) return send_all(fd_.get(), message.dump() + "\n");
  // During an exec the lines go out from the exec's loop, which reads while it writes: a
  // blocking send here could wait on a server that waits on us to read its output.
  outbox_ += message.dump();
  outbox_ += '\n';
  return true;
}

std::expected<json, client_error> client::read_reply(const json& id) {
  std::string line;
  if (!read_line(line, true))
    return std::unexpected(client_error{"ended", "the session closed the connection"});
  auto j = parse_json(line, "the session's reply");
  if (!j || !j->is_object())
    return std::unexpected(client_error{"internal", "a reply that is not JSON"});
  if (json_member(*j, "id") != id && !json_member(*j, "id").is_null())
    return std::unexpected(client_error{"internal", "a reply to another request"});
  if (json_value_or(*j, "ok", false)) return std::move(*j);
  const json& e = json_member(*j, "error");
  return std::unexpected(client_error{json_value_or(e, "kind", std::string("internal")),
                                      json_value_or(e, "message", std::string("failed"))});
}

std::expected<json, client_error> client::call(json request) {
  request["id"] = ++next_id_;
  if (!send(request))
    return std::unexpected(client_error{"ended", "the session closed the connection"});
  return read_reply(request["id"]);
}

std::expected<json, client_error> client::exec(
    json request, const std::function<void(std::string_view, std::string_view)>& on_frame,
    int input_fd, const std::function<void()>& poll_hook) {
  request["id"] = ++next_id_;
  const json id = request["id"];
  // Everything sent while the exec runs is queued (send()) and written as the socket takes
  // it; more input is read only when the queue is short, so memory stays bounded.
  constexpr size_t outbox_high = 256u << 10;
  in_exec_ = true;
  struct leave_exec {
    client& c;
    ~leave_exec() {
      c.in_exec_ = false;
      c.outbox_.clear();
    }
  } leave{*this};
  send(request);
  const auto ended = [] {
    return std::unexpected(client_error{"ended", "the session closed the connection"});
  };
  for (;;) {
    while (!outbox_.empty()) {
      const ssize_t n =
          ::send(fd_.get(), outbox_.data(), outbox_.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      if (n <= 0) return ended();
      outbox_.erase(0, static_cast<size_t>(n));
    }
    const bool want_input = input_fd >= 0 && outbox_.size() < outbox_high;
    pollfd fds[2] = {{fd_.get(), static_cast<short>(POLLIN | (outbox_.empty() ? 0 : POLLOUT)), 0},
                     {want_input ? input_fd : -1, POLLIN, 0}};
    const size_t pending = buf_.find('\n') != std::string::npos ? 1 : 0;
    if (!pending && ::poll(fds, 2, 100) < 0 && errno != EINTR)
      return std::unexpected(client_error{"internal", std::strerror(errno)});
    if (poll_hook) poll_hook();
    if (want_input && (fds[1].revents & (POLLIN | POLLHUP | POLLERR))) {
      char chunk[65536];
      const ssize_t n = ::read(input_fd, chunk, sizeof chunk);
      if (n > 0) {
        send({{"op", "input"},
              {"id", id},
              {"data", base64_encode(std::string_view(chunk, static_cast<size_t>(n)))}});
      } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
        send({{"op", "input"}, {"id", id}, {"data", ""}, {"eof", true}});
        input_fd = -1;
      }
    }
    if (!pending && !(fds[0].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    std::string line;
    while (read_line(line, false)) {
      auto j = parse_json(line, "the session's reply");
      if (!j || !j->is_object())
        return std::unexpected(client_error{"internal", "a reply that is not JSON"});
      if (j->contains("stream")) {
        auto bytes = base64_decode(json_value_or(*j, "data", std::string()));
        if (bytes) on_frame(json_value_or(*j, "stream", std::string("stdout")), *bytes);
        continue;
      }
      if (json_member(*j, "id") != id) continue;  // an answer to an input that was refused
      if (json_value_or(*j, "ok", false)) return std::move(*j);
      const json& e = json_member(*j, "error");
      return std::unexpected(client_error{json_value_or(e, "kind", std::string("internal")),
                                          json_value_or(e, "message", std::string("failed"))});
    }
    if (buf_.size() > max_line)
      return std::unexpected(client_error{"internal", "a reply too long"});
    // read_line returned false: nothing complete yet, or the connection ended.
    char probe;
    if (::recv(fd_.get(), &probe, 1, MSG_PEEK | MSG_DONTWAIT) == 0) return ended();
  }
}

error_kind error_kind_of(std::string_view k) noexcept {
  if (k == "invalid_request" || k == "unknown_op" || k == "too_large")
    return error_kind::invalid_argument;
  if (k == "not_found") return error_kind::not_found;
  if (k == "permission") return error_kind::permission;
  if (k == "busy") return error_kind::busy;
  if (k == "unsupported") return error_kind::unsupported;
  if (k == "ended") return error_kind::cancelled;
  return error_kind::internal;
}

// Copies a local file or directory into the session (directories made as needed); links and
// special files are left out and said. The count of files copied.
status copy_into_session(client& c, const fs::path& from, const std::string& to, copied& out) {
  std::error_code ec;
  const auto st = fs::symlink_status(from, ec);
  if (ec) return make_error(error_kind::not_found, "{}: {}", from.string(), ec.message());
  if (fs::is_directory(st)) {
    for (const auto& e : fs::directory_iterator(from, ec))
      EB_TRY(copy_into_session(c, e.path(), to + "/" + e.path().filename().string(), out));
    if (ec) return make_error(error_kind::io, "{}: {}", from.string(), ec.message());
    return {};
  }
  if (!fs::is_regular_file(st)) {
    out.left_out.push_back(from.string());
    return {};
  }
  const std::string data = EB_TRY(read_file(from, 32u << 20));
  const auto mode = static_cast<uint32_t>(st.permissions()) & 0777;
  auto r = c.call({{"op", "write_file"},
                   {"path", to},
                   {"data", base64_encode(data)},
                   {"mode", mode},
                   {"parents", true}});
  if (!r) return make_error(error_kind_of(r.error().kind), "{}", r.error().message);
  ++out.files;
  return {};
}

namespace {

// `from` (of type `type`, as its directory's listing says) out to `to`.
status copy_out(client& c, const std::string& from, const std::string& type, const fs::path& to,
                copied& out) {
  if (type == "file") {
    auto r = c.call({{"op", "read_file"}, {"path", from}});
    if (!r) return make_error(error_kind_of(r.error().kind), "{}", r.error().message);
    auto bytes = EB_TRY(base64_decode(json_value_or(*r, "data", std::string())));
    EB_TRY(write_file(to, bytes, json_value_or(*r, "mode", 0644u) & 0777));
    ++out.files;
    return {};
  }
  if (type != "dir") {
    out.left_out.push_back(from);
    return {};
  }
  auto listed = c.call({{"op", "ls"}, {"path", from}});
  if (!listed) return make_error(error_kind_of(listed.error().kind), "{}", listed.error().message);
  EB_TRY(make_dirs(to, 0755));
  for (const auto& e : json_member(*listed, "entries")) {
    const std::string name = json_value_or(e, "name", std::string());
    if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos)
      continue;
    EB_TRY(copy_out(c, from + "/" + name, json_value_or(e, "type", std::string()), to / name, out));
  }
  return {};
}

}  // namespace

status copy_out_of_session(client& c, const std::string& from, const fs::path& to, copied& out) {
  // What `from` is: its entry in its directory's listing (a directory's own listing would look
  // like a file's).
  std::string trimmed = from;
  while (trimmed.size() > 1 && trimmed.back() == '/') trimmed.pop_back();
  const size_t cut = trimmed.rfind('/');
  const std::string name = cut == std::string::npos ? trimmed : trimmed.substr(cut + 1);
  const std::string parent = cut == std::string::npos ? "."
                             : cut == 0               ? "/"
                                                      : trimmed.substr(0, cut);
  if (trimmed == "/" || name == "." || name == "..") return copy_out(c, trimmed, "dir", to, out);
  auto listed = c.call({{"op", "ls"}, {"path", parent}});
  if (!listed) return make_error(error_kind_of(listed.error().kind), "{}", listed.error().message);
  for (const auto& e : json_member(*listed, "entries"))
    if (json_value_or(e, "name", std::string()) == name)
      return copy_out(c, trimmed, json_value_or(e, "type", std::string()), to, out);
  return make_error(error_kind::not_found, "{}: no such file or directory", from);
}

}  // namespace sessions
}  // namespace evalbox::harness
