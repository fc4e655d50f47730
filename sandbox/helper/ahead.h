// Namespaces made ahead: a warm helper, while it waits for its plan, makes the run's user
// namespace and network namespace (the network namespace's creation is the largest kernel cost
// of a launch: setup_net and its sysctl tables). A holder process, cloned into both and doing
// nothing else, keeps them until the launch: the clone3 child joins them through the holder's
// pidfd (child.h, enter_ahead), and the helper then kills the holder before pid 1 is released.
// Each pair serves one run: one warm helper makes one, and a helper runs one plan.
#pragma once

#include <memory>

#include "base/error.h"
#include "base/unique_fd.h"
#include "sandbox/cgroup/cgroup.h"
#include "sandbox/sys/process.h"

namespace evalbox::sandbox::helper {

// Clones the holder into a new user namespace and a new network namespace owned by it. The
// holder shares the caller's memory (no page tables copied, none freed at its end) but not its
// fds: it closes every one, dies with the caller (parent-death signal) and otherwise sleeps
// until it is killed.
result<sys::owned_process> make_namespaces_ahead();

// Cgroups made ahead (cgroup.h, "Cgroups made ahead"; cgroup v1): a warm helper that holds
// namespaces made ahead also makes its launch's cgroups and starts the process that will clone
// pid 1 — the starter — which moves itself into them at once (cgroup::move_self: no grace
// period), so that pid 1 is born in the run's cgroups and no task is moved on the launch's
// path. The starter shares the helper's memory and fd table while it waits, on a stack of its
// own (as large as a main thread's: pid 1 goes on on its copy); at go() it takes a copy of the
// fd table and does what the child of supervisor::clone_entering_ahead does (child.cpp,
// enter_made_ahead): joins the namespaces made ahead, clones pid 1 as the helper's child and
// exits. It dies with the helper (parent-death signal).
class cgroup_ahead {
 public:
  cgroup_ahead(const cgroup_ahead&) = delete;
  cgroup_ahead& operator=(const cgroup_ahead&) = delete;
  // Kills the starter (unless it went) and removes the cgroups (unless taken).
  ~cgroup_ahead();

  // The cgroups ("@ahead-<pid>"); empty once taken.
  std::unique_ptr<cgroup::run_cgroup> take_cgroup() { return std::move(cg_); }
  // Starts pid 1 from `ctx` (a child_context with `ahead` set) in the starter, which exits
  // once it cloned pid 1 (or reported its failed step on the error pipe). Returns the
  // starter's wait status. The caller must not touch the memory pid 1 copies until then.
  result<int> go(void* ctx);
  // The starter has exited (killed from outside: it waits until go()).
  [[nodiscard]] bool starter_gone() const noexcept;

 private:
  friend result<std::unique_ptr<cgroup_ahead>> make_cgroup_ahead(const cgroup::host_options&);
  cgroup_ahead() = default;
  std::unique_ptr<cgroup::run_cgroup> cg_;
  sys::owned_process starter_;
  unique_fd go_;  // write end: one byte starts pid 1
  void* stack_ = nullptr;
};

// Makes the cgroups and starts the starter in them (where cgroup::ahead_applies(host)).
result<std::unique_ptr<cgroup_ahead>> make_cgroup_ahead(const cgroup::host_options& host);

}  // namespace evalbox::sandbox::helper
