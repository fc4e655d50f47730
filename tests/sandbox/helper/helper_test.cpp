// The helper run by hand-written plans over temp directories: outcomes, limits, errors that
// name their step, cancellation, nested namespaces, and the network relay and proxy.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "base/unique_fd.h"
#include "sandbox/cgroup/cgroup.h"
#include "tests/support/helper_env.h"
#include "tests/support/isolation.h"

namespace evalbox::sandbox {
namespace {

using evalbox::testing::helper_env;

class Helper : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto& h = evalbox::testing::host();
    EVALBOX_REQUIRE_FEATURE(
        h.user_namespaces && h.mount_namespaces && h.pid_namespaces && h.net_namespaces,
        "user, mount, pid and net namespaces");
  }
  helper_env env_;
};

TEST_F(Helper, ReportsTheExitCodeAndCapturesMergedOutputInOrder) {
  auto r = env_.run({"/bin/sh", "-c", "echo one; echo two >&2; echo three; exit 3"});
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.outcome, outcome_kind::exited);
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(env_.output(), "one\ntwo\nthree\n");
  EXPECT_EQ(r.output_bytes, 14u);
}

TEST_F(Helper, KeepsStderrApartWhenAsked) {
  env_.plan.stderr_path = (env_.dir() / "out" / "stderr").string();
  auto r = env_.run({"/bin/sh", "-c", "echo out; echo err >&2"});
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(env_.output(), "out\n");
  EXPECT_EQ(read_file(env_.plan.stderr_path).value_or(""), "err\n");
}

TEST_F(Helper, RunsAsRootOfItsNamespaceWithoutCapabilities) {
  auto r = env_.run({"/bin/sh", "-c",
                     "id -u; grep -E '^Cap(Eff|Prm|Bnd|Amb)' /proc/self/status; "
                     "grep NoNewPrivs /proc/self/status; hostname"});
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(env_.output(),
            "0\nCapPrm:\t0000000000000000\nCapEff:\t0000000000000000\n"
            "CapBnd:\t0000000000000000\nCapAmb:\t0000000000000000\nNoNewPrivs:\t1\nevalbox\n");
  EXPECT_EQ(r.mechanisms["capabilities"], "none");
  EXPECT_EQ(r.mechanisms["seccomp_digest"].get<std::string>().size(), 64u);
}

TEST_F(Helper, RecordsEachLimitWithItsMechanism) {
  EVALBOX_REQUIRE_FEATURE(evalbox::testing::host().root, "root (a writable cgroup)");
  auto r = env_.run({"/bin/true"});
  ASSERT_EQ(r.error, "");
  const json& lim = r.mechanisms["limits"];
  const std::string cg = "cgroup " + r.mechanisms["cgroup"].get<std::string>();
  EXPECT_EQ(lim["memory_bytes"]["value"], env_.plan.limits.memory_bytes);
  EXPECT_EQ(lim["memory_bytes"]["by"], json::array({cg}));
  EXPECT_EQ(lim["pids"]["by"], json::array({cg}));
  EXPECT_EQ(lim["cpu_ms"]["by"], json::array({cg + " accounting", "RLIMIT_CPU"}));
  EXPECT_EQ(lim["output_bytes"]["by"], json::array({"helper"}));
}

TEST_F(Helper, AFailedSetupStepIsAnErrorNamingTheStep) {
  env_.plan.cwd = "/no/such/dir";
  auto r = env_.run({"/bin/true"});
  EXPECT_EQ(r.error_step, "chdir /no/such/dir");
  EXPECT_EQ(r.error, "step chdir /no/such/dir: ENOENT: No such file or directory");
}

TEST_F(Helper, AMissingProgramIsAnErrorAtExecve) {
  auto r = env_.run({"/usr/bin/no-such-program"});
  EXPECT_EQ(r.error_step, "execve");
  EXPECT_NE(r.error.find("ENOENT"), std::string::npos);
}

TEST_F(Helper, AMissingMountSourceIsAnErrorNamingTheSource) {
  env_.plan.mounts.push_back({env_.dir() / "absent", "/evalbox/absent", false, false});
  auto r = env_.run({"/bin/true"});
  EXPECT_EQ(r.error_step, "open " + (env_.dir() / "absent").string());
  EXPECT_NE(r.error.find("ENOENT"), std::string::npos);
}

