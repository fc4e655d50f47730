// The outcome of a run from what its end looked like (see outcome.h).
#include "sandbox/helper/outcome.h"

#include <signal.h>
#include <sys/wait.h>

#include <fmt/format.h>

namespace evalbox::sandbox::helper {

decided decide_outcome(const run_end& end) {
  decided d;
  if (end.forced == outcome_kind::cancelled) {
    d.outcome = outcome_kind::cancelled;
    return d;
  }
  if (end.oom_kills > 0) {
    d.outcome = outcome_kind::oom_killed;
    return d;
  }
  if (end.forced) {
    d.outcome = *end.forced;
    return d;
  }
  if (!end.wait_status) {
    // Pid 1 died without a report: the OOM killer would be counted above (pid 1 is protected,
    // but not beyond its own cgroup's limit), so a kill from outside, or a crash.
    const int st = end.init_status;
    d.error_step = "init";
    d.error = WIFSIGNALED(st)
                  ? fmt::format(
                        "pid 1 of the run was killed by signal {} from outside the sandbox "
                        "(not by evalbox-sandbox) before the program finished",
                        WTERMSIG(st))
                  : fmt::format("pid 1 of the run exited with status {} without a report",
                                WEXITSTATUS(st));
    return d;
  }
  const int ws = *end.wait_status;
  if (WIFSIGNALED(ws)) {
    const int sig = WTERMSIG(ws);
    if (sig == SIGXCPU || (sig == SIGKILL && end.cpu_limit_ms && end.cpu_ms >= end.cpu_limit_ms)) {
      d.outcome = outcome_kind::cpu_limit;  // RLIMIT_CPU, the second fence
    } else {
      d.outcome = outcome_kind::signaled;
      d.signal = sig;
    }
    return d;
  }
  d.outcome = outcome_kind::exited;
  d.exit_code = WIFEXITED(ws) ? WEXITSTATUS(ws) : 0;
  return d;
}

}  // namespace evalbox::sandbox::helper
