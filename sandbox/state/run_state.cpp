// Run directories, their locks, and the reclaim of dead runs (see run_state.h).
#include "sandbox/state/run_state.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "base/fs.h"
#include "base/log.h"
#include "sandbox/cgroup/cgroup.h"
#include "sandbox/mount/mount.h"

namespace evalbox::sandbox::state {

namespace fs = std::filesystem;

fs::path runs_dir(const fs::path& state_root) { return state_root / "runs"; }
fs::path leases_dir(const fs::path& state_root) { return state_root / "credential-leases"; }

namespace {

constexpr const char* lock_name = "lock";
constexpr const char* new_prefix = ".new-";
// A half-built run directory without a lock file is left alone this long (its builder may be
// between mkdir and creating the lock).
constexpr auto orphan_grace = std::chrono::seconds(60);

// Opens and locks `dir`/lock without blocking. An invalid fd with errno EWOULDBLOCK: held.
unique_fd try_lock(const fs::path& dir, bool create) {
  fs::path lock = dir / lock_name;
  int flags = O_RDWR | O_NOFOLLOW | O_CLOEXEC | (create ? O_CREAT | O_EXCL : 0);
  unique_fd fd(::open(lock.c_str(), flags, 0600));
  if (!fd) return fd;
  if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    fd.reset();
    errno = err;
  }
  return fd;
}

result<std::vector<std::string>> list_dir(const fs::path& dir) {
  std::vector<std::string> names;
  unique_dir d(::opendir(dir.c_str()));
  if (!d) {
    if (errno == ENOENT) return names;
    return sys_error(errno, "opendir {}", dir.string());
  }
  while (dirent* e = ::readdir(d.get())) {
    std::string_view n = e->d_name;
    if (n != "." && n != "..") names.emplace_back(n);
  }
  std::sort(names.begin(), names.end());
  return names;
}

// ".new-<pid>-<random>": true when that pid no longer exists (a reused pid only delays
// reclaim until the grace period has passed).
bool builder_dead(const std::string& name) {
  std::string_view rest = std::string_view(name).substr(std::string_view(new_prefix).size());
  auto dash = rest.find('-');
  if (dash == std::string_view::npos) return false;
  long pid = 0;
  for (char c : rest.substr(0, dash)) {
    if (c < '0' || c > '9') return false;
    pid = pid * 10 + (c - '0');
    if (pid > 1 << 30) return false;
  }
  return pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

}  // namespace

result<run_lock> create_run_dir(const fs::path& runs, const std::string& run_id) {
  EB_TRY(make_dirs(runs, 0700));
  fs::path final_dir = runs / run_id;
  for (int attempt = 0; attempt < 2; ++attempt) {
    // The builder's pid is in the name: if it dies before the lock exists, reclaim can tell.
    fs::path tmp = runs / fmt::format("{}{}-{}", new_prefix, ::getpid(), random_suffix());
    if (::mkdir(tmp.c_str(), 0700) != 0) return sys_error(errno, "mkdir {}", tmp.string());
    unique_fd fd = try_lock(tmp, true);
    if (!fd) {
      int err = errno;
      (void)remove_tree(tmp);
      return sys_error(err, "lock {}/{}", tmp.string(), lock_name);
    }
    if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, final_dir.c_str(), RENAME_NOREPLACE) == 0)
      return run_lock(std::move(fd), final_dir);
    int err = errno;
    fd.reset();
    (void)remove_tree(tmp);
    if (err != EEXIST && err != ENOTEMPTY)
      return sys_error(err, "rename {} -> {}", tmp.string(), final_dir.string());
    // The id is taken: by a live run (busy), or by a dead one (reclaim it and try again).
    unique_fd other = try_lock(final_dir, false);
    if (!other && errno == EWOULDBLOCK)
      return make_error(error_kind::busy,
                        "run {} is already in use by a live session ({}): run ids must be "
                        "unique among concurrent runs",
                        run_id, final_dir.string());
    reclaim_counts counts;
    EB_TRY_CTX(remove_run(final_dir, run_id, counts), fmt::format("reclaim stale run {}", run_id));
  }
  return make_error(error_kind::busy,
                    "run {} is already in use: its directory {} keeps "
                    "reappearing",
                    run_id, final_dir.string());
}

std::vector<fs::path> run_cgroup_dirs(const std::string& run_id) {
  std::vector<fs::path> out;
  auto table = mount::read_mountinfo();
  if (!table) return out;
  std::set<fs::path> seen;
  for (const auto& m : *table) {
    if (m.fstype != "cgroup" && m.fstype != "cgroup2") continue;
    if (!seen.insert(m.mount_point).second) continue;
    for (auto& dir : cgroup::run_cgroups_in(m.mount_point / "evalbox", run_id))
      out.push_back(std::move(dir));
  }
  return out;
}

