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

enum class workspace_strategy {
  auto_select,  // overlay when the host allows it, else reflink when supported, else copy
  overlay,      // fixture workspace as read-only (idmapped) lower, upper on a size-limited tmpfs
  reflink,      // FICLONE per file onto the state filesystem
  copy,         // copy_file_range per file into a size-limited tmpfs (or a plain dir)
};

struct workspace_spec {
  std::filesystem::path source;  // a directory on the host; never modified
  workspace_strategy strategy = workspace_strategy::auto_select;
  // Optional tree digest of `source` computed by the caller (the harness digests fixtures
  // once per plan); goes into the binding digest. Hashing here would make preparation
  // O(files), so it is not recomputed.
  std::string digest;
};

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

// A credential file leased for the run and mounted writable at `target` inside the home.
struct secret_mount {
  std::string handle;            // names the lease: [A-Za-z0-9_.-]{1,64}
  std::filesystem::path source;  // host file; always a protected root
  std::filesystem::path target;  // relative to the home, e.g. ".codex/auth.json"
};

// A content-addressed read-only input (a file or directory) projected at `target`.
struct bundle {
  std::filesystem::path source;  // host file or directory
  std::string sha256;            // tree_digest(source); a mismatch rejects the request
  std::filesystem::path target;  // absolute inside the sandbox, e.g. "/evalbox/bin"
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

struct session_request {
  std::string run_id;  // [a-z0-9][a-z0-9_.-]{0,63}; names the run directory and cgroup
  // The request is refused after this instant (the harness authorizes runs as it schedules
  // them; a stale request from a crashed planner must not run).
  std::chrono::system_clock::time_point authorized_until;
  std::string backend = "linux";
  std::vector<std::string> argv;           // argv[0] is an absolute host path
  std::map<std::string, std::string> env;  // exactly the agent's environment; nothing inherited
  workspace_spec workspace;
  home_layout home;
  std::vector<secret_mount> secrets;
  std::vector<bundle> bundles;
  // Host directories mounted read-only at the same path (an agent's install prefix, e.g. an
  // npm prefix). argv[0]'s directory (and its symlink target's) is added automatically.
  std::vector<std::filesystem::path> readonly_paths;
  // Never visible inside, never a mount source, never holding argv[0]. The state root's other
  // runs and every credential source are added implicitly.
  std::vector<std::filesystem::path> protected_roots;
  resource_limits limits;
  network_policy network;
  // Landlock is per candidate: on by default, off for an agent whose own sandbox must mount
  // (a Landlock domain forbids mount(2)/pivot_root(2) for all descendants). Recorded.
  bool landlock = true;
};

// A read-only or writable bind the launcher must make, resolved from the request by the
// preparer (credential leases, bundles, read-only paths) or given at launch (grader files).
struct bind_mount {
  std::filesystem::path source;  // host path
  std::filesystem::path target;  // absolute path inside the sandbox
  bool writable = false;
  bool is_file = false;
};

}  // namespace evalbox::sandbox
