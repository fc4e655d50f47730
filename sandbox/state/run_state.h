// The run-state root: per-run directories, each held by a lock for the run's whole life, and
// the reclaim of runs whose holder died (kill -9, power loss) — their mounts, cgroups and files.
//
//   <state>/runs/<run_id>/lock   flock(LOCK_EX) by the live session (O_CLOEXEC: never leaks
//                                into a child, so a crashed parent frees it even while its
//                                sandboxed children linger; reclaim kills those through their
//                                cgroups)
//   <state>/credential-leases/   see sandbox/creds
//
// A run directory appears under its final name only with its lock already held (it is built
// as runs/.new-XXXX and renamed without replacing), so a reclaimer never sees a live run
// without a lock.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/unique_fd.h"

namespace evalbox::sandbox::state {

std::filesystem::path runs_dir(const std::filesystem::path& state_root);
std::filesystem::path leases_dir(const std::filesystem::path& state_root);

// Holds a run directory: the open, locked lock file.
class run_lock {
 public:
  run_lock() = default;
  run_lock(unique_fd fd, std::filesystem::path dir) : fd_(std::move(fd)), dir_(std::move(dir)) {}
  [[nodiscard]] const std::filesystem::path& dir() const noexcept { return dir_; }
  [[nodiscard]] bool held() const noexcept { return fd_.valid(); }
  void release() noexcept { fd_.reset(); }

 private:
  unique_fd fd_;
  std::filesystem::path dir_;
};

struct reclaim_counts {
  int runs = 0;
  int mounts = 0;
  int cgroups = 0;
  std::vector<std::string> errors;
};

// Creates <runs>/<run_id> (0700) with its lock held. A live run of that id → busy
// ("already in use"); a dead one is reclaimed first.
result<run_lock> create_run_dir(const std::filesystem::path& runs, const std::string& run_id);

// Removes a run: unmounts everything below its directory (deepest first), kills and removes
// the cgroups named for it, removes the directory. Adds to `counts`.
status remove_run(const std::filesystem::path& run_dir, const std::string& run_id,
                  reclaim_counts& counts);

// The live owner's teardown of its own run: unmounts `known_mounts` (the points it mounted,
// in order) without reading the mount table, removes the run's cgroups from the hierarchies
// evalbox uses (cgroup::run_cgroup_parents, with `cgroup_v2_root` when one is forced: the
// session's launch_settings), removes the directory. Anything mounted that was not listed
// makes it fall back to remove_run. Adds to `counts`.
status remove_own_run(const std::filesystem::path& run_dir, const std::string& run_id,
                      const std::vector<std::filesystem::path>& known_mounts,
                      const std::filesystem::path& cgroup_v2_root, reclaim_counts& counts);
// Reclaims every run under `runs` whose lock is free. Errors of one run are collected in
// counts.errors and do not stop the others.
result<reclaim_counts> reclaim_stale(const std::filesystem::path& runs);

// The cgroup directories of a run that exist, in every mounted hierarchy (one read of the
// mount table): <v1 controller mount>/evalbox/<run_id>@<leaf> and <v2 root>/evalbox/
// <run_id>@<leaf>, one per launch (cgroup.h), and <...>/evalbox/<run_id> left by an earlier
// version, which made each launch's cgroup below such a directory.
std::vector<std::filesystem::path> run_cgroup_dirs(const std::string& run_id);
// Kills every task in those cgroups (and below) and removes them bottom-up. Returns how many
// directories were removed.
result<int> remove_run_cgroups(const std::string& run_id);

}  // namespace evalbox::sandbox::state
