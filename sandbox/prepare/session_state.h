// The inside of a prepared_session (preparer.h): every resource it owns, in the order they
// are released. Private to sandbox/prepare.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/json.h"
#include "sandbox/creds/lease.h"
#include "sandbox/image/store.h"
#include "sandbox/prepare/preparer.h"
#include "sandbox/state/run_state.h"
#include "sandbox/workspace/workspace.h"

namespace evalbox::sandbox {
inline namespace prepare {

namespace run_state = ::evalbox::sandbox::state;

struct prepared_session::state {
  session_request request;
  preparer_options options;
  std::filesystem::path run_dir;
  std::filesystem::path workspace_dir;
  std::filesystem::path home_dir;
  std::filesystem::path launch_dir;
  run_state::run_lock lock;  // held until the run directory is gone
  std::optional<workspace::workspace_tree> workspace;
  bool quota_enforced = false;
  std::vector<creds::credential_lease> leases;
  // The image's layers, held (shared flocks) until the run directory is gone: gc and
  // `evalbox image rm` leave them alone meanwhile.
  image::image_use image_use;
  std::optional<session_image> image;
  std::vector<bind_mount> mounts;
  // The ephemeral-write mounts' trees (request.mounts' order, read-only ones skipped), each on
  // a disk of its own under <run>/mounts/<n>; and the disks whose quota is enforced (tmpfs),
  // which the helper samples for disk_limit_hit.
  std::vector<workspace::workspace_tree> mount_trees;
  std::vector<std::filesystem::path> quota_dirs;
  json mount_identity = json::array();
  std::string binding_digest;
  json filesystem_identity;
  bool closed = false;

  // Unmounts, removes cgroups named for the run, releases leases, removes the run directory,
  // then the lock. Idempotent.
  status teardown();
};

}  // namespace prepare
}  // namespace evalbox::sandbox
