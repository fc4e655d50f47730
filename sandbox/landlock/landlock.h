// Landlock: restricts the program's file access to the tree evalbox mounted for it (read and
// execute everywhere; write only where the run may write). Best-effort ABI negotiation: the
// helper asks the kernel for its ABI (up to 7), handles exactly the rights that ABI knows, and
// records the ABI in force (0 = off, with the reason).
//
// Lifecycle: make_ruleset() in the helper before clone (allocates); apply() in the program's
// process after pivot_root, after no_new_privs, before seccomp (allocates nothing).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace evalbox::sandbox::landlock {

inline constexpr int max_abi = 7;

// The kernel's Landlock ABI (0 = unavailable or disabled).
int kernel_abi() noexcept;

enum class access { read_only, read_write, device };

struct path_rule {
  std::string path;  // inside the sandbox, after pivot_root; a missing path is skipped
  access kind = access::read_only;
};

struct ruleset {
  int abi = 0;  // 0: do not apply
  uint64_t handled_fs = 0;
  uint64_t scoped = 0;  // ABI 6: abstract unix sockets and signals stay in the run
  std::vector<std::string> paths;
  std::vector<uint64_t> rights;  // per path, a subset of handled_fs
};

// The default rules: read/execute on "/", read/write on the writable trees, read/write on the
// character devices. `abi` is min(kernel_abi(), max_abi).
ruleset make_ruleset(int abi, const std::vector<path_rule>& rules);

// Creates the ruleset, adds each rule, restricts the calling thread. Returns 0 or an errno.
// Async-signal-safe: no allocation.
int apply(const ruleset& rs) noexcept;

}  // namespace evalbox::sandbox::landlock
