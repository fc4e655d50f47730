// The helper's supervision (supervisor.h). start() is the table of contents: open the
// streams and channels, clone, release, supervise, classify.
#include "sandbox/helper/supervisor.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <iterator>
#include <vector>

#include "base/fs.h"
#include "base/json.h"
#include "base/log.h"
#include "sandbox/helper/outcome.h"
#include "sandbox/net/relay.h"
#include "sandbox/sys/fd_passing.h"
#include "sandbox/sys/syscalls.h"

namespace evalbox::sandbox::helper {
namespace {
using clock = std::chrono::steady_clock;

struct pipe_pair {
  unique_fd read, write;
};
result<pipe_pair> make_pipe(int read_flags = O_CLOEXEC, int write_flags = O_CLOEXEC) {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return sys_error(errno, "pipe2");
  pipe_pair pp{unique_fd(p[0]), unique_fd(p[1])};
  if (!(read_flags & O_CLOEXEC)) ::fcntl(p[0], F_SETFD, 0);
  if (!(write_flags & O_CLOEXEC)) ::fcntl(p[1], F_SETFD, 0);
  if (read_flags & O_NONBLOCK) ::fcntl(p[0], F_SETFL, O_NONBLOCK);
  return pp;
}

status write_proc(pid_t pid, const char* file, std::string_view text) {
  const std::string path = fmt::format("/proc/{}/{}", pid, file);
  unique_fd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd) return sys_error(errno, "open({})", path);
  if (::write(fd.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
    return sys_error(errno, "write({}, {})", path, text);
  }
  return {};
}

}  // namespace

// Every channel between the helper and the child (docs/sandbox.md, "File descriptors"). The
// child's ends are closed in the helper as soon as the child holds its copies.
struct supervisor::channels {
  unique_fd stdin_file;             // the program's stdin
  unique_fd out_write, err_write;   // the program's ends of the output pipes
  pipe_pair sync;                   // a socket pair: one byte (and tasks files): released
  pipe_pair errors;                 // a failing step writes its step_failure
  pipe_pair status;                 // pid 1 writes the program's wait status
  unique_fd net_parent, net_child;  // listening sockets from pid 1 (network allow)
  unique_fd signals;                // signalfd: the helper's termination signals
  unique_fd tty_parent, tty_child;  // the terminal's master from the program's process

