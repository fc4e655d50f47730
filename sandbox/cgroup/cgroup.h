// The run's control group: limits memory and pids, measures CPU time, peak memory and OOM
// kills, and kills every task of a launch. Two implementations behind this one header: cgroup
// v2 (one directory under the unified root, entered with CLONE_INTO_CGROUP) and cgroup v1 (one
// directory per controller: memory, pids, cpuacct; a task enters by moving itself: move_self).
//
// Naming, one level: <root>/evalbox/<run_id>@<leaf> (v2) and <controller mount>/evalbox/
// <run_id>@<leaf> (v1), leaf = "<label>-<seq>". One level, not a directory per run with a leaf
// per launch in it: each cgroup mkdir and rmdir takes the kernel's one cgroup mutex, so a
// launch that makes and removes one directory per hierarchy instead of two holds it half as
// often. '@' because a run id may hold '.', '-' and '_' but never '@': "<run_id>@" names one
// run's cgroups and no other's. The preparer's reclaim removes <...>/evalbox/<run_id>@* of
// stale runs (and <...>/evalbox/<run_id>, the two-level name of earlier versions).
// Lifecycle: create → add the child (before it runs anything) → read_usage while it runs →
// destroy (kills leftovers, removes the directories; also done by the destructor).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/json_fwd.h"
#include "base/unique_fd.h"

