// The launcher: runs a command in a prepared session by handing a plain-data launch plan to the
// single-threaded helper `evalbox-sandbox` — a warm one started ahead of need, else one spawned
// for it (start_host_process, host_program.h) — and returns its run record. Thread-safe: the
// harness launches from many worker threads.
//
// A launch, in order: plan it (plan_launch: a pure function of the session and the options),
// write the plan's files, start the helper (warm or cold), hand it the run's cgroup, await its
// record. How it starts the helper and makes the cgroup is the session's launch_settings
// (preparer.h), read from the environment once, at the edge.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "sandbox/prepare/preparer.h"
#include "sandbox/protocol/launch_plan.h"
#include "sandbox/protocol/run_record.h"
#include "sandbox/spec/request.h"

namespace evalbox::sandbox {
inline namespace launch {

// Set by the caller (e.g. from a SIGINT handler thread) to stop a running launch: the helper
// kills the run, tears down and reports outcome `cancelled`.
struct cancel_token {
  std::atomic<bool> requested{false};
};

struct launch_options {
  std::string label = "agent";    // "setup", "agent", "grade": names plan/record files
  std::vector<std::string> argv;  // empty: the request's argv
  std::optional<std::map<std::string, std::string>> env;  // unset: the request's env
  std::filesystem::path cwd;  // empty: the workspace (session.workspace_target())
  // Extra binds from the trusted caller, e.g. the grader at /grader and the transcript at
  // /evalbox/transcript.jsonl while checks run.
  std::vector<bind_mount> extra_mounts;
  bool with_secrets = true;  // false: credential leases are not mounted
  // The host's allow-listed root even when the session's is an image: for evalbox's own tools
  // (the workspace diff), which must not depend on what the image has.
  bool host_root = false;
  std::optional<resource_limits> limits_override;
  std::optional<network_policy> network_override;
  // Standard streams. Empty paths with inherit_stdio: the caller's terminal (sandbox shell).
  std::filesystem::path stdout_path;
  std::filesystem::path stderr_path;      // may equal stdout_path (merged, in order)
  std::optional<std::string> stdin_data;  // else stdin is /dev/null (unless inherit_stdio)
  bool inherit_stdio = false;
  // With inherit_stdio, when the caller's stdin is a terminal: the program gets a
  // pseudo-terminal of its own (sandbox shell), relayed by the helper; the caller puts its
  // terminal in raw mode meanwhile (harness/cli/terminal.h).
  bool terminal = false;
  // Serve mode (a session, sandbox/live): pid 1 serves exec requests on this end of a socket
  // pair (serve_wire.h) instead of running argv, which must be empty; the launch then lasts
  // until the other end is closed. Borrowed: the helper gets a copy. Always a cold helper.
  int serve_fd = -1;
  // A session's writable trees as overlays of its layers (launch_plan::workspace_overlay,
  // home_overlay), and an image root's layers above the image's own with this upper.
  std::optional<launch_overlay> workspace_overlay, home_overlay;
  std::vector<std::filesystem::path> root_layers;  // top-most first, above the session's upper
  std::filesystem::path root_upper, root_work;     // empty: the session's own
};

// Where the helper binary is: `settings.helper` (EVALBOX_HELPER), else beside the running
// executable, else the build tree path compiled in.
std::filesystem::path helper_path(const launch_settings& settings);

result<run_record> launch_in(const prepared_session& session, const launch_options& options,
                             const cancel_token* cancel = nullptr);

// What a launch takes from its prepared session, as plain data (view_of): a launch plan is a
// function of it and the launch options alone, so it can be checked without preparing a
// session. `request`, `image` and `mounts` are borrowed from the session.
struct session_view {
  const session_request* request = nullptr;
  uid_t sandbox_uid = 0;
  gid_t sandbox_gid = 0;
  std::filesystem::path launch_dir;  // where the launch's files go
  std::filesystem::path workspace_dir;
  std::filesystem::path workspace_target = "/workspace";
  std::filesystem::path home_dir;
  const session_image* image = nullptr;  // nullptr: the allow-listed host root
  const std::vector<bind_mount>* mounts = nullptr;
  bool disk_quota_enforced = false;
  const std::vector<std::filesystem::path>* quota_dirs = nullptr;  // ephemeral-write mounts' disks
  std::string binding_digest;
};
session_view view_of(const prepared_session& session);

// A launch before anything of it exists: the helper's plan and the launcher's files, all named
// <launch dir>/<label>-<seq>.* (.root: the new root's mount point, .stdin, .stdout, .stderr).
struct planned_launch {
  launch_plan plan;
  std::filesystem::path launch_dir;
  std::string plan_path;    // <base>.plan.json: the plan, for the helper
  std::string record_path;  // <base>.record.json: where the helper writes the run record
};

// The plan of launch number `seq` of this process (it names the launch's files and cgroup):
// the session's root, binds and ids, the program, limits and network of the request unless
// `options` overrides them, and the standard streams. Pure: nothing is created.
planned_launch plan_launch(const session_view& session, const launch_options& options, int seq);

// The warm helper (docs/sandbox.md, "Order of steps"). After its first launch a process keeps
// one helper started ahead of need by a thread of its own that lives as long as the process
// (the helper's parent-death signal follows that thread, so no warm helper outlives the
// process), waiting on a socket for its plan. A launch whose standard streams are files takes
// it and pays no exec on its critical path; a launch that inherits the caller's stdio (a shell,
// a terminal), a helper that died while it waited, or none ready yet: the launch spawns its own
// (the cold path), with the same plan, steps and record. A plan goes to one helper only, once.
// A session whose launch_settings say warm_helper = false (EVALBOX_WARM_HELPER=0) launches cold.

// Starts keeping a warm helper of `settings`' helper binary (when `settings` enable it and none
// is kept yet) and waits up to `timeout` for one to be waiting: its pid, or nothing (disabled,
// or none ready in time).
std::optional<pid_t> wait_for_warm_helper(const launch_settings& settings,
                                          std::chrono::milliseconds timeout);

// Counts since the process started, for tests and measurements.
struct warm_helper_counts {
  uint64_t warm = 0;      // launches that took a warm helper
  uint64_t cold = 0;      // launches that spawned their own
  uint64_t replaced = 0;  // warm helpers found dead (killed, crashed) before their plan
};
warm_helper_counts warm_helper_stats();

}  // namespace launch
}  // namespace evalbox::sandbox
