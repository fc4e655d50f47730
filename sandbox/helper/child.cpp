// The child's step interpreter. Everything here runs after clone3 in the sandbox child: only
// system calls on precomputed data, no allocation, no locks, no exceptions.
#include "sandbox/helper/child.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/unique_fd.h"
#include "sandbox/cgroup/cgroup.h"
#include "sandbox/protocol/serve_wire.h"
#include "sandbox/sys/fd_passing.h"
#include "sandbox/sys/syscalls.h"

namespace evalbox::sandbox::helper {
namespace {

void write_all(int fd, const void* buf, size_t n) noexcept {
  const char* p = static_cast<const char*>(buf);
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    p += w;
    n -= static_cast<size_t>(w);
  }
}

// Serve mode: the failure of an exec's step, written by its process into the memory it shares
// with pid 1 until exec (start_program), read by pid 1 once the clone returns.
step_failure g_exec_failure;
bool g_exec_failed = false;

[[noreturn]] void fail(const child_context& ctx, int phase, size_t index, int err) noexcept {
  step_failure f{phase, static_cast<int32_t>(index), err == 0 ? EIO : err};
  if (ctx.error_fd < 0) {  // serve mode: an exec's process
    g_exec_failure = f;
    g_exec_failed = true;
  } else {
    write_all(ctx.error_fd, &f, sizeof f);
  }
  ::_exit(127);
}

int pass_listener(const child_context& ctx, const step& s) noexcept {
  if (ctx.net_fd < 0) return EBADF;
  unique_fd fd(::socket(s.ipv6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return errno;
  int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  int rc;
  if (s.ipv6) {
    sockaddr_in6 sa{};
    sa.sin6_family = AF_INET6;
    sa.sin6_port = htons(s.port);
    ::inet_pton(AF_INET6, s.value, &sa.sin6_addr);
    rc = ::bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa);
  } else {
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(s.port);
    ::inet_pton(AF_INET, s.value, &sa.sin_addr);
    rc = ::bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa);
  }
  if (rc != 0 || ::listen(fd.get(), 64) != 0) return errno;
  // One byte (the listener's index in the plan) with the socket attached.
  return sys::send_fd(ctx.net_fd, &s.index, 1, fd.get()) < 0 ? errno : 0;
}

// Opens `path` (relative to the new root, the working directory) refusing any symlink or
// escape on the way: a symlink planted in /workspace or /home/agent by an earlier launch of the
// session must not redirect where evalbox creates a mount point or mounts.
unique_fd open_beneath(const char* path, uint64_t extra_flags) noexcept {
  open_how how{};
  how.flags = O_PATH | O_CLOEXEC | extra_flags;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  return unique_fd(sys::openat2(AT_FDCWD, path, &how));
}

// Splits `path` at its last '/' into a parent opened beneath the root (`dir`) and the final
// name. Returns 0 or an errno.
int open_parent(const char* path, unique_fd& dir, const char** name) noexcept {
  const char* slash = std::strrchr(path, '/');
  if (!slash || slash == path) return EINVAL;
  char parent[4096];
  const size_t len = static_cast<size_t>(slash - path);
  if (len >= sizeof parent) return ENAMETOOLONG;
  std::memcpy(parent, path, len);
  parent[len] = '\0';
  *name = slash + 1;
  dir = open_beneath(parent, O_DIRECTORY);
  return dir ? 0 : errno;
}

// A mount point: a directory (an existing one is fine) whose parent lies beneath the root.
int make_dir_beneath(const step& s) noexcept {
  unique_fd dir;
  const char* name = nullptr;
  if (int err = open_parent(s.target, dir, &name)) return err;
  if (::mkdirat(dir.get(), name, static_cast<mode_t>(s.mode)) == 0 || errno == EEXIST) return 0;
  return errno;
}

// A file mount point, likewise; an existing file is fine, a symlink is not (unless the step
// asks to replace one: then it goes, and the file takes its place).
int make_file_beneath(const step& s) noexcept {
  unique_fd dir;
  const char* name = nullptr;
  if (int err = open_parent(s.target, dir, &name)) return err;
  constexpr int flags = O_RDONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK;
  unique_fd file(::openat(dir.get(), name, flags, s.mode));
  if (!file && errno == ELOOP && s.replace_symlink) {
    if (::unlinkat(dir.get(), name, 0) != 0) return errno;
    file.reset(::openat(dir.get(), name, flags | O_EXCL, s.mode));
  }
  return file ? 0 : errno;
}

// Mounts the filesystem context at fd `s.fd` and attaches it on the mount point at fd
// `s.target_fd`; that fd then names the new mount (its root), the context's is closed.
int attach_filesystem(const step& s) noexcept {
  unique_fd mnt(sys::fsmount(s.fd, FSMOUNT_CLOEXEC, static_cast<unsigned>(s.flags)));
  if (!mnt) return errno;
  if (sys::move_mount(mnt.get(), "", s.target_fd, "",
                      MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) != 0)
    return errno;
  if (::dup3(mnt.get(), s.target_fd, O_CLOEXEC) < 0) return errno;
  ::close(s.fd);
  return 0;
}

// execve of each PATH candidate in turn, as execvp does: a missing one (ENOENT, ENOTDIR) or one
// we may not run (EACCES, reported if nothing else is found) is skipped; any other failure
// (ENOEXEC, E2BIG, ...) is the answer.
int exec_on_path(const child_context& ctx) noexcept {
  bool denied = false;
  for (const char* const* p = ctx.exec_candidates; *p; ++p) {
    ::execve(*p, ctx.argv, ctx.envp);
    if (errno == EACCES) {
      denied = true;
    } else if (errno != ENOENT && errno != ENOTDIR) {
      return errno;
    }
  }
  return denied ? EACCES : ENOENT;
}

int check_target(const step& s) noexcept { return open_beneath(s.target, 0) ? 0 : errno; }

int write_file(const step& s) noexcept {
  unique_fd fd(::open(s.target, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, s.mode));
  if (!fd) return errno;
  const ssize_t w = ::write(fd.get(), s.data, s.size);
  if (w < 0) return errno;
  return w == static_cast<ssize_t>(s.size) ? 0 : EIO;
}

// The cgroup v1 `tasks` files that came with the release, until enter_cgroups writes to them
// (pid 1's own copy of this memory).
int release_fds[sys::max_fds];
size_t release_fd_count = 0;

// Reads the release byte; the helper writes it once the id maps are in place, with the tasks
// files of the run's cgroup v1 leaves attached (none on v2, or when pid 1 was born in them).
int wait_for_helper(const child_context& ctx) noexcept {
  char b = 0;
  const ssize_t n = sys::recv_fds(ctx.sync_fd, &b, 1, release_fds, sys::max_fds, &release_fd_count);
  const int err = errno;
  ::close(ctx.sync_fd);                    // pid 1's copy; the helper holds its own end
  if (n != 1) return n < 0 ? err : EPIPE;  // the helper died before releasing us
  return 0;
}

// Pid 1 moves itself into the run's cgroups (cgroup.h, move_self): it is one thread, so the
// kernel takes no threadgroup lock and waits for no grace period, where a pid written by the
// helper would. Nothing of the run runs before it.
int enter_cgroups() noexcept {
  const int err = cgroup::move_self(release_fds, release_fd_count);
  for (size_t i = 0; i < release_fd_count; ++i) ::close(release_fds[i]);
  release_fd_count = 0;
  return err;
}

int set_ids(const child_context& ctx) noexcept {
  if (::setresgid(0, 0, 0) != 0) return errno;
  if (ctx.map_groups && ::setgroups(0, nullptr) != 0) return errno;
  if (::setresuid(0, 0, 0) != 0) return errno;
  return 0;
}

// Opens a mount source (O_PATH) at the fixed fd `s.fd`, where the bind step finds it.
int open_source(const step& s) noexcept {
  unique_fd fd(::open(s.target, O_PATH | O_CLOEXEC));
  if (!fd) return errno;
  return ::dup3(fd.get(), s.fd, O_CLOEXEC) < 0 ? errno : 0;
}

int parent_death_signal(const child_context& ctx) noexcept {
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0) return errno;
  // The helper may have died before the flag was set: its end of the status pipe is then
  // closed, and there is no one to run for.
  pollfd p{ctx.status_fd, 0, 0};
  if (::poll(&p, 1, 0) == 1 && (p.revents & POLLERR)) return EPIPE;
  return 0;
}

