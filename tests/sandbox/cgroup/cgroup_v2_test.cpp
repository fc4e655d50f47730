// The cgroup v2 implementation against a fake cgroupfs (a plain directory tree): paths, limits,
// controller delegation, usage parsing and removal. The fake tree's cgroups are made with an
// eviction of the test's own (cgroup.h, evict_fn): its "kernel files" are plain files that
// rmdir will not remove, and the pids written into them are not the test's to kill.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "base/fs.h"
#include "sandbox/cgroup/cgroup.h"

namespace evalbox::sandbox::cgroup {
namespace {

// A fake leaf that rmdir refused: its files go with it; nothing is killed.
status remove_fake_leaf(const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  if (ec) return make_error(error_kind::io, "remove {}: {}", dir.string(), ec.message());
  return {};
}

class CgroupV2Fake : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(write_file(root() / "cgroup.controllers", "cpuset cpu io memory pids\n"));
    ASSERT_TRUE(write_file(root() / "cgroup.subtree_control", ""));
  }
  std::filesystem::path root() const { return dir_.path(); }
  result<std::unique_ptr<run_cgroup>> create(const std::string& run_id, const std::string& leaf,
                                             const limits& lim) const {
    return create_v2(root(), run_id, leaf, lim, remove_fake_leaf);
  }
  temp_dir dir_{"evalbox-fake-cgroup"};
};

TEST_F(CgroupV2Fake, CreatesOneLevelRunAtLeafUnderEvalbox) {
  auto cg = create("run1", "agent-1", {64 << 20, 64});
  ASSERT_TRUE(cg) << cg.error().message;
  EXPECT_EQ((*cg)->version(), "v2");
  ASSERT_EQ((*cg)->paths().size(), 1u);
  EXPECT_EQ((*cg)->paths()[0], root() / "evalbox" / "run1@agent-1");
  EXPECT_GE((*cg)->clone_into_fd(), 0);
}

TEST_F(CgroupV2Fake, WritesMemorySwapAndPidsLimits) {
  auto cg = create("run1", "agent-1", {64 << 20, 64});
  ASSERT_TRUE(cg);
  const auto leaf = root() / "evalbox" / "run1@agent-1";
  EXPECT_EQ(read_file(leaf / "memory.max").value_or(""), std::to_string(64 << 20));
  EXPECT_EQ(read_file(leaf / "memory.swap.max").value_or(""), "0");
  EXPECT_EQ(read_file(leaf / "pids.max").value_or(""), "64");
}

TEST_F(CgroupV2Fake, DelegatesOfferedControllersDownTheTree) {
  auto cg = create("run1", "agent-1", {});
  ASSERT_TRUE(cg);
  EXPECT_EQ(read_file(root() / "cgroup.subtree_control").value_or(""), "+memory +pids +cpu ");
}

TEST_F(CgroupV2Fake, ReadsUsageFromCpuStatMemoryPeakAndEvents) {
  auto cg = create("run1", "agent-1", {});
  ASSERT_TRUE(cg);
  const auto leaf = root() / "evalbox" / "run1@agent-1";
  ASSERT_TRUE(write_file(leaf / "cpu.stat", "usage_usec 2500\nuser_usec 2000\nsystem_usec 500\n"));
  ASSERT_TRUE(write_file(leaf / "memory.peak", "1048576\n"));
  ASSERT_TRUE(write_file(leaf / "memory.events", "low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n"));
  ASSERT_TRUE(write_file(leaf / "pids.events", "max 2\n"));
  auto u = (*cg)->read_usage();
  ASSERT_TRUE(u);
  EXPECT_EQ(u->cpu_ns, 2500000u);
  EXPECT_EQ(u->peak_memory_bytes, 1048576u);
  EXPECT_EQ(u->oom_kills, 1u);
  EXPECT_TRUE(u->pids_limit_hit);
}

