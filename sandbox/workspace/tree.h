// Tree copies and comparisons for the copy/reflink workspace strategies: copy_file_range or
// FICLONE per file, symlinks as symlinks (never followed), other special files skipped,
// modes and mtimes kept, everything owned by the sandbox id.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string>
#include <vector>

#include "sandbox/base/error.h"

namespace evalbox::sandbox::workspace {

enum class copy_mode { copy, reflink };

// Copies the contents of directory `from` into the existing directory `to`.
status copy_tree(const std::filesystem::path& from, const std::filesystem::path& to, copy_mode mode,
                 uid_t uid, gid_t gid);

// True when `rel` differs between trees `a` and `b`: existence, type, permission bits, size,
// content or link target.
bool entry_differs(const std::filesystem::path& a, const std::filesystem::path& b,
                   const std::filesystem::path& rel);

// Every relative path below `root` (directories included), sorted.
std::vector<std::string> list_tree(const std::filesystem::path& root);

}  // namespace evalbox::sandbox::workspace
