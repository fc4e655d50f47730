// The helper's compilation pass as data: a representative launch plan compiles to exactly the
// step list in tests/data/sandbox/helper/compiled-steps.txt (every step's name, operation and
// arguments, in the order pid 1 and the program's process run them), and the environment the
// program gets. A change to the order or content of the steps shows here as a diff to review.
// The plan is compiled against a fixed host view: this project's hosts (Debian 12, merged
// /usr, with /lib32), so that the list is the same wherever the test runs.
#include <sys/resource.h>
#include <sys/stat.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "base/json.h"
#include "sandbox/helper/compile.h"
#include "sandbox/spec/system_paths.h"
#include "tests/support/golden.h"

namespace evalbox::sandbox::helper {
namespace {

namespace fs = std::filesystem;

const char* op_name(op kind) {
  switch (kind) {
    case op::wait_parent:
      return "wait_parent";
    case op::enter_cgroups:
      return "enter_cgroups";
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
    case op::terminal:
      return "terminal";
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
    case op::fs_open:
      return "fs_open";
    case op::fs_config:
      return "fs_config";
    case op::fs_attach:
      return "fs_attach";
    case op::exec:
      return "exec";
    case op::unblock_signals:
      return "unblock_signals";
    case op::controlling_tty:
      return "controlling_tty";
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
      if (s.source) out += fmt::format(" source={}", escaped(s.source));
      if (s.target) out += fmt::format(" target={}", escaped(s.target));
      if (s.fstype) out += fmt::format(" fstype={}", escaped(s.fstype));
      if (s.data) out += fmt::format(" data={}", escaped(s.data));
      if (s.key) out += fmt::format(" key={}", escaped(s.key));
      if (s.value) out += fmt::format(" value={}", escaped(s.value));
      if (s.flags) out += fmt::format(" flags={:#x}", s.flags);
      if (s.size) out += fmt::format(" size={}", s.size);
      if (s.kind == op::rlimit)
        out += fmt::format(" resource={} soft={} hard={}", s.resource, s.soft, s.hard);
      if (s.mode) out += fmt::format(" mode={:#o}", s.mode);
      if (s.fd >= 0) out += fmt::format(" fd={}", s.fd);
      if (s.target_fd >= 0) out += fmt::format(" target_fd={}", s.target_fd);
      if (s.last_fd >= 0) out += fmt::format(" last_fd={}", s.last_fd);
      if (s.kind == op::listen_pass)
        out += fmt::format(" port={} index={}{}", s.port, s.index, s.ipv6 ? " ipv6" : "");
      if (s.recursive) out += " recursive";
      if (s.replace_symlink) out += " replace_symlink";
      out += "\n";
    }
  };
  steps("setup", c.ctx.setup);
  steps("program", c.ctx.program);
  if (c.ctx.exec_candidates)
    for (const char* const* p = c.ctx.exec_candidates; *p; ++p)
      out += fmt::format("exec candidate {}\n", *p);
  for (const auto& [path, content] : c.host_files)
    out += fmt::format("host file {} {}\n", path, escaped(content.c_str()));
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

using kind = host_view::path_entry::kind;

// Debian 12 with merged /usr and multilib: what look_at_host() sees on this project's hosts.
host_view debian_host() {
  host_view h;
  h.paths = {
      {"/usr", {kind::directory, ""}},
      {"/bin", {kind::symlink, "usr/bin"}},
      {"/sbin", {kind::symlink, "usr/sbin"}},
      {"/lib", {kind::symlink, "usr/lib"}},
      {"/lib32", {kind::symlink, "usr/lib32"}},
      {"/lib64", {kind::symlink, "usr/lib64"}},
      {"/etc/ssl", {kind::directory, ""}},
      {"/etc/ca-certificates", {kind::directory, ""}},
      {"/etc/alternatives", {kind::directory, ""}},
      {"/etc/ld.so.cache", {kind::file, ""}},
      {"/etc/localtime", {kind::symlink, "/usr/share/zoneinfo/Etc/UTC"}},
  };
  h.devices = {"null", "zero", "full", "random", "urandom", "tty"};
  h.nofile_hard = 8192;
  h.landlock_abi = 6;
  h.cap_last = 40;
  h.resolv_conf = "nameserver 192.0.2.53\n";
  return h;
}

// The names of the steps of `list`, in order.
std::vector<std::string> names(const std::vector<step>& list) {
  std::vector<std::string> out;
  for (const step& s : list) out.push_back(s.name);
  return out;
}

bool has_step(const std::vector<step>& list, const std::string& name) {
  const auto all = names(list);
  return std::find(all.begin(), all.end(), name) != all.end();
}

TEST(CompilePlan, StepsMatchTheGoldenList) {
  compiled c;
  ASSERT_TRUE(compile(representative_plan(), debian_host(), c));
  evalbox::testing::expect_golden(
      render(c), fs::path(EVALBOX_SOURCE_DIR) / "tests/data/sandbox/helper/compiled-steps.txt");
}

// The same agent in an image's root, started by a bare name: the layers are opened with the
// other sources, the overlay is made after the id change and attached as the new root, no host
// system path is bound, /etc gets generated files over the image's, every mount target is
// checked beneath the root, / stays writable, and the program is looked up on its PATH.
launch_plan image_plan() {
  launch_plan p = representative_plan();
  p.image = launch_image{{"/state/images/layers/bbbb/tree", "/state/images/layers/aaaa/tree"},
                         "/state/runs/golden/disk/root/upper",
                         "/state/runs/golden/disk/root/work",
                         "sha256:1111",
                         "oci:/images/py313:latest",
                         "sha256:2222",
                         {"sha256:aaaa", "sha256:bbbb"}};
  p.workspace_target = "/app";
  p.cwd = "/app";
  p.argv = {"python3", "-m", "agent"};
  p.env = {{"HOME", "/home/agent"}, {"PATH", "/usr/local/bin:/usr/bin::/bin"}};
  return p;
}

TEST(CompilePlan, AnImageRootMatchesTheGoldenList) {
  compiled c;
  ASSERT_TRUE(compile(image_plan(), debian_host(), c));
  evalbox::testing::expect_golden(
      render(c),
      fs::path(EVALBOX_SOURCE_DIR) / "tests/data/sandbox/helper/compiled-image-steps.txt");
  EXPECT_EQ(c.ll.abi, 6);
}

TEST(CompilePlan, ABareProgramWithoutPathInItsEnvironmentIsNotFoundAndSaysWhy) {
  launch_plan p = representative_plan();
  p.argv = {"make", "test"};
  p.env.erase("PATH");
  compiled c;
  ASSERT_TRUE(compile(p, debian_host(), c));
  ASSERT_NE(c.ctx.exec_candidates, nullptr);
  EXPECT_EQ(c.ctx.exec_candidates[0], nullptr);
  EXPECT_EQ(names(c.ctx.program).back(), "execve make (no PATH to find it on)");
}

// The helper mounts every system path the host has, in the order of spec/system_paths.h: a
// directory is bound read-only, a symlink recreated, a missing one skipped.
TEST(CompilePlan, MountsEverySystemPathTheHostHasInTheListsOrder) {
  host_view h = debian_host();
  for (std::string_view p : system_paths) h.paths[std::string(p)] = {kind::directory, ""};
  h.paths["/lib32"] = {kind::symlink, "usr/lib32"};
  h.paths.erase("/libx32");
  compiled c;
  ASSERT_TRUE(compile(representative_plan(), h, c));
  std::vector<std::string> seen;
  for (const std::string& n : names(c.ctx.setup)) {
    for (std::string_view p : system_paths) {
      if (n == "read-only " + std::string(p) || n == "symlink " + std::string(p)) seen.push_back(n);
    }
  }
  EXPECT_EQ(seen,
            (std::vector<std::string>{"read-only /usr", "read-only /bin", "read-only /sbin",
                                      "read-only /lib", "symlink /lib32", "read-only /lib64"}));
}

TEST(CompilePlan, HostNetworkNeedsTheUnsafeOptIn) {
  launch_plan p = representative_plan();
  p.network = {network_mode::host, {}, false};
  compiled refused;
  auto r = compile(p, debian_host(), refused);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "network host requires network.unsafe_host_network");

