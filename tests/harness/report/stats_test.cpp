// Report statistics against known values: estimators, intervals, tests, summaries and JSON.
#include "harness/report/stats.h"
#include "base/json.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

namespace evalbox::harness::stats {
namespace {

using verdict = run_outcome::verdict;

run_outcome run(std::string candidate, std::string fixture, int trial, verdict v) {
  run_outcome o;
  o.candidate = std::move(candidate);
  o.fixture = std::move(fixture);
  o.trial = trial;
  o.outcome = v;
  if (v == verdict::error) o.error_message = "sandbox setup failed";
  return o;
}

// `passes` passing and `fails` failing trials of `candidate` on `fixture`.
void add_trials(std::vector<run_outcome>& out, const std::string& candidate,
                const std::string& fixture, int passes, int fails) {
  int trial = 0;
  for (int i = 0; i < passes; ++i) out.push_back(run(candidate, fixture, trial++, verdict::passed));
  for (int i = 0; i < fails; ++i) out.push_back(run(candidate, fixture, trial++, verdict::failed));
}

std::string fixture_name(int i) { return "fixture-" + std::to_string(100 + i); }

const candidate_summary& find(const summary& s, std::string_view name) {
  auto it = std::find_if(s.candidates.begin(), s.candidates.end(),
                         [&](const candidate_summary& c) { return c.candidate == name; });
  EXPECT_NE(it, s.candidates.end()) << name;
  return *it;
}

// ---- Estimators ----------------------------------------------------------------------------

TEST(NormalQuantile, MatchesTabulatedValues) {
  EXPECT_NEAR(normal_quantile(0.975), 1.959963984540054, 1e-12);
  EXPECT_NEAR(normal_quantile(0.5), 0.0, 1e-15);
  EXPECT_NEAR(normal_quantile(0.995), 2.5758293035489, 1e-12);
  EXPECT_NEAR(normal_quantile(0.001), -3.090232306167813, 1e-12);
}

TEST(StudentT, MatchesTabulatedValues) {
  EXPECT_NEAR(student_t_quantile(0.975, 1), 12.706204736174707, 1e-9);
  EXPECT_NEAR(student_t_quantile(0.975, 2), 4.302652729749464, 1e-10);
  EXPECT_NEAR(student_t_quantile(0.975, 4), 2.7764451051977934, 1e-10);
  EXPECT_NEAR(student_t_quantile(0.975, 29), 2.045229642132703, 1e-10);
  EXPECT_NEAR(student_t_quantile(0.995, 10), 3.169272672616872, 1e-10);
  EXPECT_NEAR(student_t_quantile(0.025, 4), -2.7764451051977934, 1e-10);
  EXPECT_NEAR(student_t_quantile(0.975, 1000000), 1.959963984540054, 1e-5);
}

TEST(Wilson, EightOfTenAtNinetyFivePercent) {
  interval i = wilson(8, 10);
  EXPECT_NEAR(i.lo, 0.4902, 1e-4);
  EXPECT_NEAR(i.hi, 0.9433, 1e-4);
  EXPECT_EQ(i.level, 0.95);
}

TEST(Wilson, ZeroSuccessesHasLowerBoundExactlyZero) {
  interval i = wilson(0, 10);
  EXPECT_EQ(i.lo, 0.0);
  EXPECT_NEAR(i.hi, 0.2775, 1e-4);
  EXPECT_EQ(wilson(10, 10).hi, 1.0);
}

TEST(Wilson, NoTrialsIsTheWholeRange) {
  interval i = wilson(0, 0);
  EXPECT_EQ(i.lo, 0.0);
  EXPECT_EQ(i.hi, 1.0);
}

TEST(Wilson, HigherLevelIsWider) {
  interval i95 = wilson(30, 100, 0.95);
  interval i99 = wilson(30, 100, 0.99);
  EXPECT_LT(i99.lo, i95.lo);
  EXPECT_GT(i99.hi, i95.hi);
  EXPECT_NEAR(i95.lo, 0.2189, 1e-4);  // 30/100: [0.2189, 0.3958]
  EXPECT_NEAR(i95.hi, 0.3958, 1e-4);
}

TEST(PassAtK, KnownValues) {
  EXPECT_DOUBLE_EQ(*pass_at_k(10, 3, 1), 0.3);
  EXPECT_NEAR(*pass_at_k(10, 3, 5), 1.0 - 21.0 / 252.0, 1e-12);
  EXPECT_EQ(*pass_at_k(10, 8, 3), 1.0);  // only 2 failures: any 3 trials include a pass
  EXPECT_EQ(*pass_at_k(10, 0, 4), 0.0);
  EXPECT_EQ(*pass_at_k(5, 5, 5), 1.0);
}

TEST(PassAtK, OutsideItsDomainIsUnknown) {
  EXPECT_FALSE(pass_at_k(5, 3, 6));
  EXPECT_FALSE(pass_at_k(5, 3, 0));
  EXPECT_FALSE(pass_at_k(5, 6, 1));
}

TEST(PassAtK, StableForLargeN) {
  // C(1000, 10) overflows 64 bits; the ratio is Π (500 − i)/(1000 − i).
  double all_fail = 1.0;
  for (int i = 0; i < 10; ++i) all_fail *= (500.0 - i) / (1000.0 - i);
  EXPECT_NEAR(*pass_at_k(1000, 500, 10), 1.0 - all_fail, 1e-12);
  EXPECT_NEAR(*pass_at_k(100000, 1, 1), 1e-5, 1e-15);
}

TEST(PassHatK, KnownValues) {
  EXPECT_NEAR(*pass_hat_k(10, 3, 2), 3.0 / 45.0, 1e-12);  // C(3,2)/C(10,2)
  EXPECT_DOUBLE_EQ(*pass_hat_k(10, 7, 1), 0.7);
  EXPECT_EQ(*pass_hat_k(10, 3, 4), 0.0);
  EXPECT_EQ(*pass_hat_k(4, 4, 4), 1.0);
  EXPECT_NEAR(*pass_hat_k(10, 5, 5), 1.0 / 252.0, 1e-12);
  EXPECT_FALSE(pass_hat_k(3, 3, 4));
}

TEST(McNemar, ExactTwoSidedPValue) {
  EXPECT_NEAR(mcnemar_exact_p(1, 9), 22.0 / 1024.0, 1e-12);  // 0.021484375
  EXPECT_NEAR(mcnemar_exact_p(9, 1), 22.0 / 1024.0, 1e-12);
  EXPECT_NEAR(mcnemar_exact_p(0, 5), 2.0 / 32.0, 1e-12);
  EXPECT_NEAR(mcnemar_exact_p(2, 8), 2.0 * 56.0 / 1024.0, 1e-12);
}

TEST(McNemar, NoDiscordantPairsOrBalancedIsOne) {
  EXPECT_EQ(mcnemar_exact_p(0, 0), 1.0);
  EXPECT_EQ(mcnemar_exact_p(5, 5), 1.0);
}

TEST(McNemar, LargeCountsDoNotUnderflow) {
  double p = mcnemar_exact_p(600, 400);
  EXPECT_GT(p, 0.0);
  EXPECT_LT(p, 1e-8);
  EXPECT_NEAR(mcnemar_exact_p(520, 480), 0.2178, 2e-3);  // normal approximation ~0.2059–0.22
}

TEST(SignFlip, ExactForFewFixtures) {
  std::vector<double> three = {1, 1, 1};
  EXPECT_DOUBLE_EQ(sign_flip_p(three, 1000, 1), 2.0 / 8.0);
  std::vector<double> six = {1, 1, 1, 1, 1, 1};
  EXPECT_DOUBLE_EQ(sign_flip_p(six, 1000, 1), 2.0 / 64.0);
  std::vector<double> with_zeros = {0, 0.5, 0, 0.5, 0.5};  // zeros cannot change the sum
  EXPECT_DOUBLE_EQ(sign_flip_p(with_zeros, 1000, 1), 2.0 / 8.0);
}

TEST(SignFlip, AllZeroDifferencesGiveOne) {
  std::vector<double> zeros(10, 0.0);
  EXPECT_EQ(sign_flip_p(zeros, 1000, 1), 1.0);
}

TEST(SignFlip, MonteCarloForManyFixturesIsSeededAndClose) {
  // 24 differences of +1 and 8 of −1: exact two-sided p = 2·P(Bin(32, ½) ≥ 24) ≈ 0.0070.
  std::vector<double> d(24, 1.0);
  d.insert(d.end(), 8, -1.0);
  double p1 = sign_flip_p(d, 20000, 7);
  EXPECT_EQ(p1, sign_flip_p(d, 20000, 7));
  EXPECT_NEAR(p1, 0.0070, 0.002);
}

TEST(Bootstrap, SameSeedSameInterval) {
  std::vector<double> v = {0.2, 0.4, 0.4, 1.0, 0.0, 0.6, 0.8, 0.2};
  auto a = bootstrap_mean(v, 0.95, 2000, 42);
  auto b = bootstrap_mean(v, 0.95, 2000, 42);
  auto c = bootstrap_mean(v, 0.95, 2000, 43);
  ASSERT_TRUE(a && b && c);
  EXPECT_EQ(a->lo, b->lo);
  EXPECT_EQ(a->hi, b->hi);
  EXPECT_TRUE(a->lo != c->lo || a->hi != c->hi);
  EXPECT_LT(a->lo, 0.45);  // mean 0.45
  EXPECT_GT(a->hi, 0.45);
}

TEST(Bootstrap, TwoClustersSpanTheirRange) {
  // With two fixtures the expanded tail is ~1e-72: the interval is every resampled mean.
  std::vector<double> two = {0.2, 0.8};
  auto i = bootstrap_mean(two, 0.95, 2000, 3);
  ASSERT_TRUE(i);
  EXPECT_DOUBLE_EQ(i->lo, 0.2);
  EXPECT_DOUBLE_EQ(i->hi, 0.8);
}

TEST(Bootstrap, WiderThanTheNormalIntervalForFewClusters) {
  // Ten clusters, mean 0.52, sample sd 0.3425: the z interval's lower bound is 0.3077 and the
  // plain percentile bootstrap's is about 0.318; the expanded interval reaches below both.
  std::vector<double> v = {0.0, 0.2, 0.2, 0.4, 0.4, 0.6, 0.6, 0.8, 1.0, 1.0};
  auto i = bootstrap_mean(v, 0.95, 4000, 8);
  ASSERT_TRUE(i);
  EXPECT_LT(i->lo, 0.52 - 1.96 * 0.3425 / std::sqrt(10.0));
  EXPECT_GT(i->hi, 0.52 + 1.96 * 0.3425 / std::sqrt(10.0));
  EXPECT_GT(i->lo, 0.2);  // and not absurdly wide
}

TEST(Bootstrap, OneClusterGivesNoInterval) {
  std::vector<double> one = {0.5};
  EXPECT_FALSE(bootstrap_mean(one, 0.95, 2000, 1));
}

TEST(Bootstrap, ConstantValuesGiveAPointInterval) {
  std::vector<double> v(5, 0.6);
  auto i = bootstrap_mean(v, 0.95, 500, 1);
  ASSERT_TRUE(i);
  EXPECT_DOUBLE_EQ(i->lo, 0.6);
  EXPECT_DOUBLE_EQ(i->hi, 0.6);
}

// ---- Summaries -----------------------------------------------------------------------------

TEST(Summarize, InfrastructureErrorsAreOutsideEveryDenominator) {
  std::vector<run_outcome> o;
  add_trials(o, "a", "f1", 2, 1);
  o.push_back(run("a", "f1", 10, verdict::error));
  o.push_back(run("a", "f1", 11, verdict::error));
  add_trials(o, "a", "f2", 1, 1);
  auto s = summarize(o);
  ASSERT_TRUE(s) << s.error().message;
  const cell& f1 = s->cells[0];
  EXPECT_EQ(f1.fixture, "f1");
  EXPECT_EQ(f1.n, 3u);
  EXPECT_EQ(f1.passes, 2u);
  EXPECT_EQ(f1.errors, 2u);
  EXPECT_DOUBLE_EQ(*f1.rate, 2.0 / 3.0);
  const candidate_summary& a = find(*s, "a");
  EXPECT_EQ(a.trials, 5u);
  EXPECT_EQ(a.errors, 2u);
  EXPECT_DOUBLE_EQ(*a.pass_at_1, (2.0 / 3.0 + 0.5) / 2.0);
  EXPECT_DOUBLE_EQ(*a.pooled_rate, 3.0 / 5.0);
  ASSERT_EQ(s->errors.size(), 2u);
  EXPECT_EQ(s->errors[0].message, "sandbox setup failed");
  EXPECT_EQ(s->errors[0].trial, 10);
}

TEST(Summarize, FixtureWhereEveryTrialErroredIsExcludedAndNamed) {
  std::vector<run_outcome> o;
  add_trials(o, "a", "f1", 1, 1);
  o.push_back(run("a", "f2", 0, verdict::error));
  auto s = summarize(o);
  ASSERT_TRUE(s);
  const candidate_summary& a = find(*s, "a");
  EXPECT_EQ(a.fixtures, 1u);
  EXPECT_EQ(a.fixtures_without_trials, std::vector<std::string>{"f2"});
  EXPECT_DOUBLE_EQ(*a.pass_at_1, 0.5);
  EXPECT_FALSE(s->cells[1].rate);
}

TEST(Summarize, PassAtKForEveryKUpToTheSmallestN) {
  std::vector<run_outcome> o;
  add_trials(o, "a", "f1", 3, 7);  // n = 10
  add_trials(o, "a", "f2", 1, 4);  // n = 5
  auto s = summarize(o);
  ASSERT_TRUE(s);
  const candidate_summary& a = find(*s, "a");
  EXPECT_EQ(a.max_k, 5u);
  ASSERT_EQ(a.pass_at.size(), 5u);
  ASSERT_EQ(a.pass_hat.size(), 5u);
  EXPECT_DOUBLE_EQ(a.pass_at[0].value, (0.3 + 0.2) / 2.0);
  EXPECT_NEAR(a.pass_at[4].value, ((1.0 - 21.0 / 252.0) + 1.0) / 2.0, 1e-12);
  EXPECT_NEAR(a.pass_hat[1].value, (3.0 / 45.0 + 0.0) / 2.0, 1e-12);
  EXPECT_EQ(a.pass_at[4].fixtures, 2u);
}

TEST(Summarize, BootstrapIsReproducibleAndIndependentOfInputOrder) {
  std::vector<run_outcome> o;
  for (int f = 0; f < 12; ++f) {
    add_trials(o, "a", fixture_name(f), f % 4, 3 - f % 4);
    add_trials(o, "b", fixture_name(f), f % 3, 3 - f % 3);
  }
  options opts;
  opts.baseline = "b";
  auto s1 = summarize(o, opts);
  std::shuffle(o.begin(), o.end(), std::mt19937_64(5));
  auto s2 = summarize(o, opts);
  ASSERT_TRUE(s1 && s2);
  EXPECT_EQ(to_json(*s1), to_json(*s2));
  ASSERT_TRUE(find(*s1, "a").pass_at_1_ci);
  EXPECT_EQ(to_json(*s1)["settings"]["seed"], opts.seed);  // so a reader can reproduce it
}

TEST(Summarize, FlagsFixturesWithMixedOutcomesIncludingTheOracle) {
  std::vector<run_outcome> o;
  add_trials(o, "oracle", "steady", 3, 0);
  add_trials(o, "a", "steady", 0, 3);
  add_trials(o, "oracle", "shaky", 2, 1);
  add_trials(o, "a", "shaky", 3, 0);
  add_trials(o, "oracle", "agent-flaky", 3, 0);
  add_trials(o, "a", "agent-flaky", 1, 2);
  add_trials(o, "b", "agent-flaky", 2, 1);
  o.push_back(run("a", "steady", 9, verdict::error));  // an error is not a mixed outcome
  auto s = summarize(o);
  ASSERT_TRUE(s);
  ASSERT_EQ(s->flaky.size(), 2u);
  EXPECT_EQ(s->flaky[0].fixture, "agent-flaky");
  EXPECT_EQ(s->flaky[0].candidates, (std::vector<std::string>{"a", "b"}));
  EXPECT_FALSE(s->flaky[0].oracle);
  EXPECT_EQ(s->flaky[1].fixture, "shaky");
  EXPECT_EQ(s->flaky[1].candidates, std::vector<std::string>{"oracle"});
  EXPECT_TRUE(s->flaky[1].oracle);
}

TEST(Summarize, RejectsDuplicateTrials) {
  std::vector<run_outcome> o;
  add_trials(o, "a", "f1", 1, 0);
  o.push_back(run("a", "f1", 0, verdict::failed));
  auto s = summarize(o);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().kind, error_kind::invalid_argument);
  EXPECT_NE(s.error().message.find("duplicate"), std::string::npos);
}

TEST(Summarize, RejectsUnknownBaselineAndBadLevel) {
  std::vector<run_outcome> o;
  add_trials(o, "a", "f1", 1, 0);
  options opts;
  opts.baseline = "nobody";
  EXPECT_FALSE(summarize(o, opts));
  options bad_level;
  bad_level.level = 1.0;
  EXPECT_FALSE(summarize(o, bad_level));
}

TEST(Summarize, RejectsNegativeCost) {
  std::vector<run_outcome> o;
  add_trials(o, "a", "f1", 1, 0);
  o[0].cost_usd = -1.0;
  EXPECT_FALSE(summarize(o));
}

// ---- Paired comparison ---------------------------------------------------------------------

// Candidate and baseline on `fixtures` fixtures with the given passes out of `trials` each.
std::vector<run_outcome> paired(int fixtures, int trials, auto cand_passes, auto base_passes) {
  std::vector<run_outcome> o;
  for (int f = 0; f < fixtures; ++f) {
    add_trials(o, "cand", fixture_name(f), cand_passes(f), trials - cand_passes(f));
    add_trials(o, "base", fixture_name(f), base_passes(f), trials - base_passes(f));
  }
  return o;
}

paired_comparison compare_of(const std::vector<run_outcome>& o) {
  options opts;
  opts.baseline = "base";
  auto s = summarize(o, opts);
  EXPECT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->comparisons.size(), 1u);
  return s->comparisons.at(0);
}

