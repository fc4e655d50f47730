// Escape tests: one hostile action per test, run in a real prepared session. Each asserts
// containment, the outcome the record reports, and no residue once the session is closed (no
// mount, cgroup, run file or process of the run left). Nothing here may skip under
// EVALBOX_REQUIRE_ISOLATION=1, and no test sends traffic to any address but loopback.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "sandbox/base/fs.h"
#include "sandbox/base/unique_fd.h"
#include "sandbox/launch/launcher.h"
#include "tests/support/isolation.h"
#include "tests/support/prep_env.h"

namespace evalbox::sandbox {
namespace {

namespace fs = std::filesystem;
using evalbox::testing::prep_env;

const fs::path tools_dir = fs::path(EVALBOX_BINARY_DIR) / "tests" / "escape";
const std::string hostile = "/evalbox/tools/evalbox-hostile";

bool mounted_below(const fs::path& dir) {
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.find(" " + dir.string()) != std::string::npos) return true;
  }
  return false;
}

class Escape : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto& h = evalbox::testing::host();
    EVALBOX_REQUIRE_FEATURE(h.user_namespaces && h.mount_namespaces && h.pid_namespaces &&
                                h.net_namespaces && h.seccomp_filter,
                            "user, mount, pid, net namespaces and seccomp");
    EVALBOX_REQUIRE_FEATURE(!h.cgroup_v1_controllers.empty() || !h.cgroup_v2_controllers.empty(),
                            "a writable cgroup hierarchy (memory, pids)");
    protected_dir_ = env_.root / "protected";
    ASSERT_TRUE(make_dirs(protected_dir_, 0755));
    ASSERT_TRUE(write_file(protected_dir_ / "secret.txt", "protected secret\n", 0644));
    auto req = env_.request("escape");
    req.protected_roots = {protected_dir_};
    req.secrets = {{"codex", env_.creds / "auth.json", ".codex/auth.json"}};
    req.limits.wall_ms = 20000;
    req.limits.memory_bytes = 256ull << 20;
    req.limits.pids = 128;
    req.limits.output_bytes = 1 << 20;
    prep_.emplace(env_.options());
    auto s = prep_->prepare(req);
    ASSERT_TRUE(s) << s.error().message;
    session_.emplace(std::move(*s));
    run_id_ = req.run_id;
    run_dir_ = session_->run_dir();
  }

  void TearDown() override {
    if (!session_) return;
    ASSERT_TRUE(session_->close());
    // No residue: no mount, no run files, no cgroup (and so no process) of the run.
    EXPECT_FALSE(fs::exists(run_dir_)) << run_dir_;
    EXPECT_FALSE(mounted_below(run_dir_));
    for (const char* ctl : {"memory", "pids", "cpu", "cpuacct", "unified"}) {
      EXPECT_FALSE(fs::exists(fs::path("/sys/fs/cgroup") / ctl / "evalbox" / run_id_)) << ctl;
    }
  }

  run_record run(std::vector<std::string> argv,
                 const std::function<void(resource_limits&)>& f = {}) {
    launch_options o;
    o.label = "escape";
    o.argv = std::move(argv);
    o.extra_mounts.push_back({tools_dir, "/evalbox/tools", false, false});
    o.stdout_path = out_.path() / "stdout";
    resource_limits lim = session_->request().limits;
    if (f) f(lim);
    o.limits_override = lim;
    auto r = launch(*session_, o);
    EXPECT_TRUE(r) << r.error().message;
    if (!r) return {};
    EXPECT_EQ(r->error, "") << output();
    return *r;
  }
  std::string output() const { return read_file(out_.path() / "stdout").value_or(""); }

  prep_env env_;
  temp_dir out_{"evalbox-escape-out"};
  fs::path protected_dir_;
  std::optional<preparer> prep_;
  std::optional<prepared_session> session_;
  std::string run_id_;
  fs::path run_dir_;
};