int enter_new_root() noexcept {
  // pivot_root(".", ".") stacks the old root under the new one; detaching "." then
  // removes it, so nothing of the host's tree stays reachable (no put_old directory).
  if (sys::pivot_root(".", ".") != 0) return errno;
  if (::umount2(".", MNT_DETACH) != 0) return errno;
  return ::chdir("/") == 0 ? 0 : errno;
}

int loopback_up() noexcept {
  unique_fd fd(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!fd) return errno;
  ifreq ifr{};
  std::memcpy(ifr.ifr_name, "lo", 3);
  if (::ioctl(fd.get(), SIOCGIFFLAGS, &ifr) != 0) return errno;
  ifr.ifr_flags = static_cast<short>(ifr.ifr_flags | IFF_UP | IFF_RUNNING);
  return ::ioctl(fd.get(), SIOCSIFFLAGS, &ifr) == 0 ? 0 : errno;
}

int redirect_stdio(const child_context& ctx) noexcept {
  const int from[3] = {ctx.stdin_fd, ctx.stdout_fd, ctx.stderr_fd};
  for (int i = 0; i < 3; ++i) {
    if (from[i] < 0) continue;
    if (::dup2(from[i], i) < 0) return errno;
  }
  return 0;
}

// A pseudo-terminal from the sandbox's own devpts instance (ptmx inside, as crun's console
// socket does): the slave becomes the program's stdio and controlling terminal (after
// new_session), the master goes back to the helper, which relays it. A host pts would not
// resolve inside, and binding one in would show the host's devpts.
int open_terminal(const child_context& ctx) noexcept {
  unique_fd master(::open("/dev/pts/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC));
  if (!master) return errno;
  int unlock = 0;
  if (::ioctl(master.get(), TIOCSPTLCK, &unlock) != 0) return errno;
  unique_fd slave(::ioctl(master.get(), TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC));
  if (!slave) return errno;
  if (ctx.tty_rows && ctx.tty_cols) {
    winsize ws{};
    ws.ws_row = ctx.tty_rows;
    ws.ws_col = ctx.tty_cols;
    if (::ioctl(slave.get(), TIOCSWINSZ, &ws) != 0) return errno;
  }
  if (::ioctl(slave.get(), TIOCSCTTY, 0) != 0) return errno;
  for (int i = 0; i < 3; ++i) {
    if (::dup2(slave.get(), i) < 0) return errno;
  }
  const char tag = 't';
  if (sys::send_fd(ctx.tty_fd, &tag, 1, master.get()) < 0) return errno;
  return 0;
}

int close_fds(const child_context& ctx) noexcept {
  // Nothing the helper or pid 1 holds may reach the program: pipes, the plan, sockets.
  // The error pipe stays until exec (it is close-on-exec) so later steps can report.
  return sys::close_all_but_stdio_and(ctx.error_fd);
}

int reset_oom_score() noexcept {
  // The id change made us non-dumpable, which leaves /proc/self owned by an unmapped id; exec
  // makes the program dumpable anyway. The flag is the memory's, which this process shares with
  // pid 1 until exec (program_entry): set back at once, so pid 1 never stays dumpable.
  if (::prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) != 0) return errno;
  unique_fd fd(::open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC));
  const int err = !fd ? errno : ::write(fd.get(), "0", 1) == 1 ? 0 : errno;
  if (::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0 && err == 0) return errno;
  return err;
}