  void close_child_ends() {
    sync.read.reset();
    errors.write.reset();
    status.write.reset();
    net_child.reset();
    tty_child.reset();
    out_write.reset();
    err_write.reset();
    stdin_file.reset();
  }
};

struct supervisor::ending {
  std::optional<int> wait_status;       // the program's, as pid 1 reported it
  std::optional<step_failure> failure;  // the first step that failed, as the child reported it
  int init_status = 0;                  // pid 1's own wait status
  rusage usage{};                       // pid 1 and every process it reaped
};

status supervisor::run() {
  compiled c;
  host_view host = host_layout_ ? std::move(*host_layout_) : look_at_host_layout();
  look_at_host_network(host, plan_.network.mode);
  EB_TRY_CTX(compile(plan_, host, c), "compile the launch plan");
  rec_.binding_digest = plan_.binding_digest;
  rec_.mechanisms = mechanisms(c);
  EB_TRY(write_host_files(c));
  auto st = start(c);
  ahead_.terminate();  // killed once pid 1 joined (or unused): reaped here
  if (!c.host_dir.empty()) (void)remove_tree(c.host_dir);
  child_.terminate();  // after a normal end the run is reaped already; else it goes now
  rec_.mechanisms["cgroup"] = cg_ ? std::string(cg_->version()) : "none";
  rec_.mechanisms["limits"] = limits_by_mechanism();
  if (cg_) {
    // Not a failure of the run: the preparer's reclaim removes what is left. Said on stderr.
    if (auto d = cg_->destroy(); !d) {
      std::fprintf(stderr, "evalbox-sandbox: remove the run's cgroup: %s\n",
                   d.error().message.c_str());
    }
  }
  return st;
}

// The files compile() asked for (an image root's generated /etc), for pid 1 to bind.
status supervisor::write_host_files(const compiled& c) {
  if (c.host_dir.empty()) return {};
  if (::mkdir(c.host_dir.c_str(), 0700) != 0 && errno != EEXIST)
    return sys_error(errno, "mkdir {}", c.host_dir);
  for (const auto& [path, content] : c.host_files) EB_TRY(write_file(path, content, 0644));
  return {};
}

status supervisor::start(compiled& c) {
  channels ch;
  EB_TRY(open_streams(ch, c.ctx));
  EB_TRY(open_channels(ch, c));
  // The run's cgroup. The child waits for release, which comes only once it is in there, so
  // no task of the run is ever outside; a cgroup already here (v2) is cloned into directly.
  EB_TRY(take_cgroup(/*wait=*/false));
  EB_TRY(clone_child(c, ch));
  ch.close_child_ends();
  control_.reset();  // pid 1 holds it: its end of file is the session's host side's news
  if (auto r = release_child(ch); !r) {
    kill_run(outcome_kind::exited);
    child_.terminate();
    return std::unexpected(std::move(r.error()).with_context("set up the child"));
  }
  const ending end = EB_TRY(supervise(ch, c.allow));
  classify(c, end);
  return {};
}

// Standard streams: stdin from a host file or /dev/null, stdout and stderr through pipes the
// helper copies into the launch's files under the output cap (one pipe when both go to the
// same file, so that their order is kept). With inherit_stdio the program keeps the helper's.
status supervisor::open_streams(channels& ch, child_context& ctx) {
  if (plan_.inherit_stdio) return {};
  const bool merged = plan_.stdout_path == plan_.stderr_path;
  const char* in = plan_.stdin_path.empty() ? "/dev/null" : plan_.stdin_path.c_str();
  ch.stdin_file.reset(::open(in, O_RDONLY | O_CLOEXEC));
  if (!ch.stdin_file) return sys_error(errno, "open stdin {}", in);
  // The file `path` (empty: discarded) behind a pipe; returns the program's end.
  auto capture = [](stream& s, const std::string& path, const char* which) -> result<unique_fd> {
    s.file.reset(::open(path.empty() ? "/dev/null" : path.c_str(),
                        O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (!s.file) return sys_error(errno, "open {} {}", which, path);
    auto p = EB_TRY(make_pipe(O_CLOEXEC | O_NONBLOCK));
    s.pipe = std::move(p.read);
    s.open = true;
    return std::move(p.write);
  };
  ch.out_write = EB_TRY(capture(out_, plan_.stdout_path, "stdout"));
  if (!merged) ch.err_write = EB_TRY(capture(err_, plan_.stderr_path, "stderr"));
  ctx.stdin_fd = ch.stdin_file.get();
  ctx.stdout_fd = ch.out_write.get();
  ctx.stderr_fd = merged ? ch.out_write.get() : ch.err_write.get();
  return {};
}

// The release socket pair (the release byte carries the cgroup v1 tasks files pid 1 moves
// itself in with), the error and status pipes, and for network `allow` the socketpair pid 1
// passes its listening sockets over.
status supervisor::open_channels(channels& ch, compiled& c) {
  {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
      return sys_error(errno, "socketpair");
    }
    ch.sync.write.reset(sv[0]);
    ch.sync.read.reset(sv[1]);
  }
  ch.errors = EB_TRY(make_pipe());
  ch.status = EB_TRY(make_pipe());
  if (!c.allow.listeners.empty()) {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
      return sys_error(errno, "socketpair");
    }
    ch.net_parent.reset(sv[0]);
    ch.net_child.reset(sv[1]);
  }
  c.ctx.sync_fd = ch.sync.read.get();
  c.ctx.error_fd = ch.errors.write.get();
  c.ctx.status_fd = ch.status.write.get();
  c.ctx.helper_ends[0] = ch.sync.write.get();
  c.ctx.helper_ends[1] = ch.errors.read.get();
  c.ctx.helper_ends[2] = ch.status.read.get();
  c.ctx.net_fd = ch.net_child.get();
  if (plan_.serve) {
    if (!control_)
      return make_error(error_kind::invalid_argument, "a serving plan needs --control-fd");
    c.ctx.serve_fd = control_.get();
  }
  if (plan_.terminal) {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
      return sys_error(errno, "socketpair");
    }
    ch.tty_parent.reset(sv[0]);
    ch.tty_child.reset(sv[1]);
    c.ctx.tty_fd = ch.tty_child.get();
    winsize ws{};
    if (::ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) == 0) {
      c.ctx.tty_rows = ws.ws_row;
      c.ctx.tty_cols = ws.ws_col;
    }
  }
  c.ctx.map_groups = root_;
  return {};
}

