// A live sandbox: a prepared session whose pid 1 stays up and serves execs — the sandbox of an
// evalbox session (docs/sessions.md). The same helper, steps and fences as any launch
// (launcher.h) with the launch in serve mode: pid 1 waits on a control socket
// (sandbox/protocol/serve_wire.h) and starts each exec as it would a run's program — in the
// sandbox's namespaces and cgroups, with its Landlock, seccomp and capabilities — reaps it and
// reports its end. The host side here is thread-safe: many execs run at once.
//
// Threads: the launch waits for the helper's record on a thread of its own (the sandbox's
// life); another reads pid 1's events and hands each to the exec it names. An exec's output
// goes to the pipes its caller passed in; this class never reads it.
//
// Lifecycle: start() → exec()… → stop() (or destruction): the control socket closes, pid 1
// exits and the kernel kills every process left in the sandbox; the helper's record says how
// the sandbox ended. The prepared session must outlive the live sandbox.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/unique_fd.h"
#include "sandbox/launch/launcher.h"
#include "sandbox/prepare/preparer.h"
#include "sandbox/protocol/run_record.h"

namespace evalbox::sandbox {
inline namespace live {

struct exec_spec {
  std::vector<std::string> argv;  // argv[0] with a '/' is a path inside, else found on PATH
  std::map<std::string, std::string> env;  // set over the sandbox's own environment
  std::string cwd;                         // empty: the workspace
  // A pseudo-terminal of the sandbox's devpts as the exec's stdio and controlling terminal;
  // its master comes back with the handle (exec_handle::take_terminal).
  bool tty = false;
  uint16_t rows = 0, cols = 0;
  // Without a terminal: the exec's standard streams (borrowed; pid 1 gets copies).
  int stdin_fd = -1, stdout_fd = -1, stderr_fd = -1;
};

// An exec that started; its end comes later.
class exec_handle {
 public:
  [[nodiscard]] uint64_t id() const noexcept { return id_; }
  [[nodiscard]] pid_t pid() const noexcept { return pid_; }  // inside the sandbox
  // An eventfd that becomes readable once the exec ended — or the sandbox did first.
  [[nodiscard]] int done_fd() const noexcept { return done_.get(); }
  [[nodiscard]] bool ended() const;
  // Its wait status once it ended; none when the sandbox ended first (its process died with it).
  [[nodiscard]] std::optional<int> wait_status() const;
  // With a terminal: its master (once; then empty).
  unique_fd take_terminal();

 private:
  friend class live_sandbox;
  struct shared;  // what the event thread fills in
  std::shared_ptr<shared> s_;
  uint64_t id_ = 0;
  pid_t pid_ = 0;
  unique_fd done_;
  unique_fd terminal_;
};

// One entry of a directory inside the sandbox (live_sandbox::list).
struct file_entry {
  enum class kind { file, dir, symlink, other };
  std::string name;
  kind type = kind::other;
  uint64_t size = 0;
  uint32_t mode = 0;  // permission bits
  int64_t mtime = 0;  // seconds since the epoch
};
std::string_view to_string(file_entry::kind k) noexcept;

// A file read from inside the sandbox.
struct file_content {
  std::string data;
  uint64_t size = 0;  // the file's size
  uint32_t mode = 0;
  bool too_large = false;  // larger than asked for: `data` is empty
};

class live_sandbox {
 public:
  // Starts pid 1 of `session` in serve mode with `options` (label, environment, limits,
  // layers...; argv empty) and waits until it serves. The session must outlive the result.
  static result<std::unique_ptr<live_sandbox>> start(const prepared_session& session,
                                                     launch_options options);
  live_sandbox(const live_sandbox&) = delete;
  live_sandbox& operator=(const live_sandbox&) = delete;
  ~live_sandbox();  // stop(), its errors logged

  // Starts an exec and returns once it runs — or with an error: not_found (the program or the
  // directory is not there), permission (not executable), invalid_argument (a bad request),
  // busy (too many execs at once), cancelled (the sandbox has ended), io (the sandbox failed).
  result<std::unique_ptr<exec_handle>> exec(const exec_spec& spec);
  // Sends `sig` to the exec's process group (nothing once it ended).
  status signal(const exec_handle& exec, int sig);

  // The sandbox's root directory (O_PATH), to resolve paths in with RESOLVE_IN_ROOT: the files
  // of the sandbox as its programs see them (workspace, home, /tmp, an image's root).
  [[nodiscard]] int root_fd() const noexcept;
  // Files as the sandbox's programs see them: `path` (absolute, or relative to the workspace)
  // is resolved inside the sandbox's root (openat2 RESOLVE_IN_ROOT: `..` and symbolic links
  // stay inside it, magic links are refused), and read or written with the sandbox user's
  // filesystem ids — what its programs may not write, this may not either; what it makes,
  // the sandbox's root owns. Thread-safe.
  result<file_content> read_file(const std::string& path, uint64_t max_bytes) const;
  // Writes (or with `append` appends) `data`; a new file gets `mode`; `parents` makes missing
  // directories (0755). Returns the file's size after the write.
  result<uint64_t> write_file(const std::string& path, std::string_view data, uint32_t mode,
                              bool append, bool parents) const;
  // A directory's entries sorted by name (a file: itself alone).
  result<std::vector<file_entry>> list(const std::string& path) const;

  // pid 1 is gone (stopped, killed, or a limit ended the sandbox).
  [[nodiscard]] bool ended() const;
  // An eventfd readable once the sandbox ended.
  [[nodiscard]] int ended_fd() const noexcept;
  // Execs that started and have not ended.
  [[nodiscard]] size_t running() const;

  // Ends the sandbox (every process in it killed) and returns the helper's record of it.
  // Idempotent: later calls return the same record.
  result<run_record> stop();

  struct state;  // implementation (live.cpp)
  explicit live_sandbox(std::unique_ptr<state> s);

 private:
  std::unique_ptr<state> s_;
};

}  // namespace live
}  // namespace evalbox::sandbox
