// The helper's compilation pass as data: a representative launch plan compiles to exactly the
// step list in tests/data/sandbox/helper/compiled-steps.txt (every step's name, operation and
// arguments, in the order pid 1 and the program's process run them), and the environment the
// program gets. A change to the order or content of the steps shows here as a diff to review.
// compile() looks at the host for the system paths, /etc entries and devices it mounts: the
// golden list is this project's hosts' (Debian 12, merged /usr, with /lib32).
#include <sys/resource.h>

#include <gtest/gtest.h>

#include <string>

#include "sandbox/helper/compile.h"
#include "tests/support/golden.h"

namespace evalbox::sandbox::helper {
namespace {

namespace fs = std::filesystem;

const char* op_name(op kind) {
  switch (kind) {
    case op::wait_parent:
      return "wait_parent";
    case op::set_ids:
      return "set_ids";
    case op::unshare:
      return "unshare";
    case op::mount:
      return "mount";
    case op::set_attr:
      return "set_attr";
    case op::make_dir:
      return "make_dir";
    case op::make_file:
      return "make_file";
    case op::check_target:
      return "check_target";
    case op::make_symlink:
      return "make_symlink";
    case op::write_file:
      return "write_file";
    case op::change_dir:
      return "change_dir";
    case op::pivot_root:
      return "pivot_root";
    case op::set_hostname:
      return "set_hostname";
    case op::loopback_up:
      return "loopback_up";
    case op::listen_pass:
      return "listen_pass";
    case op::rlimit:
      return "rlimit";
    case op::death_signal:
      return "death_signal";
    case op::open_path:
      return "open_path";
    case op::close_range:
      return "close_range";
    case op::new_session:
      return "new_session";
    case op::stdio:
      return "stdio";
    case op::close_fds:
      return "close_fds";
    case op::oom_score:
      return "oom_score";
    case op::no_new_privs:
      return "no_new_privs";
    case op::drop_caps:
      return "drop_caps";
    case op::landlock:
      return "landlock";
    case op::seccomp:
      return "seccomp";
    case op::exec:
      return "exec";
  }
  return "?";
}

// Newlines and backslashes escaped, so that one step is one line.
std::string escaped(const char* text) {
  std::string out;
  for (const char* p = text; *p; ++p) {
    if (*p == '\n') {
      out += "\\n";
    } else if (*p == '\\') {
      out += "\\\\";
    } else {
      out += *p;
    }
  }
  return out;
}

// One line per step: phase, name, then the operation and every field it sets.
std::string render(const compiled& c) {
  std::string out;
  auto steps = [&](const char* phase, const std::vector<step>& list) {
    for (const step& s : list) {
      out += fmt::format("{} [{}] {}", phase, s.name, op_name(s.kind));
      if (s.a) out += fmt::format(" a={}", escaped(s.a));
      if (s.b) out += fmt::format(" b={}", escaped(s.b));
      if (s.c) out += fmt::format(" c={}", escaped(s.c));
      if (s.data) out += fmt::format(" data={}", escaped(s.data));
      if (s.flags) out += fmt::format(" flags={:#x}", s.flags);
      // `mode` is a file mode for what creates files, else a number (an fd, a resource).
      const bool file_mode =
          s.kind == op::make_dir || s.kind == op::make_file || s.kind == op::write_file;
      if (s.mode)
        out += file_mode ? fmt::format(" mode={:#o}", s.mode) : fmt::format(" mode={}", s.mode);
      if (s.len) out += fmt::format(" len={}", s.len);
      if (s.len2) out += fmt::format(" len2={}", s.len2);
      out += "\n";
    }
  };
  steps("setup", c.ctx.setup);
  steps("program", c.ctx.program);
  for (char* const* a = c.ctx.argv; *a; ++a) out += fmt::format("argv {}\n", *a);
  for (char* const* e = c.ctx.envp; *e; ++e) out += fmt::format("env {}\n", *e);
  return out;
}

// A launch of an agent with every kind of mount the preparer and the harness make: a leased
// credential, a bundle, a read-only path below a system symlink and one below /tmp, the
// grader, a writable extra mount; network `allow` with a relayed loopback port and a proxied
// host name.
launch_plan representative_plan() {
  launch_plan p;
  p.run_id = "golden";
  p.label = "agent";
  p.seq = 7;
  p.host_uid = 60000;
  p.host_gid = 60000;
  p.root_dir = "/state/runs/golden/launches/agent-7.root";
  p.workspace_dir = "/state/runs/golden/workspace";
  p.home_dir = "/state/runs/golden/disk/home";
  p.mounts = {
      {"/state/credential-leases/codex-0123", "/home/agent/.codex/auth.json", true, true},
      {"/opt/bundles/tools", "/evalbox/bin", false, false},
      {"/opt/agent/os-release", "/lib/os-release", false, true},
      {"/tmp/evalbox-agent/bin", "/tmp/evalbox-agent/bin", false, false},
      {"/project/fixture/grader", "/grader", false, false},
      {"/state/runs/golden/scratch", "/evalbox/out", true, false},
  };
  p.argv = {"/usr/bin/agent", "--task", "fix the bug"};
  p.env = {{"HOME", "/home/agent"}, {"PATH", "/usr/bin:/bin"}};
  p.cwd = "/workspace";
  p.limits.cpu_ms = 90'500;
  p.limits.disk_bytes = 1ull << 30;
  p.tmp_bytes = 256ull << 20;
  p.disk_quota = true;
  p.network.mode = network_mode::allow;
  p.network.allow = {"127.0.0.1:8080", "api.example.com:443"};
  p.landlock = true;
  p.hostname = "evalbox";
  return p;
}

TEST(CompilePlan, StepsMatchTheGoldenList) {
  // The nofile limit is derived from the helper's own hard limit: fix it.
  rlimit nofile{4096, 8192};
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &nofile), 0);
  compiled c;
  ASSERT_TRUE(compile(representative_plan(), c));
  evalbox::testing::expect_golden(
      render(c), fs::path(EVALBOX_SOURCE_DIR) / "tests/data/sandbox/helper/compiled-steps.txt");
}

}  // namespace
}  // namespace evalbox::sandbox::helper
