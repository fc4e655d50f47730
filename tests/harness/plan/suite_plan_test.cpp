// plan_suite_run: what `evalbox run` does before the first run — the shard, its results
// directory, the plan adopted — and which refusals are the user's to fix (invalid_argument).
#include "harness/plan/suite_plan.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "base/digest.h"
#include "base/fs.h"

namespace evalbox::harness {
namespace {

// Two fixtures × one candidate × one trial: two runs.
suite_spec small_suite(const std::filesystem::path& dir) {
  suite_spec s;
  s.name = "small";
  s.file = dir / "suite.yaml";
  s.results_dir = dir / "results";
  EXPECT_TRUE(write_file(s.file, "schema: evalbox.suite.v1\nname: small\n"));
  for (const char* id : {"alpha", "beta"}) {
    fixture_spec f;
    f.id = id;
    f.digest = sha256_hex(id);
    s.fixtures.push_back(f);
  }
  candidate_spec c;
  c.id = "oracle";
  c.adapter = "oracle";
  s.candidates.push_back(c);
  s.trials = 1;
  return s;
}

env_lookup no_env() {
  return [](const char*) -> const char* { return nullptr; };
}

TEST(SuitePlan, UnshardedWritesIntoTheSuitesResultsAndAdoptsThePlan) {
  temp_dir dir;
  suite_spec suite = small_suite(dir.path());
  auto p = plan_suite_run(suite, {}, no_env());
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->runs.size(), 2u);
  EXPECT_EQ(p->results_dir, suite.results_dir);
  EXPECT_FALSE(p->empty_shard);
  EXPECT_FALSE(p->replaced_other_plan);
  auto written = read_plan(p->results_dir);
  ASSERT_TRUE(written) << "plan.json is written before the first run";
  EXPECT_EQ(written->matrix_digest(), p->identity.matrix_digest());
}

TEST(SuitePlan, AnExplicitResultsDirectoryWins) {
  temp_dir dir;
  auto p = plan_suite_run(small_suite(dir.path()), {.results = dir.path() / "elsewhere"}, no_env());
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->results_dir, dir.path() / "elsewhere");
}

TEST(SuitePlan, EachShardHasADirectoryOfItsOwn) {
  temp_dir dir;
  suite_spec suite = small_suite(dir.path());
  auto p = plan_suite_run(suite, {.shard = "1/2"}, no_env());
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->shard.index, 1);
  EXPECT_EQ(p->shard.count, 2);
  EXPECT_EQ(p->results_dir, suite.results_dir / "shards" / "1");
  EXPECT_EQ(p->runs.size(), 1u);
}

TEST(SuitePlan, TheSchedulerNamesTheShard) {
  temp_dir dir;
  std::map<std::string, std::string> env{{"SLURM_ARRAY_TASK_ID", "0"}};
  auto p = plan_suite_run(small_suite(dir.path()), {.shard = "auto/2"},
                          [&](const char* name) -> const char* {
                            auto it = env.find(name);
                            return it == env.end() ? nullptr : it->second.c_str();
                          });
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->shard.index, 0);
  EXPECT_EQ(p->shard.source, "SLURM_ARRAY_TASK_ID");
}

TEST(SuitePlan, MoreShardsThanRunsLeavesAnEmptyShardThatIsNoError) {
  temp_dir dir;
  auto p = plan_suite_run(small_suite(dir.path()), {.shard = "4/5"}, no_env());
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_TRUE(p->runs.empty());
  EXPECT_TRUE(p->empty_shard);
}

TEST(SuitePlan, AFilterThatMatchesNothingIsTheUsersToFix) {
  temp_dir dir;
  auto p = plan_suite_run(small_suite(dir.path()), {.filter = "nosuch/*"}, no_env());
  ASSERT_FALSE(p);
  EXPECT_EQ(p.error().kind, error_kind::invalid_argument);
  EXPECT_NE(p.error().message.find("nosuch/*"), std::string::npos) << p.error().message;
}

TEST(SuitePlan, ABadShardIsTheUsersToFix) {
  temp_dir dir;
  for (const char* bad : {"2/2", "x/3", "auto/2"}) {
    auto p = plan_suite_run(small_suite(dir.path()), {.shard = bad}, no_env());
    ASSERT_FALSE(p) << bad;
    EXPECT_EQ(p.error().kind, error_kind::invalid_argument) << bad << ": " << p.error().message;
  }
}

