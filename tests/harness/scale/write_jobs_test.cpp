// The jobs on disk and submitted: the files evalbox slurm and evalbox k8s write, and the order
// and dependency of the two sbatch submissions, against a stand-in sbatch on PATH that records
// its arguments.
#include "harness/scale/write_jobs.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <string>

#include "base/fs.h"

namespace evalbox::harness::scale {
namespace {

namespace fs = std::filesystem;

// PATH set to a directory holding an sbatch script for the test's lifetime.
class FakeSbatch : public ::testing::Test {
 protected:
  void SetUp() override {
    old_path_ = std::getenv("PATH") ? std::getenv("PATH") : "";
    ::setenv("PATH", (dir_.path().string() + ":/usr/bin:/bin").c_str(), 1);
  }
  void TearDown() override { ::setenv("PATH", old_path_.c_str(), 1); }

  // The stand-in: appends its arguments to calls.txt, prints the next id; `fail_on` makes the
  // call whose arguments contain it fail as sbatch does (a message on stderr, exit 1).
  void install(const std::string& fail_on = "") {
    const std::string script =
        "#!/bin/sh\n"
        "echo \"$*\" >>'" +
        calls().string() +
        "'\n"
        "n=$(wc -l <'" +
        calls().string() + "')\n" +
        (fail_on.empty() ? ""
                         : "case \"$*\" in *" + fail_on +
                               "*) echo 'sbatch: error: refused' >&2; exit 1;; esac\n") +
        "echo \"$((4100 + n));cluster\"\n";
    ASSERT_TRUE(write_file(dir_.path() / "sbatch", script));
    ASSERT_EQ(::chmod((dir_.path() / "sbatch").c_str(), 0755), 0);
  }
  fs::path calls() const { return dir_.path() / "calls.txt"; }

  temp_dir dir_;
  std::string old_path_;
};

slurm_options slurm_in(const fs::path& results) {
  slurm_options o;
  o.suite_name = "examples";
  o.suite = "/shared/suite.yaml";
  o.results = results;
  o.evalbox = "/opt/evalbox/bin/evalbox";
  o.shards = 2;
  return o;
}

TEST(WriteJobs, SlurmScriptsAreExecutableAndTheLogDirectoryExists) {
  temp_dir dir;
  const auto o = slurm_in(dir.path() / "results");
  auto files = write_slurm_jobs(o, dir.path() / "out");
  ASSERT_TRUE(files) << files.error().message;
  EXPECT_EQ(files->shard, dir.path() / "out" / "shard.sbatch");
  EXPECT_EQ(files->merge, dir.path() / "out" / "merge.sbatch");
  for (const auto& f : {files->shard, files->merge}) {
    struct stat st {};
    ASSERT_EQ(::stat(f.c_str(), &st), 0) << f;
    EXPECT_EQ(st.st_mode & 0777, 0755u) << f;
  }
  EXPECT_EQ(*read_file(files->shard), slurm_jobs(o).shard);
  EXPECT_TRUE(fs::is_directory(o.results / "slurm")) << "Slurm does not make --output's directory";
}

TEST(WriteJobs, K8sManifestsAreNamedAfterTheJob) {
  temp_dir dir;
  k8s_options o;
  o.suite_name = "My Suite";
  o.suite_in_pod = "/suite/suite.yaml";
  o.image = "registry.example/evalbox:1";
  o.results_claim = "results";
  auto files = write_k8s_jobs(o, dir.path() / "k8s");
  ASSERT_TRUE(files) << files.error().message;
  const std::string name = k8s_job_name(o.suite_name);
  EXPECT_EQ(files->shard, dir.path() / "k8s" / (name + ".yaml"));
  EXPECT_EQ(files->merge, dir.path() / "k8s" / (name + "-merge.yaml"));
  auto shard = read_file(files->shard);
  ASSERT_TRUE(shard);
  EXPECT_NE(shard->find("Indexed Job of 1 completions"), std::string::npos) << *shard;
}

TEST_F(FakeSbatch, TheMergeIsSubmittedAfterTheArrayAndDependsOnIt) {
  install();
  temp_dir out;
  const job_files files{out.path() / "shard.sbatch", out.path() / "merge.sbatch"};
  auto jobs = submit_slurm_jobs(files, merge_after::ok);
  ASSERT_TRUE(jobs) << jobs.error().message;
  EXPECT_EQ(jobs->array, "4101");
  EXPECT_EQ(jobs->merge, "4102");
  auto calls_text = read_file(calls());
  ASSERT_TRUE(calls_text);
  EXPECT_EQ(*calls_text, "--parsable " + files.shard.string() +
                             "\n--parsable --dependency=afterok:4101 " + files.merge.string() +
                             "\n");
}

TEST_F(FakeSbatch, AMergeThatCannotBeSubmittedNamesTheRunningArray) {
  install("--dependency");
  temp_dir out;
  auto jobs = submit_slurm_jobs({out.path() / "s", out.path() / "m"}, merge_after::any);
  ASSERT_FALSE(jobs);
  EXPECT_NE(jobs.error().message.find("the array is job 4101"), std::string::npos)
      << jobs.error().message;
}

TEST_F(FakeSbatch, OutputThatIsNotAJobIdIsAnError) {
  ASSERT_TRUE(write_file(dir_.path() / "sbatch", "#!/bin/sh\necho 'Submitted batch job'\n"));
  ASSERT_EQ(::chmod((dir_.path() / "sbatch").c_str(), 0755), 0);
  auto id = sbatch({"x.sbatch"});
  ASSERT_FALSE(id);
  EXPECT_NE(id.error().message.find("not a job id"), std::string::npos) << id.error().message;
}

}  // namespace
}  // namespace evalbox::harness::scale
