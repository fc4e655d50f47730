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
//   <state>/runs/<run_id>/{lock, disk/ (tmpfs: upper*, work*, home, snapshots, root/{upper,work}
//                          with an image), workspace/, lower/ (idmapped source), launches/}
//   <state>/runs/<run_id>/mounts/<n>/{disk/ (tmpfs of max_bytes), lower/, workspace/}
//                          an ephemeral-write mount, made like the workspace
//   <state>/images/  the image store (sandbox/image/store.h)
//   <state>/bundles/ the bundle store (sandbox/prepare/bundles.cpp)
//   <state>/credential-leases/<handle>-<sha256 of source>  (0600, owned by the sandbox uid)
//                                                     and .slot-<k> beside it (creds/lease.h)
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "base/json_fwd.h"
#include "sandbox/image/pull.h"
#include "sandbox/spec/request.h"

namespace evalbox::sandbox {
namespace image {
struct registry_settings;  // sandbox/image/registry.h
}  // namespace image
inline namespace prepare {

// How a session's launches start their helper and make their cgroups (launcher.h), and where
// its teardown looks for those cgroups: the host's settings, which a session carries from its
// preparer's options. The defaults are an unset environment's.
struct launch_settings {
  // EVALBOX_HELPER: the evalbox-sandbox helper to run; empty: the one beside the running
  // executable, else the build tree's (helper_path).
  std::filesystem::path helper;
  // EVALBOX_WARM_HELPER=0 makes it false: every launch starts its own helper (the cold path).
  bool warm_helper = true;
  // EVALBOX_CGROUP_V2_ROOT: a cgroup v2 root to make every launch's cgroup in, and to reclaim
  // from, instead of the host's hierarchy (cgroup.h, host_options); empty: the host's.
  std::filesystem::path cgroup_v2_root;
  // EVALBOX_CGROUP_AHEAD=0 makes it false: on cgroup v1 a warm helper makes no cgroups ahead.
  bool cgroup_ahead = true;
};

struct preparer_options {
  std::filesystem::path state_root;  // e.g. /var/lib/evalbox or $XDG_STATE_HOME/evalbox
  // The unprivileged host id the sandbox's uid 0 maps to. When evalbox runs as root this is
  // a dedicated id (never 0); otherwise the invoking user's own uid and gid.
  uid_t sandbox_uid = 0;
  gid_t sandbox_gid = 0;
  launch_settings launch;
  // EVALBOX_IMAGE_MAX_LAYER_BYTES (a size: "32GiB") and EVALBOX_IMAGE_MAX_LAYER_ENTRIES (a
  // count) as given, "" for the defaults: parsed when the image store is first opened, where a
  // malformed value is an error (image::parse_limits), so a run without an image never fails
  // for one.
  std::string image_max_layer_bytes;
  std::string image_max_layer_entries;
  // How registry images are pulled (sandbox/image/registry.h); unset: read from the host's
  // environment and files when a docker:// image is first needed. The command line sets it,
  // with the credential helpers it may start.
  std::shared_ptr<const image::registry_settings> registry;
};

// The options as this process's environment sets them, read here once (the edge) and passed
// down: state root from EVALBOX_STATE_DIR, else /var/lib/evalbox (root) or
// $XDG_STATE_HOME/evalbox; sandbox id 60000 (EVALBOX_SANDBOX_UID) when root, else
// getuid()/getgid(); the launch settings and the image layer limits from their variables.
preparer_options default_preparer_options();

// An image as the store resolved it, for the harness to compose a run from (environment,
// working directory) and to record which image a run used.
struct image_summary {
  std::string reference;  // canonical text (relative paths resolved)
  // docker://: the digest the reference resolved to (the index's for a multi-platform tag),
  // and the reference pinned to it (docker://NAME@sha256:…): what a run records.
  std::string reference_digest;
  std::string pinned;
  bool pulled = false;      // the registry was asked (not the store's copy under --pull missing)
  uint64_t blob_bytes = 0;  // downloaded (or read from a file) by this call
  std::string id;           // the config digest: session_request::image_root::id
  std::string manifest_digest;   // "" for rootfs: and docker-archive:
  std::vector<std::string> env;  // the config's Env, "NAME=value"
  std::string working_dir;       // the config's WorkingDir ("" when unset)
  std::string user;
  std::vector<std::string> entrypoint, cmd;
  std::vector<std::string> layers;  // diff_ids, base first
  uint64_t bytes = 0;               // unpacked
  size_t layers_unpacked = 0;       // by this call (0: the image was in the store already)
};

// The image a session's root is built from, as the launcher needs it.
struct session_image {
  std::string id, reference, manifest_digest;
  std::vector<std::string> layers;            // diff_ids, base first
  std::vector<std::filesystem::path> lowers;  // the layer trees, top-most first
  std::filesystem::path upper, work;          // the root's writable layer, on the run's disk
};

// A read-only view of the workspace as it was when snapshot_workspace() was called.
struct workspace_snapshot {
  std::filesystem::path view;  // host path of a read-only tree of that state
  int index = 0;
};

// What collect_images did to the image store (`evalbox gc --images`).
struct image_collection_report {
  int images_removed = 0;
  int layers_removed = 0;
  int temporaries_removed = 0;  // partial layers a crashed import left
  int images_in_use = 0;        // would have been removed for space, but a run holds them
  uint64_t bytes_freed = 0;
  uint64_t bytes_after = 0;
  std::vector<std::string> errors;
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
  // Its preparer's options, as they were when it was prepared (the launch settings among them).
  [[nodiscard]] const preparer_options& options() const noexcept;
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
  // Where the sandbox sees the workspace (request().workspace.target): /workspace, or an
  // image's working directory.
  [[nodiscard]] const std::filesystem::path& workspace_target() const noexcept;
  // The image the root is built from; nullptr for the allow-listed host root.
  [[nodiscard]] const session_image* image() const noexcept;
  // Binds the launcher makes besides /workspace and /home/agent: leased credentials at their
  // home targets (writable), bundles and read-only paths (read-only).
  [[nodiscard]] const std::vector<bind_mount>& mounts() const noexcept;
  // The host path of the run's lease of credential `handle` (held until close()), or nothing
  // when the request leased no such credential. For a host_only secret the host reads.
  [[nodiscard]] std::optional<std::filesystem::path> lease_path(std::string_view handle) const;
  // Host directories of the ephemeral-write mounts' own size-limited tmpfs (empty without
  // root): sampled like the run's disk for disk_limit_hit.
  [[nodiscard]] const std::vector<std::filesystem::path>& quota_dirs() const noexcept;
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

  // A new, empty directory on the run's disk — so what is written there counts against the disk
  // limit and goes with the run — owned by the sandbox's root: the source of a writable bind
  // for one launch (a Harbor verifier's /logs/verifier). `name` is [a-z0-9-]{1,64}; an
  // existing directory of that name is removed first.
  result<std::filesystem::path> scratch_dir(std::string_view name);
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

  // Imports `reference` into the image store under the state root (relative paths against
  // `base_dir`) unless it is there already — then only its metadata is read and checked —
  // and says what it is. Thread-safe; a request then names the image by its id.
  // `cancel` (e.g. set by SIGINT) stops an import at its next block, keeping no partial
  // layer; `say` gets one line per layer unpacked ("unpacking layer 1/2 …", "… unpacked"), for
  // what may take minutes the first time.
  // A docker:// reference is pulled as `pull` says (image::pull_policy).
  result<image_summary> resolve_image(std::string_view reference,
                                      const std::filesystem::path& base_dir,
                                      const std::atomic<bool>* cancel = nullptr,
                                      std::function<void(const std::string&)> say = {},
                                      image::pull_policy pull = image::pull_policy::missing);

  // The bundle (`bundles:` of a fixture or suite) at `source` — a directory, or a tar (plain,
  // gzip or zstd) — as the bundle store under the state root holds it: verified against
  // `digest` ("sha256:<hex>", see bundle_digest) when it first enters the store, immutable
  // after; a later call finds it there without reading `source`. Returns the stored tree, which
  // a request names as the bundle's source. A mismatch is an invalid_argument error naming
  // both digests; nothing of it is kept. Thread-safe.
  result<std::filesystem::path> resolve_bundle(const std::filesystem::path& source,
                                               std::string_view digest);

  // What a registry reference (docker://…) names now, asked of its registry without pulling
  // anything: the reference pinned to that digest (docker://NAME@sha256:…). `validate
  // --pull never` checks references so.
  result<std::string> registry_digest(std::string_view reference);

  // True when `path` (absolute, inside the image) is a file of image `id` (already in the store),
  // its symlinks resolved inside the image: to check, before anything runs, that the image has
  // what a client needs (a script's interpreter). Thread-safe.
  result<bool> image_has_file(std::string_view id, const std::filesystem::path& path);

  // Reclaims runs whose lock is free: unmounts, removes cgroups and files. Thread-safe.
  result<reclaim_report> reclaim_stale();

  // Collects the image store under the state root: temporaries nobody holds and layers no
  // image names; then, with `max_bytes`, least recently used images (never one a run holds)
  // until the store's layers take at most that. Thread-safe.
  result<image_collection_report> collect_images(std::optional<uint64_t> max_bytes);

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

// The digest a bundle at `path` is verified against, "sha256:<hex>": the tree digest
// (base/digest.h) of the tree the bundle store makes of it — a directory's copy, or what a tar
// unpacks to — made in a temporary directory and removed. `evalbox bundle digest PATH`.
result<std::string> bundle_digest(const std::filesystem::path& path);

// Copies a tree a run left (its final workspace, as the host sees it) into the existing
// directory `to`, to keep it beyond the run: links kept as links and never followed, special
// files left out, setuid and setgid bits dropped, everything owned by the calling user — a
// program the agent made setuid must not become one of evalbox's user on the host.
status copy_out(const std::filesystem::path& from, const std::filesystem::path& to);

}  // namespace prepare
}  // namespace evalbox::sandbox