namespace evalbox::sandbox::cgroup {

// Where this host's launches make their cgroups, as the environment set it: read once at each
// process's edge (default_preparer_options in evalbox, the helper's main) and passed down.
// The defaults are an unset environment's.
struct host_options {
  // EVALBOX_CGROUP_V2_ROOT: a cgroup v2 root to make every launch's cgroup in (and to reclaim
  // from) instead of the host's hierarchy: for tests (the controller-less unified mount, to
  // exercise CLONE_INTO_CGROUP) and hosts that mount cgroup2 elsewhere. Empty: the host's.
  std::filesystem::path v2_root;
  // EVALBOX_CGROUP_AHEAD=0 makes it false: on cgroup v1 no cgroups are made ahead.
  bool ahead = true;
};

struct limits {
  uint64_t memory_bytes = 0;  // 0: unlimited
  uint64_t pids = 0;          // 0: unlimited
};

struct usage {
  uint64_t cpu_ns = 0;
  uint64_t peak_memory_bytes = 0;
  uint64_t oom_kills = 0;
  bool pids_limit_hit = false;
};

class run_cgroup {
 public:
  virtual ~run_cgroup() = default;
  [[nodiscard]] virtual std::string_view version() const noexcept = 0;  // "v1" | "v2"
  // A directory fd for clone3(CLONE_INTO_CGROUP), or -1 when the pid must be added instead.
  [[nodiscard]] virtual int clone_into_fd() const noexcept = 0;
  // Moves process `pid` in. On v1 the kernel takes its threadgroup lock for that, whose writer
  // side waits for an RCU grace period after idle time (7-15 ms on the guests measured) while
  // it holds the host's cgroup mutex: the launch uses move_self there instead.
  virtual status add_pid(pid_t pid) = 0;
  // v1: each leaf's `tasks` file, opened for writing, for move_self; v2: none (a task is
  // cloned in or added). At most sys::max_fds, so that one message carries them all.
  virtual result<std::vector<unique_fd>> open_tasks() const = 0;
  virtual result<usage> read_usage() const = 0;
  // The CPU time alone (one file), for checking a CPU limit while the run goes on.
  [[nodiscard]] virtual uint64_t read_cpu_ns() const = 0;
  // SIGKILLs every task still in the cgroup and removes its directories. Idempotent.
  virtual status destroy() = 0;
  // The leaf directories (one per controller for v1), for tests and diagnostics.
  [[nodiscard]] virtual std::vector<std::filesystem::path> paths() const = 0;
  // What another process needs to take the cgroup over (adopt): version and leaves.
  [[nodiscard]] virtual json describe() const = 0;
  // Hands the cgroup over: this object no longer removes it (its adopter, or the preparer's
  // teardown, does).
  virtual void release() noexcept = 0;
  // A cgroup made ahead (create_ahead) becomes a launch's: renamed to
  // launch_cgroup_name(run_id, leaf), with the limits. v1 only (v2 refuses renames).
  virtual status claim(const std::string& run_id, const std::string& leaf, const limits& lim) = 0;
};

// How destroy() empties and removes a cgroup directory that a plain rmdir refused (tasks are
// still in it). kill_and_remove, the kernel's way, is what every cgroup made or adopted here
// uses; tests over a fake tree (plain directories and files, whose "pids" are not theirs to
// kill and whose "kernel files" rmdir will not remove) pass one of their own to the create_*
// functions.
using evict_fn = status (*)(const std::filesystem::path& dir);
// Writes cgroup.kill where the kernel offers it (v2, 5.14+: atomic, even for a task forking
// right now), SIGKILLs every pid in cgroup.procs until none is left, then removes the
// directory, waiting (up to 10 s) for the killed tasks to be reaped.
status kill_and_remove(const std::filesystem::path& dir);

// Moves the calling task into the cgroup of each of `fds` (open_tasks) by writing "0": a
// single-threaded process moving itself needs no threadgroup lock (kernel 5.17 and later), so
// no grace period is waited for and the cgroup mutex is held for microseconds. No allocation:
// for a child of clone. Returns 0 or the errno of the first move refused.
int move_self(const int* fds, size_t n) noexcept;

// A launch's cgroup directory name below <...>/evalbox: "<run_id>@<leaf>".
std::string launch_cgroup_name(std::string_view run_id, std::string_view leaf);

// The cgroups of run `run_id` directly below `parent` (a <...>/evalbox directory): every
// "<run_id>@..." and the two-level "<run_id>" directory of earlier versions, whichever exist.
std::vector<std::filesystem::path> run_cgroups_in(const std::filesystem::path& parent,
                                                  std::string_view run_id);

// Takes over a cgroup that another process created (run_cgroup::describe()): the launcher
// creates the run's cgroup while the helper starts, and hands it over.
result<std::unique_ptr<run_cgroup>> adopt(const json& description);

// v2 under `root` (normally the cgroup2 mount). Enables +memory +pids +cpu in the
// subtree_control files on the way down where the parent offers them.
result<std::unique_ptr<run_cgroup>> create_v2(const std::filesystem::path& root,
                                              const std::string& run_id, const std::string& leaf,
                                              const limits& lim, evict_fn evict = kill_and_remove);

// v1 with the given controller mounts ("memory" -> /sys/fs/cgroup/memory, ...). Controllers
// missing from the map are not used.
result<std::unique_ptr<run_cgroup>> create_v1(
    const std::map<std::string, std::filesystem::path>& mounts, const std::string& run_id,
    const std::string& leaf, const limits& lim, evict_fn evict = kill_and_remove);

// Chooses for this host: v2 when its root delegates memory and pids, else v1 when memory and
// pids controllers are mounted and writable, else unsupported. A `host.v2_root` forces v2 at
// that root.
result<std::unique_ptr<run_cgroup>> create_for_host(const host_options& host,
                                                    const std::string& run_id,
                                                    const std::string& leaf, const limits& lim);

// Cgroups made ahead. On cgroup v1 a task enters a cgroup only by being moved into it (v2
// clones it there: CLONE_INTO_CGROUP). A warm helper makes its launch's cgroups while it
// waits, under a name no run has ("@ahead-<helper pid>": a run id never holds '@'), the process
// that will clone pid 1 moves itself into them there (move_self), and at the launch the helper
// claims them (renamed to the launch's name, limits set): pid 1 is born in them and the launch
// makes no cgroup. The kill and removal at the end are those of any run cgroup.
//
// Whether launches here make their cgroups ahead: this host's launches use cgroup v1
// (create_for_host's choice, with no v2 root forced by `host.v2_root`) and `host.ahead`. The
// launcher then leaves a warm helper to make its cgroup.
bool ahead_applies(const host_options& host);
// "@ahead-<pid>".
std::string ahead_cgroup_name(pid_t helper);
// The cgroups of helper `helper`, made ahead, without limits (v1 only): on this host, or
// below the given controller mounts.
result<std::unique_ptr<run_cgroup>> create_ahead(const host_options& host, pid_t helper);
result<std::unique_ptr<run_cgroup>> create_ahead_v1(
    const std::map<std::string, std::filesystem::path>& mounts, pid_t helper,
    evict_fn evict = kill_and_remove);
// Removes the empty "@ahead-<pid>" cgroups of helpers no longer alive (killed before they could
// remove their own). Best effort: a cgroup in use is never removed (rmdir refuses).
void remove_stale_ahead();

// Every directory under which create_for_host may make a run's cgroups on this host
// (<v2 root>/evalbox, <v1 controller mount>/evalbox), whether or not it exists: for a
// teardown that checks its own run's cgroups without reading the mount table. The host's
// layout is looked up once per process; a `host.v2_root` is one more.
std::vector<std::filesystem::path> run_cgroup_parents(const host_options& host);

}  // namespace evalbox::sandbox::cgroup
