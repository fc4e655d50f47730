// The launch plan as a pure function of the session and the launch options (plan_launch): what
// the helper is told — the root, the binds, the program and its fences, the streams — and the
// names of the launch's files, with nothing prepared, created or run (no root needed).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "sandbox/launch/launcher.h"

namespace evalbox::sandbox {
namespace {

namespace fs = std::filesystem;

// A bind as one line ("source -> target rw file"), to compare lists of them.
std::string str(const bind_mount& m) {
  return m.source.string() + " -> " + m.target.string() + (m.writable ? " rw" : " ro") +
         (m.is_file ? " file" : "");
}
std::vector<std::string> str(const std::vector<bind_mount>& ms) {
  std::vector<std::string> out;
  for (const auto& m : ms) out.push_back(str(m));
  return out;
}

class PlanLaunch : public ::testing::Test {
 protected:
  void SetUp() override {
    request.run_id = "run1";
    request.argv = {"/bin/agent", "--go"};
    request.env = {{"PATH", "/usr/bin:/bin"}};
    request.limits.disk_bytes = 64ull << 20;
    request.limits.memory_bytes = 512ull << 20;
    request.network.mode = network_mode::none;
    request.landlock = false;
    mounts = {lease, {"/opt/agent", "/opt/agent", false, false}};
    session.request = &request;
    session.sandbox_uid = 60000;
    session.sandbox_gid = 60001;
    session.launch_dir = "/state/runs/run1/launches";
    session.workspace_dir = "/state/runs/run1/workspace";
    session.workspace_target = "/workspace";
    session.home_dir = "/state/runs/run1/disk/home";
    session.mounts = &mounts;
    session.disk_quota_enforced = true;
    session.binding_digest = "sha256:abc";
  }

