// A host client in an image's root. An agent's program is a host file (the agent cache,
// mounted read-only at its own path) but the root around it is the image's, whose loader,
// libraries and interpreters may differ or be missing. Before a run, the plan is adapted:
//   - a static executable (Codex's musl binary) runs as it is;
//   - a dynamically linked one (Claude Code's native binary) runs with the image's loader when
//     the image has the one it names (a glibc image); else it is started through the host's
//     own loader with the host's libraries, both mounted read-only at /opt/evalbox/host, so it
//     needs nothing of the image (what it runs — bash, git, python — is the image's either way);
//   - programs the client needs from the root (Claude Code's bash or zsh) must be there;
//   - a script runs with the image's interpreter, which must be there (`#!/usr/bin/env node`
//     needs node on the image's PATH): else the run is refused before anything starts, with
//     what is missing and what to do (`evalbox validate` says the same).
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "base/error.h"
#include "harness/agent/adapter.h"

namespace evalbox::harness {
inline namespace agent {

// Where the host's loader and libraries are seen inside an image's root.
inline constexpr std::string_view host_loader_target = "/opt/evalbox/host/ld.so";
inline constexpr std::string_view host_libraries_target = "/opt/evalbox/host/lib";

// The image as the check needs it.
struct image_view {
  std::string reference;               // for messages
  std::vector<std::string> path_dirs;  // its PATH (Env), in order
  // True when the image has a file at this absolute path (links resolved inside the image).
  std::function<result<bool>(const std::filesystem::path&)> has_file;
};

// What an executable file is, from its first bytes: an ELF with or without a program
// interpreter, a "#!" script, or something else.
struct executable_kind {
  enum class type { static_elf, dynamic_elf, script, unknown };
  type what = type::unknown;
  std::string interpreter;  // dynamic_elf: PT_INTERP; script: the #! program
  std::string argument;     // script: the #! line's argument ("node" for /usr/bin/env node)
};
result<executable_kind> inspect_executable(const std::filesystem::path& file);

// Adapts `plan` (argv, host binds) so that its client starts in `image` (see the top of this
// file). Programs below a system directory and bare names are the image's: left as they are.
// An error (invalid_argument) says why the client cannot run there.
status adapt_to_image(agent_plan& plan, const image_view& image);

}  // namespace agent
}  // namespace evalbox::harness