// clone3 into new user, mount, pid, ipc, uts (and, unless the network is the host's, net)
// namespaces, into the run's cgroup when it is already here (v2). The child runs child_main.
status supervisor::clone_child(compiled& c, channels& ch) {
  // Termination requests arrive through a signalfd; the child unblocks them for itself.
  sigset_t mask;
  sigemptyset(&mask);
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGCHLD}) sigaddset(&mask, sig);
  if (plan_.terminal) sigaddset(&mask, SIGWINCH);  // forwarded to the run's terminal
  ::sigprocmask(SIG_BLOCK, &mask, nullptr);
  ch.signals.reset(::signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK));
  if (!ch.signals) return sys_error(errno, "signalfd");

  uint64_t flags =
      CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_PIDFD;
  if (plan_.network.mode != network_mode::host) flags |= CLONE_NEWNET;
  int pidfd = -1;
  clone_args args{};
  args.flags = flags;
  args.pidfd = reinterpret_cast<uint64_t>(&pidfd);
  args.exit_signal = SIGCHLD;
  into_cgroup_ = cg_ && cg_->clone_into_fd() >= 0;
  if (into_cgroup_) {
    args.flags |= CLONE_INTO_CGROUP;
    args.cgroup = static_cast<uint64_t>(cg_->clone_into_fd());
  }
  if (ahead_.owned()) {
    // A holder that died meanwhile (killed from outside) is no use: clone3 makes them instead.
    pollfd gone{ahead_.pidfd(), POLLIN, 0};
    if (::poll(&gone, 1, 0) == 0) return clone_entering_ahead(c, ch, args);
    ahead_.terminate();
  }
  drop_starter();  // pid 1 comes from here: it moves itself into the cgroup at its release
  started_ = clock::now();
  const pid_t pid = sys::clone3(&args);
  if (pid < 0)
    return sys_error(errno, "clone3(user, mount, pid, ipc, uts{})",
                     (flags & CLONE_NEWNET) ? ", net" : "");
  if (pid == 0) child_main(c.ctx);
  child_ = sys::owned_process(pid, unique_fd(pidfd));
  return {};
}

