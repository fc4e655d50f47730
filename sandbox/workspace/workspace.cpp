// Workspace materialization, snapshots and change lists (see workspace.h).
#include "sandbox/workspace/workspace.h"

#include <dirent.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <set>

#include <fmt/format.h>

#include "base/fs.h"
#include "base/json.h"
#include "sandbox/mount/mount.h"
#include "sandbox/sys/probe.h"
#include "sandbox/workspace/layers.h"
#include "sandbox/workspace/tree.h"

namespace evalbox::sandbox::workspace {

namespace fs = std::filesystem;

std::string_view to_string(workspace_strategy s) noexcept {
  switch (s) {
    case workspace_strategy::auto_select:
      return "auto";
    case workspace_strategy::overlay:
      return "overlay";
    case workspace_strategy::reflink:
      return "reflink";
    case workspace_strategy::copy:
      return "copy";
  }
  return "unknown";
}

namespace {

bool overlayfs_listed() {
  std::ifstream in("/proc/filesystems");
  std::string line;
  while (std::getline(in, line))
    if (line.size() >= 7 && line.compare(line.size() - 7, 7, "overlay") == 0) return true;
  return false;
}

status mkdir_owned(const fs::path& p, mode_t mode, uid_t uid, gid_t gid) {
  if (::mkdir(p.c_str(), mode) != 0) return sys_error(errno, "mkdir {}", p.string());
  if (::chmod(p.c_str(), mode) != 0) return sys_error(errno, "chmod {}", p.string());
  if (::lchown(p.c_str(), uid, gid) != 0 && ::geteuid() == 0)
    return sys_error(errno, "chown {}", p.string());
  return {};
}

fs::path upper(const disk_info& d, int n) { return d.dir / fmt::format("upper{}", n); }
fs::path work(const disk_info& d, int n) { return d.dir / fmt::format("work{}", n); }

}  // namespace

result<workspace_strategy> resolve_strategy(workspace_strategy requested,
                                            const fs::path& probe_dir) {
  bool root = ::geteuid() == 0;
  bool overlay_ok = root && overlayfs_listed();
  switch (requested) {
    case workspace_strategy::overlay:
      if (!overlay_ok)
        return make_error(
            error_kind::unsupported,
            "workspace strategy overlay needs root and overlayfs ({}); use "
            "auto or copy",
            root ? "overlay is not in /proc/filesystems: modprobe overlay" : "not running as root");
      return requested;
    case workspace_strategy::reflink:
      if (!sys::reflink_supported(probe_dir))
        return make_error(error_kind::unsupported,
                          "workspace strategy reflink: the state filesystem at {} does not "
                          "support FICLONE (btrfs and xfs do); use auto, overlay or copy",
                          probe_dir.string());
      return requested;
    case workspace_strategy::copy:
      return requested;
    case workspace_strategy::auto_select:
      if (overlay_ok) return workspace_strategy::overlay;
      if (sys::reflink_supported(probe_dir)) return workspace_strategy::reflink;
      return workspace_strategy::copy;
  }
  return make_error(error_kind::invalid_argument, "unknown workspace strategy");
}

result<disk_info> prepare_disk(const fs::path& run_dir, uint64_t quota_bytes, bool use_tmpfs) {
  disk_info d{run_dir / "disk", use_tmpfs, quota_bytes};
  if (::mkdir(d.dir.c_str(), 0700) != 0) return sys_error(errno, "mkdir {}", d.dir.string());
  if (use_tmpfs) EB_TRY(mount::mount_tmpfs(d.dir, quota_bytes, 0700, 0, 0));
  return d;
}

result<workspace_tree> workspace_tree::materialize(const workspace_spec& spec,
                                                   workspace_strategy strategy,
                                                   const fs::path& run_dir, const disk_info& disk,
                                                   uid_t uid, gid_t gid,
                                                   const std::vector<fs::path>& layers) {
  workspace_tree t;
  t.strategy_ = strategy;
  t.run_dir_ = run_dir;
  t.disk_ = disk;
  t.uid_ = uid;
  t.gid_ = gid;
  const bool from_image = spec.source.empty();
  t.source_ = from_image ? "image:" + spec.image_dir.string() : spec.source.string();
  // The mode of the workspace's root: the source's, the image directory's, or 0755 for an
  // image that has no such directory (it starts empty).
  mode_t root_mode = 0755;
  struct stat src {};
  if (!from_image) {
    if (::stat(spec.source.c_str(), &src) != 0)
      return sys_error(errno, "stat {}", spec.source.string());
    root_mode = src.st_mode & 01777;
  } else if (!layers.empty() && ::stat(layers.front().c_str(), &src) == 0) {
    root_mode = src.st_mode & 01777;
  }
  EB_TRY(make_dirs(run_dir / "snapshots", 0700));
  switch (strategy) {
    case workspace_strategy::overlay: {
      fs::path lower = run_dir / "lower";
      if (from_image) {
        // The layers are the lowers as they are (the store made them the sandbox id's). An
        // image without the directory gives an empty lower: overlayfs needs one.
        t.base_ = layers;
        if (t.base_.empty()) {
          EB_TRY(mkdir_owned(lower, root_mode, uid, gid));
          t.base_.push_back(lower);
        }
      } else {
        EB_TRY(mkdir_owned(lower, 0700, 0, 0));
        if (src.st_uid == uid && src.st_gid == gid) {
          EB_TRY(mount::bind(spec.source, lower, true));
        } else {
          EB_TRY(mount::bind_idmapped(spec.source, lower, src.st_uid, src.st_gid, uid, gid));
          t.idmapped_ = true;
        }
        t.lower_bound_ = true;
        t.base_.push_back(lower);
      }
      EB_TRY(mkdir_owned(upper(disk, 0), root_mode, uid, gid));
      EB_TRY(mkdir_owned(work(disk, 0), 0700, 0, 0));
      t.dir_ = run_dir / "workspace";
      EB_TRY(mkdir_owned(t.dir_, 0700, 0, 0));
      EB_TRY(mount::mount_overlay(t.dir_, t.base_, upper(disk, 0), work(disk, 0)));
      if (struct stat st{}; ::stat(upper(disk, 0).c_str(), &st) == 0) {
        t.upper0_ctime_ns_ = st.st_ctim.tv_sec * 1'000'000'000LL + st.st_ctim.tv_nsec;
        t.upper0_mode_ = st.st_mode;
      }
      return t;
    }
    case workspace_strategy::reflink:
    case workspace_strategy::copy: {
      t.dir_ =
          strategy == workspace_strategy::copy ? disk.dir / "workspace" : run_dir / "workspace";
      EB_TRY(mkdir_owned(t.dir_, from_image ? root_mode : 0700, uid, gid));
      auto mode = strategy == workspace_strategy::copy ? copy_mode::copy : copy_mode::reflink;
      status s = from_image ? copy_layers(layers, t.dir_, mode, uid, gid)
                            : copy_tree(spec.source, t.dir_, mode, uid, gid);
      if (!s) {
        if (s.error().sys_errno == ENOSPC)
          return make_error(error_kind::invalid_argument,
                            "workspace {} does not fit in the disk quota of {} bytes: raise "
                            "limits.disk",
                            t.source_, disk.quota_bytes);
        return std::unexpected(std::move(s).error().with_context("copy workspace"));
      }
      return t;
    }
    case workspace_strategy::auto_select:
      break;
  }
  return make_error(error_kind::internal, "materialize: strategy not resolved");
}

json workspace_tree::identity() const {
  return json{
      {"strategy", to_string(strategy_)},
      {"quota_bytes", disk_.quota_bytes},
      {"enforced", disk_.tmpfs},
      {"fs_type", strategy_ == workspace_strategy::overlay
                      ? "overlay"
                      : (disk_.tmpfs && strategy_ == workspace_strategy::copy ? "tmpfs" : "host")},
      {"idmapped", idmapped_},
      {"source", source_},
      {"layers", top_upper_ + 1}};
}

std::vector<fs::path> workspace_tree::mount_points() const {
  std::vector<fs::path> out;
  for (auto it = snapshots_.rbegin(); it != snapshots_.rend(); ++it) out.push_back(it->first);
  if (strategy_ == workspace_strategy::overlay) {
    out.push_back(dir_);
    if (lower_bound_) out.push_back(run_dir_ / "lower");
  }
  return out;
}

bool workspace_tree::untouched() const {
  struct stat st {};
  if (upper0_ctime_ns_ < 0 || ::stat(upper(disk_, 0).c_str(), &st) != 0) return false;
  // Creating or removing an entry, chmod, chown and setting an xattr all change the ctime; the
  // entries are counted too, as a change within the clock's tick keeps the ctime.
  if (st.st_ctim.tv_sec * 1'000'000'000LL + st.st_ctim.tv_nsec != upper0_ctime_ns_ ||
      st.st_mode != upper0_mode_ || st.st_uid != uid_ || st.st_gid != gid_)
    return false;
  unique_dir d(::opendir(upper(disk_, 0).c_str()));
  if (!d) return false;
  while (const dirent* e = ::readdir(d.get())) {
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) return false;
  }
  return true;
}