  p.network.unsafe_host_network = true;
  compiled c;
  ASSERT_TRUE(compile(p, debian_host(), c));
  // The host's network: its name service, no loopback of our own, no listeners.
  EXPECT_FALSE(has_step(c.ctx.setup, "loopback up"));
  bool resolv = false;
  for (const step& s : c.ctx.setup) {
    if (std::string(s.name) == "write /etc/resolv.conf") {
      resolv = true;
      EXPECT_STREQ(s.data, "nameserver 192.0.2.53\n");
    }
  }
  EXPECT_TRUE(resolv);
}

TEST(CompilePlan, ANonLoopbackAddressInTheAllowListIsRefused) {
  launch_plan p = representative_plan();
  p.network.allow = {"192.0.2.10:443"};
  compiled c;
  auto r = compile(p, debian_host(), c);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("only loopback IP literals or host names"), std::string::npos)
      << r.error().message;
}

TEST(CompilePlan, WithoutLandlockTheProgramKeepsSetfcapAndTheRecordSaysWhy) {
  launch_plan p = representative_plan();
  p.landlock = false;
  compiled c;
  ASSERT_TRUE(compile(p, debian_host(), c));
  EXPECT_TRUE(c.ctx.keep_setfcap);
  EXPECT_EQ(c.ctx.landlock, nullptr);
  EXPECT_EQ(c.ll.abi, 0);
  EXPECT_EQ(c.landlock_reason, "disabled for this candidate (its own sandbox needs mount)");

  host_view no_landlock = debian_host();
  no_landlock.landlock_abi = 0;
  compiled k;
  ASSERT_TRUE(compile(representative_plan(), no_landlock, k));
  EXPECT_FALSE(k.ctx.keep_setfcap);
  EXPECT_EQ(k.landlock_reason, "the kernel does not offer Landlock");

  compiled on;
  ASSERT_TRUE(compile(representative_plan(), debian_host(), on));
  ASSERT_NE(on.ctx.landlock, nullptr);
  EXPECT_EQ(on.ll.abi, 6);
  EXPECT_EQ(on.ctx.cap_last, 40);
}