namespace {

// Directories of a cgroup subtree, deepest first.
void collect_cgroups(const fs::path& dir, std::vector<fs::path>& out) {
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->is_directory(ec) && !it->is_symlink(ec)) collect_cgroups(it->path(), out);
  out.push_back(dir);
}

int kill_tasks(const fs::path& cgroup) {
  auto procs = read_file(cgroup / "cgroup.procs");
  if (!procs) return 0;
  int n = 0;
  std::istringstream in(*procs);
  long pid = 0;
  while (in >> pid)
    if (pid > 0 && ::kill(static_cast<pid_t>(pid), SIGKILL) == 0) ++n;
  return n;
}

// Kills the tasks in and removes each of `tops` (a run's cgroup directories) bottom-up.
result<int> remove_cgroup_trees(const std::vector<fs::path>& tops) {
  int removed = 0;
  for (const auto& top : tops) {
    std::error_code ec;
    if (!fs::is_directory(top, ec)) continue;
    std::vector<fs::path> dirs;
    collect_cgroups(top, dirs);
    // Tasks take a moment to die after SIGKILL; a cgroup with tasks cannot be removed. Up to
    // 10 s, as the helper waits for its own (cgroup.cpp): on a loaded machine the exit of a
    // large process tree takes a while, and a run given up on here stays until the next
    // reclaim, keeping the runs tmpfs mounted.
    for (const auto& d : dirs) {
      int err = 0;
      for (int attempt = 0; attempt < 1000; ++attempt) {
        kill_tasks(d);
        if (::rmdir(d.c_str()) == 0 || errno == ENOENT) {
          err = 0;
          break;
        }
        err = errno;
        if (err != EBUSY) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      if (err != 0) return sys_error(err, "rmdir cgroup {}", d.string());
      ++removed;
    }
  }
  return removed;
}

}  // namespace

result<int> remove_run_cgroups(const std::string& run_id) {
  return remove_cgroup_trees(run_cgroup_dirs(run_id));
}

status remove_run(const fs::path& run_dir, const std::string& run_id, reclaim_counts& counts) {
  counts.mounts += EB_TRY(mount::unmount_all_under(run_dir));
  if (!run_id.empty()) counts.cgroups += EB_TRY(remove_run_cgroups(run_id));
  EB_TRY(remove_tree(run_dir));
  return {};
}

status remove_own_run(const fs::path& run_dir, const std::string& run_id,
                      const std::vector<fs::path>& known_mounts, const fs::path& cgroup_v2_root,
                      reclaim_counts& counts) {
  counts.mounts += EB_TRY(mount::unmount_each(known_mounts));
  std::vector<fs::path> tops;
  for (const auto& parent : cgroup::run_cgroup_parents({.v2_root = cgroup_v2_root}))
    for (auto& dir : cgroup::run_cgroups_in(parent, run_id)) tops.push_back(std::move(dir));
  counts.cgroups += EB_TRY(remove_cgroup_trees(tops));
  // remove_tree stops at anything still mounted below (a mount the owner did not list):
  // then the thorough way, which reads the mount table.
  if (auto removed = remove_tree(run_dir); removed || removed.error().kind != error_kind::busy)
    return removed;
  return remove_run(run_dir, run_id, counts);
}

result<reclaim_counts> reclaim_stale(const fs::path& runs) {
  reclaim_counts counts;
  auto names = EB_TRY(list_dir(runs));
  for (const auto& name : names) {
    fs::path dir = runs / name;
    struct stat st {};
    if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
    bool building = name.rfind(new_prefix, 0) == 0;
    unique_fd lock = try_lock(dir, false);
    if (!lock) {
      if (errno == EWOULDBLOCK) continue;  // live
      if (errno != ENOENT) {
        counts.errors.push_back(fmt::format("lock {}: {}", dir.string(), errno_name(errno)));
        continue;
      }
      // No lock file: a directory being built right now, or one whose builder died early.
      // A builder known to be dead is not waited for; otherwise give it the grace period.
      auto age =
          std::chrono::system_clock::now() - std::chrono::system_clock::from_time_t(st.st_mtime);
      if (age < orphan_grace && !(building && builder_dead(name))) continue;
    }
    // Holding its lock, the run cannot come back to life while it is removed.
    if (auto s = remove_run(dir, building ? std::string() : name, counts); !s) {
      counts.errors.push_back(fmt::format("reclaim {}: {}", dir.string(), s.error().message));
      continue;
    }
    ++counts.runs;
    log::info("reclaimed stale run {}", name);
  }
  return counts;
}

}  // namespace evalbox::sandbox::state
