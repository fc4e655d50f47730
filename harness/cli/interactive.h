// One interactive launch in a prepared session, for the shell commands (sandbox shell, fixture
// shell, runs shell): the caller's terminal passed through. With a terminal on stdin the
// program gets a pseudo-terminal of its own (its controlling terminal, window size forwarded)
// while the caller's is in raw mode, put back on every way out (terminal.h); without one,
// stdin, stdout and stderr are passed through as they are (pipes, files).
#pragma once

#include "base/error.h"
#include "sandbox/launch/launcher.h"
#include "sandbox/prepare/preparer.h"
#include "sandbox/protocol/run_record.h"

namespace evalbox::harness::cli {

// Runs `options` (inherit_stdio and terminal are set here) in `session` until the program
// ends or `cancel` is set. SIGTERM, SIGHUP and a SIGINT sent to evalbox set it (unless the
// caller blocks them and watches them itself, as `evalbox fixture shell` does): the helper ends
// the run (outcome `cancelled`). Ctrl-C typed at the terminal is the program's.
result<sandbox::run_record> launch_interactive(const sandbox::prepared_session& session,
                                               sandbox::launch_options options,
                                               sandbox::cancel_token& cancel);

// The shell every shell command starts: bash where the root has it (an image may not), else
// sh, interactive.
std::vector<std::string> interactive_shell_argv();

}  // namespace evalbox::harness::cli