// With namespaces made ahead (ahead.h): a child joins the holder's user (and network)
// namespace, unshares the others and clones pid 1 as the helper's own child (child.cpp,
// enter_made_ahead); it sends pid 1's pid and exits. Pid 1 waits for its release as on the
// other path, and the holder is killed before that: from here only the run's own processes hold
// its namespaces, and nothing outside the run's pid namespace is in its user namespace.
//
// That child lives for three system calls, so it shares the helper's memory and runs on a stack
// of its own while the helper waits (CLONE_VM | CLONE_VFORK, as posix_spawn does): no copy of
// the helper's page tables. Pid 1 gets its own copy of the helper's memory, as on the other
// path, and goes on on its copy of that stack (so the stack is as large as a main thread's;
// only the pages touched cost anything).
status supervisor::clone_entering_ahead(compiled& c, channels& ch, const clone_args& args) {
  auto pid_pipe = EB_TRY(make_pipe());
  enter_ahead e;
  e.holder_pidfd = ahead_.pidfd();
  e.join = CLONE_NEWUSER | ((args.flags & CLONE_NEWNET) ? CLONE_NEWNET : 0);
  e.unshare = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS;
  e.pid_fd = pid_pipe.write.get();
  e.cgroup_fd = into_cgroup_ ? static_cast<int>(args.cgroup) : -1;
  c.ctx.ahead = e;
  int st = 0;
  // A starter killed from outside meanwhile is no use: the child below clones pid 1, which
  // then moves itself into the cgroup at its release.
  if (born_in_cgroup_ && cg_ahead_->starter_gone()) drop_starter();
  if (born_in_cgroup_) {
    // The starter, in the run's cgroups since the helper waited, does what the child below
    // would; the helper waits for it as for that child.
    started_ = clock::now();
    st = EB_TRY(cg_ahead_->go(&c.ctx));
  } else {
    constexpr size_t stack_size = 8 << 20;
    constexpr size_t guard = 64 << 10;
    void* stack = ::mmap(nullptr, stack_size, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    if (stack == MAP_FAILED) return sys_error(errno, "mmap the stack of pid 1");
    (void)::mprotect(stack, guard, PROT_NONE);  // an overflow faults instead of writing below
    started_ = clock::now();
    const pid_t pid = ::clone(child_entry, static_cast<char*>(stack) + stack_size,
                              CLONE_VM | CLONE_VFORK | SIGCHLD, &c.ctx);
    const int clone_errno = errno;
    // CLONE_VFORK: the child has exited by now (it never execs); pid 1 holds its own copy.
    if (pid > 0) {
      while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
      }
    }
    ::munmap(stack, stack_size);
    if (pid < 0) return sys_error(clone_errno, "clone (to enter the namespaces made ahead)");
  }
  pid_pipe.write.reset();
  pid_t init = -1;
  ssize_t n;
  do n = ::read(pid_pipe.read.get(), &init, sizeof init);
  while (n < 0 && errno == EINTR);
  (void)ahead_.signal(SIGKILL);
  if (n != static_cast<ssize_t>(sizeof init) || init <= 0) {
    // The child reported its failed step on the error pipe before it exited.
    step_failure f{};
    pollfd p{ch.errors.read.get(), POLLIN, 0};
    if (::poll(&p, 1, 0) == 1 && ::read(ch.errors.read.get(), &f, sizeof f) == sizeof f &&
        f.phase == 2 && f.index >= 0 &&
        static_cast<size_t>(f.index) < std::size(enter_step_names)) {
      rec_.error_step = enter_step_names[f.index];
      return make_error(error_kind::io, "step {}: {}: {}", rec_.error_step, errno_name(f.err),
                        std::strerror(f.err));
    }
    return make_error(error_kind::io,
                      "the child entering the namespaces made ahead exited ({}) "
                      "without starting pid 1",
                      st);
  }
  // Pid 1 is our child (CLONE_PARENT) and not reaped: its pid names it until we reap it.
  unique_fd init_fd(sys::pidfd_open(init, 0));
  if (!init_fd) return sys_error(errno, "pidfd_open(pid 1 of the run)");
  child_ = sys::owned_process(init, std::move(init_fd));
  return {};
}

// Maps the child's ids, puts it into the cgroup (unless cloned into it), protects pid 1 from
// the OOM killer, and only then releases it.
status supervisor::release_child(channels& ch) {
  const pid_t pid = child_.pid();
  const uid_t uid = root_ ? plan_.host_uid : ::getuid();
  const gid_t gid = root_ ? plan_.host_gid : ::getgid();
  if (!root_) EB_TRY(write_proc(pid, "setgroups", "deny"));
  EB_TRY(write_proc(pid, "uid_map", fmt::format("0 {} 1\n", uid)));
  EB_TRY(write_proc(pid, "gid_map", fmt::format("0 {} 1\n", gid)));
  EB_TRY(take_cgroup(/*wait=*/true));  // if the launcher's had not arrived before
  // On v1 pid 1 moves itself in with the tasks files sent with its release (cgroup.h,
  // move_self); on v2 it was cloned in, or is added here where the kernel could not.
  std::vector<unique_fd> tasks;
  if (cg_ && !into_cgroup_ && !born_in_cgroup_) {
    tasks = EB_TRY_CTX(cg_->open_tasks(), "open the run's cgroups for pid 1");
    if (tasks.empty()) EB_TRY(cg_->add_pid(pid));
  }
  // Pid 1 must outlive the program under memory pressure so the report gets out; the
  // program's process resets this to 0. Needs CAP_SYS_RESOURCE: best effort.
  (void)write_proc(pid, "oom_score_adj", "-1000");
  int fds[sys::max_fds];  // open_tasks opens no more
  for (size_t i = 0; i < tasks.size(); ++i) fds[i] = tasks[i].get();
  if (sys::send_fds(ch.sync.write.get(), "x", 1, fds, tasks.size()) != 1)
    return sys_error(errno, "release the child");
  ch.sync.write.reset();
  return {};
}

