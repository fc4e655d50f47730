// plan.json (evalbox.plan.v1): the contract (a golden file), validation of what is read back,
// the runs an identity alone lists (the same ids and shards as plan_runs), and which results
// directories `evalbox run` may write a plan into.
#include "harness/plan/identity.h"

#include <gtest/gtest.h>

#include <set>

#include "base/digest.h"
#include "base/fs.h"
#include "tests/support/golden.h"

namespace evalbox::harness {
namespace {

const std::filesystem::path golden_dir = EVALBOX_SOURCE_DIR "/tests/harness/plan/golden";

suite_spec example_suite(const std::filesystem::path& dir) {
  suite_spec s;
  s.name = "examples";
  s.file = dir / "suite.yaml";
  EXPECT_TRUE(write_file(s.file, "schema: evalbox.suite.v1\nname: examples\n"));
  for (const char* id : {"alpha", "beta", "gamma"}) {
    fixture_spec f;
    f.id = id;
    f.digest = sha256_hex(id);
    s.fixtures.push_back(f);
  }
  for (const char* id : {"oracle", "noop"}) {
    candidate_spec c;
    c.id = id;
    c.adapter = id;
    s.candidates.push_back(c);
  }
  s.trials = 2;
  s.baseline = "noop";
  return s;
}

TEST(PlanIdentity, GoldenFile) {
  temp_dir dir;
  plan_options o;
  o.shard_index = 1;
  o.shard_count = 3;
  auto plan = identify_plan(example_suite(dir.path()), o);
  ASSERT_TRUE(plan) << plan.error().message;
  // Where the suite file lies is not part of the identity (and differs per test run).
  EXPECT_EQ(plan->suite_file, (dir.path() / "suite.yaml").string());
  plan->suite_file = "/suites/suite.yaml";
  evalbox::testing::expect_golden(pretty_json(to_json(*plan)), golden_dir / "plan.v1.json");
  auto back = plan_from_json(to_json(*plan), "plan.json");
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->suite_file, "/suites/suite.yaml");
}

TEST(PlanIdentity, RoundTripsAndListsTheRunsPlanRunsPlans) {
  temp_dir dir;
  suite_spec suite = example_suite(dir.path());
  for (int k = 0; k < 4; ++k) {
    plan_options o;
    o.shard_index = k;
    o.shard_count = 4;
    o.filter = "*/oracle";
    auto plan = identify_plan(suite, o);
    ASSERT_TRUE(plan);
    auto back = plan_from_json(to_json(*plan), "plan.json");
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_EQ(back->matrix_digest(), plan->matrix_digest());
    auto runs = plan_runs(suite, o);
    ASSERT_TRUE(runs);
    std::vector<std::string> from_suite;
    for (const auto& r : *runs) from_suite.push_back(r.run_id);
    std::sort(from_suite.begin(), from_suite.end());
    EXPECT_EQ(planned_ids(*back), from_suite) << "shard " << k;
  }
}

// A fixture that takes the suite's default environment has run ids of its own (the environment
// is not in its tree digest); plan.json keeps it, so the ids listed from the plan alone are the
// ids the suite plans.
TEST(PlanIdentity, TheSuitesEnvironmentJoinsTheRunIdsAndThePlan) {
  temp_dir dir;
  suite_spec suite = example_suite(dir.path());
  ASSERT_FALSE(suite.fixtures.empty());
  auto bare = plan_runs(suite, {});
  ASSERT_TRUE(bare);
  suite.fixtures[0].environment = environment_spec{.image = "oci:images/py313", .workdir = "/app"};
  suite.fixtures[0].environment_from_suite = true;
  auto with_env = plan_runs(suite, {});
  ASSERT_TRUE(with_env);
  ASSERT_EQ(with_env->size(), bare->size());
  for (size_t i = 0; i < bare->size(); ++i)
    EXPECT_EQ((*with_env)[i].run_id == (*bare)[i].run_id, (*bare)[i].fixture != 0) << i;
  auto plan = identify_plan(suite, {});
  ASSERT_TRUE(plan);
  auto back = plan_from_json(to_json(*plan), "plan.json");
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->fixtures[0].environment, "oci:images/py313\n/app");
  std::vector<std::string> from_suite;
  for (const auto& r : *with_env) from_suite.push_back(r.run_id);
  std::sort(from_suite.begin(), from_suite.end());
  EXPECT_EQ(planned_ids(*back), from_suite);
  // Its own environment is in its tree digest: the id is the bare one.
  suite.fixtures[0].environment_from_suite = false;
  EXPECT_EQ(plan_runs(suite, {})->front().run_id, bare->front().run_id);
}

