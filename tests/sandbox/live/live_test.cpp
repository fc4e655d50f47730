// A live sandbox over real prepared sessions: pid 1 serves execs with the run's fences, each
// exec's streams are its caller's, its end is reported, and the sandbox ends with no process
// left behind.
#include "sandbox/live/live.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "base/fs.h"
#include "base/unique_fd.h"
#include "tests/support/isolation.h"
#include "tests/support/prep_env.h"

namespace evalbox::sandbox {
namespace {

using evalbox::testing::prep_env;
using namespace std::chrono_literals;

// One exec's pipes: the caller's ends and the exec's.
struct pipes {
  unique_fd in_r, in_w, out_r, out_w, err_r, err_w;
  pipes() {
    int p[2];
    EXPECT_EQ(::pipe2(p, O_CLOEXEC), 0);
    in_r.reset(p[0]);
    in_w.reset(p[1]);
    EXPECT_EQ(::pipe2(p, O_CLOEXEC), 0);
    out_r.reset(p[0]);
    out_w.reset(p[1]);
    EXPECT_EQ(::pipe2(p, O_CLOEXEC), 0);
    err_r.reset(p[0]);
    err_w.reset(p[1]);
  }
  void fill(exec_spec& s) const {
    s.stdin_fd = in_r.get();
    s.stdout_fd = out_w.get();
    s.stderr_fd = err_w.get();
  }
  // After the exec started: only the exec holds its ends.
  void started() {
    in_r.reset();
    out_w.reset();
    err_w.reset();
  }
};

std::string drain(int fd) {
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  return out;
}

bool wait_done(const exec_handle& h, std::chrono::milliseconds timeout = 20s) {
  pollfd p{h.done_fd(), POLLIN, 0};
  return ::poll(&p, 1, static_cast<int>(timeout.count())) == 1;
}

class Live : public ::testing::Test {
 protected:
  void SetUp() override {
    EVALBOX_REQUIRE_FEATURE(evalbox::testing::host().user_namespaces, "user namespaces");
  }
  // Runs `argv` to its end; its stdout, and its wait status.
  std::pair<std::string, int> run(live_sandbox& live, std::vector<std::string> argv,
                                  exec_spec spec = {}) {
    pipes p;
    spec.argv = std::move(argv);
    p.fill(spec);
    auto h = live.exec(spec);
    EXPECT_TRUE(h) << (h ? "" : h.error().message);
    if (!h) return {"", -1};
    p.started();
    p.in_w.reset();
    std::string out = drain(p.out_r.get());
    EXPECT_TRUE(wait_done(**h));
    return {out, (*h)->wait_status().value_or(-1)};
  }
  prep_env env_;
};

TEST_F(Live, ExecsRunInTheSandboxWithTheirOwnStreamsAndStatus) {
  preparer prep(env_.options());
  auto session = prep.prepare(env_.request("live-basic"));
  ASSERT_TRUE(session) << session.error().message;
  auto live = live_sandbox::start(*session, {});
  ASSERT_TRUE(live) << live.error().message;
  auto [out, st] = run(**live, {"/bin/sh", "-c", "pwd; id -u; cat README.md; exit 3"});
  EXPECT_EQ(out, "/workspace\n0\nhello\n");
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 3);
  // A second exec in the same sandbox sees what the first left.
  run(**live, {"/bin/sh", "-c", "echo kept > /tmp/mark"});
  EXPECT_EQ(run(**live, {"cat", "/tmp/mark"}).first, "kept\n");
  auto rec = (*live)->stop();
  ASSERT_TRUE(rec) << rec.error().message;
  EXPECT_EQ(rec->error, "");
  EXPECT_EQ(rec->outcome, outcome_kind::exited);
}

TEST_F(Live, EnvironmentAndDirectoryAreTheExecsOverTheSessions) {
  preparer prep(env_.options());
  auto session = prep.prepare(env_.request("live-env"));
  ASSERT_TRUE(session) << session.error().message;
  auto live = live_sandbox::start(*session, {});
  ASSERT_TRUE(live) << live.error().message;
  exec_spec s;
  s.env = {{"GREETING", "hi there"}};
  s.cwd = "/workspace/src";
  auto [out, st] = run(**live, {"/bin/sh", "-c", "echo \"$GREETING\" \"$PATH\"; pwd"}, s);
  EXPECT_EQ(out, "hi there /usr/bin:/bin\n/workspace/src\n");
}

TEST_F(Live, AMissingProgramOrDirectoryIsNotFoundAndTheSessionGoesOn) {
  preparer prep(env_.options());
  auto session = prep.prepare(env_.request("live-missing"));
  ASSERT_TRUE(session) << session.error().message;
  auto live = live_sandbox::start(*session, {});
  ASSERT_TRUE(live) << live.error().message;
  pipes p;
  exec_spec s;
  s.argv = {"no-such-program-here"};
  p.fill(s);
  auto h = (*live)->exec(s);
  ASSERT_FALSE(h);
  EXPECT_EQ(h.error().kind, error_kind::not_found) << h.error().message;
  s.argv = {"/bin/true"};
  s.cwd = "/nowhere";
  h = (*live)->exec(s);
  ASSERT_FALSE(h);
  EXPECT_EQ(h.error().kind, error_kind::not_found) << h.error().message;
  EXPECT_EQ(run(**live, {"/bin/echo", "still"}).first, "still\n");
}

TEST_F(Live, ManyExecsAtOnce) {
  preparer prep(env_.options());
  auto session = prep.prepare(env_.request("live-many"));
  ASSERT_TRUE(session) << session.error().message;
  auto live = live_sandbox::start(*session, {});
  ASSERT_TRUE(live) << live.error().message;
  std::vector<std::thread> threads;
  std::atomic<int> good{0};
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 10; ++i) {
        auto [out, st] = run(**live, {"/bin/echo", std::to_string(t * 100 + i)});
        if (out == std::to_string(t * 100 + i) + "\n" && WIFEXITED(st) && WEXITSTATUS(st) == 0)
          ++good;
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(good.load(), 80);
  EXPECT_EQ((*live)->running(), 0u);
}

TEST_F(Live, ASignalReachesTheExecsProcessGroupOnly) {
  preparer prep(env_.options());
  auto session = prep.prepare(env_.request("live-signal"));
  ASSERT_TRUE(session) << session.error().message;
  auto live = live_sandbox::start(*session, {});
  ASSERT_TRUE(live) << live.error().message;
  // A long one elsewhere, which must survive.
  pipes other;
  exec_spec so;
  so.argv = {"/bin/sh", "-c", "sleep 30; echo survived"};
  other.fill(so);
  auto survivor = (*live)->exec(so);
  ASSERT_TRUE(survivor) << survivor.error().message;
  pipes p;
  exec_spec s;
  s.argv = {"/bin/sh", "-c", "sleep 60 & sleep 60"};
  p.fill(s);
  auto h = (*live)->exec(s);
  ASSERT_TRUE(h) << h.error().message;
  p.started();
  ASSERT_TRUE((*live)->signal(**h, SIGKILL));
  ASSERT_TRUE(wait_done(**h, 5s));
  const int st = (*h)->wait_status().value_or(0);
  ASSERT_TRUE(WIFSIGNALED(st));
  EXPECT_EQ(WTERMSIG(st), SIGKILL);
  // Its background child went with its group: the output pipe reaches end of file.
  EXPECT_EQ(drain(p.out_r.get()), "");
  EXPECT_FALSE((*survivor)->ended());
}

TEST_F(Live, StopKillsWhatIsLeftAndEndsEveryExec) {
  preparer prep(env_.options());
  auto session = prep.prepare(env_.request("live-stop"));
  ASSERT_TRUE(session) << session.error().message;
  auto live = live_sandbox::start(*session, {});
  ASSERT_TRUE(live) << live.error().message;
  pipes p;
  exec_spec s;
  s.argv = {"/bin/sleep", "60"};
  p.fill(s);
  auto h = (*live)->exec(s);
  ASSERT_TRUE(h) << h.error().message;
  p.started();
  const auto t0 = std::chrono::steady_clock::now();
  auto rec = (*live)->stop();
  ASSERT_TRUE(rec) << rec.error().message;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  EXPECT_TRUE((*h)->ended());
  EXPECT_FALSE((*h)->wait_status());
  EXPECT_TRUE((*live)->ended());
  pipes q;
  s.argv = {"/bin/true"};
  q.fill(s);
  auto after = (*live)->exec(s);
  ASSERT_FALSE(after);
  EXPECT_EQ(after.error().kind, error_kind::cancelled);
}

TEST_F(Live, ATerminalExecGetsAPseudoTerminal) {
  preparer prep(env_.options());
  auto session = prep.prepare(env_.request("live-tty"));
  ASSERT_TRUE(session) << session.error().message;
  auto live = live_sandbox::start(*session, {});
  ASSERT_TRUE(live) << live.error().message;
  exec_spec s;
  s.argv = {"/bin/sh", "-c", "tty; stty size"};
  s.tty = true;
  s.rows = 33;
  s.cols = 101;
  auto h = (*live)->exec(s);
  ASSERT_TRUE(h) << h.error().message;
  unique_fd master = (*h)->take_terminal();
  ASSERT_TRUE(master);
  ASSERT_TRUE(wait_done(**h));
  std::string out;
  char buf[512];
  pollfd pf{master.get(), POLLIN, 0};
  while (::poll(&pf, 1, 200) == 1) {
    const ssize_t n = ::read(master.get(), buf, sizeof buf);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  EXPECT_NE(out.find("/dev/pts/"), std::string::npos) << out;
  EXPECT_NE(out.find("33 101"), std::string::npos) << out;
}

TEST_F(Live, FilesAreReadAndWrittenInsideTheRootAsTheSandboxUser) {
  preparer prep(env_.options());
  auto session = prep.prepare(env_.request("live-files"));
  ASSERT_TRUE(session) << session.error().message;
  auto live = live_sandbox::start(*session, {});
  ASSERT_TRUE(live) << live.error().message;
  live_sandbox& l = **live;
  // Binary-safe both ways, relative paths from the workspace.
  const std::string bytes("a\0b\xff\n", 5);
  auto w = l.write_file("notes/bin.dat", bytes, 0640, false, true);
  ASSERT_TRUE(w) << w.error().message;
  EXPECT_EQ(*w, 5u);
  auto r = l.read_file("/workspace/notes/bin.dat", 1024);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->data, bytes);
  EXPECT_EQ(r->mode, 0640u);
  struct stat st {};
  ASSERT_EQ(::stat((session->workspace_dir() / "notes/bin.dat").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, session->sandbox_uid());
  // The sandbox's programs see it.
  EXPECT_EQ(run(l, {"/bin/sh", "-c", "wc -c < notes/bin.dat"}).first, "5\n");
  ASSERT_TRUE(l.write_file("notes/bin.dat", "more", 0644, true, false));
  EXPECT_EQ(l.read_file("notes/bin.dat", 1024)->data, bytes + "more");
  // Too large is said, not cut.
  auto big = l.read_file("notes/bin.dat", 3);
  ASSERT_TRUE(big);
  EXPECT_TRUE(big->too_large);
  // Listing, sorted, with types.
  auto ls = l.list("/workspace");
  ASSERT_TRUE(ls) << ls.error().message;
  std::vector<std::string> names;
  for (const auto& e : *ls) names.push_back(e.name);
  EXPECT_EQ(names, (std::vector<std::string>{".git", "README.md", "notes", "outside-link",
                                             "readme-link", "src"}));
  EXPECT_EQ((*ls)[3].type, file_entry::kind::symlink);
  EXPECT_EQ((*ls)[2].type, file_entry::kind::dir);
}

TEST_F(Live, NoPathReachesOutsideTheSandboxRoot) {
  preparer prep(env_.options());
  auto session = prep.prepare(env_.request("live-escape"));
  ASSERT_TRUE(session) << session.error().message;
  auto live = live_sandbox::start(*session, {});
  ASSERT_TRUE(live) << live.error().message;
  live_sandbox& l = **live;
  // The host's /etc/passwd names real users; the sandbox's is generated. A link to it, `..`
  // past the root and an absolute path all land in the sandbox's.
  for (const char* p : {"outside-link", "../../../../../../etc/passwd", "/etc/passwd",
                        "/workspace/../../etc/passwd"}) {
    auto r = l.read_file(p, 1 << 20);
    ASSERT_TRUE(r) << p << ": " << r.error().message;
    EXPECT_NE(r->data.find("agent:x:0:0"), std::string::npos) << p;
  }
  // A link planted by the sandbox's own program through /proc's magic links: refused.
  run(l, {"/bin/ln", "-s", "/proc/1/root/etc/hostname", "/workspace/magic"});
  auto magic = l.read_file("magic", 1024);
  EXPECT_FALSE(magic) << magic->data;
  // Where the sandbox may not write, neither may this.
  auto sys = l.write_file("/usr/bin/evalbox-planted", "x", 0755, false, false);
  ASSERT_FALSE(sys);
  EXPECT_EQ(sys.error().kind, error_kind::permission) << sys.error().message;
  // A protected file of the host outside the sandbox is not there at all.
  auto cred = l.read_file((env_.creds / "auth.json").string(), 1024);
  ASSERT_FALSE(cred);
  EXPECT_EQ(cred.error().kind, error_kind::not_found);
}

}  // namespace
}  // namespace evalbox::sandbox
