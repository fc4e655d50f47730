// Native agent output the adapters keep beside the normalized transcript: session files copied
// out of the managed home, and the tail of a client's stderr.
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "base/error.h"

namespace evalbox::harness {
inline namespace agent {

// Where a file found below the walked directory goes, relative to the destination (given the
// file's path relative to the walked directory), or nullopt to leave it.
using native_destination =
    std::function<std::optional<std::filesystem::path>(const std::filesystem::path& relative)>;

// Copies regular files from home/below into dest_dir, each to where `destination` says
// (overwriting). Best effort: a file that cannot be read is left out. The home was written by
// the agent, so no symlink is followed, neither in `below` nor in the tree: a link could name
// any host file. Called after the agent's processes are gone.
void copy_native_files(const std::filesystem::path& home, const std::filesystem::path& below,
                       const std::filesystem::path& dest_dir,
                       const native_destination& destination);

// An agent's output stream (its stdout) or a session file it left, for an adapter to parse: at
// most max_native_stream_bytes (harness/transcripts/read_limits.h), past which it is an error
// naming the file and the cap (the run becomes an execution error, never an empty transcript).
// A missing file reads as empty: the agent wrote nothing.
result<std::string> read_native_stream(const std::filesystem::path& path);

// The last `max_lines` lines of a file (at most its first MiB) for which `keep` is true,
// joined with " | " and scrubbed of registered secrets: why a client exited, from its stderr.
std::string tail_lines(const std::filesystem::path& path, size_t max_lines,
                       const std::function<bool(std::string_view line)>& keep);

}  // namespace agent
}  // namespace evalbox::harness
