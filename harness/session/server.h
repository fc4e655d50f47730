// The session server (docs/sessions.md): hosts sessions, each on a Unix socket of its own in
// its session directory, and answers the protocol (protocol.h) on them. One server hosts a
// session and every session forked from it (they share snapshots); `evalbox session start`
// starts one server per session it starts.
//
// Threads: the thread that calls run() watches the sessions (their TTL, their owner's exit,
// a sandbox that ended by itself) and accepts connections; each connection is served on a
// thread of its own, one request at a time (an exec streams its output while it reads the
// connection for input, resizes, a cancel, or the client's going away). A session ends when it
// is stopped, expires, loses its owner or its sandbox; its socket and directory go with it, and
// run() returns once no session is left.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/json.h"
#include "harness/session/protocol.h"
#include "harness/session/session.h"
#include "sandbox/prepare/preparer.h"

namespace evalbox::harness {
inline namespace sessions {

class server;

struct server_options {
  std::filesystem::path state_root;
  protocol_limits limits;
  // Prepares a fork's own session (its disk, cgroups, limits) from its parent's request with
  // the fork's id as its run id.
  std::function<result<sandbox::prepared_session>(const sandbox::session_request&)> prepare;
  // Says a line in the server's log.
  std::function<void(const std::string&)> log;
  // Clients of these uids are served too (besides the server's own user and root): a `loop`
  // candidate's sandbox, whose processes run as the sandbox's id.
  std::vector<uid_t> trusted_uids;
  // `evalbox serve`: what a client's `start` on the server's own socket makes (the request's
  // fields: image, workspace, ttl, limits), hosted by this server; returns the new session's
  // session.json. Unset: the server has no socket of its own.
  std::function<result<json>(server&, const json& request)> start;
  // `evalbox serve`: sessions `start` made in servers of their own (a fixture's, whose setup
  // runs there), which `ls` lists beside the hosted ones and `stop` stops. `stop_other` says
  // false for an id it does not know.
  std::function<std::vector<json>()> list_others;
  std::function<result<bool>(const std::string& id)> stop_other;
};

class server {
 public:
  explicit server(server_options options);
  ~server();
  server(const server&) = delete;
  server& operator=(const server&) = delete;

  // Hosts `s` (its directory claimed, `lock` held for its life): its socket is listened on and
  // session.json written. The session is served from the next turn of run().
  status host(std::shared_ptr<session> s, locked_fd lock);

  // `evalbox serve`: listens on `socket` too (0600), where clients start sessions, list them
  // and stop them (docs/sessions.md, "Many sessions: evalbox serve"); run() then serves until
  // `stop`, with or without sessions.
  status listen(const std::filesystem::path& socket);

  // Serves until no session is left (unless listening) or `stop` is set (then every session
  // is stopped).
  void run(const std::atomic<bool>& stop);

  // The number of sessions hosted (forks included).
  [[nodiscard]] size_t hosted() const;

  struct impl;

 private:
  std::unique_ptr<impl> impl_;
};

}  // namespace sessions
}  // namespace evalbox::harness
