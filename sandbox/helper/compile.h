// The helper's compilation pass: turns a launch plan into the child's ordered step list and
// everything it reads (C strings, argv/envp arrays, the Landlock ruleset, the seccomp BPF),
// all allocated here, before clone3, and never touched again.
#pragma once

#include <deque>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "sandbox/base/error.h"
#include "sandbox/helper/child.h"
#include "sandbox/landlock/landlock.h"
#include "sandbox/launch/plan.h"
#include "sandbox/net/relay.h"
#include "sandbox/seccomp/seccomp.h"

namespace evalbox::sandbox::helper {

// Fixed descriptor numbers for the child's mount sources; nothing else uses them.
inline constexpr int source_fd_base = 600;

// Owns every string and array the child reads; built before clone3, never touched after.
struct compiled {
  std::deque<std::string> strings;
  std::vector<std::string> argv_s, env_s;
  std::vector<char*> argv, envp;
  child_context ctx;
  landlock::ruleset ll;
  net::allow_plan allow;
  std::string landlock_reason;
  // Mount sources are opened (O_PATH) while the child still has the helper's filesystem ids,
  // which may traverse the run directory (mode 0700); binds then name /proc/self/fd/N.
  std::vector<step> opens;
  int next_fd = source_fd_base;
  std::map<std::string, std::filesystem::path> links;  // recreated system symlinks -> dest

  const char* keep(std::string s) { return strings.emplace_back(std::move(s)).c_str(); }
};

// Fills `c` from the plan. Fails on a plan the helper cannot honour (e.g. host network
// without the unsafe opt-in, a non-loopback IP in the allow-list).
status compile(const launch_plan& plan, compiled& c);

}  // namespace evalbox::sandbox::helper
