// A run cgroup on this host's real hierarchy (v1 or v2, as a launch would choose): its removal
// at a run's end. The usual end finds it empty (one rmdir per directory); one that still holds a
// task has that task killed before it goes, so no process outlives its run's cgroup.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <vector>

#include <fmt/format.h>

#include "base/fs.h"
#include "sandbox/cgroup/cgroup.h"
#include "tests/support/isolation.h"

namespace evalbox::sandbox::cgroup {
namespace {

// The host's own hierarchy: no v2 root forced, cgroups made ahead where they apply.
const host_options default_host{};

bool host_has_cgroups() {
  const auto& h = testing::host();
  return h.root && (!h.cgroup_v2_controllers.empty() || !h.cgroup_v1_controllers.empty());
}

TEST(CgroupOnTheHost, AnEmptyRunCgroupIsRemoved) {
  EVALBOX_REQUIRE_FEATURE(host_has_cgroups(), "root with a writable cgroup hierarchy");
  auto cg = create_for_host(default_host, fmt::format("cgtest-{}", ::getpid()), "empty-1",
                            {64 << 20, 16});
  ASSERT_TRUE(cg) << cg.error().message;
  const auto dirs = (*cg)->paths();
  ASSERT_FALSE(dirs.empty());
  for (const auto& d : dirs) ASSERT_TRUE(std::filesystem::is_directory(d)) << d;
  ASSERT_TRUE((*cg)->destroy());
  for (const auto& d : dirs) EXPECT_FALSE(std::filesystem::exists(d)) << d;
}

TEST(CgroupOnTheHost, ARunCgroupStillHoldingATaskHasItKilledBeforeItIsRemoved) {
  EVALBOX_REQUIRE_FEATURE(host_has_cgroups(), "root with a writable cgroup hierarchy");
  auto cg =
      create_for_host(default_host, fmt::format("cgtest-{}", ::getpid()), "held-1", {64 << 20, 16});
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

// On cgroup v1 a task of a run enters the run's cgroups by moving itself (move_self through
// open_tasks): pid 1 does so at its release and a warm helper's starter while it waits. The
// task lands in the leaf of every hierarchy, and a move into a cgroup removed meanwhile fails
// with the kernel's errno instead of leaving the task where it was unnoticed.
TEST(CgroupOnTheHost, OnV1ATaskMovesItselfIntoEveryLeafThroughItsTasksFiles) {
  EVALBOX_REQUIRE_FEATURE(testing::host().root && ahead_applies(default_host),
                          "root and cgroup v1");
  auto cg =
      create_for_host(default_host, fmt::format("cgtest-{}", ::getpid()), "self-1", {64 << 20, 16});
  ASSERT_TRUE(cg) << cg.error().message;
  ASSERT_EQ((*cg)->version(), "v1");
  auto tasks = (*cg)->open_tasks();
  ASSERT_TRUE(tasks) << tasks.error().message;
  const auto dirs = (*cg)->paths();
  ASSERT_EQ(tasks->size(), dirs.size());
  std::vector<int> fds;
  for (const auto& t : *tasks) fds.push_back(t.get());
  int report[2];
  ASSERT_EQ(::pipe(report), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::alarm(30);  // a second fence: never outlives a broken test by long
    const int err = move_self(fds.data(), fds.size());
    (void)!::write(report[1], &err, sizeof err);
    for (;;) ::pause();
  }
  ::close(report[1]);
  int err = -1;
  ASSERT_EQ(::read(report[0], &err, sizeof err), static_cast<ssize_t>(sizeof err));
  ::close(report[0]);
  EXPECT_EQ(err, 0) << std::strerror(err);
  // Each hierarchy's line in /proc/<pid>/cgroup names the leaf (its path below the mount).
  const std::string lines = read_file(fmt::format("/proc/{}/cgroup", child)).value_or("");
  for (const auto& d : dirs) {
    const std::string below = "/evalbox/" + d.filename().string() + "\n";
    EXPECT_NE(lines.find(below), std::string::npos) << d << " not in:\n" << lines;
    const std::string listed = read_file(d / "tasks").value_or("");
    EXPECT_EQ(listed, std::to_string(child) + "\n") << d;
  }
  ASSERT_TRUE((*cg)->destroy());  // kills the child, which is in them
  int st = 0;
  ASSERT_EQ(::waitpid(child, &st, 0), child);
  EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) << "status " << st;
  // The files outlive their directories: a move into a removed cgroup is refused.
  EXPECT_NE(move_self(fds.data(), fds.size()), 0);
}

}  // namespace
}  // namespace evalbox::sandbox::cgroup