TEST(CompilePlan, APassedThroughTerminalKeepsTheCallersSession) {
  launch_plan p = representative_plan();
  p.inherit_stdio = true;
  compiled c;
  ASSERT_TRUE(compile(p, debian_host(), c));
  EXPECT_EQ(names(c.ctx.program).front(), "stdio");
}

// A terminal of its own: a new session first (a controlling terminal is only acquired by a
// session leader), then the pseudo-terminal, before stdio and everything that drops privileges.
TEST(CompilePlan, ATerminalOfItsOwnComesAfterANewSessionAndBeforeStdio) {
  launch_plan p = representative_plan();
  p.inherit_stdio = true;
  p.terminal = true;
  compiled c;
  ASSERT_TRUE(compile(p, debian_host(), c));
  const auto program = names(c.ctx.program);
  ASSERT_GE(program.size(), 3u);
  EXPECT_EQ(program[0], "new session");
  EXPECT_EQ(program[1], "terminal /dev/pts/ptmx");
  EXPECT_EQ(program[2], "stdio");
  // The plan carries it to the helper (and an older plan without the field has none).
  auto back = launch_plan::from_json(p.to_json());
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_TRUE(back->terminal);
  json old = p.to_json();
  old.erase("terminal");
  auto older = launch_plan::from_json(old);
  ASSERT_TRUE(older) << older.error().message;
  EXPECT_FALSE(older->terminal);
}