int drop_caps(const child_context& ctx) noexcept {
  // Lock the root-is-special rules off first (needs CAP_SETPCAP, which is dropped next):
  // exec of a setuid-root or file-capability binary then grants nothing.
  unsigned long bits = SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP |
                       SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED;
  if (::prctl(PR_SET_SECUREBITS, bits, 0, 0, 0) != 0) return errno;
  for (int cap = 0; cap <= ctx.cap_last; ++cap) {
    if (ctx.keep_setfcap && cap == CAP_SETFCAP) continue;
    if (::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL) return errno;
  }
  if (::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0) return errno;
  __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (ctx.keep_setfcap) {
    // A nested user namespace may map its root to ours ("0 0 1", as bubblewrap does) only if
    // its creator held CAP_SETFCAP here (verify_root_map in kernel/user_namespace.c). Kept
    // as an ambient capability so it survives exec; it is local to the run's namespace.
    const __u32 bit = 1u << (CAP_SETFCAP % 32);
    data[CAP_SETFCAP / 32].effective = bit;
    data[CAP_SETFCAP / 32].permitted = bit;
    data[CAP_SETFCAP / 32].inheritable = bit;
  }
  if (sys::capset(&hdr, data) != 0) return errno;
  if (ctx.keep_setfcap && ::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_SETFCAP, 0, 0) != 0) {
    return errno;
  }
  return 0;
}

