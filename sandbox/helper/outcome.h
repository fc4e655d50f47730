// What a run's end means: the facts the supervisor saw when pid 1 of the run was gone, turned
// into the run record's outcome (docs/run-record.md, "How each outcome is decided"). Plain data
// in, plain data out: the precedence among outcomes is tested without running anything.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "sandbox/protocol/run_record.h"

namespace evalbox::sandbox::helper {

struct run_end {
  std::optional<outcome_kind> forced;  // evalbox-sandbox killed the run, and why
  std::optional<int> wait_status;      // the main process's, as pid 1 reported it
  int init_status = 0;                 // pid 1's own wait status
  uint64_t oom_kills = 0;              // the cgroup's count of OOM kills in the run
  uint64_t cpu_ms = 0;                 // the run's CPU time
  uint64_t cpu_limit_ms = 0;           // 0: none
};

struct decided {
  std::optional<outcome_kind> outcome;  // unset: the sandbox failed (error)
  int exit_code = 0;                    // exited
  int signal = 0;                       // signaled
  std::string error;
  std::string error_step;
};

// In this order: cancelled (evalbox was stopped); oom_killed when the OOM killer killed any
// process of the run, whatever the main process did afterwards (it ran without what was
// killed, and its own exit — often 137 from a shell — would hide the cause); evalbox's other
// kills (timed_out, cpu_limit, output_limit); pid 1 gone without a report (an error); the main
// process's SIGXCPU or a SIGKILL past the CPU limit (cpu_limit); another signal (signaled);
// its exit (exited).
decided decide_outcome(const run_end& end);

}  // namespace evalbox::sandbox::helper
