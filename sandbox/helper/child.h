// The sandbox child: an ordered list of named steps, precomputed by the helper before clone3
// and only read by the child. The child allocates nothing; when a step fails it writes
// {phase, step index, errno} to a close-on-exec pipe and _exits, and the helper turns that
// into "step <name>: <ERRNO>".
//
// Processes: the clone3 child is pid 1 of the run's pid namespace. It runs the `setup` steps
// (mounts, pivot_root, hostname, loopback, rlimits), then starts the program's process, which
// runs the `program` steps (session, stdio, fds, privileges, Landlock, seccomp) and execs; until
// that exec it shares pid 1's memory (CLONE_VM | CLONE_VFORK) and pid 1 waits.
// Pid 1 stays as a tiny init: it reaps, and when the program's process exits it reports the
// wait status to the helper and exits, and the kernel kills every other process of the run.
// In serve mode (a session) pid 1 starts no program of its own: it serves exec requests on
// the control socket (sandbox/protocol/serve_wire.h), starting each as it would the program,
// reaps them and reports their ends, until the socket's end of file.
//
// With namespaces made ahead (a warm helper's, ahead.h) the helper's child is not pid 1: it
// shares the helper's memory (CLONE_VM | CLONE_VFORK), joins the user and network namespaces
// made ahead, unshares the rest, clones pid 1 as the helper's child (CLONE_PARENT), reports pid
// 1's pid and exits; pid 1 then runs the steps as above.
#pragma once

#include <sys/resource.h>
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "sandbox/landlock/landlock.h"
#include "sandbox/seccomp/seccomp.h"