TEST(Compare, ClearlyBetterIsBetter) {
  auto c = compare_of(paired(
      20, 5, [](int f) { return 3 + f % 3; }, [](int f) { return f % 3; }));
  EXPECT_EQ(c.verdict, verdict_better);
  EXPECT_EQ(c.n, 20u);
  EXPECT_NEAR(*c.mean_difference, 0.6, 1e-12);
  EXPECT_GT(c.ci->lo, 0.0);
  EXPECT_LT(*c.sign_flip_p, 0.05);
  EXPECT_FALSE(c.mcnemar);
}

TEST(Compare, ClearlyWorseIsWorse) {
  auto c = compare_of(paired(
      20, 5, [](int f) { return f % 2; }, [](int f) { return 4 - f % 2; }));
  EXPECT_EQ(c.verdict, verdict_worse);
  EXPECT_LT(c.ci->hi, 0.0);
}

TEST(Compare, IdenticalResultsShowNoDifference) {
  auto same = [](int f) { return f % 6; };
  auto c = compare_of(paired(20, 5, same, same));
  EXPECT_EQ(c.verdict, verdict_no_difference);
  EXPECT_EQ(*c.mean_difference, 0.0);
  EXPECT_EQ(*c.sign_flip_p, 1.0);
}

TEST(Compare, TooFewFixturesShowNoDifferenceEvenWhenEveryOneImproves) {
  // Three fixtures, 5/5 vs 0/5 on each: the bootstrap interval is [1, 1], but three fixtures
  // cannot show that the improvement generalizes (sign-flip p = 2/8).
  auto c = compare_of(paired(
      3, 5, [](int) { return 5; }, [](int) { return 0; }));
  EXPECT_EQ(c.verdict, verdict_no_difference);
  EXPECT_EQ(c.n, 3u);
  EXPECT_DOUBLE_EQ(*c.sign_flip_p, 0.25);
}

