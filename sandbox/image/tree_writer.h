// Writes the entries of one image layer beneath its directory — the only code that creates
// files from image content. Image content is hostile: every parent is opened with
// openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS), so neither ".." nor a symlink planted by an
// earlier entry can lead a write outside the layer; the final component is created with *at
// calls that never follow it (O_EXCL, mkdirat, symlinkat, mknodat, linkat without
// AT_SYMLINK_FOLLOW). No libarchive here: the reader (layer.cpp) hands over plain entries.
//
// What is written:
//   - regular files (sparse holes kept), directories, symlinks (their text stored as is),
//     hard links to an entry already written in this layer, fifos;
//   - `.wh.NAME` becomes an overlay whiteout of NAME and `.wh..wh..opq` marks its directory
//     opaque (wherever it appears in the tar), in the store's whiteout form (see
//     sys::whiteout_form); a 0/0 character device is taken as a whiteout too;
//   - skipped and counted, never created: every other character or block device, and a hard
//     link to one. Images made from a root filesystem tar (mmdebstrap, `FROM scratch` + `ADD
//     rootfs.tar`) carry /dev/null, /dev/console, ...; a device node in an image would reach
//     hardware, and the sandbox provides its own minimal /dev — refusing the image instead
//     would make such images unusable (rootless podman skips them the same way). A skipped
//     entry writes nothing: it neither creates its parents nor replaces an earlier entry;
//   - refused: absolute paths, ".." components (a skipped device's too), sockets, and an entry
//     replacing a directory with a non-directory;
//   - modes kept (setuid/setgid included: image roots are mounted nosuid and owned by the
//     sandbox's own root), mtimes kept, directories' modes and mtimes applied last (a 0555
//     directory still receives its files);
//   - every entry is owned by the store's owner (the tar's uid/gid are not kept: the
//     sandbox maps exactly one id, its root);
//   - in flatten mode (the store's copy fallback, for hosts that can express no whiteout) the
//     layers of an image are applied one after the other onto one tree: a whiteout deletes
//     the name, an opaque marker deletes what lower layers put in its directory, and a later
//     layer may replace a directory with a file;
//   - xattrs: user.* kept (best effort, files and directories) except user.overlay.*;
//     security.*, trusted.*, system.* (ACLs) and user.overlay.* dropped — they would grant
//     file capabilities or forge overlayfs metadata (redirects, metacopy, opaque markers).
#pragma once

#include <sys/types.h>
#include <time.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "base/unique_fd.h"
#include "sandbox/sys/probe.h"

namespace evalbox::sandbox::image {

enum class entry_type {
  regular,
  directory,
  symlink,
  hardlink,
  fifo,
  char_device,
  block_device,
  socket
};

struct tree_entry {
  std::string path;  // as the archive names it ("./usr/bin/env", "etc/")
  entry_type type = entry_type::regular;
  mode_t mode = 0644;  // permission bits, 07777
  struct timespec mtime {};
  std::string link;  // symlink text, or the hard link's target path in the archive
  unsigned dev_major = 0;
  unsigned dev_minor = 0;
  int64_t size = 0;  // regular files: the content's size
  std::vector<std::pair<std::string, std::string>> xattrs;
};

// Bounds on what one layer may expand to (a decompression bomb is refused, not written).
struct layer_limits {
  uint64_t max_bytes = 32ull << 30;  // file content, counted by declared size (sparse too)
  uint64_t max_entries = 4'000'000;
  size_t max_path_bytes = 4096;
  size_t max_depth = 256;
  size_t max_xattr_bytes = 64u << 10;  // names + values of one entry
};

struct writer_options {
  uid_t owner_uid = 0;
  gid_t owner_gid = 0;
  bool chown = false;  // as root: chown every entry to the owner (rootless: already ours)
  sys::whiteout_form whiteout = sys::whiteout_form::char_device;
  bool trusted_opaque = false;  // as root: trusted.overlay.opaque too (host-namespace mounts)
  bool flatten = false;         // apply layers onto one tree (see above) instead of marking
  layer_limits limits;
};

// A block of a regular file's content at `offset` (holes of a sparse file are skipped).
struct content_block {
  const void* data = nullptr;
  size_t size = 0;
  int64_t offset = 0;
};
// Returns the next block, or nullopt at the end of the entry's content.
using content_reader = std::function<result<std::optional<content_block>>()>;

class tree_writer {
 public:
  // `root` must be an existing, empty directory; the writer owns its content from now on.
  static result<tree_writer> open(const std::filesystem::path& root, writer_options options);

