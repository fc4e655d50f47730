// Simulated suites with known true pass rates: do the reported intervals cover the truth, and
// does the paired verdict find a real improvement without inventing one? Seeded: every run of
// this test sees the same 200 suites.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <random>

#include "base/json.h"
#include "harness/report/stats.h"

namespace evalbox::harness::stats {
namespace {

constexpr int suites = 200;
constexpr int fixtures = 30;
constexpr int trials = 5;

double draw_beta(std::mt19937_64& rng, double a, double b) {
  std::gamma_distribution<double> x(a, 1.0);
  std::gamma_distribution<double> y(b, 1.0);
  const double gx = x(rng);
  return gx / (gx + y(rng));
}

// `trials` Bernoulli(rate) trials of `candidate` on `fixture`, each of which is lost to an
// infrastructure error with probability `error_rate`.
void simulate(std::vector<run_outcome>& out, std::mt19937_64& rng, const std::string& candidate,
              const std::string& fixture, double rate, double error_rate = 0.0) {
  std::bernoulli_distribution pass(rate);
  std::bernoulli_distribution lost(error_rate);
  for (int t = 0; t < trials; ++t) {
    run_outcome o;
    o.candidate = candidate;
    o.fixture = fixture;
    o.trial = t;
    o.outcome = pass(rng) ? run_outcome::verdict::passed : run_outcome::verdict::failed;
    if (lost(rng)) {
      o.outcome = run_outcome::verdict::error;
      o.error_message = "simulated sandbox failure";
    }
    out.push_back(std::move(o));
  }
}

std::string fixture_name(int f) { return "f" + std::to_string(f); }

TEST(StatsSimulation, BootstrapIntervalOfPassAt1CoversTheTrueMeanRate) {
  // Fixture difficulty varies widely (Beta(2, 3), mean 0.4): the interval must account for
  // which fixtures happen to be in the suite, not only for trial noise. One trial in ten is an
  // infrastructure error: counted as a failure, it would drag the estimate 10% low and the
  // coverage would collapse.
  constexpr double population_mean = 2.0 / (2.0 + 3.0);
  std::mt19937_64 rng(2024);
  int covers_population = 0;
  int covers_suite = 0;
  for (int s = 0; s < suites; ++s) {
    std::vector<run_outcome> o;
    double suite_mean = 0.0;
    for (int f = 0; f < fixtures; ++f) {
      const double rate = draw_beta(rng, 2.0, 3.0);
      suite_mean += rate / fixtures;
      simulate(o, rng, "a", fixture_name(f), rate, 0.1);
    }
    options opts;
    opts.seed = static_cast<uint64_t>(s);
    auto summary = summarize(o, opts);
    ASSERT_TRUE(summary);
    const auto& ci = summary->candidates.at(0).pass_at_1_ci;
    ASSERT_TRUE(ci);
    covers_population += ci->lo <= population_mean && population_mean <= ci->hi;
    covers_suite += ci->lo <= suite_mean && suite_mean <= ci->hi;
  }
  std::printf(
      "95%% bootstrap interval of pass@1 covered the population mean in %d/%d suites, "
      "the suite's own mean in %d/%d\n",
      covers_population, suites, covers_suite, suites);
  EXPECT_GE(covers_population, suites * 9 / 10);
  EXPECT_GE(covers_suite, suites * 9 / 10);
}

struct verdict_counts {
  int better = 0;
  int worse = 0;
};

// Baseline fixture rates from Beta(2, 4) (mean 1/3); the candidate's rate on each fixture is
// the baseline's plus `lift`, capped at 1.
verdict_counts paired_verdicts(double lift, uint64_t seed) {
  std::mt19937_64 rng(seed);
  verdict_counts counts;
  for (int s = 0; s < suites; ++s) {
    std::vector<run_outcome> o;
    for (int f = 0; f < fixtures; ++f) {
      const double base = draw_beta(rng, 2.0, 4.0);
      simulate(o, rng, "base", fixture_name(f), base);
      simulate(o, rng, "cand", fixture_name(f), std::min(1.0, base + lift));
    }
    options opts;
    opts.baseline = "base";
    opts.seed = static_cast<uint64_t>(s);
    auto summary = summarize(o, opts);
    EXPECT_TRUE(summary);
    if (!summary) return counts;
    const std::string& v = summary->comparisons.at(0).verdict;
    counts.better += v == verdict_better;
    counts.worse += v == verdict_worse;
  }
  return counts;
}

TEST(StatsSimulation, PairedVerdictFindsATrueImprovement) {
  verdict_counts c = paired_verdicts(0.25, 7);
  std::printf("true +0.25: better in %d/%d suites, worse in %d\n", c.better, suites, c.worse);
  EXPECT_GE(c.better, suites * 9 / 10);
  EXPECT_EQ(c.worse, 0);
}

TEST(StatsSimulation, PairedVerdictAlmostNeverInventsADifference) {
  verdict_counts c = paired_verdicts(0.0, 11);
  std::printf("identical candidates: better in %d/%d suites, worse in %d\n", c.better, suites,
              c.worse);
  EXPECT_LE(c.better, suites / 20);
  EXPECT_LE(c.better + c.worse, suites / 10);
}

}  // namespace
}  // namespace evalbox::harness::stats
