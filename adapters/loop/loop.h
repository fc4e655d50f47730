// adapter: loop — an agent whose loop runs outside the task's sandbox and drives it through a
// session (docs/sessions.md): Terminus-style tmux drivers, mini-swe-agent, SWE-agent, Inspect
// tool loops.
//
//   - id: my-loop
//     adapter: loop
//     argv: [agents/loop-agent.py, "{prompt}"]     # relative paths resolve against the suite
//
// The program runs in a sandbox of its own — the candidate's managed home and credentials, the
// suite's network for it (its model API), an empty workspace, the host's root — with
// EVALBOX_SESSION naming the socket of the run's task session, which holds the fixture's
// workspace and image, the fixture's network and no credentials. When the program exits, the
// task's state is graded like any run's; the session's commands are the run's transcript.
// The prompt also arrives on stdin and in EVALBOX_PROMPT.
#pragma once

#include <memory>

#include "harness/agent/adapter.h"

namespace evalbox::adapters::loop {
std::unique_ptr<harness::adapter> make_adapter();
}
