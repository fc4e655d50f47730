// Where sessions live on disk (docs/sessions.md, docs/state.md):
//
//   <state>/sessions/<id>/          0700: session.json, socket (0600), lock (held by the server
//                                   while the session lives), server.log, transcript.jsonl
//   <state>/session-layers/<fam>/   0700: a family's snapshot layers, and its lock
//
// A session whose lock is free has no server: what is left of it is reclaimed (reap_sessions,
// `evalbox gc`), as is a family's store whose lock is free. A session past its TTL whose server
// still holds the lock (a server that hangs) is stopped by signalling that server.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/json.h"
#include "base/unique_fd.h"

namespace evalbox::harness {
inline namespace sessions {

std::filesystem::path sessions_root(const std::filesystem::path& state_root);
std::filesystem::path session_layers_root(const std::filesystem::path& state_root);

// A directory made and locked for one session or one family.
struct claimed_dir {
  std::filesystem::path dir;
  locked_fd lock;
};
// Makes <root>/<name> (0700, with its parents) and takes its lock; busy if another holds it.
result<claimed_dir> claim_dir(const std::filesystem::path& root, const std::string& name);

// session.json, replaced atomically.
status write_session_json(const std::filesystem::path& dir, const json& info);

struct listed_session {
  std::string id;
  std::filesystem::path dir;
  json info;          // session.json (null when unreadable)
  bool live = false;  // its server holds the lock
};
// Every session directory, sorted by id.
std::vector<listed_session> list_sessions(const std::filesystem::path& state_root);

// A session by id, or by a unique prefix of one ("ses-3f9" for "ses-3f9a1c2b7d4e"): its
// directory. not_found or invalid_argument (ambiguous) otherwise.
result<listed_session> find_session(const std::filesystem::path& state_root, const std::string& id);

struct reap_report {
  int removed = 0;  // directories of sessions (and families) without a server
  int stopped = 0;  // servers past their sessions' TTL, signalled
  std::vector<std::string> errors;
};
// What `evalbox gc` does for sessions. `grace`: how long past its expiry a live session's server
// is given before it is signalled (it ends its sessions itself at their TTL).
reap_report reap_sessions(const std::filesystem::path& state_root,
                          std::chrono::seconds grace = std::chrono::seconds(30));

}  // namespace sessions
}  // namespace evalbox::harness
