// Escape tests through a session's exec (sandbox/live): the hostile actions of escape_test.cpp,
// each started by pid 1 of a live sandbox as a session's exec rather than as a run's program,
// with the session's writable trees stacked as overlays of their layers (sandbox/live/stack.h).
// Each asserts containment, and the session ends with no residue. Run with the host's
// allow-listed root and with an image's (the busybox test image).
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <chrono>
#include <thread>

#include "base/fs.h"
#include "base/unique_fd.h"
#include "sandbox/cgroup/cgroup.h"
#include "sandbox/live/live.h"
#include "sandbox/live/stack.h"
#include "tests/support/isolation.h"
#include "tests/support/prep_env.h"
#include "tests/support/test_images.h"

namespace evalbox::sandbox {
namespace {

namespace fs = std::filesystem;
using evalbox::testing::prep_env;
using namespace std::chrono_literals;

const fs::path tools_dir = fs::path(EVALBOX_BINARY_DIR) / "tests" / "escape";
const std::string hostile = "/evalbox/tools/evalbox-hostile";

using evalbox::testing::mounted_below;

enum class root_kind { host, image };

class SessionEscape : public ::testing::TestWithParam<root_kind> {
 protected:
  bool image() const { return GetParam() == root_kind::image; }

  void SetUp() override {
    const auto& h = evalbox::testing::host();
    EVALBOX_REQUIRE_FEATURE(h.user_namespaces && h.mount_namespaces && h.pid_namespaces &&
                                h.net_namespaces && h.seccomp_filter && h.userns_overlay,
                            "user, mount, pid, net namespaces, seccomp, userxattr overlays");
    protected_dir_ = env_.root / "protected";
    ASSERT_TRUE(make_dirs(protected_dir_, 0755));
    ASSERT_TRUE(write_file(protected_dir_ / "secret.txt", "protected secret\n", 0644));
    prep_.emplace(env_.options());
    auto req = env_.request("session-escape");
    if (image()) {
      const std::string ref = evalbox::testing::test_image_ref("busybox");
      EVALBOX_REQUIRE_FEATURE(!ref.empty(), "the busybox test image (tests/images/make-images)");
      auto img = prep_->resolve_image(ref, {});
      ASSERT_TRUE(img) << img.error().message;
      req.image = image_root{img->id, img->reference, img->manifest_digest};
      req.env = {{"PATH", "/bin"}};
    }
    req.protected_roots = {protected_dir_};
    req.limits.wall_ms = 60000;
    req.limits.memory_bytes = 256ull << 20;
    req.limits.pids = 64;
    auto s = prep_->prepare(req);
    ASSERT_TRUE(s) << s.error().message;
    session_.emplace(std::move(*s));
    run_id_ = req.run_id;
    run_dir_ = session_->run_dir();
    launch_options o;
    o.extra_mounts.push_back({tools_dir, "/evalbox/tools", false, false});
    layer_stack stack{{session_->workspace_dir()}, {session_->home_dir()}, {}};
    auto dir = stack_layers(*session_, stack, "live-1", o);
    ASSERT_TRUE(dir) << dir.error().message;
    uppers_ = *dir;
    auto live = live_sandbox::start(*session_, o);
    ASSERT_TRUE(live) << live.error().message;
    live_ = std::move(*live);
  }

  void TearDown() override {
    if (live_) {
      auto rec = live_->stop();
      EXPECT_TRUE(rec) << rec.error().message;
      live_.reset();
    }
    if (!session_) return;
    ASSERT_TRUE(session_->close());
    EXPECT_FALSE(fs::exists(run_dir_)) << run_dir_;
    EXPECT_FALSE(mounted_below(run_dir_));
    for (const char* ctl : {"memory", "pids", "cpu", "cpuacct", "unified"})
      EXPECT_TRUE(
          cgroup::run_cgroups_in(fs::path("/sys/fs/cgroup") / ctl / "evalbox", run_id_).empty())
          << ctl;
  }

