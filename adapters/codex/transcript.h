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

#include "harness/transcript/transcript.h"

namespace evalbox::adapters::codex {

// Never fails on content: garbage lines and unknown event or item types are counted.
result<harness::transcript> parse_codex_exec_json(std::string_view jsonl);

// `/bin/bash -lc '<script>'` (how Codex reports every shell command) -> `<script>`, so that
// commands compare equal across agents; nullopt when `command` is not of that shape.
std::optional<std::string> unwrap_shell_command(std::string_view command);

}  // namespace evalbox::adapters::codex