result<std::pair<fs::path, int>> workspace_tree::snapshot() {
  int n = static_cast<int>(snapshots_.size());
  fs::path view = run_dir_ / "snapshots" / std::to_string(n);
  if (strategy_ == workspace_strategy::overlay && snapshots_.empty() && top_upper_ == 0 &&
      untouched()) {
    // Nothing was written since the workspace was made (no setup, or one that left it as it
    // was): what it shows is its base, and a view of that needs no freezing — no unmount and
    // remount of the workspace (each unmount of an overlay waits for two RCU grace periods).
    // Every upper counts as written after this snapshot (frozen -1).
    EB_TRY(mkdir_owned(view, 0700, 0, 0));
    if (base_.size() == 1) {
      EB_TRY_CTX(mount::bind(base_.front(), view, true), "snapshot view");
    } else {
      EB_TRY_CTX(mount::mount_overlay(view, base_, {}, {}), "snapshot view");
    }
    snapshots_.emplace_back(view, -1);
    return std::make_pair(view, n);
  }
  if (strategy_ != workspace_strategy::overlay) {
    EB_TRY(mkdir_owned(view, 0700, uid_, gid_));
    EB_TRY_CTX(copy_tree(dir_, view, copy_mode::copy, uid_, gid_), "snapshot workspace");
    // Frozen read-only where we may mount (as root); without root the copy is only ever
    // mounted read-only into sandboxes, and nothing else writes to it.
    if (::geteuid() == 0) EB_TRY(mount::bind(view, view, true));
    snapshots_.emplace_back(view, -1);
    return std::make_pair(view, n);
  }
  // The writable upper freezes into the top lower; a fresh upper takes the writes from now on.
  int frozen = top_upper_;
  std::vector<fs::path> lowers;
  for (int i = frozen; i >= 0; --i) lowers.push_back(upper(disk_, i));
  lowers.insert(lowers.end(), base_.begin(), base_.end());
  EB_TRY_CTX(mount::unmount(dir_), "snapshot: a process still uses the workspace");
  struct stat root {};
  ::stat(upper(disk_, frozen).c_str(), &root);
  auto remount_old = [&] {
    (void)mount::mount_overlay(dir_, std::vector<fs::path>(lowers.begin() + 1, lowers.end()),
                               upper(disk_, frozen), work(disk_, frozen));
  };
  status s = mkdir_owned(upper(disk_, frozen + 1), root.st_mode & 01777, root.st_uid, root.st_gid);
  if (s) s = mkdir_owned(work(disk_, frozen + 1), 0700, 0, 0);
  if (s) s = mount::mount_overlay(dir_, lowers, upper(disk_, frozen + 1), work(disk_, frozen + 1));
  if (!s) {
    remount_old();
    return std::unexpected(std::move(s).error().with_context("snapshot workspace"));
  }
  top_upper_ = frozen + 1;
  EB_TRY(mkdir_owned(view, 0700, 0, 0));
  EB_TRY_CTX(mount::mount_overlay(view, lowers, {}, {}), "snapshot view");
  snapshots_.emplace_back(view, frozen);
  return std::make_pair(view, n);
}

