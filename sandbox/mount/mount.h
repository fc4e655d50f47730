// Host-side mounts of a run's materialization: the mount table as data, tmpfs, overlayfs,
// binds, idmapped binds (idmap.cpp) and unmounting everything below a directory. All of these
// mounts live in the host mount namespace; the launcher binds them into the sandbox.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "base/error.h"
#include "sandbox/sys/mountinfo.h"

namespace evalbox::sandbox::mount {

// The mount table as data (sandbox/sys/mountinfo.h).
using sys::mount_entry;
using sys::read_mountinfo;

// Mount points equal to or below `dir` (lexically), deepest (and most recent) first: the
// order in which they can be unmounted.
result<std::vector<std::filesystem::path>> mounts_under(const std::filesystem::path& dir);

// Unmounts every mount at or below `dir`, deepest first, with MNT_DETACH (a process still
// holding a file there cannot keep the run from being reclaimed). Returns how many.
result<int> unmount_all_under(const std::filesystem::path& dir);
// Unmounts one mount point without MNT_DETACH: EBUSY is reported (used before reusing the
// layers under it, e.g. for a snapshot).
status unmount(const std::filesystem::path& target);

// Unmounts each of `targets` in order (lazily, not following symlinks), repeatedly while
// something is still mounted there; a target that is not a mount point (or does not exist)
// is skipped, and so is one at or below a target already detached (which took it along).
// Reads no mount table: for mounts whose points the caller made and knows. Returns how many
// mounts came off by their own umount2.
result<int> unmount_each(const std::vector<std::filesystem::path>& targets);

// A tmpfs of `size_bytes` (the quota: writes past it fail with ENOSPC), root dir `mode`,
// owned by uid:gid. nosuid,nodev.
status mount_tmpfs(const std::filesystem::path& target, uint64_t size_bytes, mode_t mode, uid_t uid,
                   gid_t gid);

// overlayfs. `lowers` are top-most first. With an empty `upper` the overlay is read-only and
// needs at least two lowers.
status mount_overlay(const std::filesystem::path& target,
                     const std::vector<std::filesystem::path>& lowers,
                     const std::filesystem::path& upper, const std::filesystem::path& work);

// A recursive-free bind of `source` at `target`, read-only when asked (remounted so).
status bind(const std::filesystem::path& source, const std::filesystem::path& target,
            bool read_only);

// Binds `source` read-only at `target` through an idmapped mount that shows on-disk owner
// `from_uid:from_gid` as `to_uid:to_gid` (other ids show as the overflow id). The user
// namespace carrying the idmap is created once per (from, to) and cached for the life of the
// process (thread-safe). Needs root and a kernel with idmapped mounts for that filesystem.
status bind_idmapped(const std::filesystem::path& source, const std::filesystem::path& target,
                     uid_t from_uid, gid_t from_gid, uid_t to_uid, gid_t to_gid);

}  // namespace evalbox::sandbox::mount
