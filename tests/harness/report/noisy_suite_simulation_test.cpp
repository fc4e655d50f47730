// Honest intervals on the example suite with the deliberately noisy candidate
// (fixtures/examples/noisy-suite.yaml): 6 fixtures, 5 trials, the noisy agent solving three of
// them on a coin flip (true pass@1 25%) against scripted, which solves the same three always
// (50%). Over 200 seeded simulated suites, the report's 95% intervals must cover the true
// values in at least 90% of them, and the paired verdict must never call noisy "better".
#include <gtest/gtest.h>

#include <random>

#include "base/json.h"
#include "harness/report/stats.h"

namespace evalbox::harness::stats {
namespace {

using verdict = run_outcome::verdict;

constexpr int suites = 200, fixtures = 6, trials = 5;
// Per-fixture true pass rates of the noisy candidate, as in noisy-agent.sh.
constexpr double noisy_rate[fixtures] = {0.5, 0.5, 0.5, 0.0, 0.0, 0.0};
constexpr double scripted_rate[fixtures] = {1.0, 1.0, 1.0, 0.0, 0.0, 0.0};

std::vector<run_outcome> simulate(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::bernoulli_distribution error(0.05);  // infrastructure errors: never failures
  std::vector<run_outcome> out;
  for (int f = 0; f < fixtures; ++f) {
    for (int t = 0; t < trials; ++t) {
      for (const char* c : {"noisy", "scripted"}) {
        run_outcome o;
        o.candidate = c;
        o.fixture = "fixture-" + std::to_string(f);
        o.trial = t;
        double p = std::string_view(c) == "noisy" ? noisy_rate[f] : scripted_rate[f];
        if (error(rng)) {
          o.outcome = verdict::error;
          o.error_message = "simulated";
        } else {
          o.outcome = std::uniform_real_distribution<double>(0, 1)(rng) < p ? verdict::passed
                                                                            : verdict::failed;
        }
        out.push_back(std::move(o));
      }
    }
  }
  return out;
}

TEST(NoisySuiteSimulation, IntervalsCoverTheTrueRates) {
  int pass_at_1_covered = 0, wilson_covered = 0, wilson_total = 0, better = 0;
  for (int i = 0; i < suites; ++i) {
    options opts;
    opts.baseline = "scripted";
    opts.seed = 1000 + static_cast<uint64_t>(i);
    opts.bootstrap_samples = 1000;
    auto s = summarize(simulate(77 + static_cast<uint64_t>(i)), opts);
    ASSERT_TRUE(s) << s.error().message;
    const candidate_summary& noisy = s->candidates[0];
    ASSERT_EQ(noisy.candidate, "noisy");
    ASSERT_TRUE(noisy.pass_at_1_ci);
    if (noisy.pass_at_1_ci->lo <= 0.25 && 0.25 <= noisy.pass_at_1_ci->hi) ++pass_at_1_covered;
    for (const cell& c : s->cells) {
      if (c.candidate != "noisy" || c.n == 0) continue;
      double truth = noisy_rate[c.fixture.back() - '0'];
      ++wilson_total;
      if (c.ci.lo <= truth && truth <= c.ci.hi) ++wilson_covered;
    }
    ASSERT_EQ(s->comparisons.size(), 1u);
    if (s->comparisons[0].verdict == verdict_better) ++better;
  }
  RecordProperty("pass_at_1_covered", pass_at_1_covered);
  EXPECT_GE(pass_at_1_covered, suites * 9 / 10) << pass_at_1_covered << "/" << suites;
  EXPECT_GE(wilson_covered * 10, wilson_total * 9) << wilson_covered << "/" << wilson_total;
  EXPECT_EQ(better, 0);
}

}  // namespace
}  // namespace evalbox::harness::stats