TEST(Compare, SingleTrialPairsUseMcNemar) {
  // b = 9 fixtures where only the candidate passes, c = 1 where only the baseline does.
  auto c = compare_of(paired(
      14, 1, [](int f) { return f < 9 || f >= 12 ? 1 : 0; },
      [](int f) { return f == 9 || f >= 12 ? 1 : 0; }));
  ASSERT_TRUE(c.mcnemar);
  EXPECT_EQ(c.mcnemar->b, 9u);
  EXPECT_EQ(c.mcnemar->c, 1u);
  EXPECT_NEAR(c.mcnemar->p_value, 0.021484375, 1e-12);
  EXPECT_EQ(c.verdict, verdict_better);
}

TEST(Compare, McNemarMustAgreeWhenItApplies) {
  // b = 5, c = 0 over 5 discordant pairs: McNemar p = 0.0625, not below 0.05.
  auto c = compare_of(paired(
      8, 1, [](int f) { return f < 5 ? 1 : 0; }, [](int) { return 0; }));
  ASSERT_TRUE(c.mcnemar);
  EXPECT_DOUBLE_EQ(c.mcnemar->p_value, 0.0625);
  EXPECT_EQ(c.verdict, verdict_no_difference);
}

TEST(Compare, OnlySharedFixturesWithTrialsAreCompared) {
  std::vector<run_outcome> o = paired(
      10, 2, [](int) { return 2; }, [](int) { return 0; });
  add_trials(o, "cand", "cand-only", 1, 1);
  add_trials(o, "base", "base-only", 1, 1);
  o.push_back(run("cand", "errored", 0, verdict::error));
  add_trials(o, "base", "errored", 2, 0);
  auto c = compare_of(o);
  EXPECT_EQ(c.n, 10u);
  EXPECT_EQ(c.candidate_only, std::vector<std::string>{"cand-only"});
  EXPECT_EQ(c.baseline_only, (std::vector<std::string>{"base-only", "errored"}));
}

