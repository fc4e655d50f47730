// Snapshots of a live session's writable trees: an overlay's upper directory, frozen into a
// read-only layer directory while the overlay stays mounted and in use. The layer is later
// stacked as a lower of new userxattr overlays above the older layers, so the copy keeps what
// overlayfs reads from it — whiteouts, opaque directories, user.* xattrs — and never follows a
// link or writes outside the new directory, since the upper was written by untrusted code.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "base/error.h"

namespace evalbox::sandbox {
inline namespace live {

// How deep a frozen tree may go, counted in directories below its root. Every level keeps two
// fds open (the source directory and its copy), so this also bounds the fds a snapshot holds.
inline constexpr int max_layer_depth = 1024;

struct frozen_layer {
  uint64_t bytes = 0;                // regular file bytes copied
  uint64_t entries = 0;              // entries created below `to`: dirs, files, links, whiteouts
  std::vector<std::string> skipped;  // relative paths of special files left out
};

// Copies the overlay upper `upper` into the new directory `to` as a read-only layer for
// userxattr overlays. The upper may be in use: what is seen is copied, and an entry that
// vanishes while it is walked is left out.
//
// - whiteouts (0/0 character devices) stay whiteouts; an opaque directory (user.overlay.opaque
//   or, from an overlay mounted by real root, trusted.overlay.opaque) gets user.overlay.opaque;
//   other user.* xattrs are copied, security.*, trusted.* and system.* are not;
// - regular files keep contents, permission bits (setuid/setgid dropped), times, and their
//   owner when the caller is root (else they are the caller's); symlinks are copied as links;
//   directories get their mode, owner and times after their contents are in;
// - sockets, fifos and devices are left out and listed in `skipped`; hard links become
//   separate files.
//
// `to` must not exist; its parent must. `upper` must be a directory, not a symlink to one. On
// any error the partial `to` is removed and the error names the failing path and call.
result<frozen_layer> freeze_layer(const std::filesystem::path& upper,
                                  const std::filesystem::path& to);

}  // namespace live
}  // namespace evalbox::sandbox