// The event loop, until pid 1 is gone and its output drained (at most 2 s more): output,
// reports from the child, listening sockets and relayed traffic, signals, limits.
result<supervisor::ending> supervisor::supervise(channels& ch, const net::allow_plan& allow) {
  ending end;
  std::optional<net::relay> relay;
  if (!allow.listeners.empty()) relay.emplace(allow);
  ::fcntl(ch.status.read.get(), F_SETFL, O_NONBLOCK);
  ::fcntl(ch.errors.read.get(), F_SETFL, O_NONBLOCK);
  bool exited = false;
  std::optional<clock::time_point> drain_deadline;
  const auto wall_deadline = plan_.limits.wall_ms
                                 ? started_ + std::chrono::milliseconds(plan_.limits.wall_ms)
                                 : clock::time_point::max();
  for (;;) {
    if (exited &&
        ((!out_.open && !err_.open) || (drain_deadline && clock::now() > *drain_deadline))) {
      break;
    }
    std::vector<pollfd> fds = {
        {child_.pidfd(), static_cast<short>(exited ? 0 : POLLIN), 0},
        {ch.signals.get(), POLLIN, 0},
        {out_.open ? out_.pipe.get() : -1, POLLIN, 0},
        {err_.open ? err_.pipe.get() : -1, POLLIN, 0},
        {ch.status.read ? ch.status.read.get() : -1, POLLIN, 0},
        {ch.errors.read ? ch.errors.read.get() : -1, POLLIN, 0},
        {ch.net_parent ? ch.net_parent.get() : -1, POLLIN, 0},
        {ch.tty_parent ? ch.tty_parent.get() : -1, POLLIN, 0},
        {tty_input_ ? STDIN_FILENO : -1, POLLIN, 0},
    };
    if (relay) relay->fill(fds);
    int n = ::poll(fds.data(), fds.size(), 25);
    if (n < 0 && errno != EINTR) return sys_error(errno, "poll");
    if (fds[1].revents & POLLIN) on_signals(ch.signals.get());
    if (fds[2].revents) on_output(out_);
    if (fds[3].revents) on_output(err_);
    if (fds[4].revents) {
      int ws = 0;
      ssize_t r = ::read(ch.status.read.get(), &ws, sizeof ws);
      if (r == sizeof ws) end.wait_status = ws;
      if (r == 0 || r == sizeof ws) ch.status.read.reset();
    }
    if (fds[5].revents) {
      step_failure f{};
      ssize_t r = ::read(ch.errors.read.get(), &f, sizeof f);
      if (r == sizeof f && !end.failure) end.failure = f;
      if (r == 0) ch.errors.read.reset();
    }
    if (fds[6].revents & POLLIN) {
      // One byte (the listener's index in the plan) with the socket attached.
      unsigned char index = 0;
      int fd = -1;
      if (sys::recv_fd(ch.net_parent.get(), &index, 1, &fd) == 1) {
        if (fd >= 0) relay->add_listener(index, unique_fd(fd));
      } else {
        ch.net_parent.reset();
      }
    }
    if (fds[7].revents) on_terminal(ch);
    if (fds[8].revents) on_input();
    if (relay) relay->handle(fds);
    if (!exited && (fds[0].revents & POLLIN) && on_exit(ch, end)) {
      exited = true;
      drain_deadline = clock::now() + std::chrono::seconds(2);
    }
    if (!exited) enforce_limits(wall_deadline);
  }
  if (relay) {
    for (const auto& a : relay->attempts()) {
      rec_.connections.push_back({a.target, a.allowed, a.via, a.detail});
    }
  }
  return end;
}

void supervisor::on_signals(int signal_fd) {
  signalfd_siginfo si{};
  while (::read(signal_fd, &si, sizeof si) == sizeof si) {
    if (si.ssi_signo == SIGCHLD) continue;
    if (si.ssi_signo == SIGWINCH) {
      resize_terminal();
      continue;
    }
    // With a terminal passed through, Ctrl-C is the program's to handle.
    if (si.ssi_signo == SIGINT && plan_.inherit_stdio) continue;
    kill_run(outcome_kind::cancelled);
  }
}