TEST(Compare, NoSharedFixturesSaysSo) {
  std::vector<run_outcome> o;
  add_trials(o, "cand", "x", 1, 0);
  add_trials(o, "base", "y", 1, 0);
  auto c = compare_of(o);
  EXPECT_EQ(c.n, 0u);
  EXPECT_EQ(c.verdict, verdict_no_shared);
  EXPECT_FALSE(c.mean_difference);
}

TEST(Compare, OracleAndBaselineAreNotComparedAgainstTheBaseline) {
  std::vector<run_outcome> o;
  add_trials(o, "oracle", "f", 1, 0);
  add_trials(o, "base", "f", 1, 0);
  add_trials(o, "cand", "f", 1, 0);
  options opts;
  opts.baseline = "base";
  auto s = summarize(o, opts);
  ASSERT_TRUE(s);
  ASSERT_EQ(s->comparisons.size(), 1u);
  EXPECT_EQ(s->comparisons[0].candidate, "cand");
}

// ---- Usage ---------------------------------------------------------------------------------

TEST(Usage, UnknownCostIsNullNeverZero) {
  std::vector<run_outcome> o;
  add_trials(o, "a", "f", 2, 0);
  auto s = summarize(o);
  ASSERT_TRUE(s);
  EXPECT_FALSE(s->overall.cost.known_usd);
  EXPECT_EQ(s->overall.cost.unknown, 2u);
  json j = to_json(*s);
  EXPECT_TRUE(j["usage"]["cost_usd"]["known_total"].is_null());
  EXPECT_TRUE(j["usage"]["input_tokens"]["total"].is_null());
  EXPECT_EQ(j["usage"]["input_tokens"]["missing"], 2);
}