  // A credential lease: a writable file bind inside the managed home.
  const bind_mount lease{"/state/credential-leases/codex-1", "/home/agent/.codex/auth.json", true,
                         true};
  session_request request;
  std::vector<bind_mount> mounts;
  session_view session;
};

TEST_F(PlanLaunch, NamesEveryFileOfTheLaunchAfterItsLabelAndSeq) {
  launch_options o;
  o.label = "grade";
  const planned_launch l = plan_launch(session, o, 7);
  EXPECT_EQ(l.plan.label, "grade");
  EXPECT_EQ(l.plan.seq, 7);
  EXPECT_EQ(l.plan.run_id, "run1");
  EXPECT_EQ(l.launch_dir, "/state/runs/run1/launches");
  EXPECT_EQ(l.plan_path, "/state/runs/run1/launches/grade-7.plan.json");
  EXPECT_EQ(l.record_path, "/state/runs/run1/launches/grade-7.record.json");
  EXPECT_EQ(l.plan.root_dir, "/state/runs/run1/launches/grade-7.root");
  EXPECT_EQ(l.plan.stdout_path, "/state/runs/run1/launches/grade-7.stdout");
  EXPECT_EQ(l.plan.stderr_path, "/state/runs/run1/launches/grade-7.stderr");
  EXPECT_EQ(l.plan.stdin_path, "") << "no stdin data: /dev/null";
}

TEST_F(PlanLaunch, TakesTheRootBindsAndIdsFromTheSession) {
  const planned_launch l = plan_launch(session, {}, 1);
  EXPECT_EQ(l.plan.host_uid, 60000u);
  EXPECT_EQ(l.plan.host_gid, 60001u);
  EXPECT_EQ(l.plan.workspace_dir, "/state/runs/run1/workspace");
  EXPECT_EQ(l.plan.workspace_target, "/workspace");
  EXPECT_EQ(l.plan.home_dir, "/state/runs/run1/disk/home");
  EXPECT_EQ(str(l.plan.mounts), str(mounts));
  EXPECT_TRUE(l.plan.disk_quota);
  EXPECT_EQ(l.plan.binding_digest, "sha256:abc");
  EXPECT_FALSE(l.plan.image) << "no image: the allow-listed host root";
}

TEST_F(PlanLaunch, RunsTheRequestsProgramWithItsFencesUnlessTheLaunchOverridesThem) {
  const planned_launch defaults = plan_launch(session, {}, 1);
  EXPECT_EQ(defaults.plan.argv, request.argv);
  EXPECT_EQ(defaults.plan.env, request.env);
  EXPECT_EQ(defaults.plan.cwd, "/workspace") << "the workspace target";
  EXPECT_EQ(defaults.plan.limits.memory_bytes, 512ull << 20);
  EXPECT_EQ(defaults.plan.network.mode, network_mode::none);
  EXPECT_FALSE(defaults.plan.landlock);

  launch_options o;
  o.argv = {"/bin/sh", "-c", "true"};
  o.env = std::map<std::string, std::string>{{"A", "1"}};
  o.cwd = "/workspace/src";
  resource_limits lim = request.limits;
  lim.memory_bytes = 1ull << 30;
  o.limits_override = lim;
  network_policy net;
  net.mode = network_mode::allow;
  net.allow = {"api.example.com:443"};
  o.network_override = net;
  const planned_launch l = plan_launch(session, o, 2);
  EXPECT_EQ(l.plan.argv, o.argv);
  EXPECT_EQ(l.plan.env, *o.env);
  EXPECT_EQ(l.plan.cwd, "/workspace/src");
  EXPECT_EQ(l.plan.limits.memory_bytes, 1ull << 30);
  EXPECT_EQ(l.plan.network.mode, network_mode::allow);
  EXPECT_EQ(l.plan.network.allow, net.allow);
  EXPECT_FALSE(l.plan.landlock) << "the request's, always";
}

// The private /tmp is as large as the disk limit, and never more than 1 GiB (nor 1 GiB
// without a disk limit).
TEST_F(PlanLaunch, SizesTheTmpfsByTheDiskLimitUpToOneGiB) {
  EXPECT_EQ(plan_launch(session, {}, 1).plan.tmp_bytes, 64ull << 20);
  request.limits.disk_bytes = 8ull << 30;
  EXPECT_EQ(plan_launch(session, {}, 1).plan.tmp_bytes, 1ull << 30);
  request.limits.disk_bytes = 0;
  EXPECT_EQ(plan_launch(session, {}, 1).plan.tmp_bytes, 1ull << 30);
}

TEST_F(PlanLaunch, LeavesTheCredentialLeasesOutWithoutSecretsAndAddsTheExtraBindsLast) {
  launch_options o;
  o.with_secrets = false;
  const bind_mount grader{"/fixture/grader", "/grader", false, false};
  o.extra_mounts = {grader};
  const planned_launch l = plan_launch(session, o, 1);
  ASSERT_EQ(l.plan.mounts.size(), 2u);
  EXPECT_EQ(str(l.plan.mounts[0]), str(mounts[1])) << "the read-only bind stays";
  EXPECT_EQ(str(l.plan.mounts[1]), str(grader));
  o.with_secrets = true;
  const planned_launch with = plan_launch(session, o, 1);
  ASSERT_EQ(with.plan.mounts.size(), 3u);
  EXPECT_EQ(str(with.plan.mounts[0]), str(lease));
  EXPECT_EQ(str(with.plan.mounts[2]), str(grader));
}

TEST_F(PlanLaunch, StacksTheSessionsImageUnlessTheLaunchWantsTheHostRoot) {
  session_image img;
  img.id = "sha256:1d";
  img.reference = "oci:/images/busybox:latest";
  img.manifest_digest = "sha256:3a";
  img.layers = {"sha256:a", "sha256:b"};
  img.lowers = {"/store/layers/b/tree", "/store/layers/a/tree"};
  img.upper = "/state/runs/run1/disk/root/upper";
  img.work = "/state/runs/run1/disk/root/work";
  session.image = &img;
  const planned_launch l = plan_launch(session, {}, 1);
  ASSERT_TRUE(l.plan.image);
  EXPECT_EQ(l.plan.image->lowers,
            (std::vector<std::string>{"/store/layers/b/tree", "/store/layers/a/tree"}));
  EXPECT_EQ(l.plan.image->upper, "/state/runs/run1/disk/root/upper");
  EXPECT_EQ(l.plan.image->work, "/state/runs/run1/disk/root/work");
  EXPECT_EQ(l.plan.image->id, "sha256:1d");
  EXPECT_EQ(l.plan.image->reference, "oci:/images/busybox:latest");
  EXPECT_EQ(l.plan.image->manifest_digest, "sha256:3a");
  EXPECT_EQ(l.plan.image->layers, img.layers);
  launch_options o;
  o.host_root = true;
  EXPECT_FALSE(plan_launch(session, o, 1).plan.image);
}

TEST_F(PlanLaunch, StreamsAreFilesUnlessTheCallersStdioIsInherited) {
  launch_options o;
  o.stdout_path = "/out/log";
  const planned_launch merged = plan_launch(session, o, 1);
  EXPECT_EQ(merged.plan.stdout_path, "/out/log");
  EXPECT_EQ(merged.plan.stderr_path, "/out/log") << "stdout named alone: one merged stream";
  o.stderr_path = "/out/err";
  EXPECT_EQ(plan_launch(session, o, 1).plan.stderr_path, "/out/err");
  o.stdin_data = "input";
  EXPECT_EQ(plan_launch(session, o, 1).plan.stdin_path, "/state/runs/run1/launches/agent-1.stdin");

  launch_options shell;
  shell.terminal = true;
  EXPECT_FALSE(plan_launch(session, shell, 1).plan.terminal) << "a terminal needs inherit_stdio";
  shell.inherit_stdio = true;
  const planned_launch inherited = plan_launch(session, shell, 1);
  EXPECT_TRUE(inherited.plan.inherit_stdio);
  EXPECT_TRUE(inherited.plan.terminal);
  EXPECT_EQ(inherited.plan.stdout_path, "");
  EXPECT_EQ(inherited.plan.stderr_path, "");
}

TEST_F(PlanLaunch, CreatesNothing) {
  const fs::path dir = fs::temp_directory_path() / "evalbox-plan-launch-test-absent";
  session.launch_dir = dir;
  launch_options o;
  o.stdin_data = "input";
  const planned_launch l = plan_launch(session, o, 1);
  EXPECT_FALSE(fs::exists(dir));
  EXPECT_FALSE(fs::exists(l.plan_path));
}

}  // namespace
}  // namespace evalbox::sandbox
