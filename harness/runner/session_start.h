// What a session is started from (docs/sessions.md), below the command line: the one reading of
// a start request — `evalbox session start`'s options (handed to its server) and a client's
// `start` on `evalbox serve`'s socket alike — and the sessions of an image and/or a workspace,
// prepared, started and hosted. A session from a fixture goes through the runner's phases
// instead (its setup run, the session in place of the agent: harness/cli/cmd_session.cpp),
// with the same limits (session_limits).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include "base/error.h"
#include "base/json.h"
#include "harness/session/server.h"
#include "sandbox/prepare/preparer.h"
#include "sandbox/spec/request.h"

namespace evalbox::harness {
inline namespace runner {

struct session_spec {
  std::string fixture, suite,
      candidate;                 // a fixture (with its suite's defaults, a candidate's home)
  std::string image, workspace;  // or an image and/or a host directory
  std::chrono::milliseconds ttl{std::chrono::hours(1)};
  std::optional<pid_t> owner;  // its exit ends the session
  std::string network = "none";
  std::string memory = "2GiB", disk = "1GiB";
  std::optional<std::string> cpu;  // none: the TTL bounds it
  uint64_t pids = 512;
  bool landlock = true;
  std::string pull = "missing";  // registry images: missing, always, never

  [[nodiscard]] json to_json() const;
};

// Reads and checks a start request: a source (a fixture alone, or an image and/or a
// workspace), `candidate` only with `suite`, sizes, durations (`ttl` and `cpu`: a duration
// such as "30m", or a number of seconds; at most a week), the network, the pull policy; an
// unknown field is refused. Errors are invalid_argument, naming the field.
result<session_spec> session_spec_of(const json& request);

// The limits of a session's sandbox from its request's: its wall-time limit is the TTL and a
// minute (a second fence to the server's own end of it), and it has no CPU-time limit unless
// the spec asks for one — the whole session's processes share it.
sandbox::resource_limits session_limits(sandbox::resource_limits request, const session_spec& spec);

// A session of an image and/or a workspace under `state_root`: its image resolved (pulled or
// imported on first use: progress to `say`, `cancel` stops it), prepared, started and hosted
// by `srv`; its session.json. Nothing of it is left when this fails.
result<json> start_hosted_session(sessions::server& srv, sandbox::preparer& prep,
                                  const std::filesystem::path& state_root, const std::string& id,
                                  const session_spec& spec,
                                  const std::atomic<bool>* cancel = nullptr,
                                  const std::function<void(const std::string&)>& say = {});

}  // namespace runner
}  // namespace evalbox::harness
