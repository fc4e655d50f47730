// The seccomp policy: default allow, and EPERM for a documented list of system calls that reach
// kernel interfaces a program under evaluation has no business with, even as root of its own
// user namespace (each entry's reason is beside it in seccomp.cpp). Namespace and mount calls
// stay allowed: agents build nested sandboxes (bubblewrap) and must be able to.
//
// Lifecycle: compile() runs at build time (evalbox-seccomp-gen, with libseccomp) and the
// helper takes its output from builtin(); install() runs in the program's process as the
// last step before execve (allocates nothing). A test checks that builtin() is what
// compile() makes now.
#pragma once

#include <linux/filter.h>

#include <string>
#include <vector>

#include "base/error.h"

namespace evalbox::sandbox::seccomp {

struct denied_call {
  const char* name;
  const char* reason;
};

// The policy as data, in order (for docs and tests).
const std::vector<denied_call>& denied_calls();

// personality(2) flags that are refused (EPERM) when a call would set them.
struct denied_personality {
  const char* name;
  unsigned long flag;
  const char* reason;
};
const std::vector<denied_personality>& denied_personality_flags();

struct filter {
  std::vector<sock_filter> program;  // the exported BPF
  std::string digest;                // sha256 of the BPF bytes, recorded in the run record
};

// With libseccomp (library evalbox_seccomp).
result<filter> compile();

// The program compile() made at build time (library evalbox_seccomp_builtin).
const filter& builtin();

// prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER); no_new_privs must already be set. 0 or errno.
int install(const filter& f) noexcept;

}  // namespace evalbox::sandbox::seccomp