TEST_F(Escape, CannotReadAProtectedRootByAbsolutePath) {
  auto r = run({hostile, "read", (protected_dir_ / "secret.txt").string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(output(), "refused " + (protected_dir_ / "secret.txt").string() + ": ENOENT\n");
}

TEST_F(Escape, CannotReadTheHostHomeOrStateRoot) {
  auto r = run({"/bin/sh", "-c",
                fmt::format("ls /root {0} {1} 2>/dev/null; echo rc=$?", env_.state.string(),
                            env_.root.string())});
  EXPECT_EQ(output(), "rc=2\n");
}

TEST_F(Escape, CannotReadAnotherRunsWorkspace) {
  auto other = prep_->prepare(env_.request("escape-other"));
  ASSERT_TRUE(other) << other.error().message;
  const std::string path = (other->workspace_dir() / "README.md").string();
  ASSERT_TRUE(fs::exists(path));
  auto r = run({hostile, "read", path});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(output(), "refused " + path + ": ENOENT\n");
  ASSERT_TRUE(other->close());
}

TEST_F(Escape, CannotReadAProtectedRootThroughAWorkspaceSymlink) {
  const fs::path link = session_->workspace_dir() / "planted";
  ASSERT_EQ(::symlink((protected_dir_ / "secret.txt").c_str(), link.c_str()), 0);
  auto r = run({hostile, "read", "/workspace/planted"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(output(), "refused /workspace/planted: ENOENT\n");
}

TEST_F(Escape, CannotReadAProtectedRootViaDotdot) {
  const std::string path = "/workspace/../../../.." + (protected_dir_ / "secret.txt").string();
  auto r = run({hostile, "read", path});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(output(), "refused " + path + ": ENOENT\n");
}

TEST_F(Escape, CannotReadAProtectedRootViaProc1Root) {
  const std::string path = "/proc/1/root" + (protected_dir_ / "secret.txt").string();
  auto r = run({hostile, "read", path});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(output().find("refused"), std::string::npos) << output();
}

TEST_F(Escape, HoldsNoFdButStdioToReachTheHostViaProcSelfFd) {
  auto r = run({hostile, "fds"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(output(), "fds 0 1 2\n");
}

TEST_F(Escape, CannotReadTheCredentialSourceButSeesItsLease) {
  auto r = run({"/bin/sh", "-c",
                fmt::format("{0} read {1}; {0} read /home/agent/.codex/auth.json", hostile,
                            (env_.creds / "auth.json").string())});
  EXPECT_EQ(output(), fmt::format("refused {}: ENOENT\nok /home/agent/.codex/auth.json\n",
                                  (env_.creds / "auth.json").string()));
}

TEST_F(Escape, WritesOnlyUnderWorkspaceHomeAndTmp) {
  auto r = run({"/bin/sh", "-c",
                fmt::format("for p in /evil /etc/evil /usr/evil /bin/evil /dev/evil "
                            "/proc/evil /evalbox/tools/evil /workspace/ok /home/agent/ok "
                            "/tmp/ok /dev/shm/ok; do {} write $p; done",
                            hostile)});
  EXPECT_EQ(output(),
            "refused /evil: EROFS\nrefused /etc/evil: EROFS\nrefused /usr/evil: EROFS\n"
            "refused /bin/evil: EROFS\nrefused /dev/evil: EACCES\nrefused /proc/evil: ENOENT\n"
            "refused /evalbox/tools/evil: EROFS\nok /workspace/ok\nok /home/agent/ok\nok /tmp/ok\n"
            "ok /dev/shm/ok\n");
  EXPECT_FALSE(fs::exists("/evil"));
  EXPECT_FALSE(fs::exists(tools_dir / "evil"));
}

TEST_F(Escape, AForkBombHitsThePidsLimit) {
  auto r = run({"/bin/bash", "-c", "ulimit -u 400 && exec " + hostile + " fork-bomb 300"},
               [](resource_limits& l) { l.pids = 64; });
  EXPECT_EQ(r.outcome, outcome_kind::exited);
  EXPECT_TRUE(r.pids_limit_hit);
  int forked = -1, refused = -1;
  ASSERT_EQ(std::sscanf(output().c_str(), "forked %d refused %d", &forked, &refused), 2)
      << output();
  EXPECT_LT(forked, 64);
  EXPECT_GT(refused, 200);
}

TEST_F(Escape, AMemoryHogIsOomKilled) {
  auto r =
      run({hostile, "memory-hog", "256"}, [](resource_limits& l) { l.memory_bytes = 64ull << 20; });
  EXPECT_EQ(r.outcome, outcome_kind::oom_killed) << output();
  EXPECT_EQ(output(), "");
  EXPECT_LE(r.peak_memory_bytes, 64ull << 20);
  EXPECT_GT(r.peak_memory_bytes, 32ull << 20);
}

TEST_F(Escape, AnOutputFloodHitsTheOutputLimit) {
  auto r = run({"/usr/bin/yes"}, [](resource_limits& l) { l.output_bytes = 64 << 10; });
  EXPECT_EQ(r.outcome, outcome_kind::output_limit);
  EXPECT_TRUE(r.output_truncated);
  const std::string out = output();
  EXPECT_EQ(out.substr(0, 6), "y\ny\ny\n");
  EXPECT_TRUE(
      out.ends_with("[evalbox: output truncated: the run passed its limit of 65536 bytes]\n"));
  EXPECT_LT(out.size(), (64u << 10) + 200);
}

TEST_F(Escape, SleepingPastTheWallLimitTimesOut) {
  auto r = run({"/bin/sleep", "30"}, [](resource_limits& l) { l.wall_ms = 500; });
  EXPECT_EQ(r.outcome, outcome_kind::timed_out);
  EXPECT_LT(r.wall_ms, 5000u);
}

TEST_F(Escape, ADaemonDiesWithTheMainProcess) {
  auto r = run({"/bin/sh", "-c",
                "(trap '' HUP; sleep 1; touch /workspace/daemon-was-here) </dev/null "
                ">/dev/null 2>&1 & echo started"});
  EXPECT_EQ(r.outcome, outcome_kind::exited);
  EXPECT_EQ(output(), "started\n");
  std::this_thread::sleep_for(std::chrono::milliseconds(1800));
  EXPECT_FALSE(fs::exists(session_->workspace_dir() / "daemon-was-here"));
}

TEST_F(Escape, CannotConnectToAHostLoopbackPortAndSeesOnlyLo) {
  unique_fd listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
  ASSERT_EQ(::listen(listener.get(), 4), 0);
  socklen_t len = sizeof sa;
  ::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&sa), &len);
  auto r =
      run({"/bin/sh", "-c",
           fmt::format("{0} connect 127.0.0.1 {1}; {0} interfaces", hostile, ntohs(sa.sin_port))});
  EXPECT_EQ(output(), "refused connect: ECONNREFUSED\ninterfaces lo\n");
  EXPECT_LT(::accept(listener.get(), nullptr, nullptr), 0);  // nobody came through
  EXPECT_EQ(r.mechanisms["network"], "none");
}

TEST_F(Escape, CannotPtraceAHostProcess) {
  pid_t victim = ::fork();
  if (victim == 0) {
    ::execl("/bin/sleep", "sleep", "30", nullptr);
    ::_exit(127);
  }
  auto r = run({hostile, "ptrace", std::to_string(victim)});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(output().find("refused ptrace"), std::string::npos) << output();
  auto status = read_file(fmt::format("/proc/{}/status", victim)).value_or("");
  EXPECT_NE(status.find("TracerPid:\t0\n"), std::string::npos);
  ::kill(victim, SIGKILL);
  ::waitpid(victim, nullptr, 0);
}

TEST_F(Escape, CannotMountOverUsrOrRemountItWritable) {
  auto r = run(
      {"/bin/sh", "-c", fmt::format("{0} mount-usr; {0} remount-usr-rw; {0} write-usr", hostile)});
  EXPECT_EQ(output(),
            "refused mount tmpfs on /usr: EPERM\nrefused remount /usr rw: EPERM\n"
            "refused /usr/evalbox-escape: EROFS\n");
  EXPECT_FALSE(fs::exists("/usr/evalbox-escape"));
}

TEST_F(Escape, AMountInANestedNamespaceDoesNotReachTheHost) {
  launch_options o;
  auto r = run({"/usr/bin/unshare", "-Urm", "/bin/sh", "-c",
                "mount -t tmpfs x /usr && touch /usr/nested && echo mounted"});
  // Landlock is on for this session: the nested mount is refused; either way the host's
  // /usr is untouched.
  EXPECT_FALSE(fs::exists("/usr/nested"));
  EXPECT_FALSE(mounted_below("/usr"));
}

TEST_F(Escape, KexecLoadIsRefused) {
  auto r = run({hostile, "kexec"});
  EXPECT_EQ(output(), "refused kexec_load: EPERM\n");
}

TEST_F(Escape, ModuleLoadingIsRefused) {
  auto r = run({"/bin/sh", "-c", fmt::format("{0} init-module; {0} finit-module", hostile)});
  EXPECT_EQ(output(), "refused init_module: EPERM\nrefused finit_module: EPERM\n");
}

TEST_F(Escape, ASetuidRootBinaryGrantsNothing) {
  // A copy of the hostile tool, setuid and owned by the host's root, planted in the workspace.
  const fs::path planted = session_->workspace_dir() / "suid-tool";
  fs::copy_file(tools_dir / "evalbox-hostile", planted);
  ASSERT_EQ(::chown(planted.c_str(), 0, 0), 0);
  ASSERT_EQ(::chmod(planted.c_str(), 04755), 0);
  auto r = run({"/workspace/suid-tool", "whoami"});
  EXPECT_EQ(output(), "euid 0 capeff 0000000000000000\n");
}

TEST_F(Escape, ASymlinkPlantedAtALeaseTargetRedirectsNoMountToTheHost) {
  // An earlier launch replaced the lease's directory in the home with a link to a host dir.
  temp_dir host_dir("evalbox-escape-target");
  const fs::path codex = session_->home_dir() / ".codex";
  std::error_code ec;
  fs::remove_all(codex, ec);
  ASSERT_EQ(::symlink(host_dir.path().c_str(), codex.c_str()), 0);
  launch_options o;
  o.argv = {"/bin/true"};
  auto r = launch(*session_, o);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->error_step, "create /home/agent/.codex/auth.json");
  EXPECT_NE(r->error.find("ELOOP"), std::string::npos) << r->error;
  EXPECT_TRUE(fs::is_empty(host_dir.path()));
  fs::remove(codex, ec);  // let the session's teardown find its home as it made it
}

}  // namespace
}  // namespace evalbox::sandbox
