// The session server (server.h): the watch over sessions, the connections, and each op.
#include "harness/session/server.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <set>
#include <thread>

#include "base/base64.h"
#include "base/fs.h"
#include "base/json_get.h"
#include "base/log.h"
#include "base/units.h"
#include "harness/session/store.h"
#include "harness/session/unix_address.h"

namespace evalbox::harness {
inline namespace sessions {
namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;

namespace {

// Everything written to a client goes through here: a client that went away is not an error
// of the server's (MSG_NOSIGNAL: no SIGPIPE).
bool send_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) {
      pollfd p{fd, POLLOUT, 0};
      if (::poll(&p, 1, 30000) <= 0) return false;  // a client that reads nothing for 30 s
      continue;
    }
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// The lines a client sends, bounded.
class connection {
 public:
  connection(unique_fd fd, uint64_t max_line) : fd_(std::move(fd)), max_(max_line) {}
  [[nodiscard]] int fd() const noexcept { return fd_.get(); }
  bool send(std::string_view line) {
    if (gone_) return false;
    if (!send_all(fd_.get(), line)) gone_ = true;
    return !gone_;
  }
  [[nodiscard]] bool gone() const noexcept { return gone_; }

  // The next complete line already read, if any.
  std::optional<std::string> take_line() {
    const size_t nl = buf_.find('\n');
    if (nl == std::string::npos) return std::nullopt;
    std::string line = buf_.substr(0, nl);
    buf_.erase(0, nl + 1);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    return line;
  }
  // Reads what is there (`wait`: blocks until something is). False at end of file, on an
  // error, or past the line limit (then an error line was sent).
  bool fill(bool wait) {
    char chunk[65536];
    const ssize_t n = ::recv(fd_.get(), chunk, sizeof chunk, wait ? 0 : MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return true;
    if (n <= 0) {
      gone_ = true;
      return false;
    }
    buf_.append(chunk, static_cast<size_t>(n));
    if (buf_.find('\n') == std::string::npos && buf_.size() > max_) {
      send(
          error_line(nullptr, "too_large", fmt::format("a message is longer than {} bytes", max_)));
      gone_ = true;
      return false;
    }
    return true;
  }
  // The next line, waiting for it. None at end of file.
  std::optional<std::string> next_line() {
    for (;;) {
      if (auto l = take_line()) return l;
      if (!fill(true)) return std::nullopt;
    }
  }

 private:
  unique_fd fd_;
  uint64_t max_;
  std::string buf_;
  bool gone_ = false;
};

unique_fd make_eventfd() { return unique_fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)); }
void raise_event(int fd) {
  const uint64_t one = 1;
  (void)!::write(fd, &one, sizeof one);
}

// A listening Unix socket at `path`, 0600.
result<unique_fd> listen_at(const fs::path& path) {
  const std::string p = path.string();
  auto addr = EB_TRY(unix_address_of(path));
  unique_fd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd) return sys_error(errno, "socket");
  ::unlink(p.c_str());
  // No umask around bind: it is the process's, and other threads make directories meanwhile
  // (a run's uppers made 0600 cannot be entered). The directory (0700) keeps others out until
  // the chmod below.
  if (::bind(fd.get(), addr.get(), addr.size()) != 0)
    return sys_error(errno, fmt::format("bind {}", p));
  if (::chmod(p.c_str(), 0600) != 0) return sys_error(errno, fmt::format("chmod {}", p));
  if (::listen(fd.get(), 128) != 0) return sys_error(errno, fmt::format("listen {}", p));
  return fd;
}

// The client is the server's own user, root, or one of `also`.
bool trusted_peer(int fd, const std::vector<uid_t>& also) {
  ucred cred{};
  socklen_t len = sizeof cred;
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return false;
  if (cred.uid == ::geteuid() || cred.uid == 0) return true;
  return std::find(also.begin(), also.end(), cred.uid) != also.end();
}

struct pipe_pair {
  unique_fd read, write;
};
result<pipe_pair> make_pipe() {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return sys_error(errno, "pipe2");
  return pipe_pair{unique_fd(p[0]), unique_fd(p[1])};
}