TEST_F(Helper, MountsATargetBelowASystemSymlinkAtItsDestination) {
  struct stat st {};
  EVALBOX_REQUIRE_FEATURE(::lstat("/lib", &st) == 0 && S_ISLNK(st.st_mode),
                          "a merged-/usr host (/lib is a symlink)");
  const std::filesystem::path tool = env_.dir() / "tool";
  ASSERT_TRUE(make_dirs(tool, 0755));
  ASSERT_TRUE(write_file(tool / "marker", "tool\n"));
  // Read-only paths are mounted at their own (existing) host path.
  EVALBOX_REQUIRE_FEATURE(std::filesystem::exists("/lib/os-release"), "/lib/os-release");
  env_.plan.mounts.push_back({tool / "marker", "/lib/os-release", false, true});
  auto r = env_.run({"/bin/cat", "/lib/os-release"});
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(env_.output(), "tool\n");
}

TEST_F(Helper, AReadOnlyPathBelowTmpIsVisibleInThePrivateTmp) {
  const std::filesystem::path tool = env_.dir() / "tool";
  ASSERT_TRUE(make_dirs(tool, 0755));
  ASSERT_TRUE(write_file(tool / "marker", "tool\n"));
  env_.plan.mounts.push_back({tool, "/tmp/evalbox-agent/bin", false, false});
  auto r =
      env_.run({"/bin/sh", "-c", "cat /tmp/evalbox-agent/bin/marker; touch /tmp/ok && echo rw"});
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(env_.output(), "tool\nrw\n");
}

TEST_F(Helper, OutputPastTheCapIsTruncatedWithAMarkerAndKilled) {
  env_.plan.limits.output_bytes = 1000;
  auto r = env_.run({"/bin/sh", "-c", "while :; do echo xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx; done"});
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.outcome, outcome_kind::output_limit);
  EXPECT_TRUE(r.output_truncated);
  const std::string out = env_.output();
  EXPECT_EQ(out.substr(0, 1000), std::string(out.substr(0, 1000)));
  EXPECT_NE(out.find("[evalbox: output truncated: the run passed its limit of 1000 bytes]"),
            std::string::npos);
  EXPECT_LT(out.size(), 1200u);
}

TEST_F(Helper, TheWallLimitKillsTheRun) {
  env_.plan.limits.wall_ms = 300;
  auto r = env_.run({"/bin/sleep", "30"});
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.outcome, outcome_kind::timed_out);
  EXPECT_GE(r.wall_ms, 300u);
  EXPECT_LT(r.wall_ms, 5000u);
}

TEST_F(Helper, TheCpuLimitKillsABusyLoop) {
  env_.plan.limits.cpu_ms = 300;
  auto r = env_.run({"/bin/sh", "-c", "while :; do :; done"});
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.outcome, outcome_kind::cpu_limit);
  EXPECT_GE(r.cpu_ms, 300u);
}

TEST_F(Helper, SigtermToTheHelperCancelsTheRun) {
  auto r = env_.run({"/bin/sleep", "30"}, [](pid_t helper) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    ::kill(helper, SIGTERM);
  });
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.outcome, outcome_kind::cancelled);
  EXPECT_LT(r.wall_ms, 5000u);
}

TEST_F(Helper, AKilledHelperTakesItsRunWithIt) {
  EVALBOX_REQUIRE_FEATURE(evalbox::testing::host().root, "root (a cgroup to watch the run in)");
  const auto leaf = std::filesystem::path("/sys/fs/cgroup/pids/evalbox") /
                    cgroup::launch_cgroup_name(env_.plan.run_id, "agent-0");
  std::string before, after;
  env_.run({"/bin/sleep", "30"}, [&](pid_t helper) {
    for (int i = 0; i < 100 && before.empty(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      before = read_file(leaf / "cgroup.procs").value_or("");
    }
    ::kill(helper, SIGKILL);
    // Pid 1 has PR_SET_PDEATHSIG(SIGKILL): the whole pid namespace dies with the helper.
    for (int i = 0; i < 100; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      after = read_file(leaf / "cgroup.procs").value_or("?");
      if (after.empty()) break;
    }
  });
  EXPECT_FALSE(before.empty());
  EXPECT_EQ(after, "");
  // What the killed helper could not remove is the preparer's reclaim's job; here, the test's.
  for (const char* ctl : {"memory", "pids", "cpu", "cpuacct"})
    for (const auto& dir : cgroup::run_cgroups_in(
             std::filesystem::path("/sys/fs/cgroup") / ctl / "evalbox", env_.plan.run_id))
      ::rmdir(dir.c_str());
}

// Processes whose command line names `needle` (the helper, and pid 1 of its run: a clone of
// it that has not exec'ed).
std::vector<pid_t> processes_naming(const std::string& needle) {
  std::vector<pid_t> out;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmdline = read_file(e.path() / "cmdline").value_or("");
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    if (cmdline.find(needle) != std::string::npos) out.push_back(std::stoi(name));
  }
  return out;
}

