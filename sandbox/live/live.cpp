// The live sandbox (live.h): the serve-mode launch on a thread of its own, pid 1's events read
// on another and handed to the execs they name.
#include "sandbox/live/live.h"

#include <fmt/format.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

#include "base/log.h"
#include "sandbox/live/files.h"
#include "sandbox/protocol/serve_wire.h"
#include "sandbox/sys/fd_passing.h"

namespace evalbox::sandbox {
inline namespace live {
namespace wire = serve_wire;

namespace {

unique_fd make_eventfd() { return unique_fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)); }

void raise_event(int fd) {
  const uint64_t one = 1;
  (void)!::write(fd, &one, sizeof one);
}

// Reads exactly `n` bytes into `buf` after a first receive got `got` of them.
bool complete(int fd, char* buf, size_t got, size_t n) {
  while (got < n) {
    const ssize_t r = ::read(fd, buf + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    got += static_cast<size_t>(r);
  }
  return true;
}

// The thread blocks every signal: the process's own handling (Ctrl-C, SIGTERM) happens on the
// thread that waits for them, never here.
void block_signals() {
  sigset_t all;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, nullptr);
}

}  // namespace

// What pid 1's events tell about one exec.
struct exec_handle::shared {
  std::mutex m;
  std::condition_variable cv;
  bool answered = false;  // started or failed (or the sandbox ended before either)
  bool failed = false;
  int err = 0;
  wire::failed_step step = wire::failed_step::request;
  pid_t pid = 0;
  unique_fd terminal;
  bool ended = false;
  std::optional<int> wait_status;
  int done_fd = -1;  // the handle's eventfd (owned by the handle, which outlives its entry here)
};

bool exec_handle::ended() const {
  std::lock_guard lock(s_->m);
  return s_->ended;
}

std::optional<int> exec_handle::wait_status() const {
  std::lock_guard lock(s_->m);
  return s_->wait_status;
}

unique_fd exec_handle::take_terminal() { return std::move(terminal_); }

struct live_sandbox::state {
  const prepared_session* session = nullptr;
  launch_options options;
  unique_fd ours, theirs;  // the control socket: ours, and pid 1's until it is ready
  unique_fd root;          // the sandbox's root, from pid 1's ready event
  unique_fd ended_event;

  std::mutex send_m;  // one request at a time on the socket

  mutable std::mutex m;
  std::condition_variable cv;
  bool ready = false;
  bool ended = false;
  bool launch_done = false;
  std::optional<result<run_record>> record;
  uint64_t next_id = 0;
  std::map<uint64_t, std::shared_ptr<exec_handle::shared>> execs;

  std::thread life, events;

  void run_launch() {
    block_signals();
    auto rec = launch_in(*session, options);
    {
      std::lock_guard lock(m);
      record = std::move(rec);
      launch_done = true;
    }
    // Pid 1 is gone (or never came): the event thread sees end of file.
    ::shutdown(ours.get(), SHUT_RDWR);
    cv.notify_all();
  }

  void read_events() {
    block_signals();
    for (;;) {
      wire::event e;
      int fd = -1;
      const ssize_t got = sys::recv_fd(ours.get(), &e, sizeof e, &fd);
      unique_fd attached(fd);
      if (got <= 0 ||
          !complete(ours.get(), reinterpret_cast<char*>(&e), static_cast<size_t>(got), sizeof e))
        break;
      on_event(e, std::move(attached));
    }
    end_all();
  }

