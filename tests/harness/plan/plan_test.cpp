// The run matrix: deterministic ids, new ids for changed inputs, filters and shards.
#include "harness/plan/plan.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "base/fs.h"

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

// A skill, an MCP server's file or a hook is known by its content: editing one makes new run
// ids, and so does adding one; touching nothing keeps them.
TEST(Plan, AChangedSkillServerFileOrHookGetsNewIds) {
  temp_dir dir;
  const std::filesystem::path d = dir.path();
  ASSERT_TRUE(make_dirs(d / "skills/pdf"));
  ASSERT_TRUE(write_file(d / "skills/pdf/SKILL.md", "v1"));
  ASSERT_TRUE(write_file(d / "server.py", "v1"));
  ASSERT_TRUE(write_file(d / "hook.sh", "v1", 0755));
  candidate_spec c;
  c.id = "claude";
  c.adapter = "claude-code";
  const std::string bare = *candidate_digest(c);
  c.skills.push_back({"pdf", d / "skills/pdf", {}});
  const std::string with_skill = *candidate_digest(c);
  EXPECT_NE(with_skill, bare);
  mcp_server_spec m;
  m.name = "search";
  m.command = {"python3", "server.py"};
  m.files[1] = d / "server.py";
  c.mcp_servers.push_back(m);
  c.hooks.push_back({"PreToolUse", "Bash", "hook.sh", d / "hook.sh", {}});
  const auto before = candidate_digest(c);
  ASSERT_TRUE(before) << before.error().message;
  EXPECT_EQ(*candidate_digest(c), *before);
  for (const char* file : {"skills/pdf/SKILL.md", "server.py", "hook.sh"}) {
    const std::string was = *candidate_digest(c);
    ASSERT_TRUE(write_file(d / file, "v2", 0755));
    EXPECT_NE(*candidate_digest(c), was) << file;
  }
  // A skill gone from the host is an error, not a silent digest of nothing.
  ASSERT_TRUE(remove_tree(d / "skills"));
  EXPECT_FALSE(candidate_digest(c));
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

// Every shard holds every candidate (when it holds at least that many runs), no shard is empty
// while there are runs for it, sizes differ by at most one unit, and a fixture's trials are
// spread: for N from 2 to 8 over suites of 2–5 candidates.
TEST(Shards, SpreadEveryCandidateOverEveryShard) {
  for (size_t candidates = 2; candidates <= 5; ++candidates)
    for (size_t fixtures : {1u, 2u, 3u, 6u, 7u, 20u})
      for (int trials : {1, 2, 3})
        for (int n = 2; n <= 8; ++n) {
          std::vector<std::set<size_t>> held(static_cast<size_t>(n));
          std::vector<size_t> size(static_cast<size_t>(n));
          std::vector<std::set<size_t>> fixtures_of(static_cast<size_t>(n));
          for (size_t f = 0; f < fixtures; ++f)
            for (size_t c = 0; c < candidates; ++c)
              for (int t = 0; t < trials; ++t) {
                const int k = plan::shard_of(f, c, t, fixtures, trials, n);
                ASSERT_GE(k, 0);
                ASSERT_LT(k, n);
                held[static_cast<size_t>(k)].insert(c);
                ++size[static_cast<size_t>(k)];
                fixtures_of[static_cast<size_t>(k)].insert(f);
              }
          const size_t runs = fixtures * candidates * static_cast<size_t>(trials);
          const auto [lo, hi] = std::minmax_element(size.begin(), size.end());
          for (int k = 0; k < n; ++k) {
            const auto& h = held[static_cast<size_t>(k)];
            const std::string where =
                fmt::format("{} candidates, {} fixtures, {} trials, shard {}/{}", candidates,
                            fixtures, trials, k, n);
            if (size[static_cast<size_t>(k)] >= candidates) {
              EXPECT_EQ(h.size(), candidates) << where;
            }
            if (runs >= static_cast<size_t>(n)) {
              EXPECT_GT(size[static_cast<size_t>(k)], 0u) << where << ": empty";
            }
          }
          EXPECT_LE(*hi - *lo, candidates)
              << "unbalanced: " << candidates << "/" << fixtures << "/" << trials << " over " << n;
          // A fixture's trials go to different shards while there are shards for them.
          if (fixtures * static_cast<size_t>(trials) >= static_cast<size_t>(n) && trials > 1) {
            std::set<int> of_first;
            for (int t = 0; t < trials; ++t)
              of_first.insert(plan::shard_of(0, 0, t, fixtures, trials, n));
            EXPECT_EQ(of_first.size(), static_cast<size_t>(std::min(trials, n)));
          }
        }
}

// The example suite's shape (6 fixtures, 4 candidates, one trial) over 4 shards: no shard is one
// candidate, and losing any one shard leaves every candidate the same fixtures.
TEST(Shards, ALostShardTakesTheSameFixturesFromEveryCandidate) {
  for (int lost = 0; lost < 4; ++lost) {
    std::vector<std::set<size_t>> kept(4);
    for (size_t f = 0; f < 6; ++f)
      for (size_t c = 0; c < 4; ++c)
        if (plan::shard_of(f, c, 0, 6, 1, 4) != lost) kept[c].insert(f);
    for (size_t c = 1; c < 4; ++c) EXPECT_EQ(kept[c], kept[0]) << "shard " << lost << " lost";
    EXPECT_GE(kept[0].size(), 4u);
  }
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
