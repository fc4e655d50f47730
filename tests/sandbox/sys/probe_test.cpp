// The host probes must tell the truth: each is checked against an independent observation.
#include "sandbox/sys/probe.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <fstream>

#include <gtest/gtest.h>

#include "sandbox/base/json.h"
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

TEST(Probe, EveryMissingFeatureHasAHint) {
  for (const auto& f : testing::host().features()) EXPECT_FALSE(f.hint.empty()) << f.name;
}

}  // namespace
}  // namespace evalbox