  void on_event(const wire::event& e, unique_fd attached) {
    if (e.kind == wire::event_kind::ready) {
      std::lock_guard lock(m);
      root = std::move(attached);
      ready = true;
      cv.notify_all();
      return;
    }
    std::shared_ptr<exec_handle::shared> x;
    {
      std::lock_guard lock(m);
      auto it = execs.find(e.id);
      if (it == execs.end()) return;
      x = it->second;
      if (e.kind != wire::event_kind::started) execs.erase(it);
    }
    std::lock_guard lock(x->m);
    switch (e.kind) {
      case wire::event_kind::started:
        x->answered = true;
        x->pid = e.value;
        x->terminal = std::move(attached);
        break;
      case wire::event_kind::failed:
        x->answered = true;
        x->failed = true;
        x->err = e.value;
        x->step = static_cast<wire::failed_step>(e.step);
        break;
      case wire::event_kind::exited:
        x->ended = true;
        x->wait_status = e.value;
        raise_event(x->done_fd);
        break;
      case wire::event_kind::ready:
        break;
    }
    x->cv.notify_all();
  }

  // The sandbox ended: every exec waiting or running hears it.
  void end_all() {
    std::map<uint64_t, std::shared_ptr<exec_handle::shared>> left;
    {
      std::lock_guard lock(m);
      ended = true;
      left.swap(execs);
    }
    raise_event(ended_event.get());
    cv.notify_all();
    for (auto& [id, x] : left) {
      std::lock_guard lock(x->m);
      x->answered = true;
      x->ended = true;
      raise_event(x->done_fd);
      x->cv.notify_all();
    }
  }
};

live_sandbox::live_sandbox(std::unique_ptr<state> s) : s_(std::move(s)) {}

live_sandbox::~live_sandbox() {
  if (!s_) return;
  auto r = stop();
  if (!r) log::warn("stop the session's sandbox: {}", r.error().message);
}

result<std::unique_ptr<live_sandbox>> live_sandbox::start(const prepared_session& session,
                                                          launch_options options) {
  if (!options.argv.empty())
    return make_error(error_kind::invalid_argument, "a live sandbox runs no argv of its own");
  auto s = std::make_unique<state>();
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    return sys_error(errno, "socketpair (the session's control socket)");
  s->ours.reset(sv[0]);
  s->theirs.reset(sv[1]);
  s->ended_event = make_eventfd();
  if (!s->ended_event) return sys_error(errno, "eventfd");
  s->session = &session;
  s->options = std::move(options);
  s->options.serve_fd = s->theirs.get();
  if (s->options.label.empty() || s->options.label == "agent") s->options.label = "session";
  state* st = s.get();
  s->life = std::thread([st] { st->run_launch(); });
  s->events = std::thread([st] { st->read_events(); });
  auto live = std::make_unique<live_sandbox>(std::move(s));
  {
    std::unique_lock lock(st->m);
    st->cv.wait(lock, [st] { return st->ready || st->ended; });
    if (!st->ready) {
      // The launch failed before pid 1 served: its record (or error) says why.
      st->cv.wait(lock, [st] { return st->launch_done; });
      result<run_record> rec = *st->record;
      lock.unlock();
      (void)live->stop();
      if (!rec) return std::unexpected(std::move(rec.error()));
      return make_error(error_kind::io, "the session's sandbox did not start: {}{}",
                        rec->error_step.empty() ? "" : "step " + rec->error_step + ": ",
                        rec->error.empty() ? std::string(to_string(rec->outcome)) : rec->error);
    }
  }
  // The helper and pid 1 hold their copies: from now on pid 1's end is only theirs, so that
  // its death is our end of file.
  st->theirs.reset();
  return live;
}

int live_sandbox::root_fd() const noexcept { return s_->root.get(); }
int live_sandbox::ended_fd() const noexcept { return s_->ended_event.get(); }

bool live_sandbox::ended() const {
  std::lock_guard lock(s_->m);
  return s_->ended;
}

size_t live_sandbox::running() const {
  std::lock_guard lock(s_->m);
  return s_->execs.size();
}

