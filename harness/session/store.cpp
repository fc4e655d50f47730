// Sessions on disk (store.h).
#include "harness/session/store.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "base/fs.h"
#include "base/json_get.h"

namespace evalbox::harness {
inline namespace sessions {
namespace fs = std::filesystem;

fs::path sessions_root(const fs::path& state_root) { return state_root / "sessions"; }
fs::path session_layers_root(const fs::path& state_root) { return state_root / "session-layers"; }

result<claimed_dir> claim_dir(const fs::path& root, const std::string& name) {
  EB_TRY(make_dirs(root, 0700));
  claimed_dir c;
  c.dir = root / name;
  if (::mkdir(c.dir.c_str(), 0700) != 0 && errno != EEXIST) return sys_error(errno, c.dir.string());
  const fs::path lock = c.dir / "lock";
  unique_fd fd(::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd) return sys_error(errno, lock.string());
  if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0)
    return make_error(error_kind::busy, "{} is in use", c.dir.string());
  c.lock = locked_fd(std::move(fd));
  return c;
}

status write_session_json(const fs::path& dir, const json& info) {
  return write_file_replace(dir / "session.json", pretty_json(info), 0600);
}

namespace {

// Whether someone holds `dir`'s lock (a server), without taking it for long.
bool held(const fs::path& dir) {
  unique_fd fd(::open((dir / "lock").c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) return false;
  if (::flock(fd.get(), LOCK_SH | LOCK_NB) == 0) {
    (void)::flock(fd.get(), LOCK_UN);
    return false;
  }
  return true;
}

std::vector<std::string> entries(const fs::path& root) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root, ec)) {
    if (!e.is_directory(ec) || e.is_symlink(ec)) continue;
    out.push_back(e.path().filename().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// `pid` holds the lock file of `dir` open (it is that session's server, not a reused pid):
// the same file by device and inode, whatever path the state root was reached by.
bool is_server_of(pid_t pid, const fs::path& dir) {
  struct stat lock {};
  if (::stat((dir / "lock").c_str(), &lock) != 0) return false;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(fmt::format("/proc/{}/fd", pid), ec)) {
    struct stat held {};
    if (::stat(e.path().c_str(), &held) == 0 && held.st_dev == lock.st_dev &&
        held.st_ino == lock.st_ino)
      return true;
  }
  return false;
}

}  // namespace

std::vector<listed_session> list_sessions(const fs::path& state_root) {
  std::vector<listed_session> out;
  const fs::path root = sessions_root(state_root);
  for (const auto& name : entries(root)) {
    listed_session s;
    s.id = name;
    s.dir = root / name;
    s.live = held(s.dir);
    if (auto j = read_json_file(s.dir / "session.json")) s.info = std::move(*j);
    out.push_back(std::move(s));
  }
  return out;
}

result<listed_session> find_session(const fs::path& state_root, const std::string& id) {
  if (id.empty() || id.find('/') != std::string::npos || id == "." || id == "..")
    return make_error(error_kind::invalid_argument, "'{}' is not a session id", id);
  std::vector<listed_session> matches;
  for (auto& s : list_sessions(state_root))
    if (s.id == id)
      return s;
    else if (s.id.starts_with(id))
      matches.push_back(std::move(s));
  if (matches.size() == 1) return std::move(matches.front());
  if (matches.empty())
    return make_error(error_kind::not_found, "no session '{}' under {} (see `evalbox session ls`)",
                      id, sessions_root(state_root).string());
  return make_error(error_kind::invalid_argument, "'{}' names {} sessions; give more of the id", id,
                    matches.size());
}

reap_report reap_sessions(const fs::path& state_root, std::chrono::seconds grace) {
  reap_report r;
  const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  for (const auto& s : list_sessions(state_root)) {
    if (!s.live) {
      // A directory being made — `session start` makes it, its server then locks it and
      // writes session.json — is left alone for a minute.
      struct stat st {};
      if (s.info.is_null() && ::stat(s.dir.c_str(), &st) == 0 && now - st.st_mtime < 60) continue;
      // No server: its sandbox went with it (the helpers' parent-death signal); the run
      // directory is reclaimed with the other runs. What is left here is only files.
      if (auto rm = remove_tree(s.dir); !rm)
        r.errors.push_back(rm.error().message);
      else
        ++r.removed;
      continue;
    }
    const int64_t expires = json_value_or(s.info, "expires_unix", int64_t{0});
    const int pid = json_value_or(s.info, "server_pid", 0);
    // now - grace, not expires + grace: an expiry at the end of time must not wrap around.
    if (expires == 0 || now - grace.count() < expires || pid <= 1) continue;
    if (!is_server_of(pid, s.dir)) continue;
    // A server that outlived its session's TTL: it ends its sessions at SIGTERM.
    if (::kill(pid, SIGTERM) == 0) ++r.stopped;
  }
  const fs::path layers = session_layers_root(state_root);
  for (const auto& name : entries(layers)) {
    const fs::path dir = layers / name;
    if (held(dir)) continue;
    if (auto rm = remove_tree(dir); !rm)
      r.errors.push_back(rm.error().message);
    else
      ++r.removed;
  }
  return r;
}

}  // namespace sessions
}  // namespace evalbox::harness
