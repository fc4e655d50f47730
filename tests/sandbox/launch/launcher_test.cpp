// The launcher over real prepared sessions: the program runs in /workspace as uid 0 of its
// namespace, sees its home, and the record tells the truth.
#include "sandbox/launch/launcher.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/fs.h"
#include "base/unique_fd.h"
#include "sandbox/cgroup/cgroup.h"
#include "sandbox/spec/system_paths.h"
#include "sandbox/sys/syscalls.h"
#include "tests/support/isolation.h"
#include "tests/support/prep_env.h"

namespace evalbox::sandbox {
namespace {

using evalbox::testing::prep_env;

// The launch settings of the sessions here: the environment's, as the edge reads them
// (default_preparer_options), and the cgroup options among them.
launch_settings settings() { return default_preparer_options().launch; }
cgroup::host_options cgroups() {
  const launch_settings s = settings();
  return {.v2_root = s.cgroup_v2_root, .ahead = s.cgroup_ahead};
}

class Launcher : public ::testing::Test {
 protected:
  void SetUp() override {
    EVALBOX_REQUIRE_FEATURE(evalbox::testing::host().user_namespaces, "user namespaces");
  }
  prep_env env_;
};

TEST(HelperPath, PrefersTheSettingThenTheBuildTree) {
  launch_settings s;
  s.helper = "/opt/evalbox/evalbox-sandbox";
  EXPECT_EQ(helper_path(s), "/opt/evalbox/evalbox-sandbox");
  s.helper.clear();
  // The test binary has no helper beside it: the compiled-in build path.
  EXPECT_EQ(helper_path(s),
            std::filesystem::path(EVALBOX_BINARY_DIR) / "sandbox/helper/evalbox-sandbox");
}

TEST_F(Launcher, RunsInWorkspaceAndCapturesOutput) {
  preparer prep(env_.options());
  auto req = env_.request("launch");
  auto session = prep.prepare(req);
  ASSERT_TRUE(session) << session.error().message;
  temp_dir out("evalbox-launch-out");
  launch_options o;
  o.argv = {"/bin/sh", "-c", "pwd; cat README.md; id -u; echo made > new.txt; exit 7"};
  o.stdout_path = out.path() / "stdout";
  auto rec = launch_in(*session, o);
  ASSERT_TRUE(rec) << rec.error().message;
  EXPECT_EQ(rec->error, "");
  EXPECT_EQ(rec->outcome, outcome_kind::exited);
  EXPECT_EQ(rec->exit_code, 7);
  EXPECT_EQ(read_file(out.path() / "stdout").value_or(""), "/workspace\nhello\n0\n");
  EXPECT_EQ(read_file(session->workspace_dir() / "new.txt").value_or(""), "made\n");
  EXPECT_EQ(rec->binding_digest, session->binding_digest());
}

TEST_F(Launcher, FeedsStdinDataAndKeepsStderrApart) {
  preparer prep(env_.options());
  auto session = prep.prepare(env_.request("stdin"));
  ASSERT_TRUE(session) << session.error().message;
  temp_dir out("evalbox-launch-out");
  launch_options o;
  o.argv = {"/bin/sh", "-c", "tr a-z A-Z; echo oops >&2"};
  o.stdin_data = "shout\n";
  o.stdout_path = out.path() / "stdout";
  o.stderr_path = out.path() / "stderr";
  auto rec = launch_in(*session, o);
  ASSERT_TRUE(rec) << rec.error().message;
  EXPECT_EQ(read_file(out.path() / "stdout").value_or(""), "SHOUT\n");
  EXPECT_EQ(read_file(out.path() / "stderr").value_or(""), "oops\n");
}

TEST_F(Launcher, WithoutSecretsTheLeaseIsNotMounted) {
  preparer prep(env_.options());
  auto req = env_.request("nosecret");
  req.secrets = {{"codex", env_.creds / "auth.json", ".codex/auth.json"}};
  auto session = prep.prepare(req);
  ASSERT_TRUE(session) << session.error().message;
  temp_dir out("evalbox-launch-out");
  launch_options o;
  o.argv = {"/bin/sh", "-c", "cat /home/agent/.codex/auth.json | wc -c"};
  o.stdout_path = out.path() / "stdout";
  auto with = launch_in(*session, o);
  ASSERT_TRUE(with);
  EXPECT_NE(read_file(out.path() / "stdout").value_or(""), "0\n");
  o.with_secrets = false;
  auto without = launch_in(*session, o);
  ASSERT_TRUE(without);
  EXPECT_EQ(without->error, "");
  EXPECT_EQ(read_file(out.path() / "stdout").value_or(""), "0\n");
}

TEST_F(Launcher, ACancelTokenStopsTheRunAsCancelled) {
  preparer prep(env_.options());
  auto session = prep.prepare(env_.request("cancel"));
  ASSERT_TRUE(session) << session.error().message;
  launch_options o;
  o.argv = {"/bin/sleep", "30"};
  cancel_token cancel;
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    cancel.requested = true;
  });
  const auto t0 = std::chrono::steady_clock::now();
  auto rec = launch_in(*session, o, &cancel);
  stopper.join();
  ASSERT_TRUE(rec) << rec.error().message;
  EXPECT_EQ(rec->outcome, outcome_kind::cancelled);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
}

