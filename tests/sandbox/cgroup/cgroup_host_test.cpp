// A run cgroup on this host's real hierarchy (v1 or v2, as a launch would choose): its removal
// at a run's end. The usual end finds it empty (one rmdir per directory); one that still holds a
// task has that task killed before it goes, so no process outlives its run's cgroup.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

#include <fmt/format.h>

#include "sandbox/cgroup/cgroup.h"
#include "tests/support/isolation.h"

namespace evalbox::sandbox::cgroup {
namespace {

bool host_has_cgroups() {
  const auto& h = testing::host();
  return h.root && (!h.cgroup_v2_controllers.empty() || !h.cgroup_v1_controllers.empty());
}

TEST(CgroupOnTheHost, AnEmptyRunCgroupIsRemoved) {
  EVALBOX_REQUIRE_FEATURE(host_has_cgroups(), "root with a writable cgroup hierarchy");
  auto cg = create_for_host(fmt::format("cgtest-{}", ::getpid()), "empty-1", {64 << 20, 16});
  ASSERT_TRUE(cg) << cg.error().message;
  const auto dirs = (*cg)->paths();
  ASSERT_FALSE(dirs.empty());
  for (const auto& d : dirs) ASSERT_TRUE(std::filesystem::is_directory(d)) << d;
  ASSERT_TRUE((*cg)->destroy());
  for (const auto& d : dirs) EXPECT_FALSE(std::filesystem::exists(d)) << d;
}

TEST(CgroupOnTheHost, ARunCgroupStillHoldingATaskHasItKilledBeforeItIsRemoved) {
  EVALBOX_REQUIRE_FEATURE(host_has_cgroups(), "root with a writable cgroup hierarchy");
  auto cg = create_for_host(fmt::format("cgtest-{}", ::getpid()), "held-1", {64 << 20, 16});
  ASSERT_TRUE(cg) << cg.error().message;
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::alarm(30);  // a second fence: never outlives a broken test by long
    for (;;) ::pause();
  }
  ASSERT_TRUE((*cg)->add_pid(child));
  const auto dirs = (*cg)->paths();
  ASSERT_TRUE((*cg)->destroy());
  int st = 0;
  ASSERT_EQ(::waitpid(child, &st, 0), child);
  EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) << "status " << st;
  for (const auto& d : dirs) EXPECT_FALSE(std::filesystem::exists(d)) << d;
}

}  // namespace
}  // namespace evalbox::sandbox::cgroup
