// Host feature probes: what this kernel and host let evalbox use. `evalbox doctor` prints
// them, and every run record carries them. Each probe tries the real thing (in a short-lived
// child process where it would change the caller) rather than reading version numbers.
//
// Lifecycle: call probe_host() once, early, while the process is still single-threaded
// (it forks); the result is plain data and can be shared freely afterwards.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "base/json_fwd.h"

namespace evalbox::sys {

// How an unpacked image layer can say "this name is deleted" to overlayfs, best first:
//   char_device  a 0/0 character device (root; unprivileged since Linux 5.8)
//   user_xattr   an empty file with xattr user.overlay.whiteout, its directory marked
//                user.overlay.opaque=x (Linux 6.7+; read by overlays mounted with userxattr)
//   copy         neither: layers must be flattened into one copy (slow, O(image) per image)
enum class whiteout_form { char_device, user_xattr, copy };
std::string_view to_string(whiteout_form form) noexcept;

struct feature {
  std::string name;  // "user_namespaces", "overlayfs", ...
  bool available = false;
  bool required = false;  // the default sandbox cannot run without it
  std::string detail;     // what was seen ("ABI 7", "memory pids cpu cpuacct")
  std::string hint;       // one line: what to do when it is missing
};

struct host_features {
  std::string kernel;  // uname -r
  bool root = false;   // effective uid 0
  unsigned uid = 0;
  bool user_namespaces = false;
  bool mount_namespaces = false;
  bool pid_namespaces = false;
  bool net_namespaces = false;
  bool overlayfs = false;        // listed in /proc/filesystems
  bool idmapped_mounts = false;  // idmapped bind of the state directory works
  int landlock_abi = 0;          // 0 = unavailable
  bool seccomp_filter = false;
  bool cgroup_v2 = false;  // a cgroup2 hierarchy is mounted
  std::filesystem::path cgroup_v2_root;
  std::vector<std::string> cgroup_v2_controllers;  // delegated to us (subtree_control usable)
  std::vector<std::string> cgroup_v1_controllers;  // mounted v1 controllers we can write
  std::filesystem::path state_dir;                 // the directory the reflink probe ran in
  bool reflink = false;                            // FICLONE works in state_dir
  // Image layers: the whiteout form the image store can write in state_dir, and whether an
  // overlay mounts inside an unprivileged user namespace with userxattr (rootless images).
  whiteout_form image_whiteout = whiteout_form::copy;
  bool userns_overlay = false;
  // /sys/kernel/rcu_expedited (-1: unreadable). On cgroup v1 before kernel 5.17 a launch that
  // moves its pid 1 into its cgroups after idle time waits for an RCU grace period, which this
  // makes short.
  int rcu_expedited = -1;
  // The kernel (5.17 and later) lets a single-threaded task move itself into a cgroup without
  // the threadgroup lock, so that move waits for no grace period (`kernel` read as X.Y).
  [[nodiscard]] bool self_moves_unlocked() const;

  // The same facts as a list, each with a one-line hint, for doctor.
  [[nodiscard]] std::vector<feature> features() const;
  // True when every required feature is present.
  [[nodiscard]] bool sandbox_ready() const;
  [[nodiscard]] json to_json() const;
};

// Probes the host. `state_dir` is where run state will live (for the reflink and idmap
// probes); it is created if missing.
host_features probe_host(const std::filesystem::path& state_dir);

// Whether FICLONE works in `dir` (tries it on two scratch files there, then removes them).
bool reflink_supported(const std::filesystem::path& dir);

// The whiteout form this process can create in `dir` (see whiteout_form): tries a 0/0 mknod,
// then an xattr on an empty file, on scratch names it removes again.
whiteout_form probe_whiteout_form(const std::filesystem::path& dir);
// Mounts an overlay (userxattr) in a child process inside a new user and mount namespace
// mapping only the caller's own ids, as a rootless run would.
bool probe_userns_overlay();
// The cgroup v1 mount points of controllers ("memory" -> /sys/fs/cgroup/memory), in the order
// asked, empty where a controller is absent; at most one read of the mount table (which costs
// O(host mounts) of kernel time).
std::vector<std::filesystem::path> cgroup_v1_mounts(const std::vector<std::string>& controllers);

}  // namespace evalbox::sys
