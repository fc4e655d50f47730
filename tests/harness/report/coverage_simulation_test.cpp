// The coverage of the report's intervals at the edges (docs/statistics.md, "Coverage"): over
// p ∈ {0.01, 0.05, 0.5, 0.95, 0.99} × fixtures ∈ {5, 20, 100} × trials ∈ {1, 3}, each fixture's
// trials Bernoulli(p), how often the 95 % interval of pass@1, and of the paired difference of
// two candidates of the same p, holds the truth. Every cell must be near 95 % (93–97 %), or above
// it where the data are too coarse for more (fewer than 5 expected passes or failures over all
// the trials, or fewer than 10 fixtures). No interval may have zero width. Seeded: every run sees
// the same suites. The table it prints is the one in docs/statistics.md.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "harness/report/stats.h"

namespace evalbox::harness::stats {
namespace {

constexpr double ps[] = {0.01, 0.05, 0.5, 0.95, 0.99};
constexpr int fixture_counts[] = {5, 20, 100};
constexpr int trial_counts[] = {1, 3};

// `trials` Bernoulli(p) trials of `candidate` on each of `fixtures` fixtures.
void simulate(std::vector<run_outcome>& out, std::mt19937_64& rng, const std::string& candidate,
              int fixtures, int trials, double p) {
  std::bernoulli_distribution pass(p);
  for (int f = 0; f < fixtures; ++f)
    for (int t = 0; t < trials; ++t) {
      run_outcome o;
      o.candidate = candidate;
      o.fixture = "f" + std::to_string(f);
      o.trial = t;
      o.outcome = pass(rng) ? run_outcome::verdict::passed : run_outcome::verdict::failed;
      out.push_back(std::move(o));
    }
}

// Where discreteness allows no better than conservative: few expected passes or failures, or
// so few fixtures that their rates take a handful of values and their spread has 4 degrees of
// freedom.
bool coarse(double p, int fixtures, int trials) {
  const double n = static_cast<double>(fixtures) * trials;
  return std::min(p, 1.0 - p) * n < 5.0 || fixtures < 10;
}

struct cell_result {
  double coverage = 0.0;
  int zero_width = 0;
};

void check_cell(const char* what, double p, int f, int t, const cell_result& r) {
  EXPECT_GE(r.coverage, 0.93) << what << " p=" << p << " fixtures=" << f << " trials=" << t;
  if (!coarse(p, f, t)) {
    EXPECT_LE(r.coverage, 0.97) << what << " p=" << p << " fixtures=" << f << " trials=" << t;
  }
  EXPECT_EQ(r.zero_width, 0) << what << ": intervals of zero width, p=" << p << " fixtures=" << f
                             << " trials=" << t;
}

TEST(CoverageSimulation, PassAt1AndThePairedDifferenceHoldTheTruthAtTheEdges) {
  constexpr int replicates = 1000;
  std::printf(
      "| p | fixtures | trials | pass@1 | paired difference |\n|---|---:|---:|---:|---:|\n");
  uint64_t seed = 1;
  for (double p : ps)
    for (int f : fixture_counts)
      for (int t : trial_counts) {
        std::mt19937_64 rng(seed++);
        cell_result one, two;
        for (int i = 0; i < replicates; ++i) {
          std::vector<run_outcome> o;
          simulate(o, rng, "a", f, t, p);
          simulate(o, rng, "b", f, t, p);
          options opts;
          opts.baseline = "b";
          opts.bootstrap_samples = 400;
          opts.permutation_samples = 200;
          opts.seed = static_cast<uint64_t>(i);
          auto s = summarize(o, opts);
          ASSERT_TRUE(s) << s.error().message;
          const auto& ci = s->candidates.at(0).pass_at_1_ci;
          ASSERT_TRUE(ci);
          one.coverage += ci->lo <= p && p <= ci->hi;
          one.zero_width += ci->hi <= ci->lo;
          const auto& d = s->comparisons.at(0).ci;
          ASSERT_TRUE(d);
          two.coverage += d->lo <= 0.0 && 0.0 <= d->hi;
          two.zero_width += d->hi <= d->lo;
        }
        one.coverage /= replicates;
        two.coverage /= replicates;
        std::printf("| %.2f | %d | %d | %.1f %% | %.1f %% |\n", p, f, t, 100 * one.coverage,
                    100 * two.coverage);
        check_cell("pass@1", p, f, t, one);
        check_cell("paired difference", p, f, t, two);
      }
}

}  // namespace
}  // namespace evalbox::harness::stats
