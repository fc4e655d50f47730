// Namespaces made ahead: a warm helper, while it waits for its plan, makes the run's user
// namespace and network namespace (the network namespace's creation is the largest kernel cost
// of a launch: setup_net and its sysctl tables). A holder process, cloned into both and doing
// nothing else, keeps them until the launch: the clone3 child joins them through the holder's
// pidfd (child.h, enter_ahead), and the helper then kills the holder before pid 1 is released.
// Each pair serves one run: one warm helper makes one, and a helper runs one plan.
#pragma once

#include "sandbox/base/error.h"
#include "sandbox/sys/process.h"

namespace evalbox::sandbox::helper {

// Whether a warm helper makes its namespaces ahead: yes unless EVALBOX_NAMESPACES_AHEAD=0.
bool namespaces_ahead_enabled();

// Clones the holder into a new user namespace and a new network namespace owned by it. The
// holder shares the caller's memory (no page tables copied, none freed at its end) but not its
// fds: it closes every one, dies with the caller (parent-death signal) and otherwise sleeps
// until it is killed.
result<sys::owned_process> make_namespaces_ahead();

}  // namespace evalbox::sandbox::helper
