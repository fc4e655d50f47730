// Escape tests: one hostile action per test, run in a real prepared session. Each asserts
// containment, the outcome the record reports, and no residue once the session is closed (no
// mount, cgroup, run file or process of the run left). Nothing here may skip under
// EVALBOX_REQUIRE_ISOLATION=1, and no test sends traffic to any address but loopback.
//
// Every test runs through the warm helper (launcher.h) and again, as `<name>.cold`, through a
// helper started for the launch (EVALBOX_WARM_HELPER=0).
//
// Every test runs twice: with the host's allow-listed root and with an image's (the busybox
// test image: no glibc, /bin only; the hostile tool is static). Where the two differ by design
// — an image's root is the run's own and writable — the test says what each must show; what
// must never differ is that nothing reaches the host.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>

#include <chrono>
#include <thread>

#include "base/fs.h"
#include "base/unique_fd.h"
#include "sandbox/cgroup/cgroup.h"
#include "sandbox/launch/launcher.h"
#include "tests/support/isolation.h"
#include "tests/support/prep_env.h"
#include "tests/support/test_images.h"

namespace evalbox::sandbox {
namespace {

namespace fs = std::filesystem;
using evalbox::testing::prep_env;

const fs::path tools_dir = fs::path(EVALBOX_BINARY_DIR) / "tests" / "escape";
const std::string hostile = "/evalbox/tools/evalbox-hostile";

using evalbox::testing::mounted_below;

enum class root_kind { host, image };

class Escape : public ::testing::TestWithParam<root_kind> {
 protected:
  bool image() const { return GetParam() == root_kind::image; }

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
    prep_.emplace(env_.options());
    auto req = env_.request("escape");
    if (image()) {
      EVALBOX_REQUIRE_FEATURE(h.userns_overlay, "overlayfs in a user namespace (userxattr)");
      const std::string ref = evalbox::testing::test_image_ref("busybox");
      EVALBOX_REQUIRE_FEATURE(!ref.empty(), "the busybox test image (tests/images/make-images)");
      auto img = prep_->resolve_image(ref, {});
      ASSERT_TRUE(img) << img.error().message;
      req.image = image_root{img->id, img->reference, img->manifest_digest};
      req.env = {{"PATH", "/bin"}};
    }
    req.protected_roots = {protected_dir_};
    req.secrets = {{"codex", env_.creds / "auth.json", ".codex/auth.json"}};
    req.limits.wall_ms = 20000;
    req.limits.memory_bytes = 256ull << 20;
    req.limits.pids = 128;
    req.limits.output_bytes = 1 << 20;
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
      EXPECT_TRUE(
          cgroup::run_cgroups_in(fs::path("/sys/fs/cgroup") / ctl / "evalbox", run_id_).empty())
          << ctl;
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
    // Through the warm helper unless EVALBOX_WARM_HELPER=0 (ctest runs the suite both ways,
    // the cold run's names ending in `.cold`): the launch must take it, not fall back.
    const launch_settings& settings = session_->options().launch;
    const bool warm = settings.warm_helper;
    if (warm) {
      EXPECT_TRUE(wait_for_warm_helper(settings, std::chrono::seconds(10)));
    }
    const warm_helper_counts before = warm_helper_stats();
    auto r = launch_in(*session_, o);
    EXPECT_EQ(warm_helper_stats().warm, before.warm + (warm ? 1 : 0));
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

TEST_P(Escape, CannotReadAProtectedRootByAbsolutePath) {
  auto r = run({hostile, "read", (protected_dir_ / "secret.txt").string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(output(), "refused " + (protected_dir_ / "secret.txt").string() + ": ENOENT\n");
}

TEST_P(Escape, CannotReadTheHostHomeOrStateRoot) {
  ASSERT_TRUE(fs::exists("/root/.bashrc")) << "the host's home is expected to have .bashrc";
  auto r = run({"/bin/sh", "-c",
                fmt::format("for p in /root/.bashrc {0} {1}; do test -e $p && echo sees $p; done; "
                            "echo done",
                            env_.state.string(), env_.root.string())});
  EXPECT_EQ(output(), "done\n");
}

TEST_P(Escape, CannotReadAnotherRunsWorkspace) {
  auto other = prep_->prepare(env_.request("escape-other"));
  ASSERT_TRUE(other) << other.error().message;
  const std::string path = (other->workspace_dir() / "README.md").string();
  ASSERT_TRUE(fs::exists(path));
  auto r = run({hostile, "read", path});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(output(), "refused " + path + ": ENOENT\n");
  ASSERT_TRUE(other->close());
}

TEST_P(Escape, CannotReadAProtectedRootThroughAWorkspaceSymlink) {
  const fs::path link = session_->workspace_dir() / "planted";
  ASSERT_EQ(::symlink((protected_dir_ / "secret.txt").c_str(), link.c_str()), 0);
  auto r = run({hostile, "read", "/workspace/planted"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(output(), "refused /workspace/planted: ENOENT\n");
}

TEST_P(Escape, CannotReadAProtectedRootViaDotdot) {
  const std::string path = "/workspace/../../../.." + (protected_dir_ / "secret.txt").string();
  auto r = run({hostile, "read", path});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(output(), "refused " + path + ": ENOENT\n");
}

TEST_P(Escape, CannotReadAProtectedRootViaProc1Root) {
  const std::string path = "/proc/1/root" + (protected_dir_ / "secret.txt").string();
  auto r = run({hostile, "read", path});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(output().find("refused"), std::string::npos) << output();
}

TEST_P(Escape, HoldsNoFdButStdioToReachTheHostViaProcSelfFd) {
  auto r = run({hostile, "fds"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(output(), "fds 0 1 2\n");
}

TEST_P(Escape, CannotReadTheCredentialSourceButSeesItsLease) {
  auto r = run({"/bin/sh", "-c",
                fmt::format("{0} read {1}; {0} read /home/agent/.codex/auth.json", hostile,
                            (env_.creds / "auth.json").string())});
  EXPECT_EQ(output(), fmt::format("refused {}: ENOENT\nok /home/agent/.codex/auth.json\n",
                                  (env_.creds / "auth.json").string()));
}

// With the host's root, writes succeed only in the run's own trees. An image's root is the
// run's own too (writable, thrown away with it): writes there land in the run's upper layer,
// never in the host's tree nor in the image's shared layers.
TEST_P(Escape, WritesOnlyUnderWorkspaceHomeAndTmp) {
  auto r = run({"/bin/sh", "-c",
                fmt::format("for p in /evil /etc/evil /usr/evil /bin/evil /dev/evil "
                            "/proc/evil /evalbox/tools/evil /workspace/ok /home/agent/ok "
                            "/tmp/ok /dev/shm/ok; do {} write $p; done",
                            hostile)});
  const std::string run_own = "ok /workspace/ok\nok /home/agent/ok\nok /tmp/ok\nok /dev/shm/ok\n";
  if (image()) {
    EXPECT_EQ(output(),
              "ok /evil\nok /etc/evil\nrefused /usr/evil: ENOENT\nok /bin/evil\n"
              "refused /dev/evil: EROFS\nrefused /proc/evil: ENOENT\n"
              "refused /evalbox/tools/evil: EROFS\n" +
                  run_own);
    for (const auto& l : session_->image()->lowers)
      for (const char* p : {"evil", "etc/evil", "bin/evil"}) EXPECT_FALSE(fs::exists(l / p)) << l;
    EXPECT_TRUE(fs::exists(session_->image()->upper / "bin/evil"));
  } else {
    EXPECT_EQ(output(),
              "refused /evil: EROFS\nrefused /etc/evil: EROFS\nrefused /usr/evil: EROFS\n"
              "refused /bin/evil: EROFS\nrefused /dev/evil: EACCES\nrefused /proc/evil: ENOENT\n"
              "refused /evalbox/tools/evil: EROFS\n" +
                  run_own);
  }
  for (const char* p : {"/evil", "/etc/evil", "/usr/evil", "/bin/evil"})
    EXPECT_FALSE(fs::exists(p)) << p;
  EXPECT_FALSE(fs::exists(tools_dir / "evil"));
}

TEST_P(Escape, AForkBombHitsThePidsLimit) {
  auto r = run({hostile, "fork-bomb", "300"}, [](resource_limits& l) { l.pids = 64; });
  EXPECT_EQ(r.outcome, outcome_kind::exited);
  EXPECT_TRUE(r.pids_limit_hit);
  int forked = -1, refused = -1;
  ASSERT_EQ(std::sscanf(output().c_str(), "forked %d refused %d", &forked, &refused), 2)
      << output();
  EXPECT_LT(forked, 64);
  EXPECT_GT(refused, 200);
}

TEST_P(Escape, AMemoryHogIsOomKilled) {
  auto r =
      run({hostile, "memory-hog", "256"}, [](resource_limits& l) { l.memory_bytes = 64ull << 20; });
  EXPECT_EQ(r.outcome, outcome_kind::oom_killed) << output();
  EXPECT_GE(r.oom_kills, 1u);
  EXPECT_EQ(output(), "");
  EXPECT_LE(r.peak_memory_bytes, 64ull << 20);
  EXPECT_GT(r.peak_memory_bytes, 32ull << 20);
}

// The OOM killer ends a child; the main process (a shell) survives it and exits on its own —
// with the child's 137, or 0. Either way the run was cut short by its memory limit.
TEST_P(Escape, AChildsOomKillMakesTheRunOomKilledWhateverTheMainProcessDoesAfter) {
  for (const char* tail : {"exit $rc", "exit 0"}) {
    auto r = run({"/bin/sh", "-c",
                  fmt::format("{} memory-hog 256; rc=$?; echo child $rc; {}", hostile, tail)},
                 [](resource_limits& l) { l.memory_bytes = 64ull << 20; });
    EXPECT_EQ(r.outcome, outcome_kind::oom_killed) << tail << ": " << output();
    EXPECT_GE(r.oom_kills, 1u) << tail;
    // The shell says "Killed" for its child, then goes on.
    EXPECT_TRUE(output().ends_with("child 137\n")) << "the shell outlived its child: " << output();
    EXPECT_EQ(r.to_json()["exit_code"], json(nullptr));
  }
}

// A full disk refuses writes with ENOSPC and kills nothing: the record says it happened, even
// when the files are gone again by the end of the run.
TEST_P(Escape, FillingTheDiskIsRecordedEvenWhenFreedAgain) {
  auto r = run({"/bin/sh", "-c",
                "i=0; while [ $i -lt 100 ]; do head -c 1048576 /dev/zero > /workspace/fill$i "
                "2>/dev/null || { echo full at $i; break; }; i=$((i+1)); done; sleep 0.2; "
                "rm -f /workspace/fill*"});
  EXPECT_EQ(r.outcome, outcome_kind::exited);
  EXPECT_TRUE(r.disk_limit_hit);
  int at = -1;
  ASSERT_EQ(std::sscanf(output().c_str(), "full at %d", &at), 1) << output();
  EXPECT_GT(at, 32);
  EXPECT_LE(at, 64) << "the quota is 64 MiB";
  auto calm = run({"/bin/sh", "-c", "head -c 1048576 /dev/zero > /workspace/one"});
  EXPECT_FALSE(calm.disk_limit_hit);
  EXPECT_EQ(calm.oom_kills, 0u);
}

TEST_P(Escape, AnOutputFloodHitsTheOutputLimit) {
  auto r = run({"/bin/yes"}, [](resource_limits& l) { l.output_bytes = 64 << 10; });
  EXPECT_EQ(r.outcome, outcome_kind::output_limit);
  EXPECT_TRUE(r.output_truncated);
  const std::string out = output();
  EXPECT_EQ(out.substr(0, 6), "y\ny\ny\n");
  EXPECT_TRUE(
      out.ends_with("[evalbox: output truncated: the run passed its limit of 65536 bytes]\n"));
  EXPECT_LT(out.size(), (64u << 10) + 200);
}

TEST_P(Escape, SleepingPastTheWallLimitTimesOut) {
  auto r = run({"/bin/sleep", "30"}, [](resource_limits& l) { l.wall_ms = 500; });
  EXPECT_EQ(r.outcome, outcome_kind::timed_out);
  EXPECT_LT(r.wall_ms, 5000u);
}

TEST_P(Escape, ADaemonDiesWithTheMainProcess) {
  auto r = run({"/bin/sh", "-c",
                "(trap '' HUP; sleep 1; touch /workspace/daemon-was-here) </dev/null "
                ">/dev/null 2>&1 & echo started"});
  EXPECT_EQ(r.outcome, outcome_kind::exited);
  EXPECT_EQ(output(), "started\n");
  std::this_thread::sleep_for(std::chrono::milliseconds(1800));
  EXPECT_FALSE(fs::exists(session_->workspace_dir() / "daemon-was-here"));
}

TEST_P(Escape, CannotConnectToAHostLoopbackPortAndSeesOnlyLo) {
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

TEST_P(Escape, CannotPtraceAHostProcess) {
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

// No mount, no remount: the program holds no capability. An image's /usr (made here: busybox
// has none) is the run's own to write; the host's never is.
// Pid 1 reports the program's wait status to the helper: a program that could trace it or
// write its memory could forge its own result. Pid 1 keeps its capabilities in the run's user
// namespace and is not dumpable, also after starting the program in its own memory.
TEST_P(Escape, CannotTraceOrReadTheMemoryOfPid1) {
  auto r = run(
      {"/bin/sh", "-c",
       fmt::format("{0} ptrace 1; {0} read /proc/1/mem; {0} write /proc/1/mem; exit 0", hostile)});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(output().find("refused ptrace: EPERM"), std::string::npos) << output();
  EXPECT_NE(output().find("refused /proc/1/mem: EACCES"), std::string::npos) << output();
  EXPECT_EQ(output().find("ok "), std::string::npos) << output();
}

TEST_P(Escape, CannotMountOverUsrOrRemountItWritable) {
  auto r = run({"/bin/sh", "-c",
                fmt::format("{1}{0} mount-usr; {0} remount-usr-rw; {0} write-usr", hostile,
                            image() ? "mkdir /usr; " : "")});
  EXPECT_EQ(output(), fmt::format("refused mount tmpfs on /usr: EPERM\nrefused remount /usr rw: "
                                  "EPERM\n{} /usr/evalbox-escape{}\n",
                                  image() ? "ok" : "refused", image() ? "" : ": EROFS"));
  EXPECT_FALSE(fs::exists("/usr/evalbox-escape"));
}

TEST_P(Escape, AMountInANestedNamespaceDoesNotReachTheHost) {
  launch_options o;
  auto r = run({"/bin/unshare", "-Urm", "/bin/sh", "-c",
                "mount -t tmpfs x /usr && touch /usr/nested && echo mounted"});
  // Landlock is on for this session: the nested mount is refused; either way the host's
  // /usr is untouched.
  EXPECT_FALSE(fs::exists("/usr/nested"));
  EXPECT_FALSE(mounted_below("/usr"));
}

TEST_P(Escape, KexecLoadIsRefused) {
  auto r = run({hostile, "kexec"});
  EXPECT_EQ(output(), "refused kexec_load: EPERM\n");
}

TEST_P(Escape, ModuleLoadingIsRefused) {
  auto r = run({"/bin/sh", "-c", fmt::format("{0} init-module; {0} finit-module", hostile)});
  EXPECT_EQ(output(), "refused init_module: EPERM\nrefused finit_module: EPERM\n");
}

TEST_P(Escape, ASetuidRootBinaryGrantsNothing) {
  // A copy of the hostile tool, setuid and owned by the host's root, planted in the workspace.
  const fs::path planted = session_->workspace_dir() / "suid-tool";
  fs::copy_file(tools_dir / "evalbox-hostile", planted);
  ASSERT_EQ(::chown(planted.c_str(), 0, 0), 0);
  ASSERT_EQ(::chmod(planted.c_str(), 04755), 0);
  auto r = run({"/workspace/suid-tool", "whoami"});
  EXPECT_EQ(output(), "euid 0 capeff 0000000000000000\n");
}

TEST_P(Escape, ASymlinkPlantedAtALeaseTargetRedirectsNoMountToTheHost) {
  // An earlier launch replaced the lease's directory in the home with a link to a host dir.
  temp_dir host_dir("evalbox-escape-target");
  const fs::path codex = session_->home_dir() / ".codex";
  std::error_code ec;
  fs::remove_all(codex, ec);
  ASSERT_EQ(::symlink(host_dir.path().c_str(), codex.c_str()), 0);
  launch_options o;
  o.argv = {"/bin/true"};
  auto r = launch_in(*session_, o);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->error_step, "create /home/agent/.codex/auth.json");
  EXPECT_NE(r->error.find("ELOOP"), std::string::npos) << r->error;
  EXPECT_TRUE(fs::is_empty(host_dir.path()));
  fs::remove(codex, ec);  // let the session's teardown find its home as it made it
}

// A setuid-root binary with file capabilities, shipped in an image: the store keeps the mode
// bits but gives the file to the sandbox's root (the host id 60000, not root) and drops
// security.capability; inside, the root is nosuid and the program holds no_new_privs and no
// capability — running it grants nothing, in the sandbox or on the host.
class EscapeFromImage : public Escape {};

TEST_P(EscapeFromImage, ASetuidRootBinaryFromAnImageGrantsNothing) {
  temp_dir tree("evalbox-escape-suid-image");
  ASSERT_TRUE(make_dirs(tree.path() / "bin", 0755));
  const fs::path tool = tree.path() / "bin" / "suid-tool";
  fs::copy_file(tools_dir / "evalbox-hostile", tool);
  ASSERT_EQ(::chown(tool.c_str(), 0, 0), 0);
  ASSERT_EQ(::chmod(tool.c_str(), 06755), 0);
  // cap_sys_admin+ep as a v2 file capability (struct vfs_cap_data).
  const uint32_t cap[5] = {0x02000001, 1u << 21, 1u << 21, 0, 0};
  ASSERT_EQ(::setxattr(tool.c_str(), "security.capability", cap, sizeof cap, 0), 0);
  auto img = prep_->resolve_image("rootfs:" + tree.path().string(), {});
  ASSERT_TRUE(img) << img.error().message;
  auto req = env_.request("escape-suid");
  req.image = image_root{img->id, img->reference, ""};
  req.env = {{"PATH", "/bin"}};
  auto s = prep_->prepare(req);
  ASSERT_TRUE(s) << s.error().message;
  // As stored: setuid kept, owned by the sandbox's root, the capability gone.
  const fs::path stored = s->image()->lowers.front() / "bin/suid-tool";
  struct stat st {};
  ASSERT_EQ(::stat(stored.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 06755u);
  EXPECT_EQ(st.st_uid, s->sandbox_uid());
  EXPECT_NE(st.st_uid, 0u);
  EXPECT_LT(::getxattr(stored.c_str(), "security.capability", nullptr, 0), 0);
  launch_options o;
  o.argv = {"/bin/suid-tool", "whoami"};
  o.stdout_path = out_.path() / "stdout";
  auto r = launch_in(*s, o);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->error, "");
  EXPECT_EQ(output(), "euid 0 capeff 0000000000000000\n");
  EXPECT_EQ(r->mechanisms["user_ns"]["host_uid"], s->sandbox_uid());
  ASSERT_TRUE(s->close());
}

const auto root_name = [](const ::testing::TestParamInfo<root_kind>& i) {
  return i.param == root_kind::host ? "HostRoot" : "ImageRoot";
};
INSTANTIATE_TEST_SUITE_P(Roots, Escape, ::testing::Values(root_kind::host, root_kind::image),
                         root_name);
INSTANTIATE_TEST_SUITE_P(Roots, EscapeFromImage, ::testing::Values(root_kind::image), root_name);

}  // namespace
}  // namespace evalbox::sandbox
