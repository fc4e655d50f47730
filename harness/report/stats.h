// The statistics behind every evalbox report: per-fixture tallies, pass@k and pass^k, Wilson and
// fixture-clustered bootstrap intervals, paired comparisons with a plain-words verdict, flaky
// fixtures and usage (tokens, cost, wall time). Pure computation over plain data: no I/O.
//
// Rules that hold everywhere (docs/statistics.md has the formulas):
// - an infrastructure error is never a task failure: it is left out of every denominator,
//   counted, and listed with its message;
// - every estimate carries its n, and what n counts (trials or fixtures) is part of its name;
// - a value nobody reported is std::nullopt (JSON null), never 0;
// - randomness (bootstrap, permutation tests) comes from std::mt19937_64 seeded from
//   options::seed and the names involved, so the same outcomes give the same numbers anywhere.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "base/json_fwd.h"

namespace evalbox::harness {
inline namespace report {
namespace stats {

// One finished run as the report sees it (a row of results.jsonl).
struct run_outcome {
  enum class verdict { passed, failed, error };  // error = infrastructure, not the task

  std::string candidate;
  std::string fixture;
  int trial = 0;
  verdict outcome = verdict::failed;
  std::string error_message;  // why the run is an infrastructure error
  std::optional<double> wall_ms;
  std::optional<uint64_t> input_tokens, output_tokens;
  std::optional<double> cost_usd;  // reported by the client or priced from the suite's table
  // The judge's usage (judge checks), apart from the candidate's: set when the run was judged.
  bool judged = false;
  std::optional<uint64_t> judge_input_tokens, judge_output_tokens;
  std::optional<double> judge_cost_usd;  // priced from the suite's table by the judge's model
  // Which grading made the verdict (the record's grading.digest; "" in older records), and
  // whether it came from grading the run again (evalbox regrade).
  std::string grading_digest;
  bool regraded = false;
  // A gateway candidate's run (docs/agents.md): its usage was counted by its model gateway from
  // every response (exact); the median time to first byte and length of its model calls; and
  // whether its budget ended it.
  bool gateway = false;
  std::optional<double> ttfb_ms, call_ms;
  bool budget_exhausted = false;
  // How long the run waited for a free lease of its credentials (timings.credential_wait_ms);
  // nullopt for a run without credentials or an older record.
  std::optional<double> credential_wait_ms;
};

struct interval {
  double lo = 0.0;
  double hi = 1.0;
  double level = 0.95;

  bool excludes_zero() const { return lo > 0.0 || hi < 0.0; }
};

// ---- Estimators and tests on plain numbers -------------------------------------------------

// The standard normal quantile Φ⁻¹(p) for 0 < p < 1 (|error| < 1e-12).
double normal_quantile(double p);

// Student's t quantile for integer df ≥ 1 (|relative error| < 1e-12 up to df = 100000, then the
// normal quantile).
double student_t_quantile(double p, uint64_t df);

// Wilson score interval for `successes` out of `n` trials; n = 0 gives [0, 1].
interval wilson(uint64_t successes, uint64_t n, double level = 0.95);

// The unbiased pass@k estimator 1 − C(n−c, k)/C(n, k): the chance that at least one of k trials
// drawn without replacement from n (c of them passing) passes. Computed as a product, so it is
// exact in floating point for any n. nullopt unless 1 ≤ k ≤ n and c ≤ n.
std::optional<double> pass_at_k(uint64_t n, uint64_t c, uint64_t k);

// pass^k = C(c, k)/C(n, k): the chance that all k trials drawn from n pass. Same domain.
std::optional<double> pass_hat_k(uint64_t n, uint64_t c, uint64_t k);

// Two-sided exact McNemar p-value for discordant counts b and c: 2·P(X ≤ min(b, c)) for
// X ~ Binomial(b + c, ½), capped at 1. b = c = 0 gives 1.
double mcnemar_exact_p(uint64_t b, uint64_t c);

// Two-sided paired sign-flip permutation p-value for H0 "the per-fixture differences are
// symmetric about 0": exact over all 2^m sign patterns of the m non-zero differences when
// m ≤ 16, otherwise Monte Carlo with `samples` seeded draws ((1 + hits) / (1 + samples)).
double sign_flip_p(std::span<const double> differences, int samples, uint64_t seed);

// Expanded percentile bootstrap interval of the mean of `values` (each value is one cluster,
// e.g. one fixture's pass rate): resample values with replacement `samples` times and read the
// quantiles at Φ(−√(n/(n−1))·t_{n−1}) instead of α/2, which keeps coverage near nominal with few
// clusters. nullopt when fewer than two values (one cluster says nothing about the spread).
std::optional<interval> bootstrap_mean(std::span<const double> values, double level, int samples,
                                       uint64_t seed);

// An interval for the mean of per-cluster rates (one fixture's pass rate from its trials), which
// does not collapse at 0 or 1 nor claim certainty from few clusters: Clopper–Pearson on an
// effective sample size (Korn & Graubard 1998). The effective size is the binomial size whose
// variance equals the estimated variance of the mean (s²/F over the F clusters), never more than
// the trials themselves hold (F² / Σ 1/nᵢ), and the trials when the clusters do not vary (all 0,
// all 1); scaled by (z/t_{F−1})² for the few-cluster uncertainty of s². nullopt without clusters
// or with a cluster of no trials.
std::optional<interval> clustered_rate(std::span<const double> rates,
                                       std::span<const uint64_t> trials, double level);

// A difference a − b of two estimates from their own intervals and their correlation r (MOVER,
// Zou & Donner 2008; Newcombe's method 10 for proportions): as wide as the two intervals allow,
// never empty when either is not.
interval mover_difference(double a, const interval& ia, double b, const interval& ib, double r);

// ---- Summaries of a set of outcomes --------------------------------------------------------

struct options {
  double level = 0.95;                  // of every interval and of the verdict's tests
  int bootstrap_samples = 2000;         // B of every bootstrap
  int permutation_samples = 10000;      // Monte Carlo draws of the sign-flip test when m > 20
  uint64_t seed = 20240601;             // mixed with candidate names: order of input is irrelevant
  std::string oracle = "oracle";        // the reference candidate; flagged in flaky fixtures
  std::optional<std::string> baseline;  // compare every other candidate against this one
};

// One candidate on one fixture.
struct cell {
  std::string candidate;
  std::string fixture;
  uint64_t n = 0;  // trials that did not error: the denominator
  uint64_t passes = 0;
  uint64_t errors = 0;         // infrastructure errors, outside n
  std::optional<double> rate;  // passes / n; nullopt when n = 0
  interval ci;                 // Wilson on (passes, n)
};

struct k_estimate {
  uint64_t k = 0;
  double value = 0.0;
  uint64_t fixtures = 0;  // n: the estimate is a mean over this many fixtures
};

// Non-negative quantities reported by some runs. `missing` runs did not report; the
// distribution is over the `n` that did, and every field is nullopt when n = 0.
struct distribution {
  uint64_t n = 0;
  uint64_t missing = 0;
  std::optional<double> total, min, p50, p90, p99, max;  // percentiles: nearest rank
};

struct cost_total {
  uint64_t known = 0;               // runs with a cost
  uint64_t unknown = 0;             // runs without one: the total below does not include them
  std::optional<double> known_usd;  // sum over known runs; nullopt when none is known
};

// What the judges of judge checks used over the judged runs of a set (never added to the
// candidate's usage).
struct judge_usage {
  uint64_t runs = 0;  // judged runs
  distribution input_tokens, output_tokens;
  cost_total cost;
};

// What the model gateways of a set's gateway runs saw: over those runs, each run's median
// time to first byte and median call length (model calls), and the runs a budget ended.
struct gateway_usage {
  uint64_t runs = 0;
  distribution ttfb_ms, call_ms;
  uint64_t budget_exhausted = 0;
};

// The runs of a set that waited for a free credential lease (a login serves one run at a
// time, a shared credential its max_concurrent): how many, and their waits.
struct credential_wait {
  uint64_t runs = 0;     // runs whose wait was above 0
  distribution wait_ms;  // over those runs
};

// Resources used by a set of runs, errored runs included (they consumed them too).
struct usage {
  uint64_t runs = 0;
  distribution input_tokens, output_tokens, wall_ms;
  cost_total cost;
  judge_usage judge;
  gateway_usage gateway;
  credential_wait credentials;
};

struct candidate_summary {
  std::string candidate;
  uint64_t fixtures = 0;  // fixtures with n > 0: the n of pass@1 and its bootstrap
  std::vector<std::string> fixtures_without_trials;  // every trial errored: excluded, counted
  uint64_t trials = 0;  // non-error trials over all fixtures: the n of the pooled rate
  uint64_t passes = 0;
  uint64_t errors = 0;
  std::optional<double> pass_at_1;       // mean over fixtures of per-fixture rates
  std::optional<interval> pass_at_1_ci;  // clustered_rate over the fixtures' rates
  std::optional<double> pooled_rate;     // passes / trials, for reference
  std::optional<interval> pooled_ci;     // Wilson on pooled trials (ignores clustering)
  uint64_t max_k = 0;                    // the smallest n over fixtures with n > 0
  std::vector<k_estimate> pass_at;       // pass@k for k = 1..max_k, mean over fixtures
  std::vector<k_estimate> pass_hat;      // pass^k for k = 1..max_k, mean over fixtures
  usage use;
};

struct fixture_difference {
  std::string fixture;
  double candidate_rate = 0.0;
  uint64_t candidate_n = 0;
  double baseline_rate = 0.0;
  uint64_t baseline_n = 0;
  double difference = 0.0;  // candidate_rate − baseline_rate
};

struct mcnemar_test {
  uint64_t b = 0;  // fixtures where the candidate passed and the baseline failed
  uint64_t c = 0;  // fixtures where the candidate failed and the baseline passed
  double p_value = 1.0;
};

inline constexpr std::string_view verdict_better = "better";
inline constexpr std::string_view verdict_worse = "worse";
inline constexpr std::string_view verdict_no_difference = "no detectable difference at this n";
inline constexpr std::string_view verdict_no_shared = "no shared fixtures";

struct paired_comparison {
  std::string candidate;
  std::string baseline;
  uint64_t n = 0;                                          // shared fixtures: n > 0 for both
  std::vector<std::string> candidate_only, baseline_only;  // not shared, so not compared
  std::vector<fixture_difference> differences;
  std::optional<double> mean_difference;
  std::optional<interval> ci;  // paired bootstrap over shared fixtures; MOVER when it collapses
  std::optional<double> sign_flip_p;    // paired permutation test over shared fixtures
  std::optional<mcnemar_test> mcnemar;  // only when every shared fixture has one trial each
  std::string verdict;                  // one of the verdict_* strings
};

struct flaky_fixture {
  std::string fixture;
  std::vector<std::string> candidates;  // each had both a pass and a failure on it
  bool oracle = false;                  // the oracle is among them: the fixture itself is flaky
};

struct error_entry {
  std::string candidate;
  std::string fixture;
  int trial = 0;
  std::string message;
};

// Runs a plan has that no record here covers (a partial `evalbox merge --partial`): every number
// of the summary is over the recorded runs only, so a report must say how many are missing.
struct missing_runs {
  uint64_t planned = 0;  // runs of the whole plan
  uint64_t missing = 0;  // of those, runs without a record
};

// Which gradings the verdicts come from (summary.json "grading").
struct grading_sources {
  uint64_t regraded = 0;                    // verdicts from grading a run again
  std::map<std::string, uint64_t> digests;  // grading digest ("" unknown) → runs
  // Fixtures whose runs were graded by different checks (more than one digest), sorted.
  std::vector<std::string> mixed_fixtures;
  std::string selected;  // set when the report shows one older grading (report --grading)
};

struct summary {
  options settings;
  grading_sources grading;
  uint64_t runs = 0;
  std::optional<missing_runs> missing;         // set only by a partial merge; in JSON "runs"
  std::vector<cell> cells;                     // sorted by candidate, then fixture
  std::vector<candidate_summary> candidates;   // sorted by name
  std::vector<paired_comparison> comparisons;  // each non-oracle candidate vs the baseline
  std::vector<flaky_fixture> flaky;            // sorted by fixture
  std::vector<error_entry> errors;             // sorted by candidate, fixture, trial
  usage overall;
};

// Tallies outcomes per candidate × fixture (Wilson intervals at `level`). Rejects duplicate
// (candidate, fixture, trial) rows, empty names, and negative or non-finite wall time or cost.
result<std::vector<cell>> tabulate(std::span<const run_outcome> outcomes, double level = 0.95);

// Summarizes the cells of one candidate (all with the same candidate name, any order). Leaves
// `use` empty: usage needs the runs themselves (summarize_usage).
candidate_summary summarize_candidate(std::span<const cell> cells, const options& opts);

// Compares `candidate` against `baseline` over the fixtures both ran with n > 0.
// "better"/"worse" needs all of: the paired bootstrap interval excludes 0, the sign-flip test
// rejects at 1 − level, and (when it applies) the exact McNemar test rejects at 1 − level.
paired_comparison compare(std::span<const cell> candidate, std::span<const cell> baseline,
                          const options& opts);

usage summarize_usage(std::span<const run_outcome> outcomes);

// Everything above for one set of outcomes. Fails on invalid input or options (a level outside
// (0, 1), fewer than one bootstrap sample, a baseline that is not a candidate).
result<summary> summarize(std::span<const run_outcome> outcomes, const options& opts = {});

// The summary as JSON, schema "evalbox.summary.v1" (docs/statistics.md); unknown values are null.
json to_json(const summary& s);

// The same as pretty_json(to_json(s)), byte for byte, written as it is built: only one element
// of a list (a cell, an error, one k of pass@k) is a json value at a time, so a summary of
// many fixtures or trials is never held as a whole document.
void write_json(std::ostream& out, const summary& s);

}  // namespace stats
}  // namespace report
}  // namespace evalbox::harness