  // Runs `argv` as an exec of the session: its stdout and stderr together, and its wait status.
  std::pair<std::string, int> exec(std::vector<std::string> argv) {
    int out[2];
    EXPECT_EQ(::pipe2(out, O_CLOEXEC), 0);
    unique_fd out_r(out[0]), out_w(out[1]);
    unique_fd null(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    exec_spec spec;
    spec.argv = std::move(argv);
    spec.stdin_fd = null.get();
    spec.stdout_fd = out_w.get();
    spec.stderr_fd = out_w.get();
    auto h = live_->exec(spec);
    EXPECT_TRUE(h) << (h ? "" : h.error().message);
    if (!h) return {"", -1};
    out_w.reset();
    std::string text;
    char buf[4096];
    pollfd p{out_r.get(), POLLIN, 0};
    while (::poll(&p, 1, 20000) == 1) {
      const ssize_t n = ::read(out_r.get(), buf, sizeof buf);
      if (n <= 0) break;
      text.append(buf, static_cast<size_t>(n));
    }
    pollfd d{(*h)->done_fd(), POLLIN, 0};
    EXPECT_EQ(::poll(&d, 1, 20000), 1);
    const int st = (*h)->wait_status().value_or(-1);
    return {text, WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st)};
  }

  prep_env env_;
  fs::path protected_dir_;
  std::optional<preparer> prep_;
  std::optional<prepared_session> session_;
  std::unique_ptr<live_sandbox> live_;
  fs::path uppers_;
  std::string run_id_;
  fs::path run_dir_;
};

TEST_P(SessionEscape, CannotReadAProtectedRootByPathLinkOrDotdot) {
  const std::string secret = (protected_dir_ / "secret.txt").string();
  ASSERT_EQ(::symlink(secret.c_str(), (session_->workspace_dir() / "planted").c_str()), 0);
  for (const std::string& p : {secret, std::string("/workspace/planted"),
                               "/workspace/../../../.." + secret, "/proc/1/root" + secret}) {
    auto [out, code] = exec({hostile, "read", p});
    EXPECT_EQ(code, 1) << p << ": " << out;
    EXPECT_NE(out.find("refused"), std::string::npos) << p << ": " << out;
  }
}

TEST_P(SessionEscape, AnExecHoldsNoFdButStdioNotTheControlSocket) {
  auto [out, code] = exec({hostile, "fds"});
  EXPECT_EQ(code, 0);
  EXPECT_EQ(out, "fds 0 1 2\n");
}

TEST_P(SessionEscape, WritesLandInTheSessionsUpperNeverInTheHostsTrees) {
  auto [out, code] = exec({"/bin/sh", "-c",
                           fmt::format("for p in /usr/evil /workspace/ok /home/agent/ok /tmp/ok; "
                                       "do {} write $p; done",
                                       hostile)});
  EXPECT_NE(out.find("ok /workspace/ok"), std::string::npos) << out;
  EXPECT_NE(out.find("ok /home/agent/ok"), std::string::npos) << out;
  // The session's trees are overlays: the host's workspace and home are its lowers, untouched.
  EXPECT_FALSE(fs::exists(session_->workspace_dir() / "ok"));
  EXPECT_FALSE(fs::exists(session_->home_dir() / "ok"));
  EXPECT_TRUE(fs::exists(uppers_ / "workspace" / "upper" / "ok"));
  EXPECT_FALSE(fs::exists("/usr/evil"));
}

TEST_P(SessionEscape, CannotTraceOrReadPid1WhichServesTheSession) {
  auto [out, code] = exec(
      {"/bin/sh", "-c",
       fmt::format("{0} ptrace 1; {0} read /proc/1/mem; {0} write /proc/1/mem; exit 0", hostile)});
  EXPECT_NE(out.find("refused ptrace: EPERM"), std::string::npos) << out;
  EXPECT_NE(out.find("refused /proc/1/mem: EACCES"), std::string::npos) << out;
  EXPECT_EQ(out.find("ok "), std::string::npos) << out;
  // Pid 1 serves on: another exec runs.
  EXPECT_EQ(exec({"/bin/echo", "alive"}).first, "alive\n");
}

TEST_P(SessionEscape, ASignalToPid1ChangesNothing) {
  auto [out, code] = exec({"/bin/sh", "-c", "kill -9 1; kill -TERM 1; echo sent"});
  // The exec holds no capability over pid 1 (its sandbox's root, with them): refused.
  EXPECT_TRUE(out.ends_with("sent\n")) << out;
  EXPECT_NE(out.find("not permitted"), std::string::npos) << out;
  EXPECT_EQ(exec({"/bin/echo", "alive"}).first, "alive\n");
  EXPECT_FALSE(live_->ended());
}

TEST_P(SessionEscape, CannotConnectToAHostLoopbackPort) {
  unique_fd listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
  ASSERT_EQ(::listen(listener.get(), 4), 0);
  socklen_t len = sizeof sa;
  ::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&sa), &len);
  auto [out, code] = exec({hostile, "connect", "127.0.0.1", std::to_string(ntohs(sa.sin_port))});
  EXPECT_EQ(out, "refused connect: ECONNREFUSED\n");
  EXPECT_LT(::accept(listener.get(), nullptr, nullptr), 0);
}

