// A run whose process was killed (-9) mid-way is reclaimed by the next start: no mount, no
// file, no cgroup remains. The victim is a separate process (evalbox_prep_victim).
#include "sandbox/state/run_state.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "base/fs.h"
#include "sandbox/mount/mount.h"
#include "sandbox/prepare/preparer.h"
#include "tests/support/isolation.h"
#include "tests/support/prep_env.h"

extern char** environ;

namespace evalbox::sandbox {
namespace {

using testing::prep_env;
namespace fs = std::filesystem;

// Starts the victim and waits for its "ready" line; returns its pid (or -1).
pid_t start_victim(const prep_env& env, const std::string& run_id) {
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return -1;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  std::string state = env.state.string(), ws = env.source.string();
  char* args[] = {const_cast<char*>(EVALBOX_PREP_VICTIM), state.data(), ws.data(),
                  const_cast<char*>(run_id.c_str()), nullptr};
  pid_t pid = -1;
  int rc = ::posix_spawn(&pid, EVALBOX_PREP_VICTIM, &fa, nullptr, args, environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(out[1]);
  char buf[16] = {};
  ssize_t n = rc == 0 ? ::read(out[0], buf, sizeof buf - 1) : -1;
  ::close(out[0]);
  if (rc != 0) return -1;
  if (n <= 0 || std::string(buf) != "ready\n") {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    return -1;
  }
  return pid;
}

TEST(Reclaim, KilledRunLeavesNoMountFileOrCgroupAfterReclaim) {
  EVALBOX_REQUIRE_FEATURE(::geteuid() == 0 && !testing::host().cgroup_v1_controllers.empty(),
                          "root with cgroups");
  prep_env env;
  std::string run_id = "victim-" + std::to_string(::getpid());
  pid_t pid = start_victim(env, run_id);
  ASSERT_GT(pid, 0) << "the victim did not get ready";
  fs::path run = env.state / "runs" / run_id;
  ASSERT_TRUE(fs::exists(run / "lock"));
  ASSERT_FALSE(mount::mounts_under(run)->empty());
  ASSERT_FALSE(state::run_cgroup_dirs(run_id).empty());

  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  int st = 0;
  ASSERT_EQ(::waitpid(pid, &st, 0), pid);

  preparer p(env.options());
  auto report = p.reclaim_stale();
  ASSERT_TRUE(report) << report.error().message;
  EXPECT_EQ(report->runs_reclaimed, 1);
  EXPECT_GE(report->mounts_unmounted, 3);  // disk, lower, workspace, snapshot view
  EXPECT_GE(report->cgroups_removed, 1);
  EXPECT_TRUE(report->errors.empty());
  EXPECT_TRUE(mount::mounts_under(run)->empty());
  EXPECT_FALSE(fs::exists(run));
  const auto left = state::run_cgroup_dirs(run_id);
  EXPECT_TRUE(left.empty()) << "left behind: " << left.front();
  // The victim's runs tmpfs goes too: nothing of the state root stays mounted.
  EXPECT_TRUE(mount::mounts_under(env.state)->empty());
}

TEST(Reclaim, LiveRunIsLeftAlone) {
  EVALBOX_REQUIRE_FEATURE(::geteuid() == 0, "root");
  prep_env env;
  preparer p(env.options());
  auto s = p.prepare(env.request("live"));
  ASSERT_TRUE(s) << s.error().message;
  auto report = p.reclaim_stale();
  ASSERT_TRUE(report);
  EXPECT_EQ(report->runs_reclaimed, 0);
  EXPECT_TRUE(fs::exists(s->workspace_dir() / "README.md"));
}

TEST(Reclaim, PrepareReclaimsAStaleRunAtStart) {
  EVALBOX_REQUIRE_FEATURE(::geteuid() == 0, "root");
  prep_env env;
  std::string run_id = "stale-" + std::to_string(::getpid());
  pid_t pid = start_victim(env, run_id);
  ASSERT_GT(pid, 0);
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  preparer p(env.options());
  auto s = p.prepare(env.request("next"));
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_FALSE(fs::exists(env.state / "runs" / run_id));
}

// A builder killed between creating its run directory and its lock file leaves a lock-less
// ".new-<pid>-..." directory: reclaimed at once when that pid is gone, left alone while the
// builder lives (it may be about to create the lock).
TEST(Reclaim, AHalfBuiltRunOfADeadBuilderIsReclaimedAtOnce) {
  prep_env env;
  pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  ASSERT_GT(dead, 0);
  ::waitpid(dead, nullptr, 0);
  fs::path runs = env.state / "runs";
  ASSERT_TRUE(make_dirs(runs / fmt::format(".new-{}-00000000deadbeef", dead), 0700));
  ASSERT_TRUE(make_dirs(runs / fmt::format(".new-{}-00000000cafecafe", ::getpid()), 0700));
  preparer p(env.options());
  auto report = p.reclaim_stale();
  ASSERT_TRUE(report);
  EXPECT_FALSE(fs::exists(runs / fmt::format(".new-{}-00000000deadbeef", dead)));
  EXPECT_TRUE(fs::exists(runs / fmt::format(".new-{}-00000000cafecafe", ::getpid())));
}

}  // namespace
}  // namespace evalbox::sandbox