// One step: 0 or the errno it failed with.
int run_step(const child_context& ctx, const step& s) noexcept {
  switch (s.kind) {
    case op::wait_parent:
      return wait_for_helper(ctx);
    case op::enter_cgroups:
      return enter_cgroups();
    case op::set_ids:
      return set_ids(ctx);
    case op::unshare:
      return ::unshare(static_cast<int>(s.flags)) == 0 ? 0 : errno;
    case op::mount:
      return ::mount(s.source, s.target, s.fstype, s.flags, s.data) == 0 ? 0 : errno;
    case op::set_attr: {
      mount_attr attr{};
      attr.attr_set = s.flags;
      return sys::mount_setattr(AT_FDCWD, s.target, s.recursive ? AT_RECURSIVE : 0, &attr) == 0
                 ? 0
                 : errno;
    }
    case op::make_dir:
      return make_dir_beneath(s);
    case op::make_file:
      return make_file_beneath(s);
    case op::check_target:
      return check_target(s);
    case op::make_symlink:
      return ::symlink(s.source, s.target) == 0 ? 0 : errno;
    case op::write_file:
      return write_file(s);
    case op::change_dir:
      return ::chdir(s.target ? s.target : ctx.cwd) == 0 ? 0 : errno;
    case op::pivot_root:
      return enter_new_root();
    case op::set_hostname:
      return ::sethostname(s.value, std::strlen(s.value)) == 0 ? 0 : errno;
    case op::loopback_up:
      return loopback_up();
    case op::listen_pass:
      return pass_listener(ctx, s);
    case op::rlimit: {
      rlimit rl{s.soft, s.hard};
      return ::setrlimit(static_cast<__rlimit_resource>(s.resource), &rl) == 0 ? 0 : errno;
    }
    case op::open_path:
      return open_source(s);
    case op::close_range:
      return sys::close_range(static_cast<unsigned>(s.fd), static_cast<unsigned>(s.last_fd), 0) == 0
                 ? 0
                 : errno;
    case op::death_signal:
      return parent_death_signal(ctx);
    case op::new_session:
      return ::setsid() >= 0 ? 0 : errno;
    case op::terminal:
      return open_terminal(ctx);
    case op::stdio:
      return redirect_stdio(ctx);
    case op::close_fds:
      return close_fds(ctx);
    case op::oom_score:
      return reset_oom_score();
    case op::no_new_privs:
      return ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 ? 0 : errno;
    case op::drop_caps:
      return drop_caps(ctx);
    case op::landlock:
      return ctx.landlock ? landlock::apply(*ctx.landlock) : 0;
    case op::seccomp:
      return ctx.seccomp ? seccomp::install(*ctx.seccomp) : 0;
    case op::fs_open: {
      unique_fd fd(sys::fsopen(s.fstype, FSOPEN_CLOEXEC));
      if (!fd) return errno;
      return ::dup3(fd.get(), s.fd, O_CLOEXEC) < 0 ? errno : 0;
    }
    case op::fs_config:
      return sys::fsconfig(s.fd, static_cast<unsigned>(s.flags), s.key, s.value, 0) == 0 ? 0
                                                                                         : errno;
    case op::fs_attach:
      return attach_filesystem(s);
    case op::exec:
      if (ctx.exec_candidates) return exec_on_path(ctx);
      ::execve(ctx.argv[0], ctx.argv, ctx.envp);
      return errno;
    case op::unblock_signals: {
      sigset_t none;
      sigemptyset(&none);
      return ::sigprocmask(SIG_SETMASK, &none, nullptr) == 0 ? 0 : errno;
    }
    case op::controlling_tty:
      return !ctx.ctty || ::ioctl(0, TIOCSCTTY, 0) == 0 ? 0 : errno;
  }
  return EINVAL;
}

[[noreturn]] void run_init(const child_context& ctx, pid_t program) noexcept {
  // Pid 1 keeps only what it needs: the status pipe (and the error pipe, close-on-exec). These
  // are its copies of fds the helper owns; the program's process has its own.
  for (int fd : {ctx.stdin_fd, ctx.stdout_fd, ctx.stderr_fd, ctx.net_fd, ctx.tty_fd}) {
    if (fd > 2) ::close(fd);
  }
  for (;;) {
    int st = 0;
    pid_t p = ::waitpid(-1, &st, 0);
    if (p < 0) {
      if (errno == EINTR) continue;
      ::_exit(126);  // no children left and no report: cannot happen
    }
    if (p == program) {
      write_all(ctx.status_fd, &st, sizeof st);
      // Exiting kills every other process of the pid namespace: no lingering daemons.
      ::_exit(0);
    }
  }
}

