// One session (docs/sessions.md): a prepared session whose sandbox stays up (sandbox/live),
// and its state as layers — what it was started from, the snapshots it took, the upper its
// programs write now — so that it can be snapshotted, reset and forked.
//
// State. A session's writable trees (the workspace, the home, and with an image the root) are
// overlays, stacked by pid 1 in the sandbox: read-only layers (top-most first) under an upper on
// the run's disk, new for each incarnation of the sandbox. A session starts on its prepared
// session's own trees (after a fixture's setup); a snapshot freezes the current uppers as
// copies (O(changes)) in its family's store and records the whole stack; a reset stops the
// sandbox (every process killed) and starts it again on a snapshot's stack with fresh uppers; a
// fork starts new sessions, each with a prepared session of its own (its own disk, cgroups and
// limits), on a snapshot's stack. A family (a first session and every fork of it, hosted by one
// server) shares snapshots by name; the first snapshot also copies the first session's own
// trees into the family's store once, so that no stack names a directory of a session that may
// end before it.
//
// Threads: every method may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/json.h"
#include "base/unique_fd.h"
#include "sandbox/launch/launcher.h"
#include "sandbox/live/live.h"
#include "sandbox/live/stack.h"
#include "sandbox/prepare/preparer.h"

namespace evalbox::harness {
inline namespace sessions {

using sandbox::layer_stack;

// A state of a session for its fixture's checks: the layers its trees are stacked from and the
// commands that made it (transcript.jsonl). Returns what the grading says (its checks and
// verdict). Set for sessions started from a fixture (the runner's grading, runner.h).
using session_grader =
    std::function<result<json>(const layer_stack&, const std::filesystem::path&)>;

// What the sessions of one server that fork from each other share: their snapshots (by name)
// and the store of layers (<state>/session-layers/<family>/), removed with the family.
class family {
 public:
  // `dir` is the family's store, `lock` held while the family lives (store.h, claim_dir).
  family(std::filesystem::path dir, locked_fd lock)
      : dir_(std::move(dir)), lock_(std::move(lock)) {}
  ~family();
  family(const family&) = delete;
  family& operator=(const family&) = delete;

  [[nodiscard]] const std::filesystem::path& dir() const noexcept { return dir_; }
  // A new directory name in the store for one frozen layer.
  std::filesystem::path next_layer(std::string_view tree);
  std::optional<layer_stack> find(const std::string& name) const;
  // False when the name is taken (snapshots are immutable). `commands`: a copy of the
  // transcript of the session that took it, up to then (a fork's begins with it).
  bool add(const std::string& name, layer_stack stack, std::filesystem::path commands = {});
  // That copy (empty when there is none).
  std::filesystem::path commands_of(const std::string& name) const;
  [[nodiscard]] std::vector<std::string> names() const;

  // The first session's own trees, copied into the store once (see above).
  std::mutex base_m;
  std::optional<layer_stack> base;
  std::filesystem::path base_of_workspace, base_of_home;  // the first session's host trees

 private:
  std::filesystem::path dir_;
  locked_fd lock_;
  mutable std::mutex m_;
  std::map<std::string, layer_stack> snapshots_;
  std::map<std::string, std::filesystem::path> commands_;
  int next_ = 0;
};

// How one exec ended, as the transcript and the protocol say it.
struct exec_event {
  std::vector<std::string> argv;
  std::string cwd;
  std::optional<int> exit_code, signal;
  bool timed_out = false, cancelled = false, truncated = false;
  uint64_t stdout_bytes = 0, stderr_bytes = 0;
  uint64_t duration_ms = 0;
  std::string error;  // the exec could not start (or the sandbox ended under it)
};

// What a session is made with.
struct session_setup {
  std::string id;
  std::filesystem::path dir;        // <state>/sessions/<id>: session.json, transcript.jsonl
  std::shared_ptr<family> fam;      // shared with its forks
  sandbox::launch_options options;  // every incarnation's label, environment and extra mounts
  json source;                      // what it was started from (session.json's "source")
  std::chrono::system_clock::time_point expires;
  std::optional<pid_t> owner;  // the process whose exit ends it
  std::string parent;          // the session it was forked from
  session_grader grader;       // how its state is graded (a fixture's session), else unset
};

class session {
 public:
  // Starts the sandbox of `prepared` on `start` (empty: the prepared session's own trees).
  // `owned`: the prepared session, when the session owns it (else it is borrowed and outlives
  // the session).
  static result<std::shared_ptr<session>> start(session_setup setup,
                                                sandbox::prepared_session& prepared,
                                                std::unique_ptr<sandbox::prepared_session> owned,
                                                std::optional<layer_stack> start = {});
  ~session();
  session(const session&) = delete;
  session& operator=(const session&) = delete;

  [[nodiscard]] const std::string& id() const noexcept { return setup_.id; }
  [[nodiscard]] const session_setup& setup() const noexcept { return setup_; }
  [[nodiscard]] const sandbox::prepared_session& prepared() const noexcept { return *prepared_; }

  // The running sandbox, for one exec or file operation; a session that ended says so (error
  // kind cancelled). A reset stops it under its users: their execs end (the sandbox ended), and
  // what they do with it after that fails.
  result<std::shared_ptr<sandbox::live_sandbox>> acquire();

  result<json> snapshot(const std::string& name);
  // Back to snapshot `to` (none: where the session started). Every process is killed.
  result<json> reset(const std::optional<std::string>& to);
  // The stack a fork starts from: snapshot `from`, or one taken now.
  // `commands`, when given, is set to a copy of the transcript up to that point (the
  // snapshot's, or now's), which a fork's transcript begins with.
  result<layer_stack> fork_point(const std::optional<std::string>& from,
                                 std::filesystem::path* commands = nullptr);
  // The current state graded with the fixture's checks (unsupported without a fixture): its
  // uppers frozen as for a snapshot, then graded in sandboxes of their own over that stack.
  result<json> grade();

  // A line of transcript.jsonl.
  void record(const exec_event& e);
  // session.json's content: id, socket, times, owner, source, snapshots.
  [[nodiscard]] json info() const;
  // The session is over: stopped, or its sandbox ended by itself (a limit, pid 1 killed).
  [[nodiscard]] bool ended() const;
  // Ends the sandbox (every process killed) and tears down what the session owns. Idempotent.
  result<sandbox::run_record> stop();

 private:
  session(session_setup setup, sandbox::prepared_session& prepared,
          std::unique_ptr<sandbox::prepared_session> owned);
  // Starts an incarnation on `stack` (fresh uppers); the caller holds m_ exclusively.
  status launch(const layer_stack& stack);
  // The current uppers frozen into the family's store, on top of the current stack (whose own
  // trees are replaced by the family's copies of them).
  result<layer_stack> freeze(uint64_t& bytes, uint64_t& entries);
  result<layer_stack> self_contained(const layer_stack& stack);
  // transcript.jsonl as it is now, copied into the family's store.
  result<std::filesystem::path> keep_commands();

  session_setup setup_;
  std::unique_ptr<sandbox::prepared_session> owned_;
  sandbox::prepared_session* prepared_ = nullptr;
  const std::chrono::system_clock::time_point created_ = std::chrono::system_clock::now();

  mutable std::shared_mutex m_;  // shared to read the state below, exclusive to change it
  std::shared_ptr<sandbox::live_sandbox> live_;
  layer_stack start_;             // where the session started (a reset without a name)
  layer_stack current_;           // the stack of the running incarnation
  std::filesystem::path uppers_;  // the running incarnation's uppers (on the run's disk)
  int incarnation_ = 0;
  bool stopped_ = false;
  std::optional<result<sandbox::run_record>> record_;

  std::mutex transcript_m_;
};

// A new session id: "ses-" and 12 hex digits from the kernel's random source.
std::string new_session_id();

}  // namespace sessions
}  // namespace evalbox::harness
