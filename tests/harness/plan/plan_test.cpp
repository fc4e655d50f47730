// The run matrix: deterministic ids, new ids for changed inputs, filters and shards.
#include "harness/plan/plan.h"

#include <set>

#include <gtest/gtest.h>

namespace evalbox::harness {
namespace {

suite_spec two_by_two() {
  suite_spec s;
  s.name = "s";
  for (const char* id : {"alpha", "beta"}) {
    fixture_spec f;
    f.id = id;
    f.digest = std::string(64, id[0]);
    s.fixtures.push_back(f);
  }
  for (const char* id : {"oracle", "noop"}) {
    candidate_spec c;
    c.id = id;
    c.adapter = id;
    s.candidates.push_back(c);
  }
  s.trials = 3;
  return s;
}

TEST(Plan, MatrixIsFixturesTimesCandidatesTimesTrials) {
  auto runs = plan_runs(two_by_two(), {});
  ASSERT_TRUE(runs);
  EXPECT_EQ(runs->size(), 12u);
  std::set<std::string> ids;
  for (const auto& r : *runs) ids.insert(r.run_id);
  EXPECT_EQ(ids.size(), 12u) << "run ids are unique";
}

TEST(Plan, RunIdsAreDeterministic) {
  auto a = *plan_runs(two_by_two(), {});
  auto b = *plan_runs(two_by_two(), {});
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].run_id, b[i].run_id);
}

TEST(Plan, AChangedFixtureOrCandidateGetsNewIds) {
  auto base = *plan_runs(two_by_two(), {});
  auto s = two_by_two();
  s.fixtures[0].digest = std::string(64, 'z');
  auto changed = *plan_runs(s, {});
  EXPECT_NE(changed[0].run_id, base[0].run_id);
  EXPECT_EQ(changed.back().run_id, base.back().run_id) << "other fixtures keep their ids";
  auto s2 = two_by_two();
  s2.candidates[0].env["MODEL"] = "other";
  auto changed2 = *plan_runs(s2, {});
  EXPECT_NE(changed2[0].run_id, base[0].run_id);
  EXPECT_EQ(changed2[3].run_id, base[3].run_id) << "the other candidate keeps its ids";
}

TEST(Plan, FilterSelectsFixtureSlashCandidate) {
  plan_options o;
  o.filter = "alpha/*";
  EXPECT_EQ(plan_runs(two_by_two(), o)->size(), 6u);
  o.filter = "*/noop";
  EXPECT_EQ(plan_runs(two_by_two(), o)->size(), 6u);
  o.filter = "nothing";
  EXPECT_TRUE(plan_runs(two_by_two(), o)->empty());
}

TEST(Plan, ShardsPartitionTheMatrix) {
  std::multiset<std::string> all;
  for (int k = 0; k < 5; ++k) {
    plan_options o;
    o.shard_index = k;
    o.shard_count = 5;
    auto runs = plan_runs(two_by_two(), o);
    ASSERT_TRUE(runs);
    for (const auto& r : *runs) all.insert(r.run_id);
  }
  std::multiset<std::string> whole;
  auto runs = plan_runs(two_by_two(), {});
  ASSERT_TRUE(runs);
  for (const auto& r : *runs) whole.insert(r.run_id);
  EXPECT_EQ(all, whole) << "every run in exactly one shard";
}

TEST(Plan, RejectsAnInvalidShard) {
  plan_options o;
  o.shard_index = 3;
  o.shard_count = 3;
  EXPECT_FALSE(plan_runs(two_by_two(), o));
}

TEST(Glob, Matches) {
  EXPECT_TRUE(glob_match("a*", "abc/d"));
  EXPECT_TRUE(glob_match("?b*", "abc"));
  EXPECT_FALSE(glob_match("b*", "abc"));
}

}  // namespace
}  // namespace evalbox::harness
