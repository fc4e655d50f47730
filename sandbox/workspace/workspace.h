// The run's workspace: materialized from the fixture's source by one of three strategies, on
// the run's disk (a tmpfs of the quota size when evalbox is root), with O(1) snapshots for
// overlay and tree copies for copy/reflink.
//
// Layout inside the run directory:
//   disk/            tmpfs (size = disk quota, 0700) — or a plain directory without root
//   disk/upper<N>, disk/work<N>   overlay layers (N grows with each snapshot)
//   disk/workspace   the copy (copy strategy)
//   lower/           the source, bound read-only (idmapped to the sandbox id when needed); for
//                    a workspace from an image directory the image's layers take its place
//   workspace/       the merged overlay (overlay) or the copy (reflink)
//   snapshots/<n>    read-only views of snapshot n
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/json_fwd.h"
#include "sandbox/spec/request.h"

namespace evalbox::sandbox::workspace {

std::string_view to_string(workspace_strategy s) noexcept;

struct disk_info {
  std::filesystem::path dir;  // <run>/disk
  bool tmpfs = false;         // the quota is enforced (ENOSPC past it)
  uint64_t quota_bytes = 0;
};

// Creates <run>/disk: a size-limited tmpfs owned by root (0700) when `use_tmpfs`, else a plain
// directory (the quota is then only recorded).
result<disk_info> prepare_disk(const std::filesystem::path& run_dir, uint64_t quota_bytes,
                               bool use_tmpfs);

// A materialized workspace and its layers. Plain data; teardown is the run's (unmount all
// under the run directory, remove it).
class workspace_tree {
 public:
  // Materializes `spec.source` with `strategy` (never auto_select: resolve it first). Without a
  // source (a workspace taken from an image's directory), the workspace starts as the merged
  // view of `layers` (top-most first, already owned by uid:gid; see subtree_layers in
  // layers.h): the overlay stacks them as its lowers, a copy copies what they show.
  static result<workspace_tree> materialize(const workspace_spec& spec, workspace_strategy strategy,
                                            const std::filesystem::path& run_dir,
                                            const disk_info& disk, uid_t uid, gid_t gid,
                                            const std::vector<std::filesystem::path>& layers = {});

  [[nodiscard]] workspace_strategy strategy() const noexcept { return strategy_; }
  [[nodiscard]] const std::filesystem::path& dir() const noexcept { return dir_; }
  [[nodiscard]] json identity() const;

  // See prepared_session::snapshot_workspace(): returns the view and its index.
  result<std::pair<std::filesystem::path, int>> snapshot();
  result<std::vector<std::string>> changed_paths(int since_index) const;
  // Every point this tree may have mounted something on, in the order to unmount them
  // (snapshot views newest first, the workspace, its lower). Some may hold no mount.
  [[nodiscard]] std::vector<std::filesystem::path> mount_points() const;

 private:
  workspace_strategy strategy_ = workspace_strategy::copy;
  std::filesystem::path run_dir_;
  std::filesystem::path dir_;
  disk_info disk_;
  uid_t uid_ = 0;
  gid_t gid_ = 0;
  bool idmapped_ = false;
  bool lower_bound_ = false;  // <run>/lower is a bind of the source (to unmount)
  std::string source_;        // what it was made from, for identity()
  // overlay: what the workspace's own uppers stack on, top-most first (the bound source, or
  // the image's layers)
  std::vector<std::filesystem::path> base_;
  int top_upper_ = 0;  // overlay: index of the writable upper
  // overlay: the first upper's root as materialized (change time in ns, mode), to tell at the
  // first snapshot whether anything has been written into the workspace since (-1: unknown).
  int64_t upper0_ctime_ns_ = -1;
  mode_t upper0_mode_ = 0;
  // Whether the first upper is still as materialized: no entry, the same root.
  [[nodiscard]] bool untouched() const;
  // Per snapshot n: its view, and (overlay) the top upper index it froze.
  std::vector<std::pair<std::filesystem::path, int>> snapshots_;
};

// Picks the strategy for `requested` on this host: overlay when root and overlayfs is there;
// reflink when FICLONE works on the state filesystem; else copy. An explicit choice the host
// cannot honour is an unsupported error saying why.
result<workspace_strategy> resolve_strategy(workspace_strategy requested,
                                            const std::filesystem::path& probe_dir);

}  // namespace evalbox::sandbox::workspace
