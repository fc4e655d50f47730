// The mount table as data: /proc/<pid>/mountinfo parsed into entries. One parser for every
// reader (the mount layer unmounting a run, the host probe finding cgroup hierarchies).
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"

namespace evalbox::sys {

// One line of /proc/<pid>/mountinfo, with octal escapes (\040) decoded.
struct mount_entry {
  int id = 0;
  int parent_id = 0;
  std::filesystem::path mount_point;
  std::string fstype;
  std::string source;
  std::string options;        // per-mount (rw, nosuid, ...)
  std::string optional;       // propagation tags (shared:N, master:N), space separated
  std::string super_options;  // per-superblock (size=..., lowerdir=...)
};

// The entries of mountinfo text, in order. A line without every field (the kernel never
// writes one) is left out rather than half read.
std::vector<mount_entry> parse_mountinfo(std::string_view text);

result<std::vector<mount_entry>> read_mountinfo(
    const std::filesystem::path& file = "/proc/self/mountinfo");

}  // namespace evalbox::sys