// The helper's child with namespaces made ahead (sharing the helper's memory until it exits:
// only system calls on its own stack): joins the user (and network) namespace the holder keeps,
// makes the rest — owned by that user namespace, as clone3 would have made them — and clones pid 1
// as a sibling, the helper's own child, so that the helper supervises, kills and reaps pid 1
// exactly as on the other path. Returns in pid 1 only.
void enter_made_ahead(const child_context& ctx) noexcept {
  const enter_ahead& e = *ctx.ahead;
  if (::setns(e.holder_pidfd, e.join) != 0) fail(ctx, 2, 0, errno);
  if (::unshare(e.unshare) != 0) fail(ctx, 2, 1, errno);
  clone_args args{};
  args.flags = CLONE_PARENT;  // exit_signal stays 0: pid 1 signals as this child does (SIGCHLD)
  if (e.cgroup_fd >= 0) {
    args.flags |= CLONE_INTO_CGROUP;
    args.cgroup = static_cast<uint64_t>(e.cgroup_fd);
  }
  const pid_t pid = sys::clone3(&args);
  if (pid < 0) fail(ctx, 2, 2, errno);
  if (pid > 0) {
    write_all(e.pid_fd, &pid, sizeof pid);
    ::_exit(0);
  }
  // Pid 1: nothing of the holder or of this hand-over stays with the run.
  ::close(e.pid_fd);
  ::close(e.holder_pidfd);
}

// The program's process, until exec.
int program_entry(void* arg) noexcept {
  const child_context& ctx = *static_cast<const child_context*>(arg);
  for (size_t i = 0; i < ctx.program.size(); ++i) {
    if (int err = run_step(ctx, ctx.program[i]); err != 0) fail(ctx, 1, i, err);
  }
  ::_exit(127);  // the last step is exec
}

// Pid 1 starts the program's process sharing its memory until exec (CLONE_VM | CLONE_VFORK, as
// posix_spawn does, on a stack of its own): a fork would copy pid 1's page tables (those of
// the helper it was cloned from), take a copy-on-write fault on every page either side then
// writes, and free it all again at exec. Everything the program's steps change is the
// process's own (ids, capabilities, Landlock, seccomp, fds, limits, session) except the
// memory's dumpable flag (reset_oom_score sets it back); pid 1 waits meanwhile.
pid_t start_program(const child_context& ctx) noexcept {
  constexpr size_t stack_size = 1 << 20;  // the steps use a few KiB; untouched pages cost nothing
  void* stack = ::mmap(nullptr, stack_size, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK | MAP_NORESERVE, -1, 0);
  if (stack == MAP_FAILED) return -1;
  (void)::mprotect(stack, 4096, PROT_NONE);  // an overflow faults instead of writing below
  const pid_t pid = ::clone(program_entry, static_cast<char*>(stack) + stack_size,
                            CLONE_VM | CLONE_VFORK | SIGCHLD, const_cast<child_context*>(&ctx));
  const int err = errno;
  ::munmap(stack, stack_size);  // the program has its own memory now (or never started)
  errno = err;
  return pid;
}

// ---- Serve mode (launch_plan::serve; sandbox/protocol/serve_wire.h) ----
//
// Pid 1 is one thread, in its own copy of the helper's memory: what it allocates here it
// allocates once (mmap, at the start), and each exec reuses it, so that ten thousand execs
// leave it as large as one did.

namespace wire = serve_wire;

struct running_exec {
  uint64_t id = 0;
  pid_t pid = 0;  // 0: a free slot
};
constexpr size_t max_running = 4096;

struct serve_state {
  running_exec running[max_running];
  char* payload = nullptr;           // wire::max_payload bytes
  char** argv = nullptr;             // wire::max_strings + 1
  char** envp = nullptr;             // wire::max_strings + base + 1
  const char** paths = nullptr;      // PATH candidates, max_path_dirs + 1
  char* path_text = nullptr;         // their text
  const char* default_cwd = "/";     // the plan's cwd (the workspace)
  char* const* base_envp = nullptr;  // the session's own environment (the plan's)
  int sigchld = -1;
};
constexpr size_t max_path_dirs = 512;
constexpr size_t path_text_bytes = 256 << 10;

