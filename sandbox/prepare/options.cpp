// Default preparer options: where state lives, which host id the sandbox maps to, how sessions
// launch and how large an image layer may grow. The one place the evalbox process reads the
// sandbox's EVALBOX_* variables (docs/cli.md lists them); everything below gets them passed.
#include <unistd.h>

#include <cstdlib>
#include <string_view>

#include "sandbox/prepare/preparer.h"

namespace evalbox::sandbox {
inline namespace prepare {

namespace {

// The host uid/gid that the sandbox's uid 0 maps to when evalbox runs as root: a dedicated
// unprivileged id, so that an agent that escaped every other fence still holds no host
// privilege (and owns nothing of the host's). Overridable with EVALBOX_SANDBOX_UID.
constexpr uid_t root_sandbox_id = 60000;

// A variable's value as getenv gave it; "" when unset (an empty value means unset for every
// variable here).
std::string_view value(const char* v) { return v ? v : ""; }

std::filesystem::path state_root_from_env() {
  if (const auto dir = value(std::getenv("EVALBOX_STATE_DIR")); !dir.empty()) return dir;
  if (::geteuid() == 0) return "/var/lib/evalbox";
  if (const auto xdg = value(std::getenv("XDG_STATE_HOME")); !xdg.empty())
    return std::filesystem::path(xdg) / "evalbox";
  if (const auto home = value(std::getenv("HOME")); !home.empty())
    return std::filesystem::path(home) / ".local/state/evalbox";
  return "/tmp/evalbox-state";
}

// Root: the dedicated id (or EVALBOX_SANDBOX_UID, when it is one: 1..2^31-2). Rootless: the
// caller's own ids, the only ones it can map.
void sandbox_ids_from_env(preparer_options& o) {
  if (::geteuid() != 0) {
    o.sandbox_uid = ::getuid();
    o.sandbox_gid = ::getgid();
    return;
  }
  uid_t id = root_sandbox_id;
  if (const char* v = std::getenv("EVALBOX_SANDBOX_UID"); v && *v) {
    long parsed = std::strtol(v, nullptr, 10);
    if (parsed > 0 && parsed < 0x7fffffff) id = static_cast<uid_t>(parsed);
  }
  o.sandbox_uid = id;
  o.sandbox_gid = id;
}

launch_settings launch_settings_from_env() {
  launch_settings s;
  s.helper = value(std::getenv("EVALBOX_HELPER"));
  s.warm_helper = value(std::getenv("EVALBOX_WARM_HELPER")) != "0";
  s.cgroup_v2_root = value(std::getenv("EVALBOX_CGROUP_V2_ROOT"));
  s.cgroup_ahead = value(std::getenv("EVALBOX_CGROUP_AHEAD")) != "0";
  return s;
}

}  // namespace

preparer_options default_preparer_options() {
  preparer_options o;
  o.state_root = state_root_from_env();
  sandbox_ids_from_env(o);
  o.launch = launch_settings_from_env();
  o.image_max_layer_bytes = value(std::getenv("EVALBOX_IMAGE_MAX_LAYER_BYTES"));
  o.image_max_layer_entries = value(std::getenv("EVALBOX_IMAGE_MAX_LAYER_ENTRIES"));
  return o;
}

}  // namespace prepare
}  // namespace evalbox::sandbox