namespace {

bool is_whiteout(const struct stat& st) {
  return S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0);
}

bool is_opaque(const fs::path& dir) {
  char v[4] = {};
  ssize_t n = ::lgetxattr(dir.c_str(), "trusted.overlay.opaque", v, sizeof v);
  return n > 0 && v[0] == 'y';
}

// Collects the relative paths an upper layer touches. An opaque directory hides everything
// below it in the layers under it: those paths are candidates too (found in `view`).
void walk_upper(const fs::path& upper_root, const fs::path& rel, const fs::path& view,
                std::set<std::string>& out) {
  std::error_code ec;
  for (fs::directory_iterator it(upper_root / rel, ec), end; !ec && it != end; it.increment(ec)) {
    fs::path r = rel / it->path().filename();
    out.insert(r.string());
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) != 0 || is_whiteout(st)) continue;
    if (S_ISDIR(st.st_mode)) {
      if (is_opaque(it->path()))
        for (const auto& hidden : list_tree(view / r)) out.insert((r / hidden).string());
      walk_upper(upper_root, r, view, out);
    }
  }
}

}  // namespace

result<std::vector<std::string>> workspace_tree::changed_paths(int since_index) const {
  if (since_index < 0 || since_index >= static_cast<int>(snapshots_.size()))
    return make_error(error_kind::not_found, "no workspace snapshot {}", since_index);
  const auto& [view, frozen] = snapshots_[static_cast<size_t>(since_index)];
  std::set<std::string> candidates;
  if (strategy_ == workspace_strategy::overlay) {
    // Only the layers written since the snapshot can hold changes: O(changes).
    for (int i = frozen + 1; i <= top_upper_; ++i)
      walk_upper(upper(disk_, i), {}, view, candidates);
  } else {
    for (auto& p : list_tree(view)) candidates.insert(std::move(p));
    for (auto& p : list_tree(dir_)) candidates.insert(std::move(p));
  }
  std::vector<std::string> out;
  for (const auto& c : candidates)
    if (entry_differs(view, dir_, c)) out.push_back(c);
  return out;
}

}  // namespace evalbox::sandbox::workspace
