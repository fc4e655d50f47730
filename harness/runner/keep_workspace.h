// Keeping a run's final workspace (`evalbox run --keep-workspaces`): which runs keep theirs,
// and the bounded copy out of the session before teardown into runs/<run_id>/workspace/, which
// `evalbox runs shell` opens (a copy of it) and `evalbox gc --results` counts.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "base/error.h"
#include "harness/runner/run_json.h"

namespace evalbox::harness {
inline namespace runner {

enum class keep_policy {
  none,    // the default: only workspace.diff says what the agent left
  failed,  // every run that did not pass: a failed task, an execution or a grading error
  all,
};

// "none", "failed" or "all".
result<keep_policy> parse_keep_policy(std::string_view text);
std::string_view to_string(keep_policy policy) noexcept;

// Whether a run that ended as `st` keeps its workspace under `policy`. A cancelled run keeps
// nothing (it is not recorded).
bool should_keep(keep_policy policy, const attempt_state& st);

// Where a run's kept workspace is, beneath its run directory.
inline constexpr std::string_view kept_workspace_dir = "workspace";

// The default bound on one kept workspace.
inline constexpr uint64_t default_keep_bytes = 1ull << 30;

// What keep_tree did: the copy, or why there is none.
struct kept_tree {
  bool kept = false;
  uint64_t bytes = 0;    // regular files' sizes (as far as counted when above the bound)
  uint64_t entries = 0;  // files, directories and symlinks
  std::string skipped;   // why nothing was kept; empty when kept
};

// Copies the tree at `from` (a run's workspace: agent-written, so hostile — symlinks are copied
// as symlinks and never followed, sockets, FIFOs and devices are left out) to `to`, which must
// not exist. Above `max_bytes` of regular files nothing is copied at all (no partial tree):
// the result says how large it was. An error only for a failure of the host (to cannot be
// written); a partial copy is then removed.
result<kept_tree> keep_tree(const std::filesystem::path& from, const std::filesystem::path& to,
                            uint64_t max_bytes);

// The kept workspaces of a results directory (`evalbox gc --results`): how many runs keep one
// and how many bytes of files they hold (symlinks not followed).
struct kept_totals {
  int runs = 0;
  uint64_t bytes = 0;
};
kept_totals count_kept(const std::filesystem::path& results_root);

// A finished run's kept workspace, as `evalbox runs shell` opens it.
struct kept_run {
  std::filesystem::path workspace;    // runs/<run_id>/workspace
  std::filesystem::path fixture_dir;  // where the run had its fixture
  std::string fixture_digest;         // the fixture's digest when it ran
};

// Reads runs/<run_id>/run.json under `results_root`. invalid_argument, saying what to do: no
// such run (an id with '/' is none), a run that kept no workspace (and why, when the record
// says), a kept workspace that is gone. An unreadable record is the host's error.
result<kept_run> find_kept_run(const std::filesystem::path& results_root, std::string_view run_id);

}  // namespace runner
}  // namespace evalbox::harness