TEST(Usage, PartialCostSumsOnlyKnownAndCountsUnknown) {
  std::vector<run_outcome> o;
  add_trials(o, "a", "f", 3, 0);
  o[0].cost_usd = 0.25;
  o[1].cost_usd = 0.5;
  auto s = summarize(o);
  ASSERT_TRUE(s);
  EXPECT_DOUBLE_EQ(*s->overall.cost.known_usd, 0.75);
  EXPECT_EQ(s->overall.cost.known, 2u);
  EXPECT_EQ(s->overall.cost.unknown, 1u);
}

TEST(Usage, TokenDistributionsAndWallTimePercentiles) {
  std::vector<run_outcome> o;
  add_trials(o, "a", "f", 10, 0);
  o.push_back(run("a", "f", 10, verdict::error));  // errored runs used resources too
  for (int i = 0; i < 10; ++i) {
    o[i].input_tokens = 100 * (i + 1);
    o[i].output_tokens = 10;
    o[i].wall_ms = 1000.0 * (i + 1);
  }
  o[10].wall_ms = 50000.0;
  const usage u = summarize_usage(o);
  EXPECT_EQ(u.runs, 11u);
  EXPECT_EQ(u.input_tokens.n, 10u);
  EXPECT_EQ(u.input_tokens.missing, 1u);
  EXPECT_EQ(*u.input_tokens.total, 5500.0);
  EXPECT_EQ(*u.input_tokens.min, 100.0);
  EXPECT_EQ(*u.input_tokens.p50, 500.0);  // nearest rank: ⌈0.5·10⌉ = 5th value
  EXPECT_EQ(*u.input_tokens.p90, 900.0);
  EXPECT_EQ(*u.input_tokens.max, 1000.0);
  EXPECT_EQ(u.wall_ms.n, 11u);
  EXPECT_EQ(*u.wall_ms.p50, 6000.0);   // ⌈5.5⌉ = 6th of 11
  EXPECT_EQ(*u.wall_ms.p90, 10000.0);  // ⌈9.9⌉ = 10th
  EXPECT_EQ(*u.wall_ms.p99, 50000.0);
}

