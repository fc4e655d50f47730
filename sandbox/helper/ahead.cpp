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

namespace {

// The holder's stack: it shares the helper's memory (CLONE_VM: its creation and exit copy and
// free no page tables) and runs only the few calls below, which touch nothing else of it and
// cannot fail (so it never writes the errno it shares with the helper).
alignas(64) char holder_stack[16 << 10];

int hold(void* parent) noexcept {
  (void)sys::close_range(0, ~0U, 0);  // its own fd table: holds no fd of the helper's
  (void)::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  if (::getppid() != *static_cast<const pid_t*>(parent)) ::_exit(0);
  for (;;) ::pause();  // no signal is caught: only a fatal one ends it
}

}  // namespace

result<sys::owned_process> make_namespaces_ahead() {
  static pid_t parent;
  parent = ::getpid();
  int pidfd = -1;
  const pid_t pid =
      ::clone(hold, holder_stack + sizeof holder_stack,
              CLONE_VM | CLONE_NEWUSER | CLONE_NEWNET | CLONE_PIDFD | SIGCHLD, &parent, &pidfd);
  if (pid < 0) return sys_error(errno, "clone(user, net) ahead of the launch");
  return sys::owned_process(pid, unique_fd(pidfd));
}

}  // namespace evalbox::sandbox::helper
