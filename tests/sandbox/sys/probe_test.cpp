// The host probes must tell the truth: each is checked against an independent observation.
#include "sandbox/sys/probe.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <fstream>
#include <optional>

#include <gtest/gtest.h>

#include "base/fs.h"
#include "base/json.h"
#include "tests/support/isolation.h"

namespace evalbox {
namespace {

TEST(Probe, ReportsKernelAndIdentity) {
  const auto& h = testing::host();
  struct utsname u {};
  ASSERT_EQ(::uname(&u), 0);
  EXPECT_EQ(h.kernel, u.release);
  EXPECT_EQ(h.root, ::geteuid() == 0);
}

TEST(Probe, OverlayMatchesProcFilesystems) {
  std::ifstream in("/proc/filesystems");
  std::string all((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(testing::host().overlayfs, all.find("\toverlay\n") != std::string::npos);
}

TEST(Probe, DefaultSandboxFeaturesPresent) {
  const auto& h = testing::host();
  EVALBOX_REQUIRE_FEATURE(h.sandbox_ready(), "namespaces, seccomp and cgroup limits");
  EXPECT_TRUE(h.user_namespaces);
  EXPECT_TRUE(h.mount_namespaces);
  EXPECT_TRUE(h.pid_namespaces);
  EXPECT_TRUE(h.net_namespaces);
  EXPECT_TRUE(h.seccomp_filter);
}

TEST(Probe, JsonHasSchemaAndEveryFeature) {
  auto j = testing::host().to_json();
  EXPECT_EQ(j["schema"], "evalbox.host.v1");
  for (const auto& f : testing::host().features()) {
    ASSERT_TRUE(j["features"].contains(f.name)) << f.name;
    if (!f.available) {
      EXPECT_FALSE(j["features"][f.name]["hint"].get<std::string>().empty());
    }
  }
}

// Without root a run goes ahead without a cgroup (rlimits only), so a host without cgroups can
// still sandbox an unprivileged user: doctor must not fail a node that `evalbox run` can use.
TEST(Probe, CgroupLimitsAreRequiredOnlyAsRoot) {
  sys::host_features h;
  h.user_namespaces = h.mount_namespaces = h.pid_namespaces = h.net_namespaces = true;
  h.seccomp_filter = true;
  h.root = false;
  EXPECT_TRUE(h.sandbox_ready()) << "unprivileged, namespaces and seccomp: enough";
  h.root = true;
  EXPECT_FALSE(h.sandbox_ready()) << "as root the launch needs cgroup limits";
  h.cgroup_v1_controllers = {"memory", "pids"};
  EXPECT_TRUE(h.sandbox_ready());
  h.root = false;
  h.cgroup_v1_controllers.clear();
  h.user_namespaces = false;
  EXPECT_FALSE(h.sandbox_ready()) << "no user namespaces: no sandbox";
}

// On cgroup v1 pid 1 moves itself into its cgroups; before kernel 5.17 that move waits for an RCU
// grace period after idle time unless grace periods are expedited: doctor says so, only where
// v1 is what is used.
TEST(Probe, CgroupV1MovesAreReportedWhereV1IsUsed) {
  auto find = [](const sys::host_features& h) -> std::optional<sys::feature> {
    for (const auto& f : h.features())
      if (f.name == "cgroup_v1_moves") return f;
    return std::nullopt;
  };
  sys::host_features h;
  h.cgroup_v1_controllers = {"cpuacct", "memory", "pids"};
  h.kernel = "5.10.0-28-amd64";
  h.rcu_expedited = 0;
  auto f = find(h);
  ASSERT_TRUE(f);
  EXPECT_FALSE(f->available);
  EXPECT_FALSE(f->required);
  EXPECT_EQ(f->detail, "kernel 5.10.0-28-amd64, rcu_expedited 0");
  EXPECT_NE(f->hint.find("/sys/kernel/rcu_expedited"), std::string::npos) << f->hint;
  h.rcu_expedited = 1;
  ASSERT_TRUE(find(h));
  EXPECT_TRUE(find(h)->available);
  h.rcu_expedited = 0;
  for (const char* k : {"5.17.0", "6.1.0-18-amd64", "6.18.44-fc-v1147", "10.0"}) {
    h.kernel = k;
    ASSERT_TRUE(find(h));
    EXPECT_TRUE(find(h)->available) << k << ": a task moves itself without the lock";
  }
  for (const char* k : {"5.16.20", "4.19.0", "", "6", "x.y", "5.x"}) {
    h.kernel = k;
    EXPECT_FALSE(h.self_moves_unlocked()) << "'" << k << "'";
  }
  h.cgroup_v2_controllers = {"memory", "pids"};
  EXPECT_FALSE(find(h)) << "v2 clones pid 1 into its cgroup: nothing to say";
  // What this host says agrees with the kernel's own file.
  const auto text = read_file("/sys/kernel/rcu_expedited");
  if (text && !text->empty()) {
    EXPECT_EQ(testing::host().rcu_expedited, (*text)[0] - '0');
  }
}

TEST(Probe, WhiteoutFormMatchesAnIndependentMknod) {
  temp_dir dir("evalbox-probe-whiteout");
  const auto form = sys::probe_whiteout_form(dir.path());
  const auto node = dir.path() / "wh";
  bool chardev = ::mknod(node.c_str(), S_IFCHR | 0600, makedev(0, 0)) == 0;
  EXPECT_EQ(form == sys::whiteout_form::char_device, chardev);
  // The probe leaves nothing behind.
  std::filesystem::remove(node);
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
  EXPECT_EQ(testing::host().to_json()["image_whiteout"],
            std::string(sys::to_string(testing::host().image_whiteout)));
}

TEST(Probe, UserNamespaceOverlayOnThisKernel) {
  // Linux >= 5.11 mounts overlayfs inside a user namespace (userxattr); the project's hosts
  // run 6.x with unprivileged user namespaces, so this must hold where isolation is required.
  EVALBOX_REQUIRE_FEATURE(testing::host().userns_overlay,
                          "overlayfs inside a user namespace (rootless images)");
  EXPECT_TRUE(testing::host().user_namespaces);
}

TEST(Probe, EveryMissingFeatureHasAHint) {
  for (const auto& f : testing::host().features()) EXPECT_FALSE(f.hint.empty()) << f.name;
}

}  // namespace
}  // namespace evalbox