// When `pid` started (field 22 of /proc/<pid>/stat, clock ticks since boot): a pid and its
// start time name one process even across pid reuse. None when there is no such process.
std::optional<uint64_t> started_at(pid_t pid) {
  auto text = read_file(fmt::format("/proc/{}/stat", pid), 4096);
  if (!text) return std::nullopt;
  const size_t paren = text->rfind(')');  // the command name may hold spaces and parentheses
  if (paren == std::string::npos) return std::nullopt;
  // `pos` is at the space before field `field` (the state, field 3, follows the name).
  size_t field = 3, pos = paren + 1;
  while (field < 22 && pos < text->size()) {
    pos = text->find(' ', pos + 1);
    if (pos == std::string::npos) return std::nullopt;
    ++field;
  }
  return std::strtoull(text->c_str() + pos + 1, nullptr, 10);
}

}  // namespace

// One hosted session.
struct hosted_session {
  std::shared_ptr<session> s;
  locked_fd lock;
  unique_fd listener;
  std::optional<uint64_t> owner_started;  // the owner's start time (started_at)
  std::atomic<bool> stop_requested{false};
  std::atomic<bool> ended{false};  // set by run(), read by the connections' threads
  // The connections being served: end() shuts them down, so that a client idle between requests
  // lets go of the session at once (its thread is blocked reading the next one). A connection
  // leaves the set before its descriptor is closed.
  std::mutex connections_m;
  std::set<int> connections;
  bool hung_up = false;

  // Admits a connection unless the session has ended or `max` are served already.
  bool admit(int fd, int max) {
    std::lock_guard g(connections_m);
    if (hung_up || static_cast<int>(connections.size()) >= max) return false;
    connections.insert(fd);
    return true;
  }
  void leave(int fd) {
    std::lock_guard g(connections_m);
    connections.erase(fd);
  }
  void hang_up() {
    std::lock_guard g(connections_m);
    hung_up = true;
    for (int fd : connections) ::shutdown(fd, SHUT_RDWR);
  }
};

struct server::impl {
  server_options o;
  server* self = nullptr;
  unique_fd control;  // `evalbox serve`: the server's own socket
  std::filesystem::path control_path;
  mutable std::mutex m;
  std::vector<std::shared_ptr<hosted_session>> sessions;
  unique_fd wake = make_eventfd();
  std::mutex threads_m;
  std::condition_variable threads_cv;
  int threads = 0;

  void say(const std::string& line) const {
    if (o.log) o.log(line);
  }

  void serve_connection(const std::shared_ptr<hosted_session>& h, unique_fd fd);
  void serve_control(unique_fd fd);
  // A connection's thread, counted so that the server's end waits for it; every signal
  // blocked (the process's own handling happens on the thread that waits for them).
  template <class F>
  void spawn(F work) {
    {
      std::lock_guard g(threads_m);
      ++threads;
    }
    std::thread([this, work = std::move(work)]() mutable {
      sigset_t all;
      sigfillset(&all);
      ::pthread_sigmask(SIG_SETMASK, &all, nullptr);
      {
        // What the work holds (its session) goes before the server may: the count below is
        // what the server's end waits for.
        F done = std::move(work);
        done();
      }
      std::lock_guard g(threads_m);
      --threads;
      threads_cv.notify_all();
    }).detach();
  }
  void dispatch(const std::shared_ptr<hosted_session>& h, connection& c, const std::string& line);
  void run_exec(const std::shared_ptr<hosted_session>& h, connection& c, const request& r);
  void run_fork(const std::shared_ptr<hosted_session>& h, connection& c, const request& r);
  result<std::shared_ptr<session>> make_child(const session& parent, const layer_stack& stack,
                                              const fs::path& commands);
  void end(hosted_session& h, const std::string& why);
  status host(std::shared_ptr<session> s, locked_fd lock);
};

server::server(server_options options) : impl_(std::make_unique<impl>()) {
  impl_->o = std::move(options);
  impl_->self = this;
}

status server::listen(const std::filesystem::path& socket) {
  impl_->control = EB_TRY(listen_at(socket));
  impl_->control_path = socket;
  return {};
}