void* map_bytes(size_t n) noexcept {
  void* p = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

bool send_event(const child_context& ctx, wire::event_kind kind, uint64_t id, int32_t value,
                int32_t step = 0, int fd = -1) noexcept {
  wire::event e;
  e.kind = kind;
  e.id = id;
  e.value = value;
  e.step = step;
  const ssize_t n = fd >= 0 ? sys::send_fd(ctx.serve_fd, &e, sizeof e, fd)
                            : ::send(ctx.serve_fd, &e, sizeof e, MSG_NOSIGNAL);
  return n == static_cast<ssize_t>(sizeof e);
}

// Reads exactly `n` bytes (after what a first receive got). False at end of file or an error.
bool read_exact(int fd, char* buf, size_t n) noexcept {
  while (n > 0) {
    const ssize_t r = ::read(fd, buf, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    buf += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

// The strings of the payload: `count` NUL-terminated ones from `*at`, each inside [.., end).
bool take_strings(char*& at, const char* end, size_t count, char** out) noexcept {
  for (size_t i = 0; i < count; ++i) {
    const void* nul = std::memchr(at, '\0', static_cast<size_t>(end - at));
    if (!nul) return false;
    out[i] = at;
    at = static_cast<char*>(const_cast<void*>(nul)) + 1;
  }
  out[count] = nullptr;
  return true;
}

// `entry`'s name (up to '=') equals that of `other`.
bool same_name(const char* entry, const char* other) noexcept {
  for (;; ++entry, ++other) {
    if (*entry == '=' || *entry == '\0') return *other == '=' || *other == '\0';
    if (*entry != *other) return false;
  }
}

// The exec's environment: its own entries (already in envp[0, own)), then the session's
// entries of other names.
void merge_environment(serve_state& s, size_t own) noexcept {
  size_t n = own;
  for (char* const* e = s.base_envp; e && *e; ++e) {
    bool shadowed = false;
    for (size_t i = 0; i < own && !shadowed; ++i) shadowed = same_name(*e, s.envp[i]);
    if (!shadowed) s.envp[n++] = *e;
  }
  s.envp[n] = nullptr;
}

// A bare argv[0]: the files to try, in the order of the exec's own PATH (execvp's rule); none
// without a PATH (the exec step then fails with ENOENT).
const char* const* path_candidates(serve_state& s, const char* name) noexcept {
  const char* path = nullptr;
  for (char** e = s.envp; *e; ++e)
    if (std::strncmp(*e, "PATH=", 5) == 0) {
      path = *e + 5;
      break;
    }
  size_t count = 0, used = 0;
  const size_t name_len = std::strlen(name);
  for (const char* p = path; p && count < max_path_dirs;) {
    const char* colon = std::strchr(p, ':');
    size_t len = colon ? static_cast<size_t>(colon - p) : std::strlen(p);
    const char* dir = len ? p : ".";  // an empty entry is the working directory
    if (!len) len = 1;
    if (used + len + 1 + name_len + 1 > path_text_bytes) break;
    char* out = s.path_text + used;
    std::memcpy(out, dir, len);
    out[len] = '/';
    std::memcpy(out + len + 1, name, name_len + 1);
    s.paths[count++] = out;
    used += len + 1 + name_len + 1;
    if (!colon) break;
    p = colon + 1;
  }
  s.paths[count] = nullptr;
  return s.paths;
}

// A pseudo-terminal of the sandbox's devpts for an exec: the master (for the host side) and
// the slave (the exec's stdio and controlling terminal). 0 or an errno.
int open_exec_terminal(const wire::request& r, unique_fd& master, unique_fd& slave) noexcept {
  master.reset(::open("/dev/pts/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC));
  if (!master) return errno;
  int unlock = 0;
  if (::ioctl(master.get(), TIOCSPTLCK, &unlock) != 0) return errno;
  slave.reset(::ioctl(master.get(), TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC));
  if (!slave) return errno;
  if (r.rows && r.cols) {
    winsize ws{};
    ws.ws_row = r.rows;
    ws.ws_col = r.cols;
    if (::ioctl(slave.get(), TIOCSWINSZ, &ws) != 0) return errno;
  }
  return 0;
}

// One exec: its strings checked and laid out, its process started with the program's steps.
// False when the host side can no longer be told (the session then ends).
bool serve_exec(const child_context& ctx, serve_state& s, const wire::request& r, int* fds,
                size_t nfds) noexcept {
  unique_fd given[3];
  for (size_t i = 0; i < nfds && i < 3; ++i) given[i].reset(fds[i]);
  auto refuse = [&](int err) {
    return send_event(ctx, wire::event_kind::failed, r.id, err,
                      static_cast<int32_t>(wire::failed_step::request));
  };
  const bool tty = (r.flags & wire::flag_tty) != 0;
  if (r.argc == 0 || r.argc > wire::max_strings || r.envc > wire::max_strings ||
      (!tty && nfds != 3))
    return refuse(EINVAL);
  size_t slot = max_running;
  for (size_t i = 0; i < max_running && slot == max_running; ++i)
    if (s.running[i].pid == 0) slot = i;
  if (slot == max_running) return refuse(EAGAIN);
  char* at = s.payload;
  const char* end = s.payload + r.payload_bytes;
  if (!take_strings(at, end, r.argc, s.argv) || !take_strings(at, end, r.envc, s.envp))
    return refuse(EINVAL);
  char* cwd[2];
  if (!take_strings(at, end, 1, cwd) || at != end) return refuse(EINVAL);
  merge_environment(s, r.envc);
  unique_fd master, slave;
  if (tty) {
    if (int err = open_exec_terminal(r, master, slave)) return refuse(err);
  }
  // Pid 1's own copy of the context (child_main's argument is the helper's compiled context,
  // copied into pid 1's memory by clone3): the exec's fields, for the steps to read.
  child_context& x = const_cast<child_context&>(ctx);
  x.argv = s.argv;
  x.envp = s.envp;
  x.exec_candidates = std::strchr(s.argv[0], '/') ? nullptr : path_candidates(s, s.argv[0]);
  x.stdin_fd = tty ? slave.get() : given[0].get();
  x.stdout_fd = tty ? slave.get() : given[1].get();
  x.stderr_fd = tty ? slave.get() : given[2].get();
  x.cwd = cwd[0][0] ? cwd[0] : s.default_cwd;
  x.ctty = tty;
  x.error_fd = -1;  // a failed step is told through the shared memory (fail)
  g_exec_failed = false;
  const pid_t pid = start_program(x);
  if (pid < 0) return refuse(errno);
  if (g_exec_failed) {
    // Its process exited (127) after the step failed; reaped with the others, unreported.
    const auto index = static_cast<size_t>(g_exec_failure.index);
    const op kind = index < ctx.program.size() ? ctx.program[index].kind : op::exec;
    const wire::failed_step step = kind == op::exec         ? wire::failed_step::exec
                                   : kind == op::change_dir ? wire::failed_step::chdir
                                                            : wire::failed_step::other;
    return send_event(ctx, wire::event_kind::failed, r.id, g_exec_failure.err,
                      static_cast<int32_t>(step));
  }
  s.running[slot] = {r.id, pid};
  return send_event(ctx, wire::event_kind::started, r.id, pid, 0, tty ? master.get() : -1);
}

// The exec's process group (its own session, so its pid) gets the signal.
void serve_signal(serve_state& s, const wire::request& r) noexcept {
  for (const auto& e : s.running)
    if (e.pid != 0 && e.id == r.id) {
      ::kill(-e.pid, r.signal);
      ::kill(e.pid, r.signal);  // in case it left its group (setpgid)
    }
}

// Reaps every child that ended (orphans of the sandbox included: pid 1 is their init) and
// reports the execs among them.
bool reap_execs(const child_context& ctx, serve_state& s) noexcept {
  signalfd_siginfo si;
  while (::read(s.sigchld, &si, sizeof si) == sizeof si) {
  }
  for (;;) {
    int st = 0;
    const pid_t p = ::waitpid(-1, &st, WNOHANG);
    if (p <= 0) return true;
    for (auto& e : s.running)
      if (e.pid == p) {
        e.pid = 0;
        if (!send_event(ctx, wire::event_kind::exited, e.id, st)) return false;
      }
  }
}

// One request. False at the end of the stream (or a stream that no longer makes sense).
bool serve_request(const child_context& ctx, serve_state& s) noexcept {
  wire::request r;
  int fds[sys::max_fds];
  size_t nfds = 0;
  const ssize_t got = sys::recv_fds(ctx.serve_fd, &r, sizeof r, fds, 3, &nfds);
  if (got <= 0) return false;
  if (static_cast<size_t>(got) < sizeof r &&
      !read_exact(ctx.serve_fd, reinterpret_cast<char*>(&r) + got, sizeof r - got)) {
    for (size_t i = 0; i < nfds; ++i) ::close(fds[i]);
    return false;
  }
  const bool ok = r.magic == wire::magic && r.payload_bytes <= wire::max_payload &&
                  read_exact(ctx.serve_fd, s.payload, r.payload_bytes);
  if (!ok || r.kind == wire::request_kind::signal) {
    for (size_t i = 0; i < nfds; ++i) ::close(fds[i]);
    if (ok) serve_signal(s, r);
    return ok;
  }
  if (r.kind != wire::request_kind::exec) return false;
  return serve_exec(ctx, s, r, fds, nfds);
}

// Pid 1 in serve mode, after its setup: says it is ready (with its root, from which the host
// side reads and writes files), then serves until the end of its socket, and exits — the
// kernel then kills every process of the sandbox.
[[noreturn]] void serve(const child_context& ctx) noexcept {
  for (int fd : {ctx.stdin_fd, ctx.stdout_fd, ctx.stderr_fd, ctx.net_fd, ctx.tty_fd}) {
    if (fd > 2) ::close(fd);
  }
  static serve_state s;
  // Taken before the first exec replaces them in pid 1's copy of the context.
  if (ctx.cwd) s.default_cwd = ctx.cwd;
  s.base_envp = ctx.envp;
  size_t base = 0;
  for (char* const* e = ctx.envp; e && *e; ++e) ++base;
  s.payload = static_cast<char*>(map_bytes(wire::max_payload));
  s.argv = static_cast<char**>(map_bytes((wire::max_strings + 1) * sizeof(char*)));
  s.envp = static_cast<char**>(map_bytes((wire::max_strings + base + 1) * sizeof(char*)));
  s.paths = static_cast<const char**>(map_bytes((max_path_dirs + 1) * sizeof(char*)));
  s.path_text = static_cast<char*>(map_bytes(path_text_bytes));
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  ::sigprocmask(SIG_BLOCK, &chld, nullptr);
  s.sigchld = ::signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
  const int root = ::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
  const bool ready = s.payload && s.argv && s.envp && s.paths && s.path_text && s.sigchld >= 0 &&
                     root >= 0 && send_event(ctx, wire::event_kind::ready, 0, 0, 0, root);
  if (root >= 0) ::close(root);
  while (ready) {
    pollfd p[2] = {{ctx.serve_fd, POLLIN, 0}, {s.sigchld, POLLIN, 0}};
    if (::poll(p, 2, -1) < 0 && errno != EINTR) break;
    if ((p[1].revents & POLLIN) && !reap_execs(ctx, s)) break;
    if (p[0].revents && !serve_request(ctx, s)) break;
  }
  const int status = 0;  // the session ended as asked: "exited 0"
  write_all(ctx.status_fd, &status, sizeof status);
  ::_exit(0);
}

}  // namespace

void child_main(const child_context& ctx) noexcept {
  for (int fd : ctx.helper_ends) {
    if (fd >= 0) ::close(fd);
  }
  // The helper blocks its termination signals (it reads them through a signalfd); the mask
  // is inherited across clone and exec, so unblock them here.
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  // An ignored signal stays ignored across exec: give the program default dispositions
  // whatever its launcher ignored (evalbox ignores SIGINT while a terminal is passed through).
  for (int sig : {SIGINT, SIGQUIT, SIGTERM, SIGHUP, SIGPIPE, SIGTSTP, SIGTTIN, SIGTTOU}) {
    ::signal(sig, SIG_DFL);
  }
  if (ctx.ahead) enter_made_ahead(ctx);
  for (size_t i = 0; i < ctx.setup.size(); ++i) {
    if (int err = run_step(ctx, ctx.setup[i]); err != 0) fail(ctx, 0, i, err);
  }
  if (ctx.serve_fd >= 0) serve(ctx);
  const pid_t program = start_program(ctx);
  if (program < 0) fail(ctx, 0, ctx.setup.size(), errno);
  run_init(ctx, program);
}

int child_entry(void* ctx) noexcept { child_main(*static_cast<const child_context*>(ctx)); }

}  // namespace evalbox::sandbox::helper
