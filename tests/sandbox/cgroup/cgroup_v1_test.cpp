// The cgroup v1 implementation's accounting against a fake tree (plain directories standing for
// the memory, pids and cpuacct mounts): what the run record's OOM kills, peak memory, CPU time
// and pids limit come from on a v1 host. The real hierarchy is exercised by tests/escape.
#include <gtest/gtest.h>

#include "base/fs.h"
#include "base/json.h"
#include "sandbox/cgroup/cgroup.h"

namespace evalbox::sandbox::cgroup {
namespace {

class CgroupV1Fake : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* c : {"memory", "pids", "cpuacct"}) ASSERT_TRUE(make_dirs(dir_.path() / c));
  }
  std::map<std::string, std::filesystem::path> mounts() const {
    return {{"memory", dir_.path() / "memory"},
            {"pids", dir_.path() / "pids"},
            {"cpuacct", dir_.path() / "cpuacct"}};
  }
  std::filesystem::path leaf(const char* controller) const {
    return dir_.path() / controller / "evalbox" / "run1@agent-1";
  }
  temp_dir dir_{"evalbox-fake-cgroup-v1"};
};

TEST_F(CgroupV1Fake, WritesTheMemoryAndPidsLimits) {
  auto cg = create_v1(mounts(), "run1", "agent-1", {256 << 20, 64});
  ASSERT_TRUE(cg) << cg.error().message;
  EXPECT_EQ((*cg)->version(), "v1");
  EXPECT_EQ(read_file(leaf("memory") / "memory.limit_in_bytes").value_or(""),
            std::to_string(256 << 20));
  EXPECT_EQ(read_file(leaf("pids") / "pids.max").value_or(""), "64");
  (*cg)->release();  // a fake tree: nothing to kill
}

// memory.oom_control counts OOM kills of any task in the cgroup (Linux 4.13+): a child killed
// while the main process lives on is counted the same as the main process.
TEST_F(CgroupV1Fake, ReadsOomKillsPeakMemoryCpuAndThePidsLimit) {
  auto cg = create_v1(mounts(), "run1", "agent-1", {256 << 20, 64});
  ASSERT_TRUE(cg) << cg.error().message;
  ASSERT_TRUE(write_file(leaf("memory") / "memory.oom_control",
                         "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n"));
  ASSERT_TRUE(write_file(leaf("memory") / "memory.max_usage_in_bytes", "268435456\n"));
  ASSERT_TRUE(write_file(leaf("cpuacct") / "cpuacct.usage", "1500000000\n"));
  ASSERT_TRUE(write_file(leaf("pids") / "pids.events", "max 5\n"));
  auto u = (*cg)->read_usage();
  ASSERT_TRUE(u);
  EXPECT_EQ(u->oom_kills, 2u);
  EXPECT_EQ(u->peak_memory_bytes, 268435456u);
  EXPECT_EQ(u->cpu_ns, 1500000000u);
  EXPECT_TRUE(u->pids_limit_hit);
  ASSERT_TRUE(write_file(leaf("memory") / "memory.oom_control", "oom_kill_disable 0\n"));
  ASSERT_TRUE(write_file(leaf("pids") / "pids.events", "max 0\n"));
  u = (*cg)->read_usage();
  ASSERT_TRUE(u);
  EXPECT_EQ(u->oom_kills, 0u) << "a kernel without the counter: no kills seen";
  EXPECT_FALSE(u->pids_limit_hit);
  (*cg)->release();
}

// Cgroups made ahead (a warm helper's, before it has a plan) become a launch's at the launch:
// renamed to the launch's name, with its limits; nothing of the "@ahead-" name is left.
TEST_F(CgroupV1Fake, CgroupsMadeAheadAreClaimedUnderTheLaunchsNameWithItsLimits) {
  auto cg = create_ahead_v1(mounts(), 4242);
  ASSERT_TRUE(cg) << cg.error().message;
  for (const char* c : {"memory", "pids", "cpuacct"}) {
    const auto ahead = dir_.path() / c / "evalbox" / "@ahead-4242";
    EXPECT_TRUE(std::filesystem::is_directory(ahead)) << ahead;
    EXPECT_FALSE(std::filesystem::exists(ahead / "pids.max")) << "no limits before the claim";
  }
  ASSERT_TRUE((*cg)->claim("run1", "agent-1", {256 << 20, 64}));
  for (const char* c : {"memory", "pids", "cpuacct"}) {
    EXPECT_FALSE(std::filesystem::exists(dir_.path() / c / "evalbox" / "@ahead-4242")) << c;
    EXPECT_TRUE(std::filesystem::is_directory(leaf(c))) << c;
  }
  EXPECT_EQ(read_file(leaf("memory") / "memory.limit_in_bytes").value_or(""),
            std::to_string(256 << 20));
  EXPECT_EQ(read_file(leaf("pids") / "pids.max").value_or(""), "64");
  const auto paths = (*cg)->paths();
  EXPECT_EQ(paths.size(), 3u);
  for (const auto& p : paths) EXPECT_EQ(p.filename(), "run1@agent-1");
  EXPECT_EQ((*cg)->describe()["leaves"]["pids"], leaf("pids").string());
  EXPECT_EQ(run_cgroups_in(dir_.path() / "pids" / "evalbox", "run1").size(), 1u);
  (*cg)->release();
}

TEST_F(CgroupV1Fake, NoRunIdNamesTheCgroupsMadeAhead) {
  // '@' never appears in a run id, and "<run_id>@" is how a run's cgroups are found: the
  // reclaim of a run never takes a helper's cgroups made ahead, whatever the run is called.
  auto cg = create_ahead_v1(mounts(), 77);
  ASSERT_TRUE(cg) << cg.error().message;
  EXPECT_EQ(ahead_cgroup_name(77), "@ahead-77");
  for (const char* id : {"ahead", "ahead-77"})
    EXPECT_TRUE(run_cgroups_in(dir_.path() / "memory" / "evalbox", id).empty()) << id;
  (*cg)->release();
}

}  // namespace
}  // namespace evalbox::sandbox::cgroup
