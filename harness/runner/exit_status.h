// The exit statuses of evalbox's commands: a contract of the product (docs/cli.md, "Exit
// codes"; scripts/check-docs fails when one is missing there), and the rule that turns how a
// set of runs ended into one of them. `evalbox run` uses each of them.
#pragma once

#include "base/error.h"
#include "harness/results/record.h"

namespace evalbox::harness {
inline namespace runner {

enum exit_code : int {
  exit_ok = 0,
  exit_task_failed = 1,
  exit_execution_failed = 2,
  exit_grader_failed = 3,
  exit_budget_spent = 4,  // the suite_budget stopped the suite before every planned run started
  exit_usage = 64,        // invalid configuration or arguments
  exit_internal = 70,
  exit_sigint = 130,
  exit_sigterm = 143,
};

// The exit status for runs that ended this way at worst: an execution error outweighs a
// grader error, which outweighs a failed task.
constexpr exit_code exit_status(run_ending worst) noexcept {
  switch (worst) {
    case run_ending::passed:
      return exit_ok;
    case run_ending::task_failed:
      return exit_task_failed;
    case run_ending::grader_error:
      return exit_grader_failed;
    case run_ending::execution_error:
      return exit_execution_failed;
  }
  return exit_internal;
}

// The exit status of a command stopped by this signal (SIGINT, SIGTERM), else exit_internal.
exit_code exit_status_of_signal(int sig) noexcept;

// The exit status of a command on a store or a file that failed with `e` (evalbox image): the
// user's mistake (64), a missing image (1, as a task that did not pass), a stop (130), or the
// host's failure (2).
constexpr exit_code exit_status_of_error(const error& e) noexcept {
  switch (e.kind) {
    case error_kind::invalid_argument:
      return exit_usage;
    case error_kind::not_found:
      return exit_task_failed;
    case error_kind::cancelled:
      return exit_sigint;
    default:
      return exit_execution_failed;
  }
}

}  // namespace runner
}  // namespace evalbox::harness
