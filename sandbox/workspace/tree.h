// Tree copies and comparisons for the copy/reflink workspace strategies: copy_file_range or
// FICLONE per file, symlinks as symlinks (never followed), other special files skipped,
// modes and mtimes kept, everything owned by the sandbox id.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <filesystem>
#include <string>
#include <vector>

#include "base/error.h"

namespace evalbox::sandbox::workspace {

enum class copy_mode { copy, reflink };

// Copies the contents of directory `from` into the existing directory `to`.
status copy_tree(const std::filesystem::path& from, const std::filesystem::path& to, copy_mode mode,
                 uid_t uid, gid_t gid);

// The building blocks of both copies (and of copy_layers, layers.h). copy_entry copies one
// non-directory `name` of `src_dir` into `dst_dir` (a regular file by content, a symlink as a
// symlink; anything else is skipped); finish_dir gives a copied directory the owner, mode and
// times of `like` — last, so that a read-only directory is still filled first. setuid and
// setgid bits are dropped: no copy is ever executed with them.
status copy_entry(int src_dir, const char* name, int dst_dir, const std::filesystem::path& shown,
                  copy_mode mode, uid_t uid, gid_t gid);
status finish_dir(int dir, const struct stat& like, const std::filesystem::path& shown, uid_t uid,
                  gid_t gid);

// True when `rel` differs between trees `a` and `b`: existence, type, permission bits, size,
// content or link target.
bool entry_differs(const std::filesystem::path& a, const std::filesystem::path& b,
                   const std::filesystem::path& rel);

// Every relative path below `root` (directories included), sorted.
std::vector<std::string> list_tree(const std::filesystem::path& root);

}  // namespace evalbox::sandbox::workspace