// ---- JSON ----------------------------------------------------------------------------------

TEST(SummaryJson, CarriesSchemaAndEveryNumbersN) {
  std::vector<run_outcome> o = paired(
      6, 3, [](int f) { return f % 4; }, [](int f) { return f % 2; });
  o.push_back(run("cand", fixture_name(0), 99, verdict::error));
  options opts;
  opts.baseline = "base";
  auto s = summarize(o, opts);
  ASSERT_TRUE(s);
  json j = to_json(*s);
  EXPECT_EQ(j["schema"], "evalbox.summary.v1");
  EXPECT_EQ(j["runs"]["total"], 37);
  EXPECT_EQ(j["runs"]["errors"], 1);
  const json& cand = j["candidates"][1];
  EXPECT_EQ(cand["candidate"], "cand");
  EXPECT_EQ(cand["pass_at_1"]["n"], 6);
  EXPECT_EQ(cand["pooled"]["n"], 18);
  EXPECT_EQ(cand["trials"]["errors"], 1);
  EXPECT_TRUE(cand["pass_at_1"]["ci"].is_object());
  EXPECT_EQ(cand["pass_at_k"].size(), 3u);
  EXPECT_EQ(j["comparisons"][0]["n"], 6);
  EXPECT_EQ(j["comparisons"][0]["differences"].size(), 6u);
  EXPECT_TRUE(j["comparisons"][0]["mcnemar"].is_null());
  EXPECT_EQ(j["errors"][0]["message"], "sandbox setup failed");
  EXPECT_EQ(j["cells"].size(), 12u);
}

}  // namespace
}  // namespace evalbox::harness::stats
