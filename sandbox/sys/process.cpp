// owned_process (see process.h).
#include "sandbox/sys/process.h"

#include <signal.h>
#include <sys/wait.h>

#include <cerrno>
#include <utility>

#include "sandbox/sys/syscalls.h"

namespace evalbox::sys {

owned_process::owned_process(pid_t pid, unique_fd pidfd) noexcept
    : pid_(pid), pidfd_(std::move(pidfd)) {}

owned_process::owned_process(owned_process&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)), pidfd_(std::move(other.pidfd_)) {}

owned_process& owned_process::operator=(owned_process&& other) noexcept {
  if (this != &other) {
    terminate();
    pid_ = std::exchange(other.pid_, -1);
    pidfd_ = std::move(other.pidfd_);
  }
  return *this;
}

int owned_process::signal(int sig) const noexcept {
  if (!owned()) return ESRCH;
  const int rc = pidfd_ ? pidfd_send_signal(pidfd_.get(), sig, nullptr, 0) : ::kill(pid_, sig);
  return rc == 0 ? 0 : errno;
}

pid_t owned_process::reap(int* status, rusage* usage) noexcept {
  if (!owned()) {
    errno = ECHILD;
    return -1;
  }
  pid_t got;
  do got = ::wait4(pid_, status, 0, usage);
  while (got < 0 && errno == EINTR);
  if (got == pid_ || (got < 0 && errno == ECHILD)) {
    pid_ = -1;
    pidfd_.reset();
  }
  return got;
}

void owned_process::terminate() noexcept {
  if (!owned()) return;
  (void)signal(SIGKILL);
  int status = 0;
  (void)reap(&status, nullptr);
}

}  // namespace evalbox::sys