// The server's own socket: start, ls, stop, ping.
void server::impl::serve_control(unique_fd fd) {
  if (!trusted_peer(fd.get(), {})) return;
  ::fcntl(fd.get(), F_SETFL, ::fcntl(fd.get(), F_GETFL) & ~O_NONBLOCK);
  connection c(std::move(fd), o.limits.max_message_bytes);
  json hello = greeting("", o.limits);
  hello.erase("session");
  hello["server"] = true;
  if (!c.send(hello.dump() + "\n")) return;
  while (auto line = c.next_line()) {
    auto j = parse_json(*line, "the request");
    json id = j && j->is_object() ? json_member(*j, "id") : json(nullptr);
    if (!id.is_string() && !id.is_number_integer() && !id.is_number_unsigned()) id = nullptr;
    if (!j || !j->is_object() || !json_member(*j, "op").is_string()) {
      c.send(error_line(id, "invalid_request", "a request is a JSON object with an 'op'"));
      continue;
    }
    const std::string op = json_member(*j, "op").get<std::string>();
    if (op == "ping") {
      c.send(ok_line(id));
    } else if (op == "start") {
      auto made = o.start ? o.start(*self, *j)
                          : result<json>(make_error(error_kind::unsupported, "start: not here"));
      c.send(made ? ok_line(id, {{"session", std::move(*made)}}) : error_line(id, made.error()));
    } else if (op == "ls") {
      json all = json::array();
      {
        std::lock_guard g(m);
        for (const auto& h : sessions)
          if (!h->ended) all.push_back(h->s->info());
      }
      if (o.list_others)
        for (auto& info : o.list_others()) all.push_back(std::move(info));
      c.send(ok_line(id, {{"sessions", std::move(all)}}));
    } else if (op == "stop") {
      const std::string which = json_value_or(*j, "session", std::string());
      bool found = false;
      {
        std::lock_guard g(m);
        for (const auto& h : sessions)
          if (h->s->id() == which && !h->ended) {
            h->stop_requested = true;
            found = true;
          }
      }
      raise_event(wake.get());
      if (!found && o.stop_other) {
        auto other = o.stop_other(which);
        if (!other) {
          c.send(error_line(id, other.error()));
          continue;
        }
        found = *other;
      }
      c.send(found ? ok_line(id)
                   : error_line(id, "not_found", fmt::format("no session '{}' here", which)));
    } else {
      c.send(error_line(id, "unknown_op",
                        fmt::format("the server's socket answers ping, start, ls and stop; '{}' "
                                    "goes to a session's own socket",
                                    op.substr(0, 64))));
    }
  }
}

server::~server() {
  if (!impl_->control_path.empty()) ::unlink(impl_->control_path.c_str());
  // Connection threads hold their session; wait for them to go (each ends when its client or
  // its session does).
  std::unique_lock lock(impl_->threads_m);
  impl_->threads_cv.wait_for(lock, std::chrono::seconds(10), [&] { return impl_->threads == 0; });
}

size_t server::hosted() const {
  std::lock_guard lock(impl_->m);
  return impl_->sessions.size();
}

status server::host(std::shared_ptr<session> s, locked_fd lock) {
  return impl_->host(std::move(s), std::move(lock));
}

status server::impl::host(std::shared_ptr<session> s, locked_fd lock) {
  auto h = std::make_shared<hosted_session>();
  h->listener = EB_TRY(listen_at(s->setup().dir / "socket"));
  if (s->setup().owner) {
    h->owner_started = started_at(*s->setup().owner);
    if (!h->owner_started)
      return make_error(error_kind::not_found, "the session's owner (pid {}) has exited",
                        *s->setup().owner);
  }
  EB_TRY(write_session_json(s->setup().dir, s->info()));
  h->s = std::move(s);
  h->lock = std::move(lock);
  {
    std::lock_guard g(m);
    sessions.push_back(std::move(h));
  }
  raise_event(wake.get());
  return {};
}

void server::impl::end(hosted_session& h, const std::string& why) {
  h.ended = true;
  h.listener.reset();
  const fs::path dir = h.s->setup().dir;
  ::unlink((dir / "socket").c_str());
  auto rec = h.s->stop();
  h.hang_up();  // its clients' connections end now, not when each sends again
  say(fmt::format("session {} ended: {}{}", h.s->id(), why,
                  rec ? "" : fmt::format(" ({})", rec.error().message)));
  if (auto rm = remove_tree(dir); !rm) say(rm.error().message);
  h.lock.unlock();
}