  tree_writer(tree_writer&&) noexcept = default;
  tree_writer& operator=(tree_writer&&) noexcept = default;

  // Writes one entry. Errors name the entry and say what was refused.
  status add(const tree_entry& entry, const content_reader& content);
  // Ends one layer's entries (flatten mode: applies its opaque markers). Call after each layer.
  status end_layer();
  // Applies directory modes and mtimes, deepest first. Call once, after the last layer.
  status finish();

  [[nodiscard]] uint64_t bytes() const noexcept { return bytes_; }
  [[nodiscard]] uint64_t entries() const noexcept { return entries_; }
  [[nodiscard]] uint64_t whiteouts() const noexcept { return whiteouts_; }
  // Device nodes skipped (see above), over every layer written so far.
  [[nodiscard]] uint64_t devices_skipped() const noexcept { return devices_skipped_; }
  [[nodiscard]] const layer_limits& limits() const noexcept { return options_.limits; }

 private:
  tree_writer() = default;
  struct pending_dir {
    mode_t mode = 0755;
    struct timespec mtime {};
  };

  result<unique_fd> open_dir(const std::vector<std::string>& components, bool create,
                             std::string_view entry);
  result<borrowed_fd> parent_of(const std::vector<std::string>& components, std::string_view entry);
  status make_room(borrowed_fd parent, const std::string& name, bool new_is_dir,
                   std::string_view entry);
  status owned(int fd, const char* name, std::string_view entry);
  status write_regular(borrowed_fd parent, const std::string& name, const tree_entry& e,
                       const content_reader& content);
  status write_directory(borrowed_fd parent, const std::string& name,
                         const std::vector<std::string>& parts, const tree_entry& e);
  status write_symlink(borrowed_fd parent, const std::string& name, const tree_entry& e);
  status write_hardlink(borrowed_fd parent, const std::string& name, const tree_entry& e);
  status write_fifo(borrowed_fd parent, const std::string& name, const tree_entry& e);
  bool skip_device(const std::vector<std::string>& parts, const tree_entry& e);
  status whiteout(borrowed_fd parent, const std::string& name, std::string_view entry);
  status opaque(borrowed_fd dir, std::string_view entry);
  status set_xattrs(int fd, const tree_entry& e);
  status remove_below(borrowed_fd parent, const std::string& name, std::string_view entry);

  writer_options options_;
  unique_fd root_;
  std::filesystem::path root_path_;
  std::string cached_parent_;  // joined components of the last parent opened
  unique_fd cached_parent_fd_;
  bool cached_valid_ = false;
  std::map<std::string, pending_dir> dirs_;  // relative path ("" = root) -> final attributes
  // Flatten mode: paths this layer wrote, and directories it made opaque.
  std::set<std::string> written_;
  std::set<std::string> opaque_dirs_;
  // This layer's skipped device paths, while no later entry replaced them: a hard link to one
  // is skipped too.
  std::set<std::string> skipped_devices_;
  uint64_t bytes_ = 0;
  uint64_t entries_ = 0;
  uint64_t whiteouts_ = 0;
  uint64_t devices_skipped_ = 0;
};

// Splits an archive path into components: "./" prefixes and empty or "." components dropped;
// absolute paths, ".." components, NULs and over-long paths or names refused (errors name the
// entry). An empty result is the layer's root directory.
result<std::vector<std::string>> split_entry_path(std::string_view path,
                                                  const layer_limits& limits);

}  // namespace evalbox::sandbox::image