namespace {

// The error for an exec whose step failed, as a shell or execvp would say it.
error exec_error(const exec_spec& spec, int err, wire::failed_step step) {
  const std::string what = std::strerror(err);
  switch (step) {
    case wire::failed_step::exec:
      if (err == ENOENT)
        return {
            error_kind::not_found,
            fmt::format("{}: command not found in the sandbox{}", spec.argv.front(),
                        spec.argv.front().find('/') == std::string::npos ? " (on its PATH)" : ""),
            err};
      return {err == EACCES ? error_kind::permission : error_kind::invalid_argument,
              fmt::format("{}: cannot be run: {}", spec.argv.front(), what), err};
    case wire::failed_step::chdir:
      return {err == ENOENT ? error_kind::not_found : error_kind::permission,
              fmt::format("working directory {}: {}", spec.cwd, what), err};
    case wire::failed_step::request:
      if (err == EAGAIN)
        return {error_kind::busy, "too many execs running in the session at once", err};
      return {error_kind::invalid_argument, fmt::format("the exec request was refused: {}", what),
              err};
    case wire::failed_step::other:
      break;
  }
  return {error_kind::io, fmt::format("the sandbox could not start the exec: {}", what), err};
}

}  // namespace

result<std::unique_ptr<exec_handle>> live_sandbox::exec(const exec_spec& spec) {
  if (spec.argv.empty() || spec.argv.front().empty())
    return make_error(error_kind::invalid_argument, "exec: no command");
  if (!spec.tty && (spec.stdin_fd < 0 || spec.stdout_fd < 0 || spec.stderr_fd < 0))
    return make_error(error_kind::invalid_argument, "exec: standard streams missing");
  // The payload: argv, the environment, the directory; each NUL-terminated.
  std::string payload;
  auto add = [&](std::string_view text) -> status {
    if (text.find('\0') != std::string_view::npos)
      return make_error(error_kind::invalid_argument,
                        "exec: a NUL byte in an argument or variable");
    payload.append(text);
    payload.push_back('\0');
    return {};
  };
  for (const auto& a : spec.argv) EB_TRY(add(a));
  for (const auto& [k, v] : spec.env) {
    if (k.empty() || k.find('=') != std::string::npos)
      return make_error(error_kind::invalid_argument, "exec: variable name '{}'", k);
    EB_TRY(add(k + "=" + v));
  }
  EB_TRY(add(spec.cwd));
  if (payload.size() > wire::max_payload || spec.argv.size() + spec.env.size() > wire::max_strings)
    return make_error(error_kind::invalid_argument,
                      "exec: the command and environment take {} bytes in {} strings; at most {} "
                      "bytes and {} strings",
                      payload.size(), spec.argv.size() + spec.env.size(), wire::max_payload,
                      wire::max_strings);

  auto handle = std::make_unique<exec_handle>();
  handle->done_ = make_eventfd();
  if (!handle->done_) return sys_error(errno, "eventfd");
  auto x = std::make_shared<exec_handle::shared>();
  x->done_fd = handle->done_.get();
  handle->s_ = x;
  wire::request r;
  {
    std::lock_guard lock(s_->m);
    if (s_->ended) return make_error(error_kind::cancelled, "the session's sandbox has ended");
    r.id = ++s_->next_id;
    s_->execs.emplace(r.id, x);
  }
  handle->id_ = r.id;
  r.kind = wire::request_kind::exec;
  r.payload_bytes = static_cast<uint32_t>(payload.size());
  r.argc = static_cast<uint32_t>(spec.argv.size());
  r.envc = static_cast<uint32_t>(spec.env.size());
  if (spec.tty) {
    r.flags = wire::flag_tty;
    r.rows = spec.rows;
    r.cols = spec.cols;
  }
  status sent = [&]() -> status {
    std::lock_guard lock(s_->send_m);
    const int fds[3] = {spec.stdin_fd, spec.stdout_fd, spec.stderr_fd};
    iovec iov[2] = {{&r, sizeof r}, {payload.data(), payload.size()}};
    alignas(cmsghdr) char control[CMSG_SPACE(3 * sizeof(int))] = {};
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = 2;
    if (!spec.tty) {
      msg.msg_control = control;
      msg.msg_controllen = sizeof control;
      cmsghdr* cm = CMSG_FIRSTHDR(&msg);
      cm->cmsg_level = SOL_SOCKET;
      cm->cmsg_type = SCM_RIGHTS;
      cm->cmsg_len = CMSG_LEN(sizeof fds);
      std::memcpy(CMSG_DATA(cm), fds, sizeof fds);
    }
    size_t total = sizeof r + payload.size();
    ssize_t n;
    do n = ::sendmsg(s_->ours.get(), &msg, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    if (n < 0) return sys_error(errno, "send the exec to the session's sandbox");
    // The rest of a long payload (a stream socket may take it in parts).
    size_t done = static_cast<size_t>(n);
    while (done < total) {
      const size_t off = done - sizeof r;  // the record itself always goes in the first part
      const ssize_t w = ::send(s_->ours.get(), payload.data() + off, total - done, MSG_NOSIGNAL);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return sys_error(errno, "send the exec to the session's sandbox");
      done += static_cast<size_t>(w);
    }
    return {};
  }();
  if (!sent) {
    std::lock_guard lock(s_->m);
    s_->execs.erase(r.id);
    return std::unexpected(std::move(sent.error()));
  }
  std::unique_lock lock(x->m);
  x->cv.wait(lock, [&] { return x->answered; });
  if (x->failed) return std::unexpected(exec_error(spec, x->err, x->step));
  if (x->pid == 0 && x->ended)
    return make_error(error_kind::cancelled, "the session's sandbox ended before the exec started");
  handle->pid_ = x->pid;
  handle->terminal_ = std::move(x->terminal);
  return handle;
}

status live_sandbox::signal(const exec_handle& exec, int sig) {
  if (exec.ended()) return {};
  wire::request r;
  r.kind = wire::request_kind::signal;
  r.id = exec.id();
  r.signal = sig;
  std::lock_guard lock(s_->send_m);
  if (::send(s_->ours.get(), &r, sizeof r, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof r) &&
      !ended())
    return sys_error(errno, "signal the exec");
  return {};
}

std::string_view to_string(file_entry::kind k) noexcept {
  switch (k) {
    case file_entry::kind::file:
      return "file";
    case file_entry::kind::dir:
      return "dir";
    case file_entry::kind::symlink:
      return "symlink";
    case file_entry::kind::other:
      break;
  }
  return "other";
}

namespace {
live_files::place place_of(const live_sandbox::state& s) {
  return {s.root.get(), s.session->workspace_target().string(), s.session->sandbox_uid(),
          s.session->sandbox_gid()};
}
}  // namespace

result<file_content> live_sandbox::read_file(const std::string& path, uint64_t max_bytes) const {
  if (ended()) return make_error(error_kind::cancelled, "the session's sandbox has ended");
  return live_files::read(place_of(*s_), path, max_bytes);
}

result<uint64_t> live_sandbox::write_file(const std::string& path, std::string_view data,
                                          uint32_t mode, bool append, bool parents) const {
  if (ended()) return make_error(error_kind::cancelled, "the session's sandbox has ended");
  return live_files::write(place_of(*s_), path, data, mode, append, parents);
}

result<std::vector<file_entry>> live_sandbox::list(const std::string& path) const {
  if (ended()) return make_error(error_kind::cancelled, "the session's sandbox has ended");
  return live_files::list(place_of(*s_), path);
}

result<run_record> live_sandbox::stop() {
  // End of file for pid 1: it exits, and with it every process of the sandbox.
  ::shutdown(s_->ours.get(), SHUT_WR);
  if (s_->life.joinable()) s_->life.join();
  if (s_->events.joinable()) s_->events.join();
  std::lock_guard lock(s_->m);
  if (!s_->record) return make_error(error_kind::internal, "the session's sandbox left no record");
  return *s_->record;
}

}  // namespace live
}  // namespace evalbox::sandbox