TEST_P(SessionEscape, NoMountKexecOrModuleAndASetuidBinaryGrantsNothing) {
  // An image's /usr (made here: busybox has none) is the session's own; mounting on it is not.
  auto [out, code] = exec({"/bin/sh", "-c",
                           fmt::format("{1}{0} mount-usr; {0} kexec; {0} init-module; exit 0",
                                       hostile, image() ? "mkdir -p /usr; " : "")});
  EXPECT_NE(out.find("refused mount tmpfs on /usr: EPERM"), std::string::npos) << out;
  EXPECT_NE(out.find("refused kexec_load: EPERM"), std::string::npos) << out;
  EXPECT_NE(out.find("refused init_module: EPERM"), std::string::npos) << out;
  const fs::path planted = session_->workspace_dir() / "suid-tool";
  fs::copy_file(tools_dir / "evalbox-hostile", planted);
  ASSERT_EQ(::chown(planted.c_str(), 0, 0), 0);
  ASSERT_EQ(::chmod(planted.c_str(), 04755), 0);
  EXPECT_EQ(exec({"/workspace/suid-tool", "whoami"}).first, "euid 0 capeff 0000000000000000\n");
}

TEST_P(SessionEscape, AForkBombHitsTheSessionsPidsLimitAndTheSessionGoesOn) {
  auto [out, code] = exec({hostile, "fork-bomb", "200"});
  int forked = -1, refused = -1;
  ASSERT_EQ(std::sscanf(out.c_str(), "forked %d refused %d", &forked, &refused), 2) << out;
  EXPECT_LT(forked, 64);
  EXPECT_GT(refused, 130);
  // Its children sleep 3 s, then the session's pids are free again.
  std::this_thread::sleep_for(3500ms);
  EXPECT_EQ(exec({"/bin/echo", "alive"}).first, "alive\n");
}

TEST_P(SessionEscape, WhatAnExecLeavesRunningDiesWhenTheSessionStops) {
  const fs::path marker = uppers_ / "workspace" / "upper" / "late";
  auto [out, code] =
      exec({"/bin/sh", "-c",
            "(sleep 1; touch /workspace/late) </dev/null >/dev/null 2>&1 & echo started"});
  EXPECT_EQ(out, "started\n");
  ASSERT_TRUE(live_->stop());
  std::this_thread::sleep_for(1500ms);
  EXPECT_FALSE(fs::exists(marker));
}

std::string root_name(const ::testing::TestParamInfo<root_kind>& info) {
  return info.param == root_kind::host ? "HostRoot" : "ImageRoot";
}
INSTANTIATE_TEST_SUITE_P(Roots, SessionEscape, ::testing::Values(root_kind::host, root_kind::image),
                         root_name);

}  // namespace
}  // namespace evalbox::sandbox
