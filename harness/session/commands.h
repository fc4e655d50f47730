// A session's commands (transcript.jsonl, evalbox.session-event.v1) as the normalized
// transcript (harness/transcripts): one step per exec, its command a shell call with its exit
// status (a "shell" call) — what transcript checks (`command_matches`) and the ATIF trajectory
// read.
#pragma once

#include <filesystem>

#include "base/error.h"
#include "harness/transcripts/transcript.h"

namespace evalbox::harness {
inline namespace sessions {

// The events of `path` (a missing file: no command yet), bounded like any transcript read.
result<transcript> transcript_of_commands(const std::filesystem::path& path);

}  // namespace sessions
}  // namespace evalbox::harness
