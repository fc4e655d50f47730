// Default preparer options: where state lives and which host id the sandbox maps to.
#include <unistd.h>

#include <cstdlib>

#include "sandbox/preparer/preparer.h"

namespace evalbox::sandbox {

// The host uid/gid that the sandbox's uid 0 maps to when evalbox runs as root: a dedicated
// unprivileged id, so that an agent that escaped every other fence still holds no host
// privilege (and owns nothing of the host's). Overridable with EVALBOX_SANDBOX_UID.
constexpr uid_t kRootSandboxId = 60000;

preparer_options default_preparer_options() {
  preparer_options o;
  if (const char* dir = std::getenv("EVALBOX_STATE_DIR"); dir && *dir) {
    o.state_root = dir;
  } else if (::geteuid() == 0) {
    o.state_root = "/var/lib/evalbox";
  } else if (const char* xdg = std::getenv("XDG_STATE_HOME"); xdg && *xdg) {
    o.state_root = std::filesystem::path(xdg) / "evalbox";
  } else if (const char* home = std::getenv("HOME"); home && *home) {
    o.state_root = std::filesystem::path(home) / ".local/state/evalbox";
  } else {
    o.state_root = "/tmp/evalbox-state";
  }
  if (::geteuid() == 0) {
    uid_t id = kRootSandboxId;
    if (const char* v = std::getenv("EVALBOX_SANDBOX_UID"); v && *v) {
      long parsed = std::strtol(v, nullptr, 10);
      if (parsed > 0 && parsed < 0x7fffffff) id = static_cast<uid_t>(parsed);
    }
    o.sandbox_uid = id;
    o.sandbox_gid = id;
  } else {
    o.sandbox_uid = ::getuid();
    o.sandbox_gid = ::getgid();
  }
  return o;
}

}  // namespace evalbox::sandbox