TEST_F(Launcher, LaunchesFromManyThreadsAtOnce) {
  preparer prep(env_.options());
  std::vector<prepared_session> sessions;
  for (int i = 0; i < 4; ++i) {
    auto s = prep.prepare(env_.request("par" + std::to_string(i)));
    ASSERT_TRUE(s) << s.error().message;
    sessions.push_back(std::move(*s));
  }
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      launch_options o;
      o.argv = {"/bin/sh", "-c", "exit " + std::to_string(i)};
      auto r = launch_in(sessions[static_cast<size_t>(i)], o);
      if (r && r->ok() && r->exit_code == i) ++ok;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok, 4);
}

// A record the helper leaves that cannot be read fails the launch with the reason, not a
// bare "not a run record".
TEST_F(Launcher, AnUnreadableRecordIsAnErrorThatSaysWhy) {
  temp_dir bin("evalbox-fake-helper");
  const std::filesystem::path fake = bin.path() / "evalbox-sandbox";
  ASSERT_TRUE(write_file(fake,
                         "#!/bin/sh\n"
                         "while [ $# -gt 0 ]; do [ \"$1\" = --record ] && rec=$2; shift; done\n"
                         "printf '{\"schema\": \"evalbox.run-record.v0\"}' > \"$rec\"\n",
                         0755));
  auto options = env_.options();
  options.launch.helper = fake;
  preparer prep(options);
  auto session = prep.prepare(env_.request("badrecord"));
  ASSERT_TRUE(session) << session.error().message;
  launch_options o;
  o.argv = {"/bin/true"};
  auto rec = launch_in(*session, o);
  ASSERT_FALSE(rec);
  EXPECT_EQ(rec.error().kind, error_kind::internal);
  EXPECT_NE(rec.error().message.find("wrote a record evalbox cannot read"), std::string::npos)
      << rec.error().message;
  EXPECT_NE(rec.error().message.find(
                "run record: schema is 'evalbox.run-record.v0', not evalbox.run-record.v1"),
            std::string::npos)
      << rec.error().message;
}

// validate, the preparer and the helper agree on the system paths (spec/system_paths.h): a
// request naming one as its program's directory or as a read-only path is accepted, gets no
// bind of its own (the helper mounts it anyway), and its launch sees the path. A path the
// helper recreates as a symlink (/lib32 -> usr/lib32 here) used to get a bind of its own,
// which failed the launch with `step check /lib32: ELOOP`.
TEST_F(Launcher, EverySystemPathIsMountedByTheHelperAlone) {
  namespace fs = std::filesystem;
  preparer prep(env_.options());
  int seen = 0;
  for (std::string_view sp : system_paths) {
    const fs::path p(sp);
    std::error_code ec;
    if (!fs::exists(p, ec)) continue;
    ++seen;
    auto req = env_.request("system" + std::to_string(seen));
    req.readonly_paths = {p};
    // A program directly in that directory, where there is one.
    for (fs::directory_iterator it(p, ec), end; !ec && it != end; it.increment(ec)) {
      if (it->is_regular_file(ec) && ::access(it->path().c_str(), X_OK) == 0) {
        req.argv = {it->path().string()};
        break;
      }
    }
    auto session = prep.prepare(req);
    ASSERT_TRUE(session) << p << ": " << session.error().message;
    for (const auto& m : session->mounts())
      EXPECT_FALSE(below_system_path(m.target)) << p << " got a bind of its own at " << m.target;
    launch_options o;
    o.argv = {"/bin/sh", "-c", fmt::format("test -e {}", p.string())};
    auto rec = launch_in(*session, o);
    ASSERT_TRUE(rec) << rec.error().message;
    EXPECT_EQ(rec->error, "") << p;
    EXPECT_EQ(rec->exit_code, 0) << p << " is not visible inside";
  }
  EXPECT_GE(seen, 1);  // /usr at least
}

