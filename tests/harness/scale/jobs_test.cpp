// The jobs evalbox slurm and evalbox k8s write, against golden files (review a change to them
// as a change of what users submit), and the pieces they are made of.
#include "harness/scale/jobs.h"

#include <gtest/gtest.h>

#include "tests/support/golden.h"

namespace evalbox::harness::scale {
namespace {

const std::filesystem::path golden_dir = EVALBOX_SOURCE_DIR "/tests/harness/scale/golden";

slurm_options slurm_example() {
  slurm_options o;
  o.suite_name = "examples";
  o.suite = "/shared/evalbox/it's a suite/suite.yaml";  // the shell lines must quote it
  o.results = "/shared/results/examples";
  o.evalbox = "/opt/evalbox/bin/evalbox";
  o.shards = 3;
  o.parallel = 2;
  o.concurrency = 2;
  o.partition = "batch";
  o.time_ms = 90 * 60 * 1000;
  return o;
}

TEST(SlurmJobs, GoldenAfterAny) {
  auto s = slurm_jobs(slurm_example());
  evalbox::testing::expect_golden(s.shard, golden_dir / "shard.sbatch");
  evalbox::testing::expect_golden(s.merge, golden_dir / "merge-afterany.sbatch");
}

TEST(SlurmJobs, GoldenAfterOk) {
  auto o = slurm_example();
  o.after = merge_after::ok;
  o.parallel = 0;
  o.partition.clear();
  o.time_ms.reset();
  auto s = slurm_jobs(o);
  EXPECT_NE(s.shard.find("#SBATCH --array=0-2\n"), std::string::npos) << "no throttle";
  EXPECT_EQ(s.shard.find("--partition"), std::string::npos);
  EXPECT_EQ(s.shard.find("--time"), std::string::npos);
  EXPECT_EQ(s.merge.find("--partial"), std::string::npos) << "afterok merges only complete sets";
  evalbox::testing::expect_golden(s.merge, golden_dir / "merge-afterok.sbatch");
}

// Every shard runs the registry digests pinned at submission, from the images.lock beside the
// results; without one the run line is as before.
TEST(SlurmJobs, ShardsRunWithTheImagesLockWhenThereIsOne) {
  auto o = slurm_example();
  o.images_lock = "/shared/results/examples/images.lock";
  auto s = slurm_jobs(o);
  EXPECT_NE(
      s.shard.find("--shard auto/3 -j 2 --images-lock /shared/results/examples/images.lock\n"),
      std::string::npos)
      << s.shard;
  EXPECT_EQ(slurm_jobs(slurm_example()).shard.find("--images-lock"), std::string::npos);
}

TEST(SlurmJobs, ResultsPathsMustSurviveSbatchLines) {
  EXPECT_TRUE(slurm_safe_path("/shared/results/examples-2"));
  EXPECT_FALSE(slurm_safe_path("/shared/my results"));
  EXPECT_FALSE(slurm_safe_path("/shared/it's"));
  EXPECT_FALSE(slurm_safe_path("/shared/100%"));  // %j, %a are Slurm's own patterns
  EXPECT_FALSE(slurm_safe_path(""));
}

TEST(SlurmJobs, TimeIsInSlurmsFormatRoundedUpToMinutes) {
  EXPECT_EQ(slurm_time(1), "1");
  EXPECT_EQ(slurm_time(30 * 60'000), "30");
  EXPECT_EQ(slurm_time(30 * 60'000 + 1), "31");
  EXPECT_EQ(slurm_time(90 * 60'000), "01:30:00");
  EXPECT_EQ(slurm_time(26ull * 3600'000 + 5 * 60'000), "1-02:05:00");
}

TEST(SlurmJobs, ShellQuoting) {
  EXPECT_EQ(shell_quote("/a/b-c_d.yaml"), "/a/b-c_d.yaml");
  EXPECT_EQ(shell_quote("a b"), "'a b'");
  EXPECT_EQ(shell_quote("it's"), "'it'\\''s'");
  EXPECT_EQ(shell_quote("$(rm -rf /)"), "'$(rm -rf /)'");
  EXPECT_EQ(shell_quote(""), "''");
}

k8s_options k8s_example() {
  k8s_options o;
  o.suite_name = "Examples_Suite";
  o.suite_in_pod = "/suite/suite.yaml";
  o.image = "registry.example/evalbox:0.1.0";
  o.shards = 3;
  o.parallel = 2;
  o.concurrency = 2;
  o.results_claim = "evalbox-results";
  return o;
}

TEST(K8sJobs, Golden) {
  auto o = k8s_example();
  evalbox::testing::expect_golden(to_yaml(k8s_shard_job(o), "shard job\n\nof examples"),
                                  golden_dir / "shards.yaml");
  evalbox::testing::expect_golden(to_yaml(k8s_merge_job(o), "merge job"),
                                  golden_dir / "merge.yaml");
}

TEST(K8sJobs, IndexedJobAsTheSchedulerNeedsIt) {
  json j = k8s_shard_job(k8s_example());
  EXPECT_EQ(j["spec"]["completionMode"], "Indexed");
  EXPECT_EQ(j["spec"]["completions"], 3);
  EXPECT_EQ(j["spec"]["parallelism"], 2);
  EXPECT_EQ(j["spec"]["backoffLimitPerIndex"], 1);
  const json& pod = j["spec"]["template"]["spec"];
  EXPECT_EQ(pod["restartPolicy"], "Never") << "backoffLimitPerIndex needs it";
  EXPECT_EQ(pod["hostUsers"], false);
  EXPECT_EQ(pod["securityContext"]["seccompProfile"]["type"], "Unconfined");
  EXPECT_EQ(pod["securityContext"]["appArmorProfile"]["type"], "Unconfined");
  EXPECT_EQ(pod["securityContext"]["runAsUser"], 1000);
  const json& c = pod["containers"][0];
  EXPECT_EQ(c["securityContext"]["procMount"], "Unmasked");
  EXPECT_FALSE(c["securityContext"].contains("privileged")) << "never privileged by default";
  EXPECT_NE(c["command"][2].get<std::string>().find("--shard auto/3"), std::string::npos);
  EXPECT_EQ(pod["volumes"][0]["persistentVolumeClaim"]["claimName"], "evalbox-results");
  auto o = k8s_example();
  o.parallel = 0;
  EXPECT_EQ(k8s_shard_job(o)["spec"]["parallelism"], 3) << "default: every shard at once";
  json merge = k8s_merge_job(k8s_example());
  EXPECT_NE(
      merge["spec"]["template"]["spec"]["containers"][0]["command"][2].get<std::string>().find(
          "--partial"),
      std::string::npos);
  EXPECT_FALSE(merge["spec"]["template"]["spec"].contains("hostUsers"))
      << "merging starts no sandbox: the merge pod asks for nothing special";
}

TEST(K8sJobs, NamesAreDnsLabels) {
  EXPECT_EQ(k8s_job_name("examples"), "evalbox-examples");
  EXPECT_EQ(k8s_job_name("My_Suite v2!"), "evalbox-my-suite-v2");
  EXPECT_EQ(k8s_job_name("---"), "evalbox");
  EXPECT_LE(k8s_job_name(std::string(200, 'a')).size(), 48u);
}

TEST(K8sJobs, YamlKeepsStringsStrings) {
  json j = {{"a", "yes"}, {"b", "0123"}, {"c", json::array({"x", "multi\nline\n"})}, {"d", 3}};
  EXPECT_EQ(to_yaml(j, "c"),
            "# c\na: \"yes\"\nb: \"0123\"\nc:\n  - \"x\"\n  - |\n    multi\n    line\nd: 3\n");
}

}  // namespace
}  // namespace evalbox::harness::scale