TEST(SuitePlan, AChangedSuiteReplacesThePlanAndSaysSo) {
  temp_dir dir;
  suite_spec suite = small_suite(dir.path());
  ASSERT_TRUE(plan_suite_run(suite, {}, no_env()));
  suite.fixtures[0].digest = sha256_hex("changed");
  auto p = plan_suite_run(suite, {}, no_env());
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_TRUE(p->replaced_other_plan);
  auto again = plan_suite_run(suite, {}, no_env());
  ASSERT_TRUE(again);
  EXPECT_FALSE(again->replaced_other_plan) << "the same plan again is no change";
}

TEST(SuitePlan, AShardsDirectoryRefusesAnotherShard) {
  temp_dir dir;
  suite_spec suite = small_suite(dir.path());
  const auto shared = dir.path() / "shared";
  ASSERT_TRUE(plan_suite_run(suite, {.shard = "0/2", .results = shared}, no_env()));
  // Shard 1 pointed at shard 0's own directory (results/shards/0) must be refused.
  auto p = plan_suite_run(suite, {.shard = "0/1", .results = shared / "shards" / "0"}, no_env());
  ASSERT_FALSE(p);
  EXPECT_EQ(p.error().kind, error_kind::invalid_argument) << p.error().message;
}

// evalbox regrade: which suite, and which runs of it, a results directory is graded again with.
TEST(RegradePlan, TheSuiteIsTheOneGivenElseThePlansWhileItIsThere) {
  temp_dir dir;
  suite_spec suite = small_suite(dir.path());
  auto id = identify_plan(suite, {});
  ASSERT_TRUE(id);
  EXPECT_EQ(*regrade_suite_file(*id, dir.path(), "/other/suite.yaml"), "/other/suite.yaml");
  EXPECT_EQ(*regrade_suite_file(*id, dir.path(), ""), suite.file);
  std::filesystem::remove(suite.file);
  auto gone = regrade_suite_file(*id, dir.path(), "");
  ASSERT_FALSE(gone);
  EXPECT_EQ(gone.error().kind, error_kind::invalid_argument);
  EXPECT_NE(gone.error().message.find("is gone: give it with --suite"), std::string::npos);
  id->suite_file.clear();  // a plan.json written before it said
  auto unsaid = regrade_suite_file(*id, dir.path(), "");
  ASSERT_FALSE(unsaid);
  EXPECT_NE(unsaid.error().message.find("does not say where the suite file is"), std::string::npos);
}

TEST(RegradePlan, AShardsDirectoryHoldsItsShardsRunsAMergedOneEveryShards) {
  temp_dir dir;
  suite_spec suite = small_suite(dir.path());
  suite.trials = 3;  // 6 runs
  plan_options o;
  o.shard_index = 1;
  o.shard_count = 2;
  auto shard = identify_plan(suite, o);
  ASSERT_TRUE(shard);
  auto runs = plan_regrade(suite, *shard, {}, {});
  ASSERT_TRUE(runs) << runs.error().message;
  auto want = plan_runs(suite, o);
  ASSERT_TRUE(want);
  ASSERT_EQ(runs->size(), want->size());
  for (size_t i = 0; i < runs->size(); ++i) EXPECT_EQ((*runs)[i].run_id, (*want)[i].run_id);
  EXPECT_LT(runs->size(), 6u);
  shard->merged = {0, 1};
  auto merged = plan_regrade(suite, *shard, {}, {});
  ASSERT_TRUE(merged);
  EXPECT_EQ(merged->size(), 6u);
}

TEST(RegradePlan, FixturesAndCandidatesNarrowTheRunsAndAnUnknownIdIsRefused) {
  temp_dir dir;
  suite_spec suite = small_suite(dir.path());
  auto id = identify_plan(suite, {});
  ASSERT_TRUE(id);
  auto beta = plan_regrade(suite, *id, {"beta"}, {"oracle"});
  ASSERT_TRUE(beta) << beta.error().message;
  ASSERT_EQ(beta->size(), 1u);
  EXPECT_EQ(suite.fixtures[beta->front().fixture].id, "beta");
  auto nope = plan_regrade(suite, *id, {"gamma"}, {});
  ASSERT_FALSE(nope);
  EXPECT_EQ(nope.error().kind, error_kind::invalid_argument);
  EXPECT_NE(nope.error().message.find("--fixture gamma"), std::string::npos);
  auto nobody = plan_regrade(suite, *id, {}, {"nobody"});
  ASSERT_FALSE(nobody);
  EXPECT_NE(nobody.error().message.find("--candidate nobody"), std::string::npos);
}

}  // namespace
}  // namespace evalbox::harness
