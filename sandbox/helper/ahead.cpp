// Namespaces made ahead (ahead.h).
#include "sandbox/helper/ahead.h"

#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "sandbox/sys/syscalls.h"

namespace evalbox::sandbox::helper {

bool namespaces_ahead_enabled() {
  const char* v = std::getenv("EVALBOX_NAMESPACES_AHEAD");
  return !v || std::strcmp(v, "0") != 0;
}

result<sys::owned_process> make_namespaces_ahead() {
  const pid_t parent = ::getpid();
  int pidfd = -1;
  clone_args args{};
  args.flags = CLONE_NEWUSER | CLONE_NEWNET | CLONE_PIDFD;
  args.pidfd = reinterpret_cast<uint64_t>(&pidfd);
  args.exit_signal = SIGCHLD;
  const pid_t pid = sys::clone3(&args);
  if (pid < 0) return sys_error(errno, "clone3(user, net) ahead of the launch");
  if (pid == 0) {
    // The holder: holds nothing but the two namespaces, and no signal but SIGKILL ends it
    // early (none is caught; the helper's death sends SIGKILL).
    (void)sys::close_range(0, ~0U, 0);
    (void)::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    if (::getppid() != parent) ::_exit(0);
    for (;;) ::pause();
  }
  return sys::owned_process(pid, unique_fd(pidfd));
}

}  // namespace evalbox::sandbox::helper