// The run's cgroup — made by the launcher while the helper starts and handed over, or on cgroup
// v1 made ahead by a warm helper and claimed at the launch: the program runs in it, with the
// request's limits, and nothing of it is left after the launch.
// `cgroup_root` is where the run's cgroups go (<root>/evalbox/<run id>@<label>-<seq>).
void expect_run_inside_its_cgroup(prep_env& env, const preparer_options& options,
                                  const std::filesystem::path& root, const char* limit_file,
                                  const std::string& limit) {
  namespace fs = std::filesystem;
  preparer prep(options);
  auto req = env.request("cgroup");
  req.limits.memory_bytes = 256ull << 20;
  req.limits.pids = 64;
  auto session = prep.prepare(req);
  ASSERT_TRUE(session) << session.error().message;
  const fs::path parent = root / "evalbox";
  std::string procs, seen_limit;
  std::thread watcher([&] {
    for (int i = 0; i < 200 && procs.empty(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      for (const auto& dir : cgroup::run_cgroups_in(parent, req.run_id)) {
        procs = read_file(dir / "cgroup.procs").value_or("");
        if (limit_file) seen_limit = read_file(dir / limit_file).value_or("");
      }
    }
  });
  launch_options o;
  o.argv = {"/bin/sleep", "1"};
  if (!limit_file) {  // a cgroup without controllers: no memory or pids limit can be set
    o.limits_override = req.limits;
    o.limits_override->memory_bytes = 0;
    o.limits_override->pids = 0;
  }
  auto rec = launch_in(*session, o);
  watcher.join();
  ASSERT_TRUE(rec) << rec.error().message;
  EXPECT_EQ(rec->error, "");
  EXPECT_EQ(rec->outcome, outcome_kind::exited);
  EXPECT_FALSE(procs.empty()) << "no task of the run was seen in " << parent;
  if (limit_file) {
    EXPECT_EQ(seen_limit, limit + "\n");
  }
  const auto left = cgroup::run_cgroups_in(parent, req.run_id);
  EXPECT_TRUE(left.empty()) << "left behind: " << left.front();
}

TEST_F(Launcher, OnCgroupV1TheRunIsInItsOwnCgroupWithItsLimits) {
  EVALBOX_REQUIRE_FEATURE(
      evalbox::testing::host().root && std::filesystem::exists("/sys/fs/cgroup/memory/tasks"),
      "root and cgroup v1 memory at /sys/fs/cgroup/memory");
  expect_run_inside_its_cgroup(env_, env_.options(), "/sys/fs/cgroup/memory",
                               "memory.limit_in_bytes", std::to_string(256ull << 20));
}

TEST_F(Launcher, ACgroupV2MadeByTheLauncherIsHandedOverToo) {
  const std::filesystem::path unified = "/sys/fs/cgroup/unified";
  EVALBOX_REQUIRE_FEATURE(
      evalbox::testing::host().root && std::filesystem::exists(unified / "cgroup.procs"),
      "root and a cgroup2 mount at /sys/fs/cgroup/unified");
  // The unified mount here offers no controllers: membership only, no limits.
  auto options = env_.options();
  options.launch.cgroup_v2_root = unified;
  expect_run_inside_its_cgroup(env_, options, unified, nullptr, "");
}

// As root the workspace and home live on the run's size-limited tmpfs, and the record says
// so; without root it does not (tests/integration/non_root.sh).
TEST_F(Launcher, TheRecordNamesTheTmpfsQuotaWhenThereIsOne) {
  EVALBOX_REQUIRE_FEATURE(evalbox::testing::host().root, "root");
  preparer prep(env_.options());
  auto session = prep.prepare(env_.request("quota"));
  ASSERT_TRUE(session) << session.error().message;
  ASSERT_TRUE(session->disk_quota_enforced());
  launch_options o;
  o.argv = {"/bin/true"};
  auto rec = launch_in(*session, o);
  ASSERT_TRUE(rec) << rec.error().message;
  EXPECT_EQ(rec->mechanisms["limits"]["disk_bytes"]["by"],
            json::array({"RLIMIT_FSIZE", "tmpfs size"}));
}

TEST_F(Launcher, ACgroupTheLauncherCannotMakeFailsTheRunAsRoot) {
  EVALBOX_REQUIRE_FEATURE(evalbox::testing::host().root, "root");
  auto options = env_.options();
  options.launch.cgroup_v2_root = "/proc/evalbox-no-such-cgroup-root";
  preparer prep(options);
  auto session = prep.prepare(env_.request("nocgroup"));
  ASSERT_TRUE(session) << session.error().message;
  launch_options o;
  o.argv = {"/bin/true"};
  auto rec = launch_in(*session, o);
  ASSERT_TRUE(rec) << rec.error().message;
  EXPECT_FALSE(rec->ok());
  EXPECT_NE(rec->error.find("create the run's cgroup"), std::string::npos) << rec->error;
}

// The warm helper (launcher.h): a launch takes the helper started ahead of need, a dead one is
// replaced while the launch goes cold, none outlives the process, and warm or cold the run and
// its record are the same.
class WarmHelper : public Launcher {
 protected:
  void SetUp() override {
    Launcher::SetUp();
    ::unsetenv("EVALBOX_WARM_HELPER");
  }

  // Waits until `pid` has exited (its pidfd readable), at most 5 s.
  static bool exits(int pidfd) {
    pollfd p{pidfd, POLLIN, 0};
    return ::poll(&p, 1, 5000) == 1;
  }

  // Asks `done` every 10 ms until it says yes, at most 5 s (a cgroup move may wait for a grace
  // period; a helper starts on another thread). Its last answer.
  template <class F>
  static bool eventually(F done) {
    for (int i = 0; i < 500; ++i) {
      if (done()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return done();
  }

  // The tasks of `procs` (a cgroup.procs) once there is one, or "".
  static std::string tasks_once_moved(const std::filesystem::path& procs) {
    std::string tasks;
    eventually([&] { return !(tasks = read_file(procs).value_or("")).empty(); });
    return tasks;
  }
};

TEST_F(WarmHelper, ALaunchRunsItsPlanOnceInTheWarmHelper) {
  preparer prep(env_.options());
  auto session = prep.prepare(env_.request("warm"));
  ASSERT_TRUE(session) << session.error().message;
  const auto pid = wait_for_warm_helper(settings(), std::chrono::seconds(10));
  ASSERT_TRUE(pid) << "no warm helper started";
  unique_fd pidfd(sys::pidfd_open(*pid, 0));
  ASSERT_TRUE(pidfd);
  const warm_helper_counts before = warm_helper_stats();
  temp_dir out("evalbox-launch-out");
  launch_options o;
  o.argv = {"/bin/sh", "-c", "echo ran >> runs.txt; echo hello"};
  o.stdout_path = out.path() / "stdout";
  auto rec = launch_in(*session, o);
  ASSERT_TRUE(rec) << rec.error().message;
  EXPECT_TRUE(rec->ok()) << rec->error;
  EXPECT_EQ(rec->exit_code, 0);
  EXPECT_EQ(read_file(out.path() / "stdout").value_or(""), "hello\n");
  EXPECT_EQ(warm_helper_stats().warm, before.warm + 1);
  EXPECT_EQ(warm_helper_stats().cold, before.cold);
  // The helper that waited ran the plan and is gone; it ran it once; another waits now.
  EXPECT_TRUE(exits(pidfd.get()));
  EXPECT_EQ(read_file(session->workspace_dir() / "runs.txt").value_or(""), "ran\n");
  const auto next = wait_for_warm_helper(settings(), std::chrono::seconds(10));
  ASSERT_TRUE(next);
  EXPECT_NE(*next, *pid);
}

TEST_F(WarmHelper, AKilledWarmHelperIsReplacedAndTheLaunchStillRuns) {
  preparer prep(env_.options());
  auto session = prep.prepare(env_.request("killed"));
  ASSERT_TRUE(session) << session.error().message;
  const auto pid = wait_for_warm_helper(settings(), std::chrono::seconds(10));
  ASSERT_TRUE(pid);
  unique_fd pidfd(sys::pidfd_open(*pid, 0));
  ASSERT_TRUE(pidfd);
  ASSERT_EQ(::kill(*pid, SIGKILL), 0);
  ASSERT_TRUE(exits(pidfd.get()));
  const warm_helper_counts before = warm_helper_stats();
  launch_options o;
  o.argv = {"/bin/sh", "-c", "exit 3"};
  auto rec = launch_in(*session, o);
  ASSERT_TRUE(rec) << rec.error().message;
  EXPECT_EQ(rec->error, "");
  EXPECT_EQ(rec->exit_code, 3);
  const warm_helper_counts after = warm_helper_stats();
  EXPECT_EQ(after.replaced, before.replaced + 1);
  EXPECT_EQ(after.cold, before.cold + 1);  // the launch started its own
  EXPECT_EQ(after.warm, before.warm);
  const auto next = wait_for_warm_helper(settings(), std::chrono::seconds(10));
  ASSERT_TRUE(next) << "the dead helper was not replaced";
  EXPECT_NE(*next, *pid);
  // The replacement takes the next launch.
  o.argv = {"/bin/true"};
  rec = launch_in(*session, o);
  ASSERT_TRUE(rec) << rec.error().message;
  EXPECT_TRUE(rec->ok()) << rec->error;
  EXPECT_EQ(warm_helper_stats().warm, after.warm + 1);
}

// Launches `sleep 30` in a warm helper and requests a cancel after `delay` (none: before the
// launch starts); the run ends cancelled within seconds, and the launch was a warm one.
void expect_warm_launch_cancelled(prep_env& env, const std::string& name,
                                  std::optional<std::chrono::milliseconds> delay) {
  preparer prep(env.options());
  auto session = prep.prepare(env.request(name));
  ASSERT_TRUE(session) << session.error().message;
  ASSERT_TRUE(wait_for_warm_helper(settings(), std::chrono::seconds(10)));
  const warm_helper_counts before = warm_helper_stats();
  launch_options o;
  o.argv = {"/bin/sleep", "30"};
  cancel_token cancel;
  cancel.requested = !delay.has_value();
  std::thread stopper([&] {
    if (!delay) return;
    std::this_thread::sleep_for(*delay);
    cancel.requested = true;
  });
  const auto t0 = std::chrono::steady_clock::now();
  auto rec = launch_in(*session, o, &cancel);
  stopper.join();
  ASSERT_TRUE(rec) << rec.error().message;
  EXPECT_EQ(rec->outcome, outcome_kind::cancelled);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  EXPECT_EQ(warm_helper_stats().warm, before.warm + 1);
}

TEST_F(WarmHelper, ACancelReachesAWarmHelper) {
  expect_warm_launch_cancelled(env_, "cancelwarm", std::chrono::milliseconds(300));
}

// A cancel already requested when the launch starts reaches the warm helper too, though the
// first SIGTERM may come before the helper holds it (it ignores them while it waits): the
// launcher sends it again until the helper exits.
TEST_F(WarmHelper, ACancelRequestedAsTheLaunchStartsStillEndsIt) {
  expect_warm_launch_cancelled(env_, "cancelfirst", std::nullopt);
}

// Run as itself: a process keeps a warm helper ready. Run by NoWarmHelperOutlivesItsProcess
// (a fresh copy of this binary, so that no earlier test's pool is in it): it also reports the
// helper's pid on fd EVALBOX_TEST_REPORT_FD and exits when fd EVALBOX_TEST_WAIT_FD says so.
TEST_F(WarmHelper, AProcessKeepsAWarmHelperReady) {
  const auto pid = wait_for_warm_helper(settings(), std::chrono::seconds(10));
  ASSERT_TRUE(pid) << "no warm helper started";
  unique_fd pidfd(sys::pidfd_open(*pid, 0));
  ASSERT_TRUE(pidfd);
  pollfd pfd{pidfd.get(), POLLIN, 0};
  EXPECT_EQ(::poll(&pfd, 1, 100), 0) << "the warm helper exited while it waited";
  const char* report = std::getenv("EVALBOX_TEST_REPORT_FD");
  const char* wait = std::getenv("EVALBOX_TEST_WAIT_FD");
  if (report && wait) {
    const pid_t p = *pid;
    ASSERT_EQ(::write(std::atoi(report), &p, sizeof p), static_cast<ssize_t>(sizeof p));
    char c;
    (void)!::read(std::atoi(wait), &c, 1);
  }
}

TEST_F(WarmHelper, NoWarmHelperOutlivesItsProcess) {
  // A process that keeps a warm helper, then exits: the helper goes with it. The process is a
  // fresh copy of this binary running the test above, whatever ran before in this one.
  int to_parent[2], to_child[2];
  // Close-on-exec: a helper that this process's warm-pool thread starts meanwhile must not
  // inherit the write end the child waits on to see end of file (the child gets its ends
  // through dup2, which clears the flag).
  ASSERT_EQ(::pipe2(to_parent, O_CLOEXEC), 0);
  ASSERT_EQ(::pipe2(to_child, O_CLOEXEC), 0);
  const std::string report = fmt::format("EVALBOX_TEST_REPORT_FD={}", 100);
  const std::string wait = fmt::format("EVALBOX_TEST_WAIT_FD={}", 101);
  std::vector<char*> envp;
  for (char** e = environ; *e; ++e) envp.push_back(*e);
  envp.push_back(const_cast<char*>(report.c_str()));
  envp.push_back(const_cast<char*>(wait.c_str()));
  envp.push_back(nullptr);
  char filter[] = "--gtest_filter=WarmHelper.AProcessKeepsAWarmHelperReady";
  char self[] = "/proc/self/exe";
  char* argv[] = {self, filter, nullptr};
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (::dup2(to_parent[1], 100) < 0 || ::dup2(to_child[0], 101) < 0) ::_exit(126);
    ::execve(self, argv, envp.data());
    ::_exit(127);
  }
  ::close(to_parent[1]);
  ::close(to_child[0]);
  // Whatever fails below, the child is released and reaped rather than left waiting.
  struct release_child {
    int to_child, to_parent;
    pid_t pid;
    bool reaped = false;
    ~release_child() {
      if (!reaped) (void)!::write(to_child, "x", 1);  // what the child waits for
      ::close(to_child);
      ::close(to_parent);
      if (!reaped) ::waitpid(pid, nullptr, 0);
    }
  } release{to_child[1], to_parent[0], child};
  pid_t helper = -1;
  ASSERT_EQ(::read(to_parent[0], &helper, sizeof helper), static_cast<ssize_t>(sizeof helper))
      << "the child process reported no warm helper";
  ASSERT_GT(helper, 0);
  unique_fd pidfd(sys::pidfd_open(helper, 0));
  ASSERT_TRUE(pidfd);
  (void)!::write(to_child[1], "x", 1);
  int status = 0;
  const pid_t reaped = ::waitpid(child, &status, 0);
  release.reaped = reaped == child;
  ASSERT_EQ(reaped, child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child's test failed";
  EXPECT_TRUE(exits(pidfd.get())) << "the warm helper " << helper << " outlived its process";
  // It went at its launcher's end of file, removing what it made ahead.
  for (const auto& parent : cgroup::run_cgroup_parents(cgroups()))
    EXPECT_FALSE(std::filesystem::exists(parent / cgroup::ahead_cgroup_name(helper)))
        << parent << ": the helper's cgroups made ahead outlived it";
}

TEST_F(WarmHelper, AWarmHelperKeepsNoFdItInherited) {
  // A pipe made without close-on-exec, as some libraries make them, while a
  // warm helper starts: the helper inherits its write end, and must let go of it at once, or
  // the reader waits for end of file until that helper's launch comes, perhaps never.
  preparer prep(env_.options());
  auto session = prep.prepare(env_.request("fds"));
  ASSERT_TRUE(session) << session.error().message;
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  unique_fd read_end(p[0]);
  // This launch takes the helper waiting now (if any); the one started next is started after
  // the pipe, whatever ran before in this process.
  launch_options o;
  o.argv = {"/bin/true"};
  auto rec = launch_in(*session, o);
  ASSERT_TRUE(rec) << rec.error().message;
  ASSERT_TRUE(wait_for_warm_helper(settings(), std::chrono::seconds(10)))
      << "no warm helper started";
  ::close(p[1]);
  pollfd pfd{read_end.get(), POLLIN, 0};
  ASSERT_EQ(::poll(&pfd, 1, 10000), 1) << "the pipe's write end is still open in a warm helper";
  char c;
  EXPECT_EQ(::read(read_end.get(), &c, 1), 0);
}

// On cgroup v1 a waiting helper holds its launch's cgroups, made ahead, with the process that
// will clone pid 1 already inside (it moved itself in when it was made); the launch
// claims them under its own name, and nothing of the "@ahead-" name is left.
TEST_F(WarmHelper, OnCgroupV1AWaitingHelperHoldsItsCgroupsWithItsStarterInside) {
  namespace fs = std::filesystem;
  EVALBOX_REQUIRE_FEATURE(evalbox::testing::host().root && cgroup::ahead_applies(cgroups()),
                          "root and cgroup v1 (cgroups made ahead)");
  preparer prep(env_.options());
  auto session = prep.prepare(env_.request("ahead"));
  ASSERT_TRUE(session) << session.error().message;
  const auto pid = wait_for_warm_helper(settings(), std::chrono::seconds(10));
  ASSERT_TRUE(pid);
  const auto parents = cgroup::run_cgroup_parents(cgroups());
  ASSERT_FALSE(parents.empty());
  for (const auto& parent : parents) {
    const fs::path procs = parent / cgroup::ahead_cgroup_name(*pid) / "cgroup.procs";
    const std::string tasks = tasks_once_moved(procs);
    ASSERT_FALSE(tasks.empty()) << procs << ": no starter moved in";
    const pid_t starter = std::stoi(tasks);
    EXPECT_EQ(tasks, std::to_string(starter) + "\n") << "one task, the starter: " << tasks;
    const std::string status = read_file(fmt::format("/proc/{}/status", starter)).value_or("");
    EXPECT_NE(status.find(fmt::format("\nPPid:\t{}\n", *pid)), std::string::npos)
        << "the task in " << procs << " is not the helper's child:\n"
        << status;
  }
  launch_options o;
  o.argv = {"/bin/sh", "-c", "exit 4"};
  auto rec = launch_in(*session, o);
  ASSERT_TRUE(rec) << rec.error().message;
  EXPECT_EQ(rec->error, "");
  EXPECT_EQ(rec->exit_code, 4);
  EXPECT_EQ(rec->mechanisms["cgroup"], "v1");
  for (const auto& parent : parents) {
    EXPECT_FALSE(fs::exists(parent / cgroup::ahead_cgroup_name(*pid))) << parent;
    EXPECT_TRUE(cgroup::run_cgroups_in(parent, session->request().run_id).empty()) << parent;
  }
}

// A starter killed before its launch (from outside) is no use: the helper clones pid 1 itself
// and pid 1 moves itself into the run's cgroup at its release, as without cgroups made ahead.
TEST_F(WarmHelper, AStarterKilledBeforeItsLaunchLeavesPid1ToTheHelper) {
  namespace fs = std::filesystem;
  EVALBOX_REQUIRE_FEATURE(evalbox::testing::host().root && cgroup::ahead_applies(cgroups()),
                          "root and cgroup v1 (cgroups made ahead)");
  preparer prep(env_.options());
  auto req = env_.request("nostarter");
  req.limits.pids = 64;
  auto session = prep.prepare(req);
  ASSERT_TRUE(session) << session.error().message;
  const auto pid = wait_for_warm_helper(settings(), std::chrono::seconds(10));
  ASSERT_TRUE(pid);
  const fs::path procs =
      fs::path("/sys/fs/cgroup/pids/evalbox") / cgroup::ahead_cgroup_name(*pid) / "cgroup.procs";
  const std::string tasks = tasks_once_moved(procs);
  ASSERT_FALSE(tasks.empty()) << procs;
  const pid_t starter = std::stoi(tasks);
  unique_fd starter_fd(sys::pidfd_open(starter, 0));
  ASSERT_TRUE(starter_fd);
  ASSERT_EQ(::kill(starter, SIGKILL), 0);
  ASSERT_TRUE(exits(starter_fd.get()));
  launch_options o;
  o.argv = {"/bin/sleep", "1"};
  std::string seen;  // the tasks of the run's pids cgroup, seen while it runs
  std::thread watcher([&] {
    for (int i = 0; i < 300 && seen.empty(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      for (const auto& dir : cgroup::run_cgroups_in("/sys/fs/cgroup/pids/evalbox", req.run_id))
        seen = read_file(dir / "cgroup.procs").value_or("");
    }
  });
  auto rec = launch_in(*session, o);
  watcher.join();
  ASSERT_TRUE(rec) << rec.error().message;
  EXPECT_EQ(rec->error, "");
  EXPECT_EQ(rec->outcome, outcome_kind::exited);
  EXPECT_EQ(rec->exit_code, 0);
  EXPECT_FALSE(seen.empty()) << "no task of the run was seen in its pids cgroup";
  EXPECT_FALSE(fs::exists(procs.parent_path()));
  EXPECT_TRUE(cgroup::run_cgroups_in("/sys/fs/cgroup/pids/evalbox", req.run_id).empty());
}

// A helper killed while it waited leaves its "@ahead-" cgroups; the next helper removes them.
TEST_F(WarmHelper, CgroupsMadeAheadByAKilledHelperAreRemovedByTheNextOne) {
  namespace fs = std::filesystem;
  EVALBOX_REQUIRE_FEATURE(evalbox::testing::host().root && cgroup::ahead_applies(cgroups()),
                          "root and cgroup v1 (cgroups made ahead)");
  const auto pid = wait_for_warm_helper(settings(), std::chrono::seconds(10));
  ASSERT_TRUE(pid);
  unique_fd pidfd(sys::pidfd_open(*pid, 0));
  ASSERT_TRUE(pidfd);
  const auto parents = cgroup::run_cgroup_parents(cgroups());
  // Its cgroups exist once it made them (before it is told to move its starter in).
  for (const auto& parent : parents)
    ASSERT_TRUE(eventually([&] { return fs::exists(parent / cgroup::ahead_cgroup_name(*pid)); }))
        << parent;
  ASSERT_EQ(::kill(*pid, SIGKILL), 0);
  ASSERT_TRUE(exits(pidfd.get()));
  // Its starter dies with it (parent-death signal); the directories stay, empty.
  for (const auto& parent : parents) {
    const fs::path procs = parent / cgroup::ahead_cgroup_name(*pid) / "cgroup.procs";
    std::string tasks;
    eventually([&] { return (tasks = read_file(procs).value_or("")).empty(); });
    EXPECT_EQ(tasks, "") << procs;
  }
  // The pool starts the next helper, which removes them while it makes its own.
  const auto next = wait_for_warm_helper(settings(), std::chrono::seconds(10));
  ASSERT_TRUE(next);
  EXPECT_NE(*next, *pid);
  for (const auto& parent : parents)
    EXPECT_TRUE(eventually([&] { return !fs::exists(parent / cgroup::ahead_cgroup_name(*pid)); }))
        << parent << ": the killed helper's cgroups made ahead were left";
}

// A Ctrl-C reaches the whole process group, warm helpers too: a waiting helper holds SIGINT,
// SIGTERM and SIGHUP (its launcher's end of file is what ends it, after it removed what it made
// ahead), and the next launch still runs in it.
TEST_F(WarmHelper, AWaitingHelperOutlastsSigintSigtermAndSighup) {
  preparer prep(env_.options());
  auto session = prep.prepare(env_.request("signals"));
  ASSERT_TRUE(session) << session.error().message;
  const auto pid = wait_for_warm_helper(settings(), std::chrono::seconds(10));
  ASSERT_TRUE(pid);
  unique_fd pidfd(sys::pidfd_open(*pid, 0));
  ASSERT_TRUE(pidfd);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) ASSERT_EQ(::kill(*pid, sig), 0);
  pollfd gone{pidfd.get(), POLLIN, 0};
  EXPECT_EQ(::poll(&gone, 1, 200), 0) << "a signal ended the waiting helper";
  const warm_helper_counts before = warm_helper_stats();
  launch_options o;
  o.argv = {"/bin/sh", "-c", "exit 5"};
  auto rec = launch_in(*session, o);
  ASSERT_TRUE(rec) << rec.error().message;
  EXPECT_EQ(rec->error, "");
  EXPECT_EQ(rec->exit_code, 5);
  EXPECT_EQ(warm_helper_stats().warm, before.warm + 1) << "the launch did not find it warm";
}

TEST_F(WarmHelper, WarmAndColdLaunchesRecordTheSameMechanisms) {
  // The same request, once in a session whose settings keep every launch cold
  // (EVALBOX_WARM_HELPER=0), then in one that takes the warm helper.
  auto cold_options = env_.options();
  cold_options.launch.warm_helper = false;
  preparer cold_prep(cold_options);
  preparer prep(env_.options());
  auto req = env_.request("same");
  req.secrets = {{"codex", env_.creds / "auth.json", ".codex/auth.json"}};
  launch_options o;
  o.argv = {"/bin/sh", "-c", "test -f /home/agent/.codex/auth.json && exit 5"};
  auto cold_session = cold_prep.prepare(req);
  ASSERT_TRUE(cold_session) << cold_session.error().message;
  EXPECT_FALSE(wait_for_warm_helper(cold_options.launch, std::chrono::milliseconds(0)));
  warm_helper_counts before = warm_helper_stats();
  auto cold = launch_in(*cold_session, o);
  ASSERT_TRUE(cold) << cold.error().message;
  EXPECT_EQ(warm_helper_stats().cold, before.cold + 1);
  ASSERT_TRUE(cold_session->close());  // the credential lease is exclusive
  auto session = prep.prepare(req);
  ASSERT_TRUE(session) << session.error().message;
  ASSERT_TRUE(wait_for_warm_helper(settings(), std::chrono::seconds(10)));
  before = warm_helper_stats();
  auto warm = launch_in(*session, o);
  ASSERT_TRUE(warm) << warm.error().message;
  EXPECT_EQ(warm_helper_stats().warm, before.warm + 1);
  EXPECT_EQ(cold->exit_code, 5);
  EXPECT_EQ(warm->exit_code, 5);
  EXPECT_EQ(warm->outcome, cold->outcome);
  EXPECT_EQ(warm->error, cold->error);
  EXPECT_EQ(warm->mechanisms, cold->mechanisms);
  EXPECT_EQ(warm->binding_digest, cold->binding_digest);
}

// The namespaces a warm helper makes ahead (sandbox/helper/ahead.h): the nsfs link of each of
// `kind` ("user", "net") of process `pid`, e.g. "user:[4026532281]"; empty when it is gone.
std::string ns_of(pid_t pid, const char* kind) {
  std::error_code ec;
  const auto link =
      std::filesystem::read_symlink("/proc/" + std::to_string(pid) + "/ns/" + kind, ec);
  return ec ? "" : link.string();
}

// The holder a waiting warm helper made (its one child in a user namespace other than ours),
// waited for up to 5 s: the helper makes it after its start.
std::optional<pid_t> holder_of(pid_t helper) {
  const std::string ours = ns_of(::getpid(), "user");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < deadline) {
    for (const auto& e : std::filesystem::directory_iterator("/proc")) {
      const std::string name = e.path().filename();
      if (name.find_first_not_of("0123456789") != std::string::npos) continue;
      const std::string stat = read_file(e.path() / "stat").value_or("");
      const auto close = stat.rfind(')');
      if (close == std::string::npos) continue;
      int ppid = 0;
      char state = 0;
      if (std::sscanf(stat.c_str() + close + 1, " %c %d", &state, &ppid) != 2) continue;
      const pid_t pid = std::stoi(name);
      if (ppid == helper && !ns_of(pid, "user").empty() && ns_of(pid, "user") != ours) return pid;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return std::nullopt;
}

TEST_F(WarmHelper, ARunLivesInTheNamespacesItsHelperMadeAheadAndNoOtherRunDoes) {
  preparer prep(env_.options());
  auto session = prep.prepare(env_.request("ahead"));
  ASSERT_TRUE(session) << session.error().message;
  temp_dir out("evalbox-launch-out");
  launch_options o;
  o.argv = {"/bin/sh", "-c", "readlink /proc/self/ns/user /proc/self/ns/net"};
  o.stdout_path = out.path() / "stdout";
  std::vector<std::string> seen;
  for (int round = 0; round < 2; ++round) {
    const auto helper = wait_for_warm_helper(settings(), std::chrono::seconds(10));
    ASSERT_TRUE(helper);
    const auto holder = holder_of(*helper);
    ASSERT_TRUE(holder) << "warm helper " << *helper << " made no namespaces ahead";
    unique_fd holder_fd(sys::pidfd_open(*holder, 0));
    ASSERT_TRUE(holder_fd);
    const std::string user = ns_of(*holder, "user"), net = ns_of(*holder, "net");
    EXPECT_NE(net, ns_of(::getpid(), "net"));
    auto rec = launch_in(*session, o);
    ASSERT_TRUE(rec) << rec.error().message;
    EXPECT_TRUE(rec->ok()) << rec->error;
    // The run joined exactly the pair made for it...
    EXPECT_EQ(read_file(out.path() / "stdout").value_or(""), user + "\n" + net + "\n");
    // ...and the holder is gone: nothing outside the run is left in its namespaces.
    EXPECT_TRUE(exits(holder_fd.get())) << "the holder " << *holder << " outlived the launch";
    seen.push_back(user);
  }
  // Each warm helper made its own pair (the first is still referenced by nothing, but the
  // second was made while the first run lived, so the kernel cannot have reused its number).
  EXPECT_NE(seen[0], seen[1]);
}

TEST_F(WarmHelper, ARunWithTheHostNetworkJoinsOnlyTheUserNamespaceMadeAhead) {
  preparer prep(env_.options());
  auto session = prep.prepare(env_.request("aheadhost"));
  ASSERT_TRUE(session) << session.error().message;
  const auto helper = wait_for_warm_helper(settings(), std::chrono::seconds(10));
  ASSERT_TRUE(helper);
  const auto holder = holder_of(*helper);
  ASSERT_TRUE(holder);
  const std::string user = ns_of(*holder, "user");
  temp_dir out("evalbox-launch-out");
  launch_options o;
  o.argv = {"/bin/sh", "-c", "readlink /proc/self/ns/user /proc/self/ns/net"};
  o.stdout_path = out.path() / "stdout";
  network_policy n;
  n.mode = network_mode::host;
  n.unsafe_host_network = true;
  o.network_override = n;
  auto rec = launch_in(*session, o);
  ASSERT_TRUE(rec) << rec.error().message;
  EXPECT_TRUE(rec->ok()) << rec->error;
  EXPECT_EQ(read_file(out.path() / "stdout").value_or(""),
            user + "\n" + ns_of(::getpid(), "net") + "\n");
}

TEST_F(WarmHelper, AHolderKilledBeforeItsLaunchLeavesTheNamespacesToClone3) {
  preparer prep(env_.options());
  auto session = prep.prepare(env_.request("aheadkilled"));
  ASSERT_TRUE(session) << session.error().message;
  const auto helper = wait_for_warm_helper(settings(), std::chrono::seconds(10));
  ASSERT_TRUE(helper);
  const auto holder = holder_of(*helper);
  ASSERT_TRUE(holder);
  unique_fd holder_fd(sys::pidfd_open(*holder, 0));
  ASSERT_TRUE(holder_fd);
  ASSERT_EQ(::kill(*holder, SIGKILL), 0);
  ASSERT_TRUE(exits(holder_fd.get()));
  const warm_helper_counts before = warm_helper_stats();
  temp_dir out("evalbox-launch-out");
  launch_options o;
  o.argv = {"/bin/sh", "-c", "readlink /proc/self/ns/user /proc/self/ns/net"};
  o.stdout_path = out.path() / "stdout";
  auto rec = launch_in(*session, o);
  ASSERT_TRUE(rec) << rec.error().message;
  EXPECT_TRUE(rec->ok()) << rec->error;
  EXPECT_EQ(warm_helper_stats().warm, before.warm + 1);
  const std::string got = read_file(out.path() / "stdout").value_or("");
  EXPECT_EQ(got.find(ns_of(::getpid(), "user")), std::string::npos) << got;
  EXPECT_EQ(got.find(ns_of(::getpid(), "net")), std::string::npos) << got;
  EXPECT_NE(got.find("user:["), std::string::npos) << got;
}

TEST_F(WarmHelper, ALaunchThatInheritsStdioStartsItsOwn) {
  preparer prep(env_.options());
  auto session = prep.prepare(env_.request("inherit"));
  ASSERT_TRUE(session) << session.error().message;
  const auto pid = wait_for_warm_helper(settings(), std::chrono::seconds(10));
  ASSERT_TRUE(pid);
  const warm_helper_counts before = warm_helper_stats();
  launch_options o;
  o.argv = {"/bin/true"};
  o.inherit_stdio = true;
  auto rec = launch_in(*session, o);
  ASSERT_TRUE(rec) << rec.error().message;
  EXPECT_TRUE(rec->ok()) << rec->error;
  EXPECT_EQ(warm_helper_stats().cold, before.cold + 1);
  EXPECT_EQ(wait_for_warm_helper(settings(), std::chrono::seconds(1)), pid)
      << "the warm helper was used";
}

}  // namespace
}  // namespace evalbox::sandbox
