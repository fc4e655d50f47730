// owned_process: a child process that evalbox started and must not leave behind. Its owner
// kills it (SIGKILL through the pidfd when there is one: no pid-reuse race) and reaps it,
// unless it was reaped already — on every path, including early returns.
#pragma once

#include <sys/resource.h>
#include <sys/types.h>

#include "base/unique_fd.h"

namespace evalbox::sys {

class owned_process {
 public:
  owned_process() noexcept = default;
  // Takes over `pid`, a child of the caller, with its pidfd (may be empty: kill(2) then).
  owned_process(pid_t pid, unique_fd pidfd) noexcept;
  owned_process(owned_process&& other) noexcept;
  owned_process& operator=(owned_process&& other) noexcept;
  owned_process(const owned_process&) = delete;
  owned_process& operator=(const owned_process&) = delete;
  ~owned_process() { terminate(); }

  [[nodiscard]] pid_t pid() const noexcept { return pid_; }
  // Readable (POLLIN) once the process has exited; -1 without a pidfd.
  [[nodiscard]] int pidfd() const noexcept { return pidfd_.get(); }
  // True until the process is reaped.
  [[nodiscard]] bool owned() const noexcept { return pid_ > 0; }

  // Sends `sig`. Returns 0 or an errno; nothing to signal once reaped is ESRCH.
  int signal(int sig) const noexcept;
  // Waits for the process to exit and reaps it (wait4, EINTR retried); afterwards nothing is
  // owned. Returns the pid, or -1 with errno.
  pid_t reap(int* status, rusage* usage) noexcept;
  // SIGKILL and reap, now. Nothing when already reaped.
  void terminate() noexcept;

 private:
  pid_t pid_ = -1;
  unique_fd pidfd_;
};

}  // namespace evalbox::sys
