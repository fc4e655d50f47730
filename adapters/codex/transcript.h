// Codex CLI's `codex exec --json` event stream, normalized into an evalbox transcript.
//
// Mapping (docs/transcript.md has the details): each item becomes one step, created when the
// item is first seen and completed when its item.completed arrives (paired by item.id), so a
// command cut off by a kill still shows as issued. turn.completed usage sums into the total;
// turn.failed and an unfinished turn set `error`.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "harness/transcripts/transcript.h"

namespace evalbox::adapters::codex {

// Never fails on content: garbage lines and unknown event or item types are counted.
result<harness::transcript> parse_codex_exec_json(std::string_view jsonl);

// Adds the shell commands that Codex ran but left out of the `--json` stream, from its native
// session file (`rollout-*.jsonl`, the lines for this thread): codex-cli 0.171.0 emits no item
// for a command its own sandbox denied, yet the model saw the denial. Each rollout
// `function_call` (exec_command / shell) is matched in order to the stream's shell calls by
// command; an unmatched one becomes a step of its own at that point of the conversation, with
// the exit code and output parsed from its `function_call_output`. Returns how many it added.
int add_unreported_commands(harness::transcript& t, std::string_view rollout_jsonl);

// `/bin/bash -lc '<script>'` (how Codex reports every shell command) -> `<script>`, so that
// commands compare equal across agents; nullopt when `command` is not of that shape.
std::optional<std::string> unwrap_shell_command(std::string_view command);

}  // namespace evalbox::adapters::codex
