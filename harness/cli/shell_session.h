// A person's shell in place of the agent, through the runner's own phases (`evalbox fixture
// shell`, `evalbox runs shell`): the run is prepared as any run (the candidate's home and
// leases, the fixture's environment, bin/, limits and network), its setup runs, then the shell
// opens at the caller's terminal; when it exits, the run's checks grade what it left and the
// grading is printed. Nothing is kept: the results go to a temporary directory.
#pragma once

#include <filesystem>
#include <string>

#include "harness/config/spec.h"

namespace evalbox::harness::cli {

struct shell_session_options {
  std::string command;  // "fixture shell": names the messages
  bool grader = false;  // /grader mounted (read-only) in the shell too
  // The workspace to start from instead of the fixture's (a kept workspace: only read).
  std::filesystem::path workspace;
};

// Runs the suite's one run (one fixture, one candidate) so. Exit code: 0 the checks pass on
// what the shell left, 1 they do not, 2 the run could not be carried out (the setup failed,
// the sandbox did), 3 it could not be graded, 130/143 interrupted.
int run_shell_session(const harness::suite_spec& suite, const shell_session_options& options);

}  // namespace evalbox::harness::cli