// The helper killed after clone3 but before it released pid 1 (here: still waiting for the
// launcher's cgroup, which never comes): pid 1 held its own copy of the release pipe's write
// end and waited forever, in no cgroup, where no reclaim could find it. The crash drill found
// one such process after `evalbox run` was killed mid-launch.
TEST_F(Helper, APid1WhoseHelperDiesBeforeReleasingItExits) {
  env_.plan.argv = {"/bin/true"};
  const std::filesystem::path plan_path = env_.dir() / "plan-unreleased.json";
  ASSERT_TRUE(write_file(plan_path, pretty_json(env_.plan.to_json())));
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  unique_fd ours(sv[0]), theirs(sv[1]);
  pid_t helper = ::fork();
  if (helper == 0) {
    ::dup2(theirs.get(), 3);  // no cgroup message ever arrives on it: the helper waits
    const std::string h = evalbox::testing::helper_binary().string();
    ::execl(h.c_str(), h.c_str(), "--plan", plan_path.c_str(), "--record",
            (env_.dir() / "record-unreleased.json").c_str(), "--cgroup-fd", "3", nullptr);
    ::_exit(127);
  }
  theirs.reset();
  std::vector<pid_t> found;
  for (int i = 0; i < 250 && found.size() < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    found = processes_naming(plan_path.string());
  }
  ASSERT_EQ(found.size(), 2u) << "the helper and its unreleased pid 1";
  ::kill(helper, SIGKILL);
  ::waitpid(helper, nullptr, 0);
  for (int i = 0; i < 250 && !found.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    found = processes_naming(plan_path.string());
  }
  EXPECT_TRUE(found.empty()) << "pid 1 outlived its helper: " << found.front();
  for (pid_t p : found) ::kill(p, SIGKILL);
  // The launcher made no cgroup here; the helper may have made the launch's: gone too.
  for (const char* ctl : {"memory", "pids", "cpuacct"})
    for (const auto& dir : cgroup::run_cgroups_in(
             std::filesystem::path("/sys/fs/cgroup") / ctl / "evalbox", env_.plan.run_id))
      ::rmdir(dir.c_str());
}

// On cgroup v1 pid 1 moves itself into the run's cgroups with the `tasks` files that come with
// its release, before anything of the run runs. A cgroup it cannot enter — here a leaf whose
// `tasks` is /dev/full, which refuses every write — fails the launch at that step, and the
// program never starts outside its limits.
TEST_F(Helper, APid1ThatCannotEnterItsCgroupsRunsNothing) {
  const std::filesystem::path leaf = env_.dir() / "unenterable";
  ASSERT_TRUE(make_dirs(leaf, 0755));
  ASSERT_EQ(::symlink("/dev/full", (leaf / "tasks").c_str()), 0);
  env_.cgroup_message =
      json{{"cgroup", {{"version", "v1"}, {"leaves", {{"pids", leaf.string()}}}}}}.dump();
  auto r = env_.run({"/bin/sh", "-c", "touch /workspace/ran"});
  EXPECT_EQ(r.error_step, "enter the run's cgroups");
  EXPECT_NE(r.error.find("ENOSPC"), std::string::npos) << r.error;
  EXPECT_FALSE(std::filesystem::exists(env_.workspace() / "ran")) << "the program ran";
}

