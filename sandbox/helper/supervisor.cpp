// The helper's supervision (supervisor.h).
#include "sandbox/helper/supervisor.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>

#include "sandbox/base/json.h"
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

void supervisor::kill_run(outcome_kind why) {
  if (!forced_) forced_ = why;
  // SIGKILL to pid 1 of the run: the kernel kills the whole pid namespace with it.
  if (pidfd_) sys::pidfd_send_signal(pidfd_.get(), SIGKILL, nullptr, 0);
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

status supervisor::run() {
  compiled c;
  EB_TRY_CTX(compile(plan_, c), "compile the launch plan");
  rec_.binding_digest = plan_.binding_digest;
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
  rec_.mechanisms = mech;
  auto st = start(c);
  const std::string cg = cg_ ? fmt::format("cgroup {}", cg_->version()) : "";
  rec_.mechanisms["cgroup"] = cg_ ? std::string(cg_->version()) : "none";
  // Each limit with the mechanisms that enforced it (0 = no limit).
  const auto& l = plan_.limits;
  auto by = [](std::initializer_list<std::string> parts) {
    json a = json::array();
    for (const auto& p : parts) {
      if (!p.empty()) a.push_back(p);
    }
    return a;
  };
  rec_.mechanisms["limits"] = {
      {"memory_bytes", {{"value", l.memory_bytes}, {"by", by({cg})}}},
      {"pids", {{"value", l.pids}, {"by", by({cg})}}},
      {"cpu_ms",
       {{"value", l.cpu_ms}, {"by", by({cg.empty() ? "" : cg + " accounting", "RLIMIT_CPU"})}}},
      {"wall_ms", {{"value", l.wall_ms}, {"by", by({"helper"})}}},
      {"output_bytes",
       {{"value", l.output_bytes}, {"by", by({plan_.inherit_stdio ? "" : "helper"})}}},
      {"disk_bytes",
       {{"value", l.disk_bytes},
        {"by", by({"RLIMIT_FSIZE", plan_.disk_quota ? "tmpfs size" : ""})}}},
  };
  if (cg_) {
    // Not a failure of the run: the preparer's reclaim removes what is left. Said on stderr.
    if (auto d = cg_->destroy(); !d) {
      std::fprintf(stderr, "evalbox-sandbox: remove the run's cgroup: %s\n",
                   d.error().message.c_str());
    }
  }
  return st;
}

status supervisor::take_cgroup(bool root, bool wait) {
  if (!cgroup_fd_) {
    if (cg_taken_) return {};
    cg_taken_ = true;
    const std::string leaf = fmt::format("{}-{}", plan_.label, plan_.seq);
    if (auto cg = cgroup::create_for_host(plan_.run_id, leaf,
                                          {plan_.limits.memory_bytes, plan_.limits.pids})) {
      cg_ = std::move(*cg);
    } else if (root) {
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
  auto msg = EB_TRY_CTX(parse_json(cg_message_, "the launcher's cgroup message"),
                        "take over the run's cgroup");
  if (msg.is_object() && msg.contains("cgroup")) {
    cg_ = EB_TRY_CTX(cgroup::adopt(msg["cgroup"]), "take over the run's cgroup");
    return {};
  }
  if (!root) return {};  // without root, runs go without a cgroup (recorded)
  const std::string why = msg.is_object() && msg.contains("error") && msg["error"].is_string()
                              ? msg["error"].get<std::string>()
                              : "the launcher sent none";
  return make_error(error_kind::unsupported, "create the run's cgroup: {}", why);
}

status supervisor::start(compiled& c) {
  // Standard streams.
  unique_fd stdin_fd;
  pipe_pair outp, errp;
  const bool merged = !plan_.inherit_stdio && plan_.stdout_path == plan_.stderr_path;
  if (!plan_.inherit_stdio) {
    const char* in = plan_.stdin_path.empty() ? "/dev/null" : plan_.stdin_path.c_str();
    stdin_fd.reset(::open(in, O_RDONLY | O_CLOEXEC));
    if (!stdin_fd) return sys_error(errno, "open stdin {}", in);
    auto open_out = [](const std::string& p) {
      return unique_fd(::open(p.empty() ? "/dev/null" : p.c_str(),
                              O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    };
    out_.file = open_out(plan_.stdout_path);
    if (!out_.file) return sys_error(errno, "open stdout {}", plan_.stdout_path);
    outp = EB_TRY(make_pipe(O_CLOEXEC | O_NONBLOCK));
    out_.pipe = std::move(outp.read);
    out_.open = true;
    if (!merged) {
      err_.file = open_out(plan_.stderr_path);
      if (!err_.file) return sys_error(errno, "open stderr {}", plan_.stderr_path);
      errp = EB_TRY(make_pipe(O_CLOEXEC | O_NONBLOCK));
      err_.pipe = std::move(errp.read);
      err_.open = true;
    }
    c.ctx.stdin_fd = stdin_fd.get();
    c.ctx.stdout_fd = outp.write.get();
    c.ctx.stderr_fd = merged ? outp.write.get() : errp.write.get();
  }
  auto sync = EB_TRY(make_pipe());
  auto errors = EB_TRY(make_pipe());
  auto status_p = EB_TRY(make_pipe());
  unique_fd net_parent, net_child;
  if (!c.allow.listeners.empty()) {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
      return sys_error(errno, "socketpair");
    }
    net_parent.reset(sv[0]);
    net_child.reset(sv[1]);
  }
  c.ctx.sync_fd = sync.read.get();
  c.ctx.error_fd = errors.write.get();
  c.ctx.status_fd = status_p.write.get();
  c.ctx.net_fd = net_child.get();
  const bool root = ::geteuid() == 0;
  c.ctx.map_groups = root;

  // The run's cgroup. The child waits for release, which comes only once it is in there, so
  // no task of the run is ever outside; a cgroup already here (v2) is cloned into directly.
  EB_TRY(take_cgroup(root, /*wait=*/false));

  // Termination requests arrive through a signalfd; the child unblocks them for itself.
  sigset_t mask;
  sigemptyset(&mask);
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGCHLD}) sigaddset(&mask, sig);
  ::sigprocmask(SIG_BLOCK, &mask, nullptr);
  unique_fd sigfd(::signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK));
  if (!sigfd) return sys_error(errno, "signalfd");

  uint64_t flags =
      CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_PIDFD;
  if (plan_.network.mode != network_mode::host) flags |= CLONE_NEWNET;
  int pidfd_raw = -1;
  clone_args args{};
  args.flags = flags;
  args.pidfd = reinterpret_cast<uint64_t>(&pidfd_raw);
  args.exit_signal = SIGCHLD;
  const bool into_cgroup = cg_ && cg_->clone_into_fd() >= 0;
  if (into_cgroup) {
    args.flags |= CLONE_INTO_CGROUP;
    args.cgroup = static_cast<uint64_t>(cg_->clone_into_fd());
  }
  const auto started = clock::now();
  pid_t pid = sys::clone3(&args);
  if (pid < 0)
    return sys_error(errno, "clone3(user, mount, pid, ipc, uts{})",
                     (flags & CLONE_NEWNET) ? ", net" : "");
  if (pid == 0) child_main(c.ctx);
  pid_ = pid;
  pidfd_.reset(pidfd_raw);

  // Release only once ids and cgroup are in place; on any failure here the child is killed.
  auto release = [&]() -> status {
    const uid_t uid = root ? plan_.host_uid : ::getuid();
    const gid_t gid = root ? plan_.host_gid : ::getgid();
    if (!root) EB_TRY(write_proc(pid, "setgroups", "deny"));
    EB_TRY(write_proc(pid, "uid_map", fmt::format("0 {} 1\n", uid)));
    EB_TRY(write_proc(pid, "gid_map", fmt::format("0 {} 1\n", gid)));
    EB_TRY(take_cgroup(root, /*wait=*/true));  // if the launcher's had not arrived before
    if (cg_ && !into_cgroup) EB_TRY(cg_->add_pid(pid));
    // Pid 1 must outlive the program under memory pressure so the report gets out; the
    // program's process resets this to 0. Needs CAP_SYS_RESOURCE: best effort.
    (void)write_proc(pid, "oom_score_adj", "-1000");
    if (::write(sync.write.get(), "x", 1) != 1) return sys_error(errno, "release the child");
    return {};
  };
  sync.read.reset();
  errors.write.reset();
  status_p.write.reset();
  net_child.reset();
  outp.write.reset();
  errp.write.reset();
  stdin_fd.reset();
  if (auto r = release(); !r) {
    kill_run(outcome_kind::exited);
    ::waitpid(pid, nullptr, 0);
    return std::unexpected(std::move(r.error()).with_context("set up the child"));
  }
  sync.write.reset();

  std::optional<net::relay> relay;
  if (!c.allow.listeners.empty()) relay.emplace(c.allow);
  ::fcntl(status_p.read.get(), F_SETFL, O_NONBLOCK);
  ::fcntl(errors.read.get(), F_SETFL, O_NONBLOCK);

  std::optional<int> wait_status;
  std::optional<step_failure> failure;
  bool exited = false;
  rusage ru{};
  int exit_raw = 0;
  std::optional<clock::time_point> drain_deadline;
  const auto wall_deadline = plan_.limits.wall_ms
                                 ? started + std::chrono::milliseconds(plan_.limits.wall_ms)
                                 : clock::time_point::max();
  for (;;) {
    if (exited &&
        ((!out_.open && !err_.open) || (drain_deadline && clock::now() > *drain_deadline))) {
      break;
    }
    std::vector<pollfd> fds = {
        {pidfd_.get(), static_cast<short>(exited ? 0 : POLLIN), 0},
        {sigfd.get(), POLLIN, 0},
        {out_.open ? out_.pipe.get() : -1, POLLIN, 0},
        {err_.open ? err_.pipe.get() : -1, POLLIN, 0},
        {status_p.read ? status_p.read.get() : -1, POLLIN, 0},
        {errors.read ? errors.read.get() : -1, POLLIN, 0},
        {net_parent ? net_parent.get() : -1, POLLIN, 0},
    };
    if (relay) relay->fill(fds);
    int n = ::poll(fds.data(), fds.size(), 25);
    if (n < 0 && errno != EINTR) return sys_error(errno, "poll");
    if (fds[1].revents & POLLIN) {
      signalfd_siginfo si{};
      while (::read(sigfd.get(), &si, sizeof si) == sizeof si) {
        if (si.ssi_signo == SIGCHLD) continue;
        // With a terminal passed through, Ctrl-C is the program's to handle.
        if (si.ssi_signo == SIGINT && plan_.inherit_stdio) continue;
        kill_run(outcome_kind::cancelled);
      }
    }
    if (fds[2].revents) on_output(out_);
    if (fds[3].revents) on_output(err_);
    if (fds[4].revents) {
      int ws = 0;
      ssize_t r = ::read(status_p.read.get(), &ws, sizeof ws);
      if (r == sizeof ws) wait_status = ws;
      if (r == 0 || r == sizeof ws) status_p.read.reset();
    }
    if (fds[5].revents) {
      step_failure f{};
      ssize_t r = ::read(errors.read.get(), &f, sizeof f);
      if (r == sizeof f && !failure) failure = f;
      if (r == 0) errors.read.reset();
    }
    if (fds[6].revents & POLLIN) {
      // One byte (the listener's index in the plan) with the socket attached.
      unsigned char index = 0;
      int fd = -1;
      if (sys::recv_fd(net_parent.get(), &index, 1, &fd) == 1) {
        if (fd >= 0) relay->add_listener(index, unique_fd(fd));
      } else {
        net_parent.reset();
      }
    }
    if (relay) relay->handle(fds);
    if (!exited && (fds[0].revents & POLLIN)) {
      // Pid 1 is gone: the run is over (every other process of it dies with it).
      if (::wait4(pid_, &exit_raw, 0, &ru) == pid_) {
        exited = true;
        rec_.wall_ms = static_cast<uint64_t>(
            std::chrono::duration_cast<std::chrono::milliseconds>(clock::now() - started).count());
        drain_deadline = clock::now() + std::chrono::seconds(2);
        // Collect a last report still in the pipes.
        int ws = 0;
        if (status_p.read && ::read(status_p.read.get(), &ws, sizeof ws) == sizeof ws) {
          wait_status = ws;
        }
        step_failure f{};
        if (errors.read && ::read(errors.read.get(), &f, sizeof f) == sizeof f && !failure) {
          failure = f;
        }
      }
    }
    if (!exited) {
      if (clock::now() >= wall_deadline) kill_run(outcome_kind::timed_out);
      if (cg_ && plan_.limits.cpu_ms) {
        if (auto u = cg_->read_usage(); u && u->cpu_ns / 1000000 >= plan_.limits.cpu_ms) {
          kill_run(outcome_kind::cpu_limit);
        }
      }
    }
  }
  if (relay) {
    for (const auto& a : relay->attempts()) {
      rec_.connections.push_back({a.target, a.allowed, a.via, a.detail});
    }
  }
  uint64_t cpu_ms = static_cast<uint64_t>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000 +
                    static_cast<uint64_t>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000;
  cgroup::usage u;
  if (cg_) {
    if (auto r = cg_->read_usage()) u = *r;
  }
  rec_.cpu_ms = std::max<uint64_t>(cpu_ms, u.cpu_ns / 1000000);
  rec_.peak_memory_bytes = u.peak_memory_bytes;
  rec_.pids_limit_hit = u.pids_limit_hit;
  if (failure) {
    const auto& steps = failure->phase == 0 ? c.ctx.setup : c.ctx.program;
    const char* name = static_cast<size_t>(failure->index) < steps.size()
                           ? steps[static_cast<size_t>(failure->index)].name
                           : "fork program";
    rec_.error_step = name;
    rec_.error =
        fmt::format("step {}: {}: {}", name, errno_name(failure->err), std::strerror(failure->err));
    return {};
  }
  if (forced_) {
    rec_.outcome = *forced_;
    return {};
  }
  if (!wait_status) {
    // Pid 1 died without a report: only the OOM killer does that (pid 1 is protected, but
    // not beyond the memory limit of its own cgroup), or a kill from outside.
    if (u.oom_kills > 0) {
      rec_.outcome = outcome_kind::oom_killed;
      return {};
    }
    rec_.error_step = "init";
    rec_.error = WIFSIGNALED(exit_raw)
                     ? fmt::format(
                           "pid 1 of the run was killed by signal {} from outside the sandbox "
                           "(not by evalbox-sandbox) before the program finished",
                           WTERMSIG(exit_raw))
                     : fmt::format("pid 1 of the run exited with status {} without a report",
                                   WEXITSTATUS(exit_raw));
    return {};
  }
  const int ws = *wait_status;
  if (WIFEXITED(ws)) {
    rec_.outcome = outcome_kind::exited;
    rec_.exit_code = WEXITSTATUS(ws);
  } else if (WIFSIGNALED(ws)) {
    const int sig = WTERMSIG(ws);
    if (sig == SIGKILL && u.oom_kills > 0) {
      rec_.outcome = outcome_kind::oom_killed;
    } else if (sig == SIGXCPU ||
               (sig == SIGKILL && plan_.limits.cpu_ms && rec_.cpu_ms >= plan_.limits.cpu_ms)) {
      rec_.outcome = outcome_kind::cpu_limit;  // RLIMIT_CPU, the second fence
    } else {
      rec_.outcome = outcome_kind::signaled;
      rec_.signal = sig;
    }
  }
  return {};
}

}  // namespace evalbox::sandbox::helper