// The terminal's master, from the program's process: its output is the run's output (under
// the output cap, to the helper's stdout); the helper's stdin is its input.
void supervisor::on_terminal(channels& ch) {
  char tag = 0;
  int fd = -1;
  if (sys::recv_fd(ch.tty_parent.get(), &tag, 1, &fd) == 1 && fd >= 0) {
    ::fcntl(fd, F_SETFL, O_NONBLOCK);
    master_ = fd;
    out_.pipe.reset(fd);
    out_.file.reset(::fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3));
    out_.open = true;
    tty_input_ = true;
    resize_terminal();  // a resize between the helper's start and now
  }
  ch.tty_parent.reset();
}

void supervisor::on_input() {
  char buf[4096];
  ssize_t n = ::read(STDIN_FILENO, buf, sizeof buf);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (n <= 0 || !out_.open) {
    tty_input_ = false;  // end of input: the program sees no more
    return;
  }
  // Bounded: a program that reads nothing while its input buffer is full loses the keys typed
  // meanwhile rather than stalling the supervision (limits, output).
  for (ssize_t off = 0; off < n;) {
    ssize_t w = ::write(master_, buf + off, static_cast<size_t>(n - off));
    if (w > 0) {
      off += w;
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno == EAGAIN) {
      pollfd p{master_, POLLOUT, 0};
      if (::poll(&p, 1, 100) == 1) continue;
    }
    return;
  }
}

// The window size of the helper's terminal onto the run's (SIGWINCH reaches the program's
// foreground job from there).
void supervisor::resize_terminal() {
  winsize ws{};
  if (master_ >= 0 && ::ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) == 0)
    (void)::ioctl(master_, TIOCSWINSZ, &ws);
}

void supervisor::on_output(stream& s) {
  char buf[65536];
  ssize_t n = ::read(s.pipe.get(), buf, sizeof buf);
  if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
    s.open = false;
    return;
  }
  if (n < 0) return;
  rec_.output_bytes += static_cast<uint64_t>(n);
  const uint64_t cap = plan_.limits.output_bytes;
  uint64_t take = static_cast<uint64_t>(n);
  if (cap && kept_ + take > cap) take = cap - kept_;
  if (!truncated_ && take > 0) (void)!::write(s.file.get(), buf, take);
  kept_ += take;
  if (cap && !truncated_ && take < static_cast<uint64_t>(n)) {
    truncated_ = true;
    rec_.output_truncated = true;
    const std::string marker =
        fmt::format("\n[evalbox: output truncated: the run passed its limit of {} bytes]\n", cap);
    (void)!::write(s.file.get(), marker.data(), marker.size());
    kill_run(outcome_kind::output_limit);
  }
}

// Pid 1 is gone: the run is over (every other process of it dies with it). Reaps it and
// collects a last report still in the pipes. False when it was not reaped after all.
bool supervisor::on_exit(channels& ch, ending& end) {
  const pid_t pid = child_.pid();
  if (child_.reap(&end.init_status, &end.usage) != pid) return false;
  rec_.wall_ms = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(clock::now() - started_).count());
  int ws = 0;
  if (ch.status.read && ::read(ch.status.read.get(), &ws, sizeof ws) == sizeof ws) {
    end.wait_status = ws;
  }
  step_failure f{};
  if (ch.errors.read && ::read(ch.errors.read.get(), &f, sizeof f) == sizeof f && !end.failure) {
    end.failure = f;
  }
  return true;
}

void supervisor::enforce_limits(clock::time_point wall_deadline) {
  sample_disk(/*now=*/false);
  if (clock::now() >= wall_deadline) kill_run(outcome_kind::timed_out);
  if (!cg_ || !plan_.limits.cpu_ms) return;
  // Every 20 ms at most, as the disk: this runs after each wake-up of the poll (each output,
  // each pipe's end), and a read of the CPU time opens a cgroup file by its path (~30 µs; a
  // launch of /bin/true woke five to eight times, all on its way to the record).
  const auto t = clock::now();
  if (t < next_cpu_check_) return;
  next_cpu_check_ = t + std::chrono::milliseconds(20);
  if (cg_->read_cpu_ns() / 1000000 >= plan_.limits.cpu_ms) kill_run(outcome_kind::cpu_limit);
}

void supervisor::kill_run(outcome_kind why) {
  if (!forced_) forced_ = why;
  // SIGKILL to pid 1 of the run: the kernel kills the whole pid namespace with it.
  (void)child_.signal(SIGKILL);
}