// A warm helper reads the host's layout while it waits (compile.h); a plan that comes more than
// 10 s later (after an agent's run, say) is compiled against the host as it is then. Here what
// changed is the helper's own RLIMIT_NOFILE hard limit, lowered from outside while it waited:
// compiled against the stale layout, pid 1 would ask for the old hard limit and be refused.
TEST_F(Helper, AWarmHelperWhosePlanComesLateReadsTheHostAgain) {
  env_.before_plan = [](pid_t helper) {
    const rlimit lowered{1000, 1000};
    ASSERT_EQ(::prlimit(helper, RLIMIT_NOFILE, &lowered, nullptr), 0) << std::strerror(errno);
    std::this_thread::sleep_for(std::chrono::milliseconds(10500));
  };
  auto r = env_.run({"/bin/sh", "-c", "ulimit -Hn"});
  ASSERT_TRUE(r.error.empty()) << r.error_step << ": " << r.error;
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(env_.output(), "1000\n");
}

TEST_F(Helper, LeavesNoCgroupBehind) {
  auto r = env_.run({"/bin/true"});
  ASSERT_EQ(r.error, "");
  for (const char* base : {"/sys/fs/cgroup/memory/evalbox", "/sys/fs/cgroup/pids/evalbox",
                           "/sys/fs/cgroup/unified/evalbox"}) {
    EXPECT_TRUE(cgroup::run_cgroups_in(base, env_.plan.run_id).empty()) << base;
  }
}

TEST_F(Helper, EntersACgroupV2LeafWithCloneIntoCgroup) {
  const std::filesystem::path unified = "/sys/fs/cgroup/unified";
  EVALBOX_REQUIRE_FEATURE(
      evalbox::testing::host().root && std::filesystem::exists(unified / "cgroup.procs"),
      "root and a cgroup2 mount at /sys/fs/cgroup/unified");
  // The unified mount here offers no controllers: no limits, only membership.
  env_.plan.limits.memory_bytes = 0;
  env_.plan.limits.pids = 0;
  ::setenv("EVALBOX_CGROUP_V2_ROOT", unified.c_str(), 1);
  const auto leaf = unified / "evalbox" / cgroup::launch_cgroup_name(env_.plan.run_id, "agent-0");
  std::string procs;
  auto r = env_.run({"/bin/sleep", "1"}, [&](pid_t) {
    for (int i = 0; i < 100 && procs.empty(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      procs = read_file(leaf / "cgroup.procs").value_or("");
    }
  });
  ::unsetenv("EVALBOX_CGROUP_V2_ROOT");
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.mechanisms["cgroup"], "v2");
  EXPECT_FALSE(procs.empty());  // pid 1 and the program were in the leaf
  EXPECT_FALSE(std::filesystem::exists(leaf));
}

TEST_F(Helper, NestedUserNamespacesCanMountWhenLandlockIsOff) {
  env_.plan.landlock = false;
  auto r = env_.run(
      {"/usr/bin/unshare", "-Urm", "/bin/sh", "-c", "mount -t tmpfs x /mnt && echo mounted"});
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.exit_code, 0) << env_.output();
  EXPECT_EQ(env_.output(), "mounted\n");
  EXPECT_EQ(r.mechanisms["landlock_abi"], 0);
  EXPECT_EQ(r.mechanisms["capabilities"], "CAP_SETFCAP (namespace-local, nested sandboxes)");
  EXPECT_TRUE(r.mechanisms.contains("landlock_reason"));
}

TEST_F(Helper, LandlockConfinesWritesToTheWritableTrees) {
  EVALBOX_REQUIRE_FEATURE(evalbox::testing::host().landlock_abi > 0, "Landlock");
  const std::filesystem::path extra = env_.dir() / "extra";
  ASSERT_TRUE(make_dirs(extra, 0755));
  ::chmod(extra.c_str(), 0777);  // owned by the host's root: writable for the sandbox id
  // A writable bind is allowed by its own rule; a read-only one stays read-only.
  env_.plan.mounts.push_back({extra, "/evalbox/extra", true, false});
  auto r = env_.run({"/bin/sh", "-c",
                     "echo a > /workspace/a && echo b > /tmp/b && echo c > /evalbox/extra/c && "
                     "echo ok; (echo x > /proc/self/comm) 2>/dev/null || echo proc-denied"});
  ASSERT_EQ(r.error, "");
  // /proc is writable by DAC for our own process; only Landlock refuses it.
  EXPECT_EQ(env_.output(), "ok\nproc-denied\n");
  EXPECT_EQ(r.mechanisms["landlock_abi"], std::min(evalbox::testing::host().landlock_abi, 7));
}