// Pid 1 makes a directory of the new root once — but a mount hides what was made below its
// point, so a directory made there before is made again for a target that comes after it.
TEST(CompilePlan, ADirectoryIsMadeOnceUnlessAMountHidItSince) {
  launch_plan p = representative_plan();
  p.mounts = {
      {"/opt/x", "/opt/a/b", false, false},  // makes /opt and /opt/a
      {"/opt/y", "/opt/a/c", false, false},  // both there: neither made again
      {"/opt/z", "/opt", false, false},      // hides /opt/a
      {"/opt/w", "/opt/a/d", false, false},  // /opt/a made again, in the bound /opt
  };
  compiled c;
  ASSERT_TRUE(compile(p, debian_host(), c));
  const auto all = names(c.ctx.setup);
  EXPECT_EQ(std::count(all.begin(), all.end(), "mkdir /opt"), 1);
  EXPECT_EQ(std::count(all.begin(), all.end(), "mkdir /etc"), 1) << "four /etc binds, one mkdir";
  const auto first = std::find(all.begin(), all.end(), "mkdir /opt/a");
  ASSERT_NE(first, all.end());
  const auto hiding = std::find(all.begin(), all.end(), "bind /opt");
  const auto again = std::find(std::next(first), all.end(), "mkdir /opt/a");
  ASSERT_NE(hiding, all.end());
  ASSERT_NE(again, all.end()) << "a target below a later mount needs its parents made again";
  EXPECT_LT(first, hiding);
  EXPECT_LT(hiding, again);
  EXPECT_EQ(std::count(all.begin(), all.end(), "mkdir /opt/a"), 2);
}

// look_at_host() describes this host as it is.
TEST(LookAtHost, SeesTheSystemPathsAsTheyAre) {
  const host_view h = look_at_host(network_mode::none);
  for (std::string_view p : system_paths) {
    struct stat st {};
    const bool exists = ::lstat(std::string(p).c_str(), &st) == 0;
    const auto e = h.at(std::string(p));
    EXPECT_EQ(e.type != kind::missing, exists) << p;
    if (exists) {
      EXPECT_EQ(e.type == kind::symlink, S_ISLNK(st.st_mode)) << p;
    }
  }
  EXPECT_TRUE(h.devices.contains("null"));
  rlimit nofile{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &nofile), 0);
  EXPECT_EQ(h.nofile_hard, nofile.rlim_max);
  EXPECT_EQ(h.resolv_conf, "");  // read for the host network only
}

// A warm helper reads the layout while it waits and adds what the launch's network mode needs
// at the launch: the two parts make the same view as one look, for every mode.
TEST(LookAtHost, TheLayoutReadAheadPlusTheNetworkIsTheWholeView) {
  for (network_mode mode : {network_mode::none, network_mode::allow, network_mode::host}) {
    const host_view whole = look_at_host(mode);
    host_view parts = look_at_host_layout();
    EXPECT_EQ(parts.resolv_conf, "") << "the layout alone never depends on the network";
    look_at_host_network(parts, mode);
    EXPECT_EQ(parts.resolv_conf, whole.resolv_conf);
    EXPECT_EQ(parts.devices, whole.devices);
    EXPECT_EQ(parts.nofile_hard, whole.nofile_hard);
    EXPECT_EQ(parts.landlock_abi, whole.landlock_abi);
    EXPECT_EQ(parts.cap_last, whole.cap_last);
    for (std::string_view p : system_paths) {
      EXPECT_EQ(parts.at(std::string(p)).type, whole.at(std::string(p)).type) << p;
      EXPECT_EQ(parts.at(std::string(p)).link_target, whole.at(std::string(p)).link_target) << p;
    }
  }
  std::error_code ec;
  if (std::filesystem::exists("/etc/resolv.conf", ec)) {
    host_view h = look_at_host_layout();
    look_at_host_network(h, network_mode::host);
    EXPECT_EQ(h.resolv_conf, read_file("/etc/resolv.conf").value_or("<unreadable>"));
  }
}

}  // namespace
}  // namespace evalbox::sandbox::helper
