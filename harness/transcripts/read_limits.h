// How much of what an agent wrote the harness reads, at most. Everything here is agent-controlled
// (its output, its session files, its workspace), so every reader is bounded: past a cap the
// check fails, or the run is an execution error, with a message naming the cap — never
// unbounded memory in the runner, which holds up to `concurrency` runs at once.
// docs/reliability.md ("Limits on what the harness reads") lists each cap and what happens
// past it; the tests of each reader prove it. Messages name a cap with format_bytes
// (base/units.h).
#pragma once

#include <cstddef>

namespace evalbox::harness {
inline namespace transcripts {

// One line of a native stream (Codex, Claude Code, Gemini, evalbox.events.v1) or a session
// file. A line is parsed as one JSON document, which takes several times its size in memory.
inline constexpr size_t max_native_line_bytes = 8u << 20;

// A whole native stream (the agent's stdout) or a native session file the adapter reads.
// The output limit (limits.output) usually keeps stdout far below it.
inline constexpr size_t max_native_stream_bytes = 64u << 20;

// A workspace file a `file:` check reads, and each file a `git:` check compares (files of
// different sizes differ without being read).
inline constexpr size_t max_checked_file_bytes = 64u << 20;

// The files below one path of a `git:` check (a path is listed before it is compared).
inline constexpr size_t max_git_check_files = 100000;

// A reward file (a number or a small JSON document a grader writes), for the reader of
// Harbor-style rewards.
inline constexpr size_t max_reward_file_bytes = 1u << 20;

// A `tests:` check's report: the test command's output (pytest) or the JUnit XML file it
// wrote. Past it the check fails saying so.
inline constexpr size_t max_test_report_bytes = 64u << 20;

}  // namespace transcripts
}  // namespace evalbox::harness