TEST(PlanIdentity, EveryShardSharesTheMatrixDigest) {
  temp_dir dir;
  suite_spec suite = example_suite(dir.path());
  plan_options a, b;
  a.shard_count = b.shard_count = 2;
  b.shard_index = 1;
  EXPECT_EQ(identify_plan(suite, a)->matrix_digest(), identify_plan(suite, b)->matrix_digest());
  plan_options c = a;
  c.trials = 3;
  EXPECT_NE(identify_plan(suite, a)->matrix_digest(), identify_plan(suite, c)->matrix_digest());
  suite.fixtures[1].digest = sha256_hex("changed");
  EXPECT_NE(identify_plan(suite, a)->matrix_digest(),
            identify_plan(example_suite(dir.path()), a)->matrix_digest());
}

TEST(PlanIdentity, MergedDirectoryHoldsEveryShardsRuns) {
  temp_dir dir;
  plan_options o;
  o.shard_count = 3;
  auto plan = *identify_plan(example_suite(dir.path()), o);
  plan.merged = {0, 2};
  auto j = to_json(plan);
  EXPECT_TRUE(j["shard"]["index"].is_null());
  auto back = plan_from_json(j, "plan.json");
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->merged, (std::vector<int>{0, 2}));
  EXPECT_EQ(planned_ids(*back).size(), 3u * 2u * 2u) << "every shard's runs";
}

TEST(PlanIdentity, RejectsWhatIsNotAPlan) {
  temp_dir dir;
  auto good = to_json(*identify_plan(example_suite(dir.path()), {}));
  auto reject = [](json j, const char* why) {
    auto p = plan_from_json(j, "x/plan.json");
    ASSERT_FALSE(p) << why;
    EXPECT_NE(p.error().message.find("x/plan.json"), std::string::npos) << p.error().message;
  };
  reject(json::array(), "not an object");
  auto j = good;
  j["schema"] = "evalbox.plan.v2";
  reject(j, "another schema");
  j = good;
  j["fixtures"][0]["digest"] = "short";
  reject(j, "a digest that is not SHA-256");
  j = good;
  j["trials"] = 0;
  reject(j, "no trials");
  j = good;
  j["shard"] = {{"index", 2}, {"count", 2}};
  reject(j, "K >= N");
  j = good;
  j["trials"] = 5;
  reject(j, "content edited: the matrix digest no longer matches");
  j = good;
  j["merged"] = json::array();
  reject(j, "an empty merged list");
}

TEST(PlanIdentity, AdoptRefusesAnotherShardsDirectoryAndReportsAChangedPlan) {
  temp_dir dir;
  suite_spec suite = example_suite(dir.path());
  const auto results = dir.path() / "results";
  plan_options o;
  o.shard_count = 2;
  auto shard0 = *identify_plan(suite, o);
  auto first = adopt_plan(results, shard0);
  ASSERT_TRUE(first) << first.error().message;
  EXPECT_FALSE(*first) << "a new directory held no plan";
  auto again = adopt_plan(results, shard0);
  ASSERT_TRUE(again);
  EXPECT_FALSE(*again) << "the same plan again (a requeued shard) is no change";
  o.shard_index = 1;
  auto other_shard = adopt_plan(results, *identify_plan(suite, o));
  ASSERT_FALSE(other_shard);
  EXPECT_NE(other_shard.error().message.find("shard 0/2"), std::string::npos)
      << other_shard.error().message;
  suite.fixtures[0].digest = sha256_hex("changed again");
  o.shard_index = 0;
  auto changed = adopt_plan(results, *identify_plan(suite, o));
  ASSERT_TRUE(changed);
  ASSERT_TRUE(*changed) << "a changed fixture is another plan: said, not refused";
  EXPECT_EQ((*changed)->matrix_digest(), shard0.matrix_digest());
  EXPECT_EQ(read_plan(results)->matrix_digest(), identify_plan(suite, o)->matrix_digest());
  auto merged = *identify_plan(suite, o);
  merged.merged = {0, 1};
  ASSERT_TRUE(write_plan(results, merged));
  EXPECT_FALSE(adopt_plan(results, *identify_plan(suite, o))) << "a merge's directory";
}

}  // namespace
}  // namespace evalbox::harness
