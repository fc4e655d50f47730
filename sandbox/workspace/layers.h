// Directories stacked the way overlayfs stacks them — an image's layers — read without a mount:
// which layers a directory of the merged view comes from (a workspace taken from an image's
// working directory is an overlay of exactly those), and a plain copy of the merged view (the
// same workspace where evalbox cannot mount: without root).
//
// The rules are overlayfs's (Documentation/filesystems/overlayfs.rst): the top-most layer that
// has a name decides what it is; a whiteout (a 0/0 character device, or an empty file with the
// xattr user.overlay.whiteout) hides it in every layer below; a directory marked opaque
// (trusted.overlay.opaque or user.overlay.opaque = "y") hides what the layers below have in it.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <vector>

#include "base/error.h"
#include "sandbox/workspace/tree.h"

namespace evalbox::sandbox::workspace {

// The directories, top-most first, that `dir` (absolute, as the merged view names it) is made
// of in `layers` (top-most first): each layer's `dir` from the top-most one that has it down to
// the first that a whiteout, an opaque directory or a non-directory on the way hides. Empty
// when the merged view has no such directory. A symlink at `dir` or on the way to it is an error
// naming it (the merged view would follow it somewhere else).
result<std::vector<std::filesystem::path>> subtree_layers(
    const std::vector<std::filesystem::path>& layers, const std::filesystem::path& dir);

// Copies the merged view of `layers` (top-most first, each an existing directory) into the
// existing directory `to`, like copy_tree: whited-out names are left out, opaque directories
// show only their own layer's entries, everything is owned by uid:gid.
status copy_layers(const std::vector<std::filesystem::path>& layers,
                   const std::filesystem::path& to, copy_mode mode, uid_t uid, gid_t gid);

// What `path` (absolute, as the merged view names it) is in the merged view of `layers`, with
// every symlink on the way and at the end resolved inside that view (an absolute target starts
// again at its root, never the host's; at most 40 links).
enum class merged_kind { missing, directory, file, other };
result<merged_kind> merged_lookup(const std::vector<std::filesystem::path>& layers,
                                  const std::filesystem::path& path);

// overlayfs's own markers, as the image store writes them (also used by changed_paths).
bool is_whiteout_at(int dirfd, const char* name);
bool is_opaque_dir(int fd);

}  // namespace evalbox::sandbox::workspace
