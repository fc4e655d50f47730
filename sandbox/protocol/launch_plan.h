// The launch plan: the plain data the launcher hands to the `evalbox-sandbox` helper (as JSON in
// a file), and everything the helper needs to build the sandbox. It names host paths, ids,
// limits and the program; the helper derives every mount and step from it and nothing else.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/json_fwd.h"
#include "sandbox/spec/request.h"

namespace evalbox::sandbox {
inline namespace protocol {

inline constexpr std::string_view launch_plan_schema = "evalbox.launch-plan.v1";

// An image root: the layers pid 1 stacks as the new root (docs/sandbox.md, "An image as the
// root"), and what the run record says about them.
struct launch_image {
  std::vector<std::string> lowers;  // host paths of the layer trees, top-most first
  std::string upper, work;          // the run's writable layer and overlayfs's work directory
  std::string id, reference, manifest_digest;
  std::vector<std::string> layers;  // diff_ids, base first
};

// A writable tree of a session (sandbox/live) stacked by pid 1 instead of bound from the host:
// an overlay of `lowers` (host paths, top-most first: the session's frozen layers, then the
// tree's own host directory) under `upper`, made in the sandbox's user namespace (userxattr).
struct launch_overlay {
  std::vector<std::string> lowers;
  std::string upper, work;
};

struct launch_plan {
  std::string run_id;  // names the cgroup <...>/evalbox/<run_id>@<label>-<seq>
  std::string label = "agent";
  int seq = 0;
  // Host ids that the sandbox's uid/gid 0 map to (the session's sandbox_uid/gid). When the
  // helper is not root these must be its own ids, and setgroups is denied.
  uid_t host_uid = 0;
  gid_t host_gid = 0;
  std::string root_dir;       // an empty host directory: the mount point of the new root
  std::string workspace_dir;  // host path bound read-write at workspace_target
  std::string workspace_target = "/workspace";
  std::string home_dir;            // host path bound read-write at /home/agent
  std::vector<bind_mount> mounts;  // leases, bundles, read-only paths, extra mounts (in order)
  std::vector<std::string> argv;   // argv[0] is an absolute path inside the sandbox
  std::map<std::string, std::string> env;  // exactly the program's environment
  std::string cwd = "/workspace";
  resource_limits limits;
  uint64_t tmp_bytes = 256ull << 20;  // size of the private /tmp (and /dev/shm) tmpfs
  bool disk_quota = false;            // the workspace and home are on a tmpfs of limits.disk_bytes
  // Host paths of further size-limited tmpfs of the run (its ephemeral-write mounts), sampled
  // like the run's disk: a full one is disk_limit_hit too.
  std::vector<std::string> quota_dirs;
  network_policy network;
  bool landlock = true;
  // Standard streams. inherit_stdio: the helper's own fds 0-2 are passed straight through.
  bool inherit_stdio = false;
  std::string stdin_path;   // empty: /dev/null
  std::string stdout_path;  // empty: discarded (still counted)
  std::string stderr_path;  // equal to stdout_path: one merged stream, in order
  // With inherit_stdio: the program's stdio is a new pseudo-terminal of the sandbox's own devpts
  // (its controlling terminal), which the helper relays to and from its fds 0 and 1
  // (docs/sandbox.md, "A terminal").
  bool terminal = false;
  std::string binding_digest;
  std::string hostname = "evalbox";
  std::optional<launch_image> image;  // unset: the allow-listed host root
  // A session's workspace and home as overlays of its layers (unset: the host directories
  // above, bound read-write).
  std::optional<launch_overlay> workspace_overlay, home_overlay;
  // Serve mode (a session, sandbox/live): argv is empty; pid 1 does not start a program but
  // serves exec requests on the control socket the helper was given (serve_wire.h), until its
  // end of file.
  bool serve = false;

  [[nodiscard]] json to_json() const;
  static result<launch_plan> from_json(const json& j);
};

}  // namespace protocol
}  // namespace evalbox::sandbox
