// Preparation: turns a validated session_request into a prepared_session — the run directory,
// the materialized workspace, the managed home, credential leases and bundle mounts — and
// reclaims what crashed runs left behind.
//
// Lifecycle: preparer::prepare() → prepared_session (RAII owner of every mount, lease and file
// it created) → any number of launches (launcher.h) → close() or destruction tears it all
// down. A run holds an flock on <state>/runs/<run_id>/lock for its whole life; reclaim_stale()
// (called at start-up and by `evalbox gc`) removes runs whose lock is free.
//
// State layout (mode 0700 directories):
//   <state>/runs/<run_id>/{lock, disk/ (tmpfs: upper*, work*, home, snapshots), workspace/,
//                          lower/ (idmapped source), launches/}
//   <state>/credential-leases/<handle>-<sha256 of source>  (0600, owned by the sandbox uid)
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "sandbox/base/error.h"
#include "sandbox/base/json_fwd.h"
#include "sandbox/spec/request.h"

namespace evalbox::sandbox {

struct preparer_options {
  std::filesystem::path state_root;  // e.g. /var/lib/evalbox or $XDG_STATE_HOME/evalbox
  // The unprivileged host id the sandbox's uid 0 maps to. When evalbox runs as root this is
  // a dedicated id (never 0); otherwise the invoking user's own uid and gid.
  uid_t sandbox_uid = 0;
  gid_t sandbox_gid = 0;
};

// Defaults: state root from EVALBOX_STATE_DIR, else /var/lib/evalbox (root) or
// $XDG_STATE_HOME/evalbox; sandbox id 60000 when root, else getuid()/getgid().
preparer_options default_preparer_options();

// A read-only view of the workspace as it was when snapshot_workspace() was called.
struct workspace_snapshot {
  std::filesystem::path view;  // host path of a read-only tree of that state
  int index = 0;
};

struct reclaim_report {
  int runs_reclaimed = 0;
  int mounts_unmounted = 0;
  int cgroups_removed = 0;
  std::vector<std::string> errors;
};

class prepared_session {
 public:
  prepared_session(prepared_session&&) noexcept;
  prepared_session& operator=(prepared_session&&) noexcept;
  ~prepared_session();  // tears down like close(), logging (never throwing) errors

  [[nodiscard]] const session_request& request() const noexcept;
  [[nodiscard]] const std::filesystem::path& run_dir() const noexcept;
  // Host path of the workspace tree the sandbox sees at /workspace (the merged view).
  [[nodiscard]] const std::filesystem::path& workspace_dir() const noexcept;
  // Host path of the managed home the sandbox sees at /home/agent.
  [[nodiscard]] const std::filesystem::path& home_dir() const noexcept;
  // A scratch directory in the run for the launcher (launch plans, records, an empty mount
  // point for the new root).
  [[nodiscard]] std::filesystem::path launch_dir() const;
  [[nodiscard]] workspace_strategy strategy() const noexcept;  // the one actually used
  [[nodiscard]] bool disk_quota_enforced() const noexcept;
  [[nodiscard]] uid_t sandbox_uid() const noexcept;
  [[nodiscard]] gid_t sandbox_gid() const noexcept;
  // Binds the launcher makes besides /workspace and /home/agent: leased credentials at their
  // home targets (writable), bundles and read-only paths (read-only).
  [[nodiscard]] const std::vector<bind_mount>& mounts() const noexcept;
  // SHA-256 of the canonical effective profile (argv, env, mounts with content digests,
  // limits, network, landlock): equal requests on equal inputs give equal digests.
  [[nodiscard]] const std::string& binding_digest() const noexcept;
  // Partitions and their quotas: {"workspace": {"strategy", "quota_bytes", "enforced", ...}}.
  [[nodiscard]] const json& filesystem_identity() const noexcept;

  // Freezes the workspace's current state (no process may be running in it) and returns a
  // read-only view of it; later writes go to a new layer. Overlay: O(1) (the upper becomes a
  // lower); copy/reflink: a copy of the tree.
  result<workspace_snapshot> snapshot_workspace();
  // Paths (relative, sorted) that differ between a snapshot and the current workspace.
  result<std::vector<std::string>> changed_paths(const workspace_snapshot& since) const;

  // Unmounts, releases leases, removes every file this session created. Idempotent.
  status close();

  struct state;  // implementation detail (preparer.cpp)
  explicit prepared_session(std::unique_ptr<state> s);

 private:
  std::unique_ptr<state> state_;
};

class preparer {
 public:
  explicit preparer(preparer_options options);
  ~preparer();
  preparer(const preparer&) = delete;
  preparer& operator=(const preparer&) = delete;

  [[nodiscard]] const preparer_options& options() const noexcept;

  // Validates (nothing is created if this fails), then prepares. Thread-safe.
  result<prepared_session> prepare(const session_request& request);

  // Reclaims runs whose lock is free: unmounts, removes cgroups and files. Thread-safe.
  result<reclaim_report> reclaim_stale();

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace evalbox::sandbox