void server::run(const std::atomic<bool>& stop) {
  for (;;) {
    std::vector<std::shared_ptr<hosted_session>> live;
    {
      std::lock_guard g(impl_->m);
      std::erase_if(impl_->sessions, [](const auto& h) { return h->ended.load(); });
      live = impl_->sessions;
    }
    if (live.empty() && (!impl_->control || stop.load())) break;
    const auto now = std::chrono::system_clock::now();
    for (auto& h : live) {
      std::string why;
      if (stop.load())
        why = "the server was asked to stop";
      else if (h->stop_requested.load())
        why = "stopped";
      else if (now >= h->s->setup().expires)
        why = "its TTL passed";
      else if (h->s->ended())
        why = "its sandbox ended (a limit, or its pid 1 was killed)";
      else if (h->owner_started && started_at(*h->s->setup().owner) != h->owner_started)
        why = fmt::format("its owner (pid {}) exited", *h->s->setup().owner);
      if (!why.empty()) impl_->end(*h, why);
    }
    std::vector<pollfd> fds{{impl_->wake.get(), POLLIN, 0},
                            {impl_->control ? impl_->control.get() : -1, POLLIN, 0}};
    std::vector<std::shared_ptr<hosted_session>> whose;
    for (auto& h : live) {
      if (h->ended) continue;
      fds.push_back({h->listener.get(), POLLIN, 0});
      whose.push_back(h);
    }
    if (::poll(fds.data(), fds.size(), 200) < 0 && errno != EINTR) break;
    if (fds[0].revents) {
      uint64_t v;
      (void)!::read(impl_->wake.get(), &v, sizeof v);
    }
    if (fds[1].revents)
      for (;;) {
        unique_fd c(::accept4(impl_->control.get(), nullptr, nullptr, SOCK_CLOEXEC));
        if (!c) break;
        impl_->spawn([this, fd = std::move(c)]() mutable { impl_->serve_control(std::move(fd)); });
      }
    for (size_t i = 2; i < fds.size(); ++i) {
      if (!fds[i].revents) continue;
      auto& h = whose[i - 2];
      if (h->ended) continue;
      for (;;) {
        unique_fd c(::accept4(h->listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
        if (!c) break;
        impl_->spawn(
            [this, h, fd = std::move(c)]() mutable { impl_->serve_connection(h, std::move(fd)); });
      }
    }
  }
}

void server::impl::serve_connection(const std::shared_ptr<hosted_session>& h, unique_fd fd) {
  if (!trusted_peer(fd.get(), o.trusted_uids)) return;  // not the session's user: nothing is said
  // The accepted socket blocks (sends wait for a slow reader; reads wait for the next request).
  ::fcntl(fd.get(), F_SETFL, ::fcntl(fd.get(), F_GETFL) & ~O_NONBLOCK);
  connection c(std::move(fd), o.limits.max_message_bytes);
  if (!h->admit(c.fd(), o.limits.max_connections)) {
    c.send(error_line(nullptr, h->ended ? "ended" : "busy",
                      h->ended ? "the session has ended"
                               : fmt::format("the session has {} connections already",
                                             o.limits.max_connections)));
    return;
  }
  if (c.send(greeting(h->s->id(), o.limits).dump() + "\n")) {
    while (auto line = c.next_line()) {
      dispatch(h, c, *line);
      if (c.gone() || h->stop_requested.load()) break;
    }
  }
  h->leave(c.fd());
}

void server::impl::dispatch(const std::shared_ptr<hosted_session>& h, connection& c,
                            const std::string& line) {
  json id;
  auto parsed = parse_request(line, &id);
  if (!parsed) {
    c.send(error_line(id, parsed.error().kind, parsed.error().message));
    return;
  }
  const request& r = *parsed;
  auto refuse = [&](const protocol_error& e) { c.send(error_line(r.id, e.kind, e.message)); };
  auto answer = [&](result<json> res) {
    c.send(res ? ok_line(r.id, std::move(*res)) : error_line(r.id, res.error()));
  };
  session& s = *h->s;
  switch (r.op) {
    case op_kind::ping:
    case op_kind::info:
    case op_kind::grade:
    case op_kind::stop:
    case op_kind::cancel:
      if (auto f = no_fields(r); !f) return refuse(f.error());
      break;
    default:
      break;
  }
  switch (r.op) {
    case op_kind::ping:
      c.send(ok_line(r.id));
      return;
    case op_kind::info:
      c.send(ok_line(r.id, {{"session", s.info()}}));
      return;
    case op_kind::exec:
      run_exec(h, c, r);
      return;
    case op_kind::input:
    case op_kind::resize:
    case op_kind::cancel:
      c.send(error_line(r.id, "invalid_request",
                        fmt::format("{}: no exec is running on this connection", to_string(r.op))));
      return;
    case op_kind::read_file: {
      auto p = read_of(r, o.limits);
      if (!p) return refuse(p.error());
      auto live = s.acquire();
      if (!live) return answer(std::unexpected(live.error()));
      auto f = (*live)->read_file(p->path, p->max_bytes);
      if (!f) return answer(std::unexpected(f.error()));
      if (f->too_large)
        return (void)c.send(error_line(
            r.id, "too_large",
            fmt::format("{} has {} bytes; at most {} are read", p->path, f->size, p->max_bytes)));
      return answer(json{{"data", base64_encode(f->data)}, {"size", f->size}, {"mode", f->mode}});
    }
    case op_kind::write_file: {
      auto p = write_of(r, o.limits);
      if (!p) return refuse(p.error());
      auto live = s.acquire();
      if (!live) return answer(std::unexpected(live.error()));
      auto size = (*live)->write_file(p->path, p->data, p->mode, p->append, p->parents);
      if (!size) return answer(std::unexpected(size.error()));
      return answer(json{{"size", *size}});
    }
    case op_kind::ls: {
      auto p = path_of(r);
      if (!p) return refuse(p.error());
      auto live = s.acquire();
      if (!live) return answer(std::unexpected(live.error()));
      auto entries = (*live)->list(*p);
      if (!entries) return answer(std::unexpected(entries.error()));
      json a = json::array();
      for (const auto& e : *entries)
        a.push_back({{"name", e.name},
                     {"type", sandbox::to_string(e.type)},
                     {"size", e.size},
                     {"mode", e.mode},
                     {"mtime", e.mtime}});
      return answer(json{{"entries", std::move(a)}});
    }
    case op_kind::snapshot: {
      auto name = snapshot_of(r);
      if (!name) return refuse(name.error());
      auto res = s.snapshot(*name);
      if (res)
        say(fmt::format("session {}: snapshot {} ({} ms)", s.id(), *name,
                        (*res)["ms"].get<uint64_t>()));
      return answer(std::move(res));
    }
    case op_kind::reset: {
      auto to = reset_of(r);
      if (!to) return refuse(to.error());
      return answer(s.reset(*to));
    }
    case op_kind::fork:
      run_fork(h, c, r);
      return;
    case op_kind::grade:
      return answer(s.grade());
    case op_kind::stop:
      c.send(ok_line(r.id));
      h->stop_requested = true;
      raise_event(wake.get());
      return;
  }
}

result<std::shared_ptr<session>> server::impl::make_child(const session& parent,
                                                          const layer_stack& stack,
                                                          const fs::path& commands) {
  const std::string id = new_session_id();
  claimed_dir claim = EB_TRY(claim_dir(sessions_root(o.state_root), id));
  // Its transcript begins with its parent's commands up to the fork point.
  if (!commands.empty()) {
    std::error_code ec;
    fs::copy_file(commands, claim.dir / "transcript.jsonl", ec);
    if (ec) {
      (void)remove_tree(claim.dir);
      return make_error(error_kind::io, "copy the parent's transcript: {}", ec.message());
    }
  }
  sandbox::session_request req = parent.prepared().request();
  req.run_id = id;
  if (!o.prepare)
    return make_error(error_kind::unsupported, "this session cannot be forked (a run's task)");
  auto prepared = o.prepare(req);
  if (!prepared) {
    (void)remove_tree(claim.dir);
    if (prepared.error().kind == error_kind::busy && !req.secrets.empty()) {
      // A lease is exclusive (a token's rotations go to one holder): the parent holds it.
      std::string handles;
      for (const auto& secret : req.secrets)
        handles += (handles.empty() ? "" : ", ") + secret.handle;
      return make_error(error_kind::busy,
                        "a fork would need a lease of its own of the session's credential ({}), "
                        "which the session holds, and a lease is exclusive; fork a session "
                        "started without a credentialed --candidate",
                        handles);
    }
    return std::unexpected(std::move(prepared.error()));
  }
  auto owned = std::make_unique<sandbox::prepared_session>(std::move(*prepared));
  session_setup setup = parent.setup();
  setup.id = id;
  setup.dir = claim.dir;
  setup.parent = parent.id();
  sandbox::prepared_session& p = *owned;
  auto child = session::start(std::move(setup), p, std::move(owned), stack);
  if (!child) {
    (void)remove_tree(claim.dir);
    return std::unexpected(std::move(child.error()));
  }
  if (auto hs = host(*child, std::move(claim.lock)); !hs) {
    (void)(*child)->stop();
    (void)remove_tree(claim.dir);
    return std::unexpected(std::move(hs.error()));
  }
  return child;
}

void server::impl::run_fork(const std::shared_ptr<hosted_session>& h, connection& c,
                            const request& r) {
  auto p = fork_of(r, o.limits);
  if (!p) return (void)c.send(error_line(r.id, p.error().kind, p.error().message));
  const auto t0 = clock_type::now();
  fs::path commands;
  auto stack = h->s->fork_point(p->from, &commands);
  if (!stack) return (void)c.send(error_line(r.id, stack.error()));
  json made = json::array();
  for (int i = 0; i < p->count; ++i) {
    auto child = make_child(*h->s, *stack, commands);
    if (!child) {
      return (void)c.send(error_line(r.id,
                                     child.error().kind == error_kind::invalid_argument
                                         ? "internal"
                                         : protocol_kind(child.error().kind),
                                     fmt::format("fork {} of {}: {} ({} made, still running)",
                                                 i + 1, p->count, child.error().message, i)));
    }
    made.push_back(
        {{"id", (*child)->id()}, {"socket", ((*child)->setup().dir / "socket").string()}});
  }
  say(fmt::format("session {}: {} forks in {} ms", h->s->id(), p->count, ms_since(t0)));
  c.send(ok_line(r.id, {{"sessions", std::move(made)}, {"ms", ms_since(t0)}}));
}

// ---- exec ----

namespace {

// An exec's output stream: the pipe's (or the terminal's) reading end.
struct output {
  unique_fd fd;
  const char* name = "stdout";
  uint64_t bytes = 0;
  std::string kept;  // stream: false
  bool open() const { return fd.valid(); }
};

}  // namespace

void server::impl::run_exec(const std::shared_ptr<hosted_session>& h, connection& c,
                            const request& r) {
  auto p = exec_of(r, o.limits);
  if (!p) return (void)c.send(error_line(r.id, p.error().kind, p.error().message));
  session& s = *h->s;
  exec_event ev;
  ev.argv = p->argv;
  ev.cwd = p->cwd;
  auto fail = [&](const error& e) {
    ev.error = e.message;
    s.record(ev);
    c.send(error_line(r.id, e));
  };
  auto live_r = s.acquire();
  if (!live_r) return fail(live_r.error());
  std::shared_ptr<sandbox::live_sandbox> live = std::move(*live_r);
  if (live->running() >= static_cast<size_t>(o.limits.max_execs))
    return fail({error_kind::busy,
                 fmt::format("the session runs {} execs already", o.limits.max_execs), 0});

  sandbox::exec_spec spec;
  spec.argv = p->argv;
  spec.env = p->env;
  // A relative directory is the workspace's, as paths of the file operations are.
  spec.cwd = !p->cwd.empty() && p->cwd.front() != '/'
                 ? (s.prepared().workspace_target() / p->cwd).string()
                 : p->cwd;
  spec.tty = p->tty;
  spec.rows = p->rows;
  spec.cols = p->cols;
  pipe_pair in, out, err;
  if (!p->tty) {
    auto a = make_pipe(), b = make_pipe(), d = make_pipe();
    if (!a || !b || !d) return fail({error_kind::io, "pipe2: out of descriptors", 0});
    in = std::move(*a);
    out = std::move(*b);
    err = std::move(*d);
    spec.stdin_fd = in.read.get();
    spec.stdout_fd = out.write.get();
    spec.stderr_fd = err.write.get();
  }
  const auto t0 = clock_type::now();
  auto started = live->exec(spec);
  if (!started) return fail(started.error());
  std::unique_ptr<sandbox::exec_handle> x = std::move(*started);
  // Only the exec holds its ends now: end of file comes when it (and what it left) closes them.
  in.read.reset();
  out.write.reset();
  err.write.reset();
  output outs[2];
  unique_fd stdin_w;
  if (p->tty) {
    unique_fd master = x->take_terminal();
    stdin_w.reset(::fcntl(master.get(), F_DUPFD_CLOEXEC, 3));
    outs[0].fd = std::move(master);
  } else {
    outs[0].fd = std::move(out.read);
    outs[1].fd = std::move(err.read);
    outs[1].name = "stderr";
    stdin_w = std::move(in.write);
  }
  for (auto& st : outs)
    if (st.open()) ::fcntl(st.fd.get(), F_SETFL, O_NONBLOCK);
  if (stdin_w) ::fcntl(stdin_w.get(), F_SETFL, O_NONBLOCK);
  constexpr size_t stdin_backlog = 1u << 20;
  std::string pending = p->stdin_data.value_or("");
  bool stdin_eof = !p->stdin_open;  // close stdin once `pending` is written
  if (pending.empty() && stdin_eof && !p->tty) stdin_w.reset();

  const auto deadline = p->timeout_ms ? t0 + std::chrono::milliseconds(*p->timeout_ms)
                                      : clock_type::time_point::max();
  std::optional<clock_type::time_point> drain_until;
  bool killed = false;
  auto kill_exec = [&] {
    if (!killed) (void)live->signal(*x, SIGKILL);
    killed = true;
  };
  // What the client sent while the exec runs (some may have come with the exec's own line):
  // input for its stdin, a resize, a cancel; anything else is refused.
  auto take_control_lines = [&] {
    while (auto line = c.take_line()) {
      json cid;
      auto cr = parse_request(*line, &cid);
      if (!cr) {
        c.send(error_line(cid, cr.error().kind, cr.error().message));
        continue;
      }
      if (cr->op == op_kind::cancel) {
        ev.cancelled = true;
        kill_exec();
      } else if (cr->op == op_kind::input) {
        auto ip = input_of(*cr);
        if (!ip) {
          c.send(error_line(cr->id, ip.error().kind, ip.error().message));
          continue;
        }
        pending += ip->data;
        if (ip->eof) stdin_eof = true;
      } else if (cr->op == op_kind::resize) {
        auto rp = resize_of(*cr);
        if (!rp) {
          c.send(error_line(cr->id, rp.error().kind, rp.error().message));
          continue;
        }
        winsize ws{};
        ws.ws_row = rp->rows;
        ws.ws_col = rp->cols;
        if (p->tty && outs[0].open()) (void)::ioctl(outs[0].fd.get(), TIOCSWINSZ, &ws);
      } else {
        c.send(error_line(cr->id, "busy",
                          "an exec is running on this connection: one request at a time "
                          "(open another connection)"));
      }
    }
  };
  take_control_lines();
  if (stdin_w && pending.empty() && stdin_eof && !p->tty) stdin_w.reset();
  for (;;) {
    const bool done = x->ended();
    if (done && !drain_until) drain_until = clock_type::now() + std::chrono::milliseconds(200);
    const bool outputs_open = outs[0].open() || outs[1].open();
    if (done && (!outputs_open || clock_type::now() >= *drain_until)) break;
    pollfd fds[5] = {
        {outs[0].open() ? outs[0].fd.get() : -1, POLLIN, 0},
        {outs[1].open() ? outs[1].fd.get() : -1, POLLIN, 0},
        {stdin_w && !pending.empty() ? stdin_w.get() : -1, POLLOUT, 0},
        // Input waiting for the command past stdin_backlog: the client's lines wait in its
        // socket (a hang-up is still seen), so a client faster than the command costs no memory.
        {c.gone() ? -1 : c.fd(), static_cast<short>(pending.size() < stdin_backlog ? POLLIN : 0),
         0},
        {done ? -1 : x->done_fd(), POLLIN, 0},
    };
    int wait_ms = 1000;
    const auto now = clock_type::now();
    if (deadline != clock_type::time_point::max() && !killed)
      wait_ms = static_cast<int>(std::clamp<int64_t>(
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count() + 1, 0,
          1000));
    if (drain_until)
      wait_ms = std::min<int>(
          wait_ms,
          static_cast<int>(std::max<int64_t>(
              0,
              std::chrono::duration_cast<std::chrono::milliseconds>(*drain_until - now).count())));
    if (::poll(fds, 5, wait_ms) < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      output& st = outs[i];
      if (!st.open() || !fds[i].revents) continue;
      char buf[65536];
      const ssize_t n = ::read(st.fd.get(), buf, sizeof buf);
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      if (n <= 0) {  // end of file (EIO: a terminal whose every slave closed)
        st.fd.reset();
        continue;
      }
      const uint64_t before = outs[0].bytes + outs[1].bytes;
      st.bytes += static_cast<uint64_t>(n);
      if (ev.truncated) continue;  // past the cap: read and dropped
      size_t take = static_cast<size_t>(n);
      if (before + take > p->max_output) {
        take = static_cast<size_t>(p->max_output - before);
        ev.truncated = true;
        kill_exec();
      }
      if (take == 0) continue;
      if (p->stream)
        c.send(frame_line(r.id, st.name, std::string_view(buf, take)));
      else
        st.kept.append(buf, take);
    }
    if (fds[2].revents && stdin_w) {
      const ssize_t w = ::write(stdin_w.get(), pending.data(), pending.size());
      if (w > 0) pending.erase(0, static_cast<size_t>(w));
      if (w < 0 && errno != EAGAIN && errno != EINTR) pending.clear(), stdin_eof = true;
    }
    if (stdin_w && pending.empty() && stdin_eof && !p->tty) stdin_w.reset();
    if (fds[3].revents && !c.gone() && !c.fill(false)) {
      // The client went away: its exec goes too.
      ev.cancelled = true;
      kill_exec();
    }
    take_control_lines();
    if (stdin_w && pending.empty() && stdin_eof && !p->tty) stdin_w.reset();
    if (!killed && clock_type::now() >= deadline && !x->ended()) {
      ev.timed_out = true;
      kill_exec();
    }
  }
  ev.duration_ms = ms_since(t0);
  ev.stdout_bytes = outs[0].bytes;
  ev.stderr_bytes = outs[1].bytes;
  const std::optional<int> st = x->wait_status();
  if (st) {
    if (WIFEXITED(*st)) ev.exit_code = WEXITSTATUS(*st);
    if (WIFSIGNALED(*st)) ev.signal = WTERMSIG(*st);
  } else {
    ev.error = "the session's sandbox ended while the exec ran (a reset, a stop or a limit)";
  }
  s.record(ev);
  if (c.gone()) return;
  if (!st) return (void)c.send(error_line(r.id, "ended", ev.error));
  json reply{{"exit_code", ev.exit_code ? json(*ev.exit_code) : json(nullptr)},
             {"signal", ev.signal ? json(*ev.signal) : json(nullptr)},
             {"timed_out", ev.timed_out},
             {"cancelled", ev.cancelled},
             {"truncated", ev.truncated},
             {"duration_ms", ev.duration_ms},
             {"stdout_bytes", ev.stdout_bytes},
             {"stderr_bytes", ev.stderr_bytes}};
  if (!p->stream) {
    reply["stdout"] = base64_encode(outs[0].kept);
    reply["stderr"] = base64_encode(outs[1].kept);
  }
  c.send(ok_line(r.id, std::move(reply)));
}

}  // namespace sessions
}  // namespace evalbox::harness
