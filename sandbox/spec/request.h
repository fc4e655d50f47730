// The session request: everything the sandbox layer needs to prepare and launch one run, as
// plain typed data. The sandbox knows nothing of fixtures, YAML or agents; the harness and
// adapters translate into this. validate() (validate.h) rejects a bad request before anything
// is created on disk.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace evalbox::sandbox {
inline namespace spec {

enum class workspace_strategy {
  auto_select,  // overlay when the host allows it, else reflink when supported, else copy
  overlay,      // fixture workspace as read-only (idmapped) lower, upper on a size-limited tmpfs
  reflink,      // FICLONE per file onto the state filesystem
  copy,         // copy_file_range per file into a size-limited tmpfs (or a plain dir)
};

struct workspace_spec {
  std::filesystem::path source;  // a directory on the host; never modified
  workspace_strategy strategy = workspace_strategy::auto_select;
  // Where the sandbox sees it: /workspace, or (with an image root) the fixture's or the image's
  // working directory, e.g. /app.
  std::filesystem::path target = "/workspace";
  // With an image root and no host `source`: the workspace is this directory of the image
  // (absolute, inside the image), as its layers merge — its content, copy-on-write like any
  // workspace; empty (nothing there) when the image has no such directory.
  std::filesystem::path image_dir;
  // Optional tree digest of `source` computed by the caller (the harness digests fixtures
  // once per plan); goes into the binding digest. Hashing here would make preparation
  // O(files), so it is not recomputed.
  std::string digest;
};

// <state>/workspace-sources: trees the harness materializes once and shares read-only as
// runs' workspace sources (a fixture's git commit, checked out: harness/fixture/git_source.h).
// The one place inside the state root a workspace source may lie: it holds no run's state, no
// lease and no result, only content-addressed copies of what fixtures name.
inline std::filesystem::path workspace_sources_dir(const std::filesystem::path& state_root) {
  return state_root / "workspace-sources";
}

// <state>/bundles: content-addressed bundles (sandbox/prepare/bundles.cpp), each verified once when
// it entered the store and immutable after. Like workspace-sources, the one other place inside
// the state root a bundle's source may lie.
inline std::filesystem::path bundle_store_dir(const std::filesystem::path& state_root) {
  return state_root / "bundles";
}

// <state>/caches: filled caches (sandbox/prepare/caches.h), each under the key of what filled
// it and immutable after; a run mounts <state>/caches/<key>/tree as the read-only lower of an
// ephemeral-write mount. The third place inside the state root a mount's source may lie.
inline std::filesystem::path cache_store_dir(const std::filesystem::path& state_root) {
  return state_root / "caches";
}

struct home_file {
  std::filesystem::path path;  // relative to the home
  std::string content;
  mode_t mode = 0644;
};

// The managed home, mounted at /home/agent inside. Directories are created 0700.
struct home_layout {
  std::string adapter;  // the runtime adapter id that laid it out ("codex", "claude-code", ...)
  std::vector<std::filesystem::path> directories;  // relative to the home
  std::vector<home_file> files;
};

// A credential file leased for the run and mounted at `target` inside the home: writable when
// the lease is exclusive (max_concurrent 1: a login whose tokens rotate), read-only when up to
// max_concurrent runs share it (an API key: no run may change what the others read).
struct secret_mount {
  std::string handle;            // names the lease: [A-Za-z0-9_.-]{1,64}
  std::filesystem::path source;  // host file; always a protected root
  std::filesystem::path target;  // relative to the home, e.g. ".codex/auth.json"
  int max_concurrent = 1;        // runs that may hold the lease at once: 1..256
  // Leased for the run (exclusive, rotations kept) but never mounted inside: the host uses it
  // (the model gateway's login, prepared_session::lease_path). `target` is empty then.
  bool host_only = false;
};

// A content-addressed read-only input (a file or directory) projected at `target`.
struct bundle {
  // Host file or directory. A tree of the bundle store (<state>/bundles/<sha256>/tree, see
  // bundle_store_dir) was verified when it entered the store and is not digested again.
  std::filesystem::path source;
  std::string sha256;            // tree_digest(source); a mismatch rejects the request
  std::filesystem::path target;  // absolute inside the sandbox, e.g. "/evalbox/bin"
};

// A host file or directory a fixture or suite names (`mounts:`), seen at `target`:
//   read_only       bound read-only (Landlock: read), the source never written;
//   ephemeral_write the run's own copy-on-write view of a directory — an overlay upper (or a
//                   copy) on a tmpfs of its own of `max_bytes`, gone with the run; the source is
//                   never written, and a full tmpfs is recorded as disk_limit_hit.
enum class mount_access { read_only, ephemeral_write };

constexpr std::string_view to_string(mount_access a) {
  return a == mount_access::read_only ? "read-only" : "ephemeral-write";
}

struct named_mount {
  std::filesystem::path source;  // host file or directory (a directory for ephemeral_write)
  // Absolute inside the sandbox, e.g. "/data"; or below the managed home (a cache such as
  // /home/agent/.cache/pip), where it may hide no credential and no home file.
  std::filesystem::path target;
  mount_access access = mount_access::read_only;
  uint64_t max_bytes = 0;  // ephemeral_write: the size of its own tmpfs
  // Optional tree digest of `source` computed by the caller; goes into the binding digest.
  std::string digest;
};

struct resource_limits {
  uint64_t cpu_ms = 10 * 60 * 1000;
  uint64_t memory_bytes = 2ull << 30;
  uint64_t pids = 512;
  uint64_t wall_ms = 10 * 60 * 1000;
  uint64_t disk_bytes = 1ull << 30;
  uint64_t output_bytes = 8ull << 20;
};

enum class network_mode { none, allow, host };

// "none", "allow", "host": the name in plans, profiles and records.
constexpr std::string_view to_string(network_mode m) {
  switch (m) {
    case network_mode::none:
      return "none";
    case network_mode::allow:
      return "allow";
    case network_mode::host:
      return "host";
  }
  return "none";
}

// The mode named `name` (to_string's inverse), or nothing for any other text.
constexpr std::optional<network_mode> network_mode_from(std::string_view name) {
  for (network_mode m : {network_mode::none, network_mode::allow, network_mode::host})
    if (to_string(m) == name) return m;
  return std::nullopt;
}

struct network_policy {
  network_mode mode = network_mode::none;
  // For `allow`: "host:port" entries. Loopback addresses are relayed at the same address
  // inside; host names go through the CONNECT proxy.
  std::vector<std::string> allow;
  // `host` shares the host's network: only with this set, and it is recorded as unsafe.
  bool unsafe_host_network = false;
};

// A read-only or writable bind the launcher must make, resolved from the request by the
// preparer (credential leases, bundles, read-only paths) or given at launch (grader files).
struct bind_mount {
  std::filesystem::path source;  // host path
  std::filesystem::path target;  // absolute path inside the sandbox
  bool writable = false;
  bool is_file = false;
};

// The image whose layers are the sandbox's root instead of the allow-listed host root
// (docs/environments.md). The image is already in the store (preparer::resolve_image); the
// preparer holds its layers for the session's life.
struct image_root {
  std::string id;               // the image's id in the store: its config digest
  std::string reference;        // as the fixture or command line named it (canonical form)
  std::string manifest_digest;  // the manifest it was resolved through ("" for rootfs:)
};

struct session_request {
  std::string run_id;  // [a-z0-9][a-z0-9_.-]{0,63}; names the run directory and cgroup
  // The request is refused after this instant (the harness authorizes runs as it schedules
  // them; a stale request from a crashed planner must not run).
  std::chrono::system_clock::time_point authorized_until;
  std::string backend = "linux";
  // argv[0] is an absolute host path (bound read-only at the same path), a path below a system
  // directory (spec/system_paths.h: what the sandbox's root has anyway — the host's, or the
  // image's), or a bare name looked up on the sandbox's own PATH (env) when it starts.
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;  // exactly the agent's environment; nothing inherited
  workspace_spec workspace;
  home_layout home;
  std::vector<secret_mount> secrets;
  std::vector<bundle> bundles;
  std::vector<named_mount> mounts;
  // Host directories mounted read-only at the same path (an agent's install prefix, e.g. an
  // npm prefix). argv[0]'s directory (and its symlink target's) is added automatically.
  std::vector<std::filesystem::path> readonly_paths;
  // Host files or directories mounted read-only at another path inside (source -> target):
  // for a host client in an image's root, the host's dynamic loader and libraries at a private
  // path (/opt/evalbox/host/...), where they shadow nothing of the image's.
  std::vector<bind_mount> host_binds;
  // Never visible inside, never a mount source, never holding argv[0]. The state root's other
  // runs and every credential source are added implicitly.
  std::vector<std::filesystem::path> protected_roots;
  resource_limits limits;
  network_policy network;
  // Landlock is per candidate: on by default, off for an agent whose own sandbox must mount
  // (a Landlock domain forbids mount(2)/pivot_root(2) for all descendants). Recorded.
  bool landlock = true;
  // Set: the root is this image's layers under a writable upper on the run's disk.
  std::optional<image_root> image;
};

}  // namespace spec
}  // namespace evalbox::sandbox
