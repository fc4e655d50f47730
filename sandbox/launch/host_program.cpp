// run_host_program (see host_program.h): the program's environment and path, its standard
// streams, posix_spawn into an owned_process, then one poll loop that reads the captured output,
// waits for the end and enforces the timeout.
#include "sandbox/launch/host_program.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <utility>

#include "base/unique_fd.h"
#include "sandbox/sys/process.h"
#include "sandbox/sys/syscalls.h"

extern char** environ;

namespace evalbox::sandbox {
inline namespace launch {

namespace fs = std::filesystem;
using std::chrono::steady_clock;

namespace {

// The program's environment as "NAME=value" strings: `env` alone, or evalbox's own with `env`
// set over it.
std::vector<std::string> environment_of(const host_program& program) {
  std::vector<std::string> out;
  if (program.inherit_env)
    for (char** e = environ; e && *e; ++e) {
      const std::string_view entry(*e);
      const auto eq = entry.find('=');
      if (eq == std::string_view::npos || !program.env.contains(std::string(entry.substr(0, eq))))
        out.emplace_back(entry);
    }
  for (const auto& [k, v] : program.env) out.push_back(k + "=" + v);
  return out;
}

// The PATH of that environment, if it has one.
std::optional<std::string_view> path_of(const std::vector<std::string>& env) {
  for (const auto& e : env)
    if (e.starts_with("PATH=")) return std::string_view(e).substr(5);
  return std::nullopt;
}

// What the program's fds 0, 1 and 2 are made from; evalbox's ends close-on-exec from the start,
// so that a child another thread starts meanwhile (a warm sandbox helper waits for minutes)
// never holds the pipe and keeps the read of the output from seeing its end.
struct streams {
  unique_fd input;                // the input's memory file; none: /dev/null
  unique_fd log;                  // opened when a stream goes to the log
  unique_fd read_end, write_end;  // the capture pipe, when a stream is captured
};

result<streams> open_streams(const host_program& program, const fs::path& exe) {
  streams s;
  if (program.input) {
    s.input.reset(::memfd_create("evalbox-stdin", MFD_CLOEXEC));
    if (!s.input) return sys_error(errno, "memfd_create");
    std::string_view left = *program.input;
    while (!left.empty()) {
      const ssize_t n = ::write(s.input.get(), left.data(), left.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return sys_error(errno, "write the input of {}", exe.string());
      left.remove_prefix(static_cast<size_t>(n));
    }
    if (::lseek(s.input.get(), 0, SEEK_SET) != 0)
      return sys_error(errno, "rewind the input of {}", exe.string());
  }
  const auto to = [&](host_output o) { return program.stdout_to == o || program.stderr_to == o; };
  if (to(host_output::log)) {
    if (program.log.empty())
      return make_error(error_kind::invalid_argument, "{}: output to a log, but no log named",
                        exe.string());
    s.log.reset(::open(program.log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
    if (!s.log) return sys_error(errno, "open {}", program.log.string());
  }
  if (to(host_output::capture)) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return sys_error(errno, "pipe2");
    s.read_end.reset(fds[0]);
    s.write_end.reset(fds[1]);
  }
  return s;
}

// posix_spawn's attributes and file actions, destroyed on every path. Each add_* keeps the first
// failure (ENOMEM), which spawn() reports.
class spawn_setup {
 public:
  spawn_setup() noexcept {
    ::posix_spawnattr_init(&attr_);
    ::posix_spawn_file_actions_init(&actions_);
  }
  ~spawn_setup() {
    ::posix_spawn_file_actions_destroy(&actions_);
    ::posix_spawnattr_destroy(&attr_);
  }
  spawn_setup(const spawn_setup&) = delete;
  spawn_setup& operator=(const spawn_setup&) = delete;

  void dup2(int fd, int target) { keep(::posix_spawn_file_actions_adddup2(&actions_, fd, target)); }
  void open(int target, const char* path, int flags) {
    keep(::posix_spawn_file_actions_addopen(&actions_, target, path, flags, 0));
  }
  void chdir(const fs::path& dir) {
    keep(::posix_spawn_file_actions_addchdir_np(&actions_, dir.c_str()));
  }
  void close_from(int fd) { keep(::posix_spawn_file_actions_addclosefrom_np(&actions_, fd)); }
  // A signal mask of nothing and every signal at its default: the program starts as a shell
  // would start it, not with the mask of evalbox's worker threads (which block SIGINT and
  // SIGTERM for the thread that waits for them) or a signal evalbox ignores.
  void default_signals(bool own_group) {
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    short flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
    if (own_group) {
      flags |= POSIX_SPAWN_SETPGROUP;
      keep(::posix_spawnattr_setpgroup(&attr_, 0));
    }
    keep(::posix_spawnattr_setsigmask(&attr_, &none));
    keep(::posix_spawnattr_setsigdefault(&attr_, &all));
    keep(::posix_spawnattr_setflags(&attr_, flags));
  }

  [[nodiscard]] int failed() const { return failed_; }
  const posix_spawn_file_actions_t* actions() const { return &actions_; }
  const posix_spawnattr_t* attr() const { return &attr_; }

 private:
  void keep(int rc) {
    if (rc != 0 && failed_ == 0) failed_ = rc;
  }
  posix_spawnattr_t attr_;
  posix_spawn_file_actions_t actions_;
  int failed_ = 0;
};

// Makes `target` (1 or 2) what `to` says.
void route(spawn_setup& setup, const streams& s, host_output to, int target) {
  switch (to) {
    case host_output::capture:
      setup.dup2(s.write_end.get(), target);
      break;
    case host_output::log:
      setup.dup2(s.log.get(), target);
      break;
    case host_output::inherit:
      break;
    case host_output::discard:
      setup.open(target, "/dev/null", O_WRONLY);
      break;
  }
}

// The one posix_spawn of evalbox: `exe` started with `setup`, owned from here (killed and reaped
// on every early return). No pid-reuse race: the child is not reaped before the pidfd is open;
// without pidfds (Linux < 5.3) the waits poll instead. `where` is added to the error.
result<sys::owned_process> spawn_owned(const fs::path& exe, const spawn_setup& setup,
                                       char* const* argv, char* const* envp,
                                       const std::string& where = "") {
  pid_t pid = -1;
  if (const int rc = ::posix_spawn(&pid, exe.c_str(), setup.actions(), setup.attr(), argv, envp);
      rc != 0)
    return sys_error(rc, "start {}{}", exe.string(), where);
  return sys::owned_process(pid, unique_fd(sys::pidfd_open(pid, 0)));
}

// Starts the program; from here an owned_process kills and reaps it on every early return.
result<sys::owned_process> spawn(const host_program& program, const fs::path& exe,
                                 const std::vector<std::string>& env, const streams& s) {
  spawn_setup setup;
  if (s.input)
    setup.dup2(s.input.get(), STDIN_FILENO);
  else
    setup.open(STDIN_FILENO, "/dev/null", O_RDONLY);
  route(setup, s, program.stdout_to, STDOUT_FILENO);
  route(setup, s, program.stderr_to, STDERR_FILENO);
  if (!program.cwd.empty()) setup.chdir(program.cwd);
  setup.close_from(STDERR_FILENO + 1);
  setup.default_signals(program.own_process_group);
  if (setup.failed()) return sys_error(setup.failed(), "prepare to start {}", exe.string());

  std::vector<char*> argv, envp;
  for (const auto& a : program.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  return spawn_owned(exe, setup, argv.data(), envp.data(),
                     program.cwd.empty() ? "" : " in " + program.cwd.string());
}

// Whether the child has exited, without reaping it (it stays a zombie, so neither its pid nor
// its process group id can be reused until reap()).
bool has_exited(const sys::owned_process& child) {
  siginfo_t si{};
  return ::waitid(P_PID, static_cast<id_t>(child.pid()), &si, WEXITED | WNOHANG | WNOWAIT) != 0 ||
         si.si_pid == child.pid();
}

// SIGKILL to the program, or to its whole process group when it leads one. Only while the
// child is unreaped: its pid is then also its group's id, and neither can be reused.
void kill_program(const sys::owned_process& child, bool own_group) {
  if (own_group)
    (void)::kill(-child.pid(), SIGKILL);
  else
    (void)child.signal(SIGKILL);
}

// Reads the capture pipe to its end and waits for the child to exit (not reaping it), killing it
// at the deadline. The pipe is read to its end even after the child exits (a process it left
// behind may still write), unless the deadline killed them: then what is left in the pipe is
// taken and the rest given up (a process that left the group may hold the pipe forever).
status supervise(const host_program& program, const sys::owned_process& child,
                 const unique_fd& pipe, host_program_result& out) {
  // A plain time point with a flag, not an optional: GCC 12 warns that the optional's value
  // may be used uninitialized (-Wmaybe-uninitialized) where it cannot be.
  const bool has_deadline = program.timeout.has_value();
  const auto deadline =
      steady_clock::now() + program.timeout.value_or(std::chrono::milliseconds(0));
  bool reading = static_cast<bool>(pipe);
  bool exited = false, killed = false;
  int drain_reads = 64;  // after the kill: at most this many reads (a pipe holds up to 1 MiB)
  char buf[16384];
  while (reading || !exited) {
    pollfd fds[2];
    nfds_t n = 0;
    int pipe_at = -1, pidfd_at = -1;
    if (reading) {
      pipe_at = static_cast<int>(n);
      fds[n++] = {pipe.get(), POLLIN, 0};
    }
    if (!exited && child.pidfd() >= 0) {
      pidfd_at = static_cast<int>(n);
      fds[n++] = {child.pidfd(), POLLIN, 0};
    }
    int wait_ms = -1;
    if (killed && exited) {
      wait_ms = 0;  // only what is in the pipe already
    } else if (has_deadline && !killed) {
      const auto left =
          std::chrono::ceil<std::chrono::milliseconds>(deadline - steady_clock::now());
      wait_ms = static_cast<int>(std::clamp<int64_t>(left.count(), 0, 1 << 30));
    }
    if (!exited && child.pidfd() < 0) wait_ms = wait_ms < 0 ? 20 : std::min(wait_ms, 20);
    const int ready = ::poll(fds, n, wait_ms);
    if (ready < 0 && errno != EINTR) {
      const int err = errno;
      kill_program(child, program.own_process_group);
      return sys_error(err, "poll");
    }
    if (ready > 0 && pidfd_at >= 0 && fds[pidfd_at].revents != 0) exited = true;
    if (!exited && child.pidfd() < 0) exited = has_exited(child);
    if (ready > 0 && pipe_at >= 0 && fds[pipe_at].revents != 0) {
      const ssize_t got = ::read(pipe.get(), buf, sizeof buf);
      if (got > 0) {
        out.output.append(buf, static_cast<size_t>(got));
        if (out.output.size() > 2 * program.max_output)
          out.output.erase(0, out.output.size() - program.max_output);
      } else if (got == 0 || errno != EINTR) {
        reading = false;
      }
      if (killed && exited && --drain_reads == 0) break;
    } else if (killed && exited && ready == 0) {
      break;  // the pipe holds nothing more
    }
    // Checked on every pass, so that a program that writes without end still times out.
    if (has_deadline && !killed && steady_clock::now() >= deadline) {
      kill_program(child, program.own_process_group);
      killed = out.timed_out = true;
    }
  }
  if (out.output.size() > program.max_output)
    out.output.erase(0, out.output.size() - program.max_output);
  return {};
}

}  // namespace

result<sys::owned_process> start_host_process(const host_process& process) {
  spawn_setup setup;
  if (process.stdin_null) setup.open(STDIN_FILENO, "/dev/null", O_RDONLY);
  int highest = STDERR_FILENO;
  for (const auto& [fd, target] : process.fds) {
    setup.dup2(fd, target);
    highest = std::max(highest, target);
  }
  setup.close_from(highest + 1);
  if (setup.failed()) return sys_error(setup.failed(), "prepare to start {}", process.exe.string());
  const std::string path = process.exe.string();
  std::vector<char*> argv{const_cast<char*>(path.c_str())};
  for (const auto& a : process.args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  return spawn_owned(process.exe, setup, argv.data(), environ);
}

fs::path find_host_program(std::string_view name, std::optional<std::string_view> path) {
  if (name.empty()) return {};
  if (name.find('/') != std::string_view::npos) return fs::path(name);
  if (!path) {
    const char* own = std::getenv("PATH");
    path = own ? std::string_view(own) : std::string_view("/usr/bin:/bin");
  }
  std::string_view dirs = *path;
  while (!dirs.empty()) {
    const auto colon = dirs.find(':');
    const std::string_view dir = dirs.substr(0, colon);
    dirs = colon == std::string_view::npos ? std::string_view() : dirs.substr(colon + 1);
    if (dir.empty()) continue;
    fs::path candidate = fs::path(dir) / name;
    struct stat st {};
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        ::access(candidate.c_str(), X_OK) == 0)
      return candidate;
  }
  return {};
}

result<host_program_result> run_host_program(const host_program& program) {
  if (program.argv.empty()) return make_error(error_kind::invalid_argument, "no program to run");
  const std::vector<std::string> env = environment_of(program);
  // The program is found on its own PATH, not evalbox's (unless it has none).
  const fs::path exe = find_host_program(program.argv[0], path_of(env));
  if (exe.empty())
    return make_error(error_kind::not_found, "{} is not installed (not found on PATH)",
                      program.argv[0]);
  auto s = EB_TRY(open_streams(program, exe));
  auto child = EB_TRY(spawn(program, exe, env, s));
  s.write_end.reset();  // the program holds it now: the pipe ends when the program's copies do
  s.input.reset();
  host_program_result out;
  EB_TRY(supervise(program, child, s.read_end, out));
  // What the program left running in its group (a background job) ends with it.
  if (program.own_process_group) kill_program(child, true);
  int wait_status = 0;
  if (child.reap(&wait_status, nullptr) < 0) return sys_error(errno, "wait for {}", exe.string());
  if (WIFSIGNALED(wait_status)) {
    out.signal = WTERMSIG(wait_status);
    out.exit_code = -1;
  } else {
    out.exit_code = WEXITSTATUS(wait_status);
  }
  return out;
}

}  // namespace launch
}  // namespace evalbox::sandbox