// memory.events' oom_kill counts every OOM kill in the cgroup, the main process's or a
// child's: what makes a run oom_killed (tests/sandbox/helper/outcome_test.cpp).
TEST_F(CgroupV2Fake, CountsEveryOomKillInTheCgroup) {
  auto cg = create("run1", "agent-1", {64 << 20, 0});
  ASSERT_TRUE(cg);
  const auto leaf = root() / "evalbox" / "run1@agent-1";
  ASSERT_TRUE(write_file(leaf / "memory.events", "low 0\nhigh 0\nmax 40\noom 3\noom_kill 3\n"));
  auto u = (*cg)->read_usage();
  ASSERT_TRUE(u);
  EXPECT_EQ(u->oom_kills, 3u);
  ASSERT_TRUE(write_file(leaf / "memory.events", "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n"));
  EXPECT_EQ((*cg)->read_usage()->oom_kills, 0u);
}

TEST_F(CgroupV2Fake, AddPidWritesCgroupProcs) {
  auto cg = create("run1", "agent-1", {});
  ASSERT_TRUE(cg);
  ASSERT_TRUE((*cg)->add_pid(4242));
  EXPECT_EQ(read_file(root() / "evalbox/run1@agent-1/cgroup.procs").value_or(""), "4242");
}

TEST_F(CgroupV2Fake, DestroyRemovesTheLeafOnlyAndLeavesOtherLaunchesAlone) {
  auto cg = create("run1", "agent-1", {});
  auto other = create("run1", "grade-2", {});
  ASSERT_TRUE(cg);
  ASSERT_TRUE(other);
  ASSERT_TRUE((*cg)->destroy());
  EXPECT_FALSE(std::filesystem::exists(root() / "evalbox" / "run1@agent-1"));
  EXPECT_TRUE(std::filesystem::exists(root() / "evalbox" / "run1@grade-2"));
  EXPECT_TRUE(std::filesystem::exists(root() / "evalbox"));
}

// A leaf that still holds something when it is destroyed (on cgroupfs: tasks; here: the files
// the test wrote) is handed to the cgroup's eviction, which removes it.
TEST_F(CgroupV2Fake, DestroyHandsALeafRmdirRefusesToItsEviction) {
  static std::vector<std::filesystem::path> evicted;
  evicted.clear();
  auto record = [](const std::filesystem::path& dir) -> status {
    evicted.push_back(dir);
    return remove_fake_leaf(dir);
  };
  auto cg = create_v2(root(), "run1", "agent-1", {64 << 20, 64}, record);
  ASSERT_TRUE(cg) << cg.error().message;
  ASSERT_TRUE((*cg)->add_pid(4242));  // a plain file here: never a process to kill
  ASSERT_TRUE((*cg)->destroy());
  ASSERT_EQ(evicted.size(), 1u);
  EXPECT_EQ(evicted[0], root() / "evalbox" / "run1@agent-1");
  EXPECT_FALSE(std::filesystem::exists(evicted[0]));
  ASSERT_TRUE((*cg)->destroy());  // idempotent: nothing more is evicted
  EXPECT_EQ(evicted.size(), 1u);
}

// Teardown and reclaim find a run's cgroups by name: run "a"'s must never include those of a
// run whose id merely starts with "a" (ids may hold '.', '-' and '_', never '@').
TEST_F(CgroupV2Fake, ARunsCgroupsAreItsOwnNotThoseOfALookAlikeRunId) {
  std::vector<std::unique_ptr<run_cgroup>> live;
  for (const char* id : {"a", "a.b", "a-b", "a_b", "ab"}) {
    auto cg = create(id, "agent-1", {});
    ASSERT_TRUE(cg) << cg.error().message;
    live.push_back(std::move(*cg));
  }
  ASSERT_TRUE(make_dirs(root() / "evalbox" / "a" / "agent-0"));  // an earlier version's
  auto found = run_cgroups_in(root() / "evalbox", "a");
  std::sort(found.begin(), found.end());
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(found[0], root() / "evalbox" / "a");
  EXPECT_EQ(found[1], root() / "evalbox" / "a@agent-1");
  EXPECT_TRUE(run_cgroups_in(root() / "evalbox", "a.").empty());
  EXPECT_TRUE(run_cgroups_in(root() / "missing", "a").empty());
}

TEST_F(CgroupV2Fake, ASecondLaunchOfTheSameLabelAndSeqIsRefused) {
  auto a = create("run1", "agent-1", {});
  ASSERT_TRUE(a);
  auto b = create("run1", "agent-1", {});
  EXPECT_FALSE(b);
}

}  // namespace
}  // namespace evalbox::sandbox::cgroup
