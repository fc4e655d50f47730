// adapter: command — runs any program as the agent.
//
//   - id: scripted
//     adapter: command
//     argv: [agents/scripted-agent.sh, "{prompt}"]   # {prompt} substituted; relative paths
//                                                      # resolve against the suite file
//     transcript: jsonl      # stdout is evalbox.events.v1 JSONL (default: none)
//
// The prompt also arrives on stdin and in EVALBOX_PROMPT.
#pragma once

#include <memory>

#include "harness/agent/adapter.h"

namespace evalbox::adapters::command {
std::unique_ptr<harness::adapter> make_adapter();
}