// What the run's end means: a failed step is the sandbox's error; otherwise decide_outcome
// (outcome.h) weighs evalbox's own kill, the OOM killer and the program's exit or signal.
void supervisor::classify(const compiled& c, const ending& end) {
  const rusage& ru = end.usage;
  const uint64_t cpu_ms = static_cast<uint64_t>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000 +
                          static_cast<uint64_t>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000;
  cgroup::usage u;
  if (cg_) {
    if (auto r = cg_->read_usage()) u = *r;
  }
  sample_disk(/*now=*/true);
  rec_.cpu_ms = std::max<uint64_t>(cpu_ms, u.cpu_ns / 1000000);
  rec_.peak_memory_bytes = u.peak_memory_bytes;
  rec_.pids_limit_hit = u.pids_limit_hit;
  rec_.oom_kills = u.oom_kills;
  rec_.disk_limit_hit = disk_full_;
  if (end.failure) {
    const auto& steps = end.failure->phase == 0 ? c.ctx.setup : c.ctx.program;
    const auto index = static_cast<size_t>(end.failure->index);
    const char* name = index < steps.size() ? steps[index].name : "fork program";
    rec_.error_step = name;
    rec_.error = fmt::format("step {}: {}: {}", name, errno_name(end.failure->err),
                             std::strerror(end.failure->err));
    return;
  }
  const decided d = decide_outcome(
      {forced_, end.wait_status, end.init_status, u.oom_kills, rec_.cpu_ms, plan_.limits.cpu_ms});
  if (!d.outcome) {
    rec_.error = d.error;
    rec_.error_step = d.error_step;
    return;
  }
  rec_.outcome = *d.outcome;
  rec_.exit_code = d.exit_code;
  rec_.signal = d.signal;
}

// The run's disk is the tmpfs of its workspace and home (as root: plan_.disk_quota); a full
// one refuses writes with ENOSPC, which no counter records. Sampled at most every 20 ms while
// the run lasts (statfs, about a microsecond) and once at its end.
// An ephemeral-write mount's own tmpfs (plan_.quota_dirs) counts the same way.
void supervisor::sample_disk(bool now) {
  if (disk_full_) return;
  const bool home = plan_.disk_quota && !plan_.home_dir.empty();
  if (!home && plan_.quota_dirs.empty()) return;
  const auto t = clock::now();
  if (!now && t < next_disk_sample_) return;
  next_disk_sample_ = t + std::chrono::milliseconds(20);
  auto full = [](const std::string& dir) {
    struct statfs sf {};
    return ::statfs(dir.c_str(), &sf) == 0 && sf.f_blocks > 0 && sf.f_bavail == 0;
  };
  if (home && full(plan_.home_dir)) disk_full_ = true;
  for (const auto& d : plan_.quota_dirs)
    if (full(d)) disk_full_ = true;
}

json supervisor::mechanisms(const compiled& c) const {
  json mech = json::object();
  mech["user_ns"] = {{"host_uid", plan_.host_uid}, {"host_gid", plan_.host_gid}};
  mech["landlock_abi"] = c.ll.abi;
  if (c.ll.abi == 0) mech["landlock_reason"] = c.landlock_reason;
  mech["seccomp_digest"] = seccomp::builtin().digest;
  mech["capabilities"] =
      c.ctx.keep_setfcap ? "CAP_SETFCAP (namespace-local, nested sandboxes)" : "none";
  mech["no_new_privs"] = true;
  // The host's network is only ever there by the unsafe opt-in (compile() refuses it else).
  mech["network"] = fmt::format("{}{}", to_string(plan_.network.mode),
                                plan_.network.mode == network_mode::host ? " (unsafe)" : "");
  mech["cgroup"] = "none";
  // What the program saw as /: the host's allow-listed directories, or an image's layers under
  // the run's own writable layer.
  if (plan_.image) {
    mech["root"] = {{"kind", "image"},
                    {"image", plan_.image->id},
                    {"reference", plan_.image->reference},
                    {"manifest_digest", plan_.image->manifest_digest},
                    {"layers", plan_.image->layers},
                    {"mount", "overlay (userxattr, nosuid, nodev) in the run's user namespace"}};
  } else {
    mech["root"] = {{"kind", "host"}, {"mount", "tmpfs with read-only binds (allow-list)"}};
  }
  return mech;
}

