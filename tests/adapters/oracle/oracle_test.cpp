#include "adapters/oracle/oracle.h"

#include <gtest/gtest.h>

#include "base/digest.h"
#include "base/fs.h"

namespace evalbox::adapters {
namespace {

TEST(OracleAdapter, ProjectsTheSolutionAsADigestNamedBundle) {
  temp_dir dir;
  ASSERT_TRUE(make_dirs(dir.path() / "fx/solution"));
  ASSERT_TRUE(write_file(dir.path() / "fx/solution/solve.sh", "echo solved > out.txt\n"));
  harness::fixture_spec f;
  f.id = "fx";
  f.dir = dir.path() / "fx";
  f.has_solution = true;
  harness::candidate_spec c;
  c.id = c.adapter = "oracle";
  std::map<std::string, std::filesystem::path> creds;
  auto a = oracle::make_adapter();
  auto plan = a->plan({f, c, 0, "r", creds});
  ASSERT_TRUE(plan);
  ASSERT_EQ(plan->bundles.size(), 1u);
  EXPECT_EQ(plan->bundles[0].target, "/evalbox/solution");
  EXPECT_EQ(plan->bundles[0].sha256, *tree_digest(dir.path() / "fx/solution"));
  EXPECT_EQ(plan->argv.back(), "/evalbox/solution/solve.sh");
  // The one plan the runner leaves solution/ visible to (every other has it protected).
  EXPECT_TRUE(plan->runs_fixture_solution);
}

TEST(OracleAdapter, AFixtureWithoutSolutionIsAnErrorThatSaysWhatToDo) {
  harness::fixture_spec f;
  f.id = "fx";
  harness::candidate_spec c;
  c.id = c.adapter = "oracle";
  std::map<std::string, std::filesystem::path> creds;
  auto plan = oracle::make_adapter()->plan({f, c, 0, "r", creds});
  ASSERT_FALSE(plan);
  EXPECT_NE(plan.error().message.find("solution/solve.sh"), std::string::npos);
}

TEST(OracleAdapter, TranscriptIsOneShellStepWithTheExitCode) {
  temp_dir dir;
  ASSERT_TRUE(write_file(dir.path() / "out", "done\n"));
  harness::fixture_spec f;
  harness::candidate_spec c;
  std::map<std::string, std::filesystem::path> creds;
  harness::agent_output out;
  out.stdout_path = dir.path() / "out";
  out.exit_code = 3;
  auto t = oracle::make_adapter()->read_transcript({f, c, 0, "r", creds}, {out});
  ASSERT_TRUE(t);
  ASSERT_EQ(t->steps.size(), 1u);
  ASSERT_EQ(t->steps[0].observations.size(), 1u);
  EXPECT_EQ(t->steps[0].observations[0].exit_code, 3);
  EXPECT_TRUE(t->steps[0].observations[0].is_error);
  EXPECT_EQ(t->steps[0].observations[0].output, "done\n");
}

}  // namespace
}  // namespace evalbox::adapters
