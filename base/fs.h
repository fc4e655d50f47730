// Small filesystem helpers used across evalbox: whole-file I/O, atomic replace, tree removal
// that never follows symlinks or crosses mounts, and lexical containment checks.
#pragma once

#include <dirent.h>
#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <iosfwd>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"

namespace evalbox {
inline namespace base {

// 16 random hex digits for temporary names (getrandom(2): std::random_device probes the CPU
// with cpuid on every construction, a trap to the hypervisor in a VM, ~20 µs).
std::string random_suffix();

result<std::string> read_file(const std::filesystem::path& path, size_t max_bytes = 64u << 20);
// Reads `fd` to its end. More than `max_bytes` is an invalid_argument error saying "`shown`
// is larger than `max_bytes` bytes"; a read error names `shown`.
result<std::string> read_fd(int fd, size_t max_bytes, const std::filesystem::path& shown);
// Creates or truncates `path` and writes `data` (no fsync).
status write_file(const std::filesystem::path& path, std::string_view data, mode_t mode = 0644);
// Writes to a temporary sibling, fsyncs it, renames it over `path` and fsyncs the directory:
// a reader sees the old or the new content, never a torn one, even after a crash.
status write_file_atomic(const std::filesystem::path& path, std::string_view data,
                         mode_t mode = 0644);
// Writes to a temporary sibling and renames it over `path`, without any fsync: a reader sees the
// old or the new content, never a torn one, but after a crash `path` may be missing, empty or
// old until sync_durable() made it durable. For files whose commit comes later (a run's files,
// committed by its line in results.jsonl): one sync of them all is cheaper than one each.
status write_file_replace(const std::filesystem::path& path, std::string_view data,
                          mode_t mode = 0644);
// Makes `files` (each directly in `dir`) and their names in `dir` durable: the writeback of
// every file is started first, then each is fdatasynced and `dir` fsynced, so that a journaling
// filesystem commits them together (ext4: one journal commit instead of one per file and one
// per rename). A file that cannot be opened or synced is an error naming it.
status sync_durable(const std::filesystem::path& dir,
                    const std::vector<std::filesystem::path>& files);
// write_file_atomic for text produced as it is written: `write` gets a stream into the
// temporary sibling (64 KiB writes), which is then fsynced and renamed over `path`. The text is
// never held in memory whole. An error from `write`, or a failed write, leaves `path` as it
// was and removes the temporary.
status write_file_streamed(const std::filesystem::path& path,
                           const std::function<status(std::ostream&)>& write, mode_t mode = 0644);
// Appends one record (a line: `data` ends with '\n') in one write(2) under O_APPEND and an
// exclusive flock(2), and fdatasyncs before returning (results.jsonl; after the lock is released,
// so that appenders do not take turns waiting for the disk). A file whose last line is
// torn (a crash mid-append) first gets the newline that ends it; a write that fails part-way
// (ENOSPC) is truncated off again, so the file never ends in a partial line of this call.
status append_durable(const std::filesystem::path& path, std::string_view data);

status make_dirs(const std::filesystem::path& path, mode_t mode = 0755);

// A directory stream (readdir) that closes itself.
struct dir_closer {
  void operator()(DIR* dir) const noexcept { ::closedir(dir); }
};
using unique_dir = std::unique_ptr<DIR, dir_closer>;
// Reads the directory open at `dirfd` through a duplicate of it: the caller keeps `dirfd`.
result<unique_dir> read_dir_at(int dirfd, const std::filesystem::path& shown);

// Removes `path` and everything below it. Symlinks are removed, never followed; a directory
// that is a mount point is not descended into and yields an error (unmount first).
status remove_tree(const std::filesystem::path& path);

// Lexically normalized absolute form (no filesystem access).
std::filesystem::path normalize(const std::filesystem::path& path);
// True when `path` equals `prefix` or lies below it, lexically (both normalized first).
bool is_within(const std::filesystem::path& path, const std::filesystem::path& prefix);
// True when `path` is absolute and already what normalize() returns: no empty, "." or ".."
// component and no trailing separator ("/" itself is). A check of the characters, no allocation.
bool is_normal_absolute(std::string_view path);
// A relative path with no "..", no absolute root and no empty components.
bool is_safe_relative(const std::filesystem::path& rel);

// An entry looked up beneath a root directory as if that directory were "/": symlinks are
// resolved inside the root (an absolute or ".." target never leaves it), so a tree written by
// untrusted code can be read on the host without following its links out. Used by grading.
struct beneath_entry {
  enum class type_kind { missing, regular, directory, symlink, other };
  type_kind type = type_kind::missing;
  mode_t mode = 0;      // permission bits
  uint64_t size = 0;    // regular files: the size in bytes (read or not)
  std::string content;  // regular files (when read), or the link text (symlinks)
};
// `follow_final`: resolve a final symlink (inside the root) instead of reporting it. A regular
// file larger than `max_bytes` is an invalid_argument error when its content is asked for.
result<beneath_entry> lookup_beneath(const std::filesystem::path& root,
                                     const std::filesystem::path& rel, bool follow_final,
                                     bool read_content, size_t max_bytes = 64u << 20);
// Relative paths of every non-directory entry below `rel` (itself if it is not a directory),
// never following symlinks. Sorted. More than `max_entries` is an invalid_argument error that
// says so (the tree was written by untrusted code).
result<std::vector<std::string>> list_beneath(const std::filesystem::path& root,
                                              const std::filesystem::path& rel,
                                              size_t max_entries = SIZE_MAX);

// RAII temporary directory (for tests and scratch work); removed on destruction.
class temp_dir {
 public:
  explicit temp_dir(std::string_view prefix = "evalbox");
  ~temp_dir();
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  [[nodiscard]] const std::filesystem::path& path() const noexcept { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace base
}  // namespace evalbox