// Each limit with the mechanisms that enforced it (0 = no limit).
json supervisor::limits_by_mechanism() const {
  const std::string cg = cg_ ? fmt::format("cgroup {}", cg_->version()) : "";
  const auto& l = plan_.limits;
  auto by = [](std::initializer_list<std::string> parts) {
    json a = json::array();
    for (const auto& p : parts) {
      if (!p.empty()) a.push_back(p);
    }
    return a;
  };
  return {
      {"memory_bytes", {{"value", l.memory_bytes}, {"by", by({cg})}}},
      {"pids", {{"value", l.pids}, {"by", by({cg})}}},
      {"cpu_ms",
       {{"value", l.cpu_ms}, {"by", by({cg.empty() ? "" : cg + " accounting", "RLIMIT_CPU"})}}},
      {"wall_ms", {{"value", l.wall_ms}, {"by", by({"helper"})}}},
      {"output_bytes",
       {{"value", l.output_bytes},
        {"by", by({plan_.inherit_stdio && !plan_.terminal ? "" : "helper"})}}},
      {"disk_bytes",
       {{"value", l.disk_bytes},
        {"by", by({"RLIMIT_FSIZE", plan_.disk_quota ? "tmpfs size" : ""})}}},
  };
}

void supervisor::drop_starter() noexcept {
  cg_ahead_.reset();
  born_in_cgroup_ = false;
}

status supervisor::take_cgroup(bool wait) {
  if (!cgroup_fd_) {
    if (cg_taken_) return {};
    cg_taken_ = true;
    const std::string leaf = fmt::format("{}-{}", plan_.label, plan_.seq);
    const cgroup::limits lim{plan_.limits.memory_bytes, plan_.limits.pids};
    if (cg_ahead_) {
      // The cgroups made ahead become the run's, the starter in them; where that fails
      // (removed meanwhile), they go with their starter and the cgroup is made now.
      auto cg = cg_ahead_->take_cgroup();
      status claimed = cg->claim(plan_.run_id, leaf, lim);
      if (claimed) {
        cg_ = std::move(cg);
        born_in_cgroup_ = true;
        return {};
      }
      log::debug("helper: cgroups made ahead not used: {}", claimed.error().message);
      cg.reset();  // removed (and the starter in it killed) before the one made now
      drop_starter();
    }
    if (auto cg = cgroup::create_for_host(cgroups_, plan_.run_id, leaf, lim)) {
      cg_ = std::move(*cg);
    } else if (root_) {
      return std::unexpected(std::move(cg.error()).with_context("create the run's cgroup"));
    }
    return {};
  }
  // One JSON message from the launcher, then end of file: {"cgroup": description} or
  // {"error": why it could not make one}. Without `wait`, only what has arrived is read.
  char buf[4096];
  for (;;) {
    ssize_t n = ::recv(cgroup_fd_.get(), buf, sizeof buf, wait ? 0 : MSG_DONTWAIT);
    if (n > 0) {
      cg_message_.append(buf, static_cast<size_t>(n));
    } else if (n == 0) {
      break;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      return {};  // not complete yet: taken after clone3
    } else if (errno != EINTR) {
      return sys_error(errno, "read the run's cgroup from the launcher");
    }
  }
  cgroup_fd_.reset();
  cg_taken_ = true;
  drop_starter();  // the launcher made the cgroup: none made ahead is used
  auto msg = EB_TRY_CTX(parse_json(cg_message_, "the launcher's cgroup message"),
                        "take over the run's cgroup");
  if (msg.is_object() && msg.contains("cgroup")) {
    cg_ = EB_TRY_CTX(cgroup::adopt(msg["cgroup"]), "take over the run's cgroup");
    return {};
  }
  if (!root_) return {};  // without root, runs go without a cgroup (recorded)
  const std::string why = msg.is_object() && msg.contains("error") && msg["error"].is_string()
                              ? msg["error"].get<std::string>()
                              : "the launcher sent none";
  return make_error(error_kind::unsupported, "create the run's cgroup: {}", why);
}

}  // namespace evalbox::sandbox::helper
