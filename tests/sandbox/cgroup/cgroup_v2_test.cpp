// The cgroup v2 implementation against a fake cgroupfs (a plain directory tree): paths, limits,
// controller delegation, usage parsing and removal.
#include <gtest/gtest.h>

#include "sandbox/base/fs.h"
#include "sandbox/cgroup/cgroup.h"

namespace evalbox::sandbox::cgroup {
namespace {

class CgroupV2Fake : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(write_file(root() / "cgroup.controllers", "cpuset cpu io memory pids\n"));
    ASSERT_TRUE(write_file(root() / "cgroup.subtree_control", ""));
  }
  std::filesystem::path root() const { return dir_.path(); }
  temp_dir dir_{"evalbox-fake-cgroup"};
};

TEST_F(CgroupV2Fake, CreatesTheLeafUnderEvalboxRunId) {
  auto cg = create_v2(root(), "run1", "agent-1", {64 << 20, 64});
  ASSERT_TRUE(cg) << cg.error().message;
  EXPECT_EQ((*cg)->version(), "v2");
  ASSERT_EQ((*cg)->paths().size(), 1u);
  EXPECT_EQ((*cg)->paths()[0], root() / "evalbox" / "run1" / "agent-1");
  EXPECT_GE((*cg)->clone_into_fd(), 0);
}

TEST_F(CgroupV2Fake, WritesMemorySwapAndPidsLimits) {
  auto cg = create_v2(root(), "run1", "agent-1", {64 << 20, 64});
  ASSERT_TRUE(cg);
  const auto leaf = root() / "evalbox" / "run1" / "agent-1";
  EXPECT_EQ(read_file(leaf / "memory.max").value_or(""), std::to_string(64 << 20));
  EXPECT_EQ(read_file(leaf / "memory.swap.max").value_or(""), "0");
  EXPECT_EQ(read_file(leaf / "pids.max").value_or(""), "64");
}

TEST_F(CgroupV2Fake, DelegatesOfferedControllersDownTheTree) {
  auto cg = create_v2(root(), "run1", "agent-1", {});
  ASSERT_TRUE(cg);
  EXPECT_EQ(read_file(root() / "cgroup.subtree_control").value_or(""), "+memory +pids +cpu ");
}

TEST_F(CgroupV2Fake, ReadsUsageFromCpuStatMemoryPeakAndEvents) {
  auto cg = create_v2(root(), "run1", "agent-1", {});
  ASSERT_TRUE(cg);
  const auto leaf = root() / "evalbox" / "run1" / "agent-1";
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

TEST_F(CgroupV2Fake, AddPidWritesCgroupProcs) {
  auto cg = create_v2(root(), "run1", "agent-1", {});
  ASSERT_TRUE(cg);
  ASSERT_TRUE((*cg)->add_pid(4242));
  EXPECT_EQ(read_file(root() / "evalbox/run1/agent-1/cgroup.procs").value_or(""), "4242");
}

TEST_F(CgroupV2Fake, DestroyRemovesTheLeafAndTheRunDirectory) {
  auto cg = create_v2(root(), "run1", "agent-1", {});
  ASSERT_TRUE(cg);
  ASSERT_TRUE((*cg)->destroy());
  EXPECT_FALSE(std::filesystem::exists(root() / "evalbox" / "run1"));
  EXPECT_TRUE(std::filesystem::exists(root() / "evalbox"));
}

TEST_F(CgroupV2Fake, ASecondLaunchOfTheSameLabelAndSeqIsRefused) {
  auto a = create_v2(root(), "run1", "agent-1", {});
  ASSERT_TRUE(a);
  auto b = create_v2(root(), "run1", "agent-1", {});
  EXPECT_FALSE(b);
}

}  // namespace
}  // namespace evalbox::sandbox::cgroup
