// The helper's compilation pass: turns a launch plan into the child's ordered step list and
// everything it reads (C strings, argv/envp arrays, the Landlock ruleset, the seccomp BPF),
// all allocated here, before clone3, and never touched again.
//
// What the pass needs to know about the host (which system paths exist and how, the devices,
// limits the helper inherited, the Landlock ABI) is read once into a host_view, so that the
// same plan on the same host view always compiles to the same steps.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "sandbox/helper/child.h"
#include "sandbox/landlock/landlock.h"
#include "sandbox/net/relay.h"
#include "sandbox/protocol/launch_plan.h"
#include "sandbox/seccomp/seccomp.h"

namespace evalbox::sandbox::helper {

// Fixed descriptor numbers for the child's mount sources; nothing else uses them.
inline constexpr int source_fd_base = 600;

// The host as compile() sees it.
struct host_view {
  // One host path that the allow-list mounts at the same place, as lstat and readlink see it.
  struct path_entry {
    enum class kind { missing, directory, file, symlink };
    kind type = kind::missing;
    std::string link_target;  // symlink: the link's text
  };
  // The system paths (spec/system_paths.h) and the /etc entries bound read-only.
  std::map<std::string, path_entry> paths;
  std::set<std::string> devices;  // names in /dev among those bound into the sandbox's /dev
  uint64_t nofile_hard = 0;       // the helper's RLIMIT_NOFILE hard limit
  int landlock_abi = 0;           // landlock::kernel_abi()
  int cap_last = 40;              // /proc/sys/kernel/cap_last_cap
  std::string resolv_conf;        // /etc/resolv.conf, read only for the host network

  [[nodiscard]] path_entry at(const std::string& path) const;
};

// Reads this host (lstat/readlink of each path, /dev, getrlimit, Landlock, procfs).
host_view look_at_host(network_mode network);
// The same in two parts: the layout, which a warm helper reads while it waits (about 35 system
// calls off the launch's path), and what the network mode adds (/etc/resolv.conf for the host
// network), read at the launch.
host_view look_at_host_layout();
void look_at_host_network(host_view& h, network_mode network);

// Owns every string and array the child reads; built before clone3, never touched after.
struct compiled {
  std::deque<std::string> strings;
  std::vector<std::string> argv_s, env_s;
  std::vector<char*> argv, envp;
  child_context ctx;
  landlock::ruleset ll;
  net::allow_plan allow;
  std::string landlock_reason;
  // A bare argv[0]: the paths the exec step tries, in PATH order (null-terminated C array).
  std::vector<std::string> exec_paths;
  std::vector<const char*> exec_candidates;
  // Files the helper writes before clone3 for the child to bind (an image root's generated
  // /etc files), in host_dir; removed when the launch ends.
  std::string host_dir;
  std::vector<std::pair<std::string, std::string>> host_files;  // path, content

  const char* keep(std::string s) { return strings.emplace_back(std::move(s)).c_str(); }
};

// Fills `c` from the plan. Fails on a plan the helper cannot honour (e.g. host network
// without the unsafe opt-in, a non-loopback IP in the allow-list).
status compile(const launch_plan& plan, const host_view& host, compiled& c);

}  // namespace evalbox::sandbox::helper
