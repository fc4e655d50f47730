// The mount table as data, and the tmpfs/overlay/bind mounts of a run (see mount.h).
#include "sandbox/mount/mount.h"

#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include <fmt/format.h>

#include "base/fs.h"

namespace evalbox::sandbox::mount {

namespace fs = std::filesystem;

result<std::vector<fs::path>> mounts_under(const fs::path& dir) {
  auto table = EB_TRY(read_mountinfo());
  // The kernel writes mount points normalized, so a string prefix of the normalized `dir`
  // rules out nearly every entry before the component-wise comparison.
  const std::string prefix = normalize(dir).string();
  std::vector<std::pair<size_t, fs::path>> found;  // (order in the table, path)
  for (size_t i = 0; i < table.size(); ++i) {
    const std::string& point = table[i].mount_point.native();
    if (point.compare(0, prefix.size(), prefix) != 0) continue;
    if (is_within(table[i].mount_point, dir)) found.emplace_back(i, table[i].mount_point);
  }
  // Deepest first; among equal depth, the most recently mounted (later in the table) first,
  // so stacked mounts on one point come off top-down.
  std::stable_sort(found.begin(), found.end(), [](const auto& a, const auto& b) {
    auto da = std::distance(a.second.begin(), a.second.end());
    auto db = std::distance(b.second.begin(), b.second.end());
    if (da != db) return da > db;
    return a.first > b.first;
  });
  std::vector<fs::path> out;
  for (auto& [i, p] : found) out.push_back(std::move(p));
  return out;
}

result<int> unmount_all_under(const fs::path& dir) {
  int count = 0;
  // Unmounting a mount can expose another stacked below it: repeat until none is left.
  for (int round = 0; round < 16; ++round) {
    auto points = EB_TRY(mounts_under(dir));
    if (points.empty()) return count;
    for (const auto& p : points) {
      if (::umount2(p.c_str(), MNT_DETACH | UMOUNT_NOFOLLOW) == 0) {
        ++count;
      } else if (errno != EINVAL && errno != ENOENT) {
        return sys_error(errno, "umount2({}, MNT_DETACH)", p.string());
      }
    }
  }
  return make_error(error_kind::internal, "unmount below {}: mounts keep reappearing",
                    dir.string());
}

result<int> unmount_each(const std::vector<fs::path>& targets) {
  int count = 0;
  std::vector<const fs::path*> detached;
  for (const auto& t : targets) {
    // A lazy unmount takes every mount below its point with it: a target below one already
    // detached is gone (its umount2 would only say EINVAL after a path walk).
    if (std::any_of(detached.begin(), detached.end(),
                    [&](const fs::path* d) { return is_within(t, *d); }))
      continue;
    for (int stacked = 0;; ++stacked) {
      if (::umount2(t.c_str(), MNT_DETACH | UMOUNT_NOFOLLOW) == 0) {
        if (stacked == 0) detached.push_back(&t);
        ++count;
        if (stacked < 16) continue;
        return make_error(error_kind::internal, "unmount {}: mounts keep reappearing", t.string());
      }
      // Not (or no longer) a mount point; EPERM: without privilege nothing can be unmounted
      // (nor was anything mounted here), and umount2 says EPERM before it looks.
      if (errno == EINVAL || errno == ENOENT || errno == EPERM) break;
      return sys_error(errno, "umount2({}, MNT_DETACH)", t.string());
    }
  }
  return count;
}

status unmount(const fs::path& target) {
  if (::umount2(target.c_str(), UMOUNT_NOFOLLOW) != 0)
    return sys_error(errno, "umount({})", target.string());
  return {};
}

status mount_tmpfs(const fs::path& target, uint64_t size_bytes, mode_t mode, uid_t uid, gid_t gid) {
  std::string data = fmt::format("size={},mode={:o},uid={},gid={}", size_bytes, mode, uid, gid);
  if (::mount("evalbox", target.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, data.c_str()) != 0)
    return sys_error(errno, "mount(tmpfs, {}, {})", target.string(), data);
  return {};
}

namespace {

// The legacy mount data of overlayfs is split on ',' and lowerdir on ':'; the run's own paths
// never contain them unless the state root does, which is refused here with a clear message.
status check_overlay_path(const fs::path& p) {
  if (p.string().find_first_of(",:\\") != std::string::npos)
    return make_error(error_kind::invalid_argument,
                      "overlay path {} contains ',', ':' or '\\', which overlayfs cannot take; "
                      "choose a state directory without them",
                      p.string());
  return {};
}

}  // namespace

status mount_overlay(const fs::path& target, const std::vector<fs::path>& lowers,
                     const fs::path& upper, const fs::path& work) {
  std::string lowerdir;
  for (const auto& l : lowers) {
    EB_TRY(check_overlay_path(l));
    if (!lowerdir.empty()) lowerdir += ':';  // (a "" : ":" + string here trips GCC 12's -Wrestrict)
    lowerdir += l.string();
  }
  std::string data = "lowerdir=" + lowerdir;
  unsigned long flags = MS_NOSUID | MS_NODEV;
  if (upper.empty()) {
    flags |= MS_RDONLY;
  } else {
    EB_TRY(check_overlay_path(upper));
    EB_TRY(check_overlay_path(work));
    data += fmt::format(",upperdir={},workdir={}", upper.string(), work.string());
  }
  if (::mount("overlay", target.c_str(), "overlay", flags, data.c_str()) != 0)
    return sys_error(errno, "mount(overlay, {}, {})", target.string(), data);
  return {};
}

status bind(const fs::path& source, const fs::path& target, bool read_only) {
  if (::mount(source.c_str(), target.c_str(), nullptr, MS_BIND, nullptr) != 0)
    return sys_error(errno, "mount({}, {}, MS_BIND)", source.string(), target.string());
  if (read_only &&
      ::mount(nullptr, target.c_str(), nullptr, MS_BIND | MS_REMOUNT | MS_RDONLY, nullptr) != 0) {
    int err = errno;
    ::umount2(target.c_str(), MNT_DETACH);
    return sys_error(err, "mount({}, MS_REMOUNT|MS_RDONLY)", target.string());
  }
  return {};
}

}  // namespace evalbox::sandbox::mount