TEST_F(Helper, HostNetworkNeedsTheUnsafeOptIn) {
  env_.plan.network.mode = network_mode::host;
  auto refused = env_.run({"/bin/true"});
  EXPECT_NE(refused.error.find("network.unsafe_host_network"), std::string::npos) << refused.error;
  env_.plan.network.unsafe_host_network = true;
  auto r = env_.run({"/bin/sh", "-c", "cat /proc/net/dev | wc -l"});
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.mechanisms["network"], "host (unsafe)");
  // The same interfaces as the host's (its own netns would list only lo).
  const std::string host_dev = read_file("/proc/net/dev").value_or("");
  EXPECT_EQ(env_.output(), fmt::format("{}\n", std::count(host_dev.begin(), host_dev.end(), '\n')));
}

// A loopback TCP server on the host: accepts one connection, sends "pong", closes.
class pong_server {
 public:
  pong_server() {
    fd_.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd_.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa);
    ::listen(fd_.get(), 4);
    socklen_t len = sizeof sa;
    ::getsockname(fd_.get(), reinterpret_cast<sockaddr*>(&sa), &len);
    port = ntohs(sa.sin_port);
    thread_ = std::thread([this] {
      while (!stop_) {
        pollfd p{fd_.get(), POLLIN, 0};
        if (::poll(&p, 1, 50) <= 0) continue;
        int c = ::accept(fd_.get(), nullptr, nullptr);
        if (c < 0) continue;
        ++accepted;
        (void)!::write(c, "pong\n", 5);
        ::close(c);
      }
    });
  }
  ~pong_server() {
    stop_ = true;
    thread_.join();
  }
  uint16_t port = 0;
  std::atomic<int> accepted{0};

 private:
  unique_fd fd_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

TEST_F(Helper, NetworkAllowRelaysALoopbackPortAndRecordsIt) {
  pong_server server;
  env_.plan.network.mode = network_mode::allow;
  env_.plan.network.allow = {fmt::format("127.0.0.1:{}", server.port)};
  auto r = env_.run({"/usr/bin/curl", "-s", "--max-time", "5",
                     fmt::format("telnet://127.0.0.1:{}", server.port)});
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(env_.output(), "pong\n");
  EXPECT_EQ(server.accepted, 1);
  ASSERT_EQ(r.connections.size(), 1u);
  EXPECT_TRUE(r.connections[0].allowed);
  EXPECT_EQ(r.connections[0].via, "relay");
  EXPECT_EQ(r.mechanisms["network"], "allow");
}

TEST_F(Helper, PlainHttpGoesThroughTheProxyAndRelayedIpsBypassIt) {
  pong_server server;
  env_.plan.network.mode = network_mode::allow;
  env_.plan.network.allow = {fmt::format("localhost:{}", server.port),
                             fmt::format("127.0.0.1:{}", server.port)};
  // curl honours HTTP_PROXY and NO_PROXY as set by the helper.
  auto r = env_.run({"/bin/sh", "-c",
                     fmt::format("curl -s --http0.9 --max-time 5 http://localhost:{0}/a; "
                                 "curl -s --http0.9 --max-time 5 http://127.0.0.1:{0}/b",
                                 server.port)});
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(env_.output(), "pong\npong\n");
  ASSERT_EQ(r.connections.size(), 2u);
  EXPECT_EQ(r.connections[0].via, "proxy");
  EXPECT_EQ(r.connections[0].target, fmt::format("localhost:{}", server.port));
  EXPECT_EQ(r.connections[1].via, "relay");
}

TEST_F(Helper, TheProxyAllowsListedNamesAndRefusesOthers) {
  pong_server server;
  env_.plan.network.mode = network_mode::allow;
  env_.plan.network.allow = {fmt::format("localhost:{}", server.port)};
  auto r = env_.run({"/bin/sh", "-c",
                     fmt::format("curl -s --max-time 5 -p telnet://localhost:{0}; "
                                 "curl -s --max-time 5 -p telnet://localhost:{1} || echo refused",
                                 server.port, server.port + 1)});
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(env_.output(), "pong\nrefused\n");
  ASSERT_EQ(r.connections.size(), 2u);
  EXPECT_TRUE(r.connections[0].allowed);
  EXPECT_EQ(r.connections[0].via, "proxy");
  EXPECT_FALSE(r.connections[1].allowed);
  EXPECT_EQ(r.connections[1].detail, "not in the allow-list");
}

}  // namespace
}  // namespace evalbox::sandbox