namespace evalbox::sandbox::helper {

enum class op : uint8_t {
  wait_parent,    // read the release byte: uid/gid maps in place; cgroup v1 tasks files with it
  enter_cgroups,  // move itself into the cgroups of the tasks files that came with the release
  set_ids,        // setresgid/setgroups/setresuid to 0 inside (the mapped host id)
  unshare,        // unshare(flags)
  mount,          // mount(source, target, fstype, flags, data)
  set_attr,       // mount_setattr(target, recursive ? AT_RECURSIVE : 0, set=flags)
  make_dir,       // mkdir(target, mode), EEXIST tolerated; target's parent reached without symlinks
  make_file,      // open(target, O_CREAT, mode) as a mount point, an existing file tolerated;
                  // likewise; replace_symlink: a symlink there is replaced by the file
  check_target,   // target resolves beneath the new root without any symlink (a mount target)
  make_symlink,   // symlink(source, target)
  write_file,     // target := data[0, size) with mode
  change_dir,     // chdir(target)
  pivot_root,     // pivot_root(".", ".") in the new root, then the old root is detached
  set_hostname,   // sethostname(value)
  loopback_up,    // bring `lo` up
  listen_pass,    // listen on value:port (ipv6) and pass the socket, tagged index, to the helper
  rlimit,         // setrlimit(resource, {soft, hard})
  death_signal,   // PR_SET_PDEATHSIG(SIGKILL) (the flag is cleared by clone)
  open_path,      // open(target, O_PATH) and move it to `fd` (a mount source, see compile.h)
  close_range,    // close fds [fd, last_fd]
  fs_open,        // fsopen(fstype) at `fd` (a filesystem context: the image root's overlay)
  fs_config,      // fsconfig(fd, command flags, key, value)
  fs_attach,      // fsmount(fd, attributes flags), moved onto the mount point at `target_fd`,
                  // whose fd then names the new mount
  // program process
  new_session,
  terminal,  // a pseudo-terminal from the sandbox's devpts as stdio and controlling terminal
  stdio,
  close_fds,
  oom_score,  // undo the helper's oom_score_adj protection of pid 1
  no_new_privs,
  drop_caps,
  landlock,
  seccomp,
  exec,
  // serve mode (a session's execs, launch_plan::serve)
  unblock_signals,  // an empty signal mask (pid 1 holds SIGCHLD for its signalfd)
  controlling_tty,  // with a terminal: stdin (its slave) becomes the controlling terminal
};

// One step: plain data the child reads without allocating. Each op reads the fields its line
// in `op` names; the others keep their defaults.
struct step {
  const char* name = "";
  op kind = op::make_dir;
  const char* source = nullptr;  // what is mounted or linked to
  const char* target = nullptr;  // the path the step makes, mounts on, opens or enters
  const char* fstype = nullptr;  // a filesystem type (mount, fs_open)
  const char* data = nullptr;    // mount options; a written file's contents
  const char* key = nullptr;     // a filesystem context's parameter (fs_config)
  const char* value = nullptr;   // its value; the host name; the address listened on
  unsigned long flags = 0;       // unshare, mount, mount_setattr, fsconfig or fsmount flags
  uint64_t size = 0;             // bytes of data (write_file)
  uint64_t soft = 0;             // rlimit
  uint64_t hard = 0;             // rlimit
  int mode = 0;                  // a file mode (make_dir, make_file, write_file)
                                 // change_dir without a target: the context's cwd
  int fd = -1;             // the fd a step leaves its result at or works on; close_range's first
  int target_fd = -1;      // the mount point fs_attach moves the new mount onto
  int last_fd = -1;        // close_range's last
  int resource = 0;        // rlimit
  uint16_t port = 0;       // listen_pass
  uint8_t index = 0;       // listen_pass: the listener's index in the plan, sent with it
  bool ipv6 = false;       // listen_pass
  bool recursive = false;  // set_attr: AT_RECURSIVE
  bool replace_symlink = false;  // make_file
};

// What one failed step reports.
struct step_failure {
  int32_t phase = 0;  // 0 setup (pid 1), 1 program, 2 entering namespaces made ahead
  int32_t index = 0;
  int32_t err = 0;
};

// Entering namespaces made ahead (ahead.h), the steps of the clone3 child before pid 1 exists;
// their names for a step_failure of phase 2, in order.
inline constexpr const char* enter_step_names[] = {"join the namespaces made ahead",
                                                   "unshare mount, pid, ipc, uts", "clone pid 1"};

struct enter_ahead {
  int holder_pidfd = -1;  // the process holding the namespaces (setns through its pidfd)
  int join = 0;           // CLONE_NEWUSER, and CLONE_NEWNET unless the network is the host's
  int unshare = 0;        // the namespaces made now: mount, pid, ipc, uts
  int pid_fd = -1;        // write end: pid 1's pid, as an int
  int cgroup_fd = -1;     // pid 1 is cloned into this cgroup (v2), or -1
};

struct child_context {
  std::optional<enter_ahead> ahead;  // set: the clone3 child enters namespaces made ahead
  std::vector<step> setup;
  std::vector<step> program;
  int sync_fd = -1;    // socket: one byte when released, the cgroup v1 tasks files attached
  int error_fd = -1;   // write end, CLOEXEC: step_failure
  int status_fd = -1;  // write end: the program's wait status (int)
  int net_fd = -1;     // socketpair end for passing listening sockets, or -1
  // The helper's ends of the sync, error and status pipes, which clone3 copied into pid 1:
  // closed first thing, so that the helper's death closes the pipes for pid 1 too (the sync
  // read ends, the status pipe reports EPIPE). Holding them, pid 1 waited forever for a
  // release from a helper killed between clone3 and release, outside any cgroup.
  int helper_ends[3] = {-1, -1, -1};
  int stdin_fd = -1, stdout_fd = -1, stderr_fd = -1;  // -1: keep 0/1/2 (inherit_stdio)
  // The terminal step: the socket the pseudo-terminal's master goes back to the helper over,
  // and the window size the terminal starts with (0: left as the kernel makes it).
  int tty_fd = -1;
  unsigned short tty_rows = 0, tty_cols = 0;
  bool map_groups = true;     // setgroups allowed (the helper is root)
  bool keep_setfcap = false;  // nested user namespaces that map root to ours (no Landlock)
  int cap_last = 40;
  char* const* argv = nullptr;
  char* const* envp = nullptr;
  // Set for a bare argv[0]: the paths to try in order (PATH), null-terminated.
  const char* const* exec_candidates = nullptr;
  const landlock::ruleset* landlock = nullptr;
  const seccomp::filter* seccomp = nullptr;
  // Serve mode (launch_plan::serve): pid 1 serves exec requests on this socket (serve_wire.h)
  // instead of starting one program; for each exec it sets argv, envp, exec_candidates, the
  // stdio fds, cwd and ctty below before starting the program's steps.
  int serve_fd = -1;
  const char* cwd = nullptr;  // change_dir without a target
  bool ctty = false;          // controlling_tty: stdin is a terminal's slave
};

[[noreturn]] void child_main(const child_context& ctx) noexcept;
// child_main(*static_cast<const child_context*>(ctx)), for clone(2) on a stack of its own.
int child_entry(void* ctx) noexcept;

}  // namespace evalbox::sandbox::helper
