// The summary of a set of run outcomes (see stats.h): cells per candidate and fixture,
// per-candidate estimates, paired comparisons against the baseline, flaky fixtures, errors and
// usage. The estimators it uses are estimators.cpp; its JSON is summary_json.cpp.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <set>
#include <tuple>

#include "harness/report/stats.h"

namespace evalbox::harness {
inline namespace report {
namespace stats {
namespace {

uint64_t fnv1a(std::string_view text, uint64_t h = 0xcbf29ce484222325ULL) {
  for (unsigned char ch : text) {
    h ^= ch;
    h *= 0x100000001b3ULL;
  }
  return h;
}

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// A seed that depends on the user's seed and on names only, never on the order of the input or
// on which other candidates happen to be in it.
uint64_t derive_seed(uint64_t seed, std::initializer_list<std::string_view> parts) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (std::string_view part : parts) {
    h = fnv1a(part, h);
    h = fnv1a(std::string_view("\0", 1), h);
  }
  return splitmix64(seed ^ h);
}

double mean(std::span<const double> values) {
  return std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
}

// Nearest rank: the smallest observed value with at least q of the values at or below it.
double nearest_rank(std::span<const double> sorted, double q) {
  const auto rank = static_cast<size_t>(std::ceil(q * static_cast<double>(sorted.size())));
  return sorted[std::clamp<size_t>(rank, 1, sorted.size()) - 1];
}

distribution describe(std::vector<double> values, uint64_t missing) {
  distribution d;
  d.n = values.size();
  d.missing = missing;
  if (values.empty()) return d;
  std::sort(values.begin(), values.end());
  d.total = std::accumulate(values.begin(), values.end(), 0.0);
  d.min = values.front();
  d.max = values.back();
  d.p50 = nearest_rank(values, 0.50);
  d.p90 = nearest_rank(values, 0.90);
  d.p99 = nearest_rank(values, 0.99);
  return d;
}

bool valid_quantity(const std::optional<double>& v) {
  return !v || (std::isfinite(*v) && *v >= 0.0);
}

}  // namespace

result<std::vector<cell>> tabulate(std::span<const run_outcome> outcomes, double level) {
  std::map<std::pair<std::string, std::string>, cell> cells;
  std::set<std::tuple<std::string_view, std::string_view, int>> seen;
  for (const run_outcome& o : outcomes) {
    if (o.candidate.empty() || o.fixture.empty()) {
      return make_error(error_kind::invalid_argument,
                        "run outcome with an empty candidate or fixture name (trial {})", o.trial);
    }
    if (!seen.emplace(o.candidate, o.fixture, o.trial).second) {
      return make_error(error_kind::invalid_argument,
                        "duplicate run outcome: candidate {}, fixture {}, trial {}", o.candidate,
                        o.fixture, o.trial);
    }
    if (!valid_quantity(o.wall_ms) || !valid_quantity(o.cost_usd) ||
        !valid_quantity(o.judge_cost_usd)) {
      return make_error(error_kind::invalid_argument,
                        "negative or non-finite wall time or cost: candidate {}, fixture {}, "
                        "trial {}",
                        o.candidate, o.fixture, o.trial);
    }
    cell& c = cells[{o.candidate, o.fixture}];
    c.candidate = o.candidate;
    c.fixture = o.fixture;
    switch (o.outcome) {
      case run_outcome::verdict::passed:
        ++c.n;
        ++c.passes;
        break;
      case run_outcome::verdict::failed:
        ++c.n;
        break;
      case run_outcome::verdict::error:
        ++c.errors;
        break;
    }
  }
  std::vector<cell> out;
  out.reserve(cells.size());
  for (auto& [key, c] : cells) {
    if (c.n > 0) c.rate = static_cast<double>(c.passes) / static_cast<double>(c.n);
    c.ci = wilson(c.passes, c.n, level);
    out.push_back(std::move(c));
  }
  return out;
}

namespace {

// Pearson's correlation of two equally long series; 0 when either does not vary.
double correlation(const std::vector<double>& x, const std::vector<double>& y) {
  if (x.size() < 2 || x.size() != y.size()) return 0.0;
  const double mx = mean(x), my = mean(y);
  double sxy = 0.0, sxx = 0.0, syy = 0.0;
  for (size_t i = 0; i < x.size(); ++i) {
    sxy += (x[i] - mx) * (y[i] - my);
    sxx += (x[i] - mx) * (x[i] - mx);
    syy += (y[i] - my) * (y[i] - my);
  }
  return sxx > 0.0 && syy > 0.0 ? sxy / std::sqrt(sxx * syy) : 0.0;
}

}  // namespace

candidate_summary summarize_candidate(std::span<const cell> cells, const options& opts) {
  candidate_summary s;
  if (cells.empty()) return s;
  s.candidate = cells.front().candidate;
  std::vector<const cell*> sorted;
  for (const cell& c : cells) sorted.push_back(&c);
  std::sort(sorted.begin(), sorted.end(),
            [](const cell* a, const cell* b) { return a->fixture < b->fixture; });

  std::vector<const cell*> used;
  std::vector<double> rates;
  std::vector<uint64_t> ns;
  for (const cell* c : sorted) {
    s.trials += c->n;
    s.passes += c->passes;
    s.errors += c->errors;
    if (c->n == 0) {
      s.fixtures_without_trials.push_back(c->fixture);
      continue;
    }
    used.push_back(c);
    rates.push_back(*c->rate);
    ns.push_back(c->n);
  }
  s.fixtures = used.size();
  if (s.trials > 0) {
    s.pooled_rate = static_cast<double>(s.passes) / static_cast<double>(s.trials);
    s.pooled_ci = wilson(s.passes, s.trials, opts.level);
  }
  if (used.empty()) return s;

  s.pass_at_1 = mean(rates);
  s.pass_at_1_ci = clustered_rate(rates, ns, opts.level);
  s.max_k = std::numeric_limits<uint64_t>::max();
  for (const cell* c : used) s.max_k = std::min(s.max_k, c->n);
  for (uint64_t k = 1; k <= s.max_k; ++k) {
    double at = 0.0;
    double hat = 0.0;
    for (const cell* c : used) {
      at += *pass_at_k(c->n, c->passes, k);
      hat += *pass_hat_k(c->n, c->passes, k);
    }
    const auto f = static_cast<double>(used.size());
    s.pass_at.push_back({k, at / f, used.size()});
    s.pass_hat.push_back({k, hat / f, used.size()});
  }
  return s;
}

paired_comparison compare(std::span<const cell> candidate, std::span<const cell> baseline,
                          const options& opts) {
  paired_comparison r;
  if (!candidate.empty()) r.candidate = candidate.front().candidate;
  if (!baseline.empty()) r.baseline = baseline.front().candidate;
  std::map<std::string_view, const cell*> a, b;
  for (const cell& c : candidate) {
    if (c.n > 0) a[c.fixture] = &c;
  }
  for (const cell& c : baseline) {
    if (c.n > 0) b[c.fixture] = &c;
  }
  std::vector<double> diffs, rates_a, rates_b;
  std::vector<uint64_t> ns_a, ns_b;
  bool single_trials = true;
  mcnemar_test mc;
  for (const auto& [fixture, ca] : a) {
    auto it = b.find(fixture);
    if (it == b.end()) {
      r.candidate_only.emplace_back(fixture);
      continue;
    }
    const cell* cb = it->second;
    fixture_difference d{std::string(fixture), *ca->rate, ca->n, *cb->rate, cb->n,
                         *ca->rate - *cb->rate};
    diffs.push_back(d.difference);
    rates_a.push_back(*ca->rate);
    rates_b.push_back(*cb->rate);
    ns_a.push_back(ca->n);
    ns_b.push_back(cb->n);
    r.differences.push_back(std::move(d));
    single_trials = single_trials && ca->n == 1 && cb->n == 1;
    if (ca->passes > cb->passes) ++mc.b;
    if (ca->passes < cb->passes) ++mc.c;
  }
  for (const auto& [fixture, cb] : b) {
    if (!a.contains(fixture)) r.baseline_only.emplace_back(fixture);
  }
  r.n = diffs.size();
  if (r.n == 0) {
    r.verdict = verdict_no_shared;
    return r;
  }
  r.mean_difference = mean(diffs);
  r.ci = bootstrap_mean(diffs, opts.level, opts.bootstrap_samples,
                        derive_seed(opts.seed, {"paired", r.candidate, r.baseline}));
  const bool no_spread =
      std::all_of(diffs.begin(), diffs.end(), [&](double d) { return d == diffs.front(); });
  if (!r.ci || no_spread) {
    // Differences that do not vary (every fixture the same for both, say) give the bootstrap
    // nothing to resample: the interval comes from each side's own, as wide as they allow.
    const auto ia = clustered_rate(rates_a, ns_a, opts.level);
    const auto ib = clustered_rate(rates_b, ns_b, opts.level);
    if (ia && ib)
      r.ci =
          mover_difference(mean(rates_a), *ia, mean(rates_b), *ib, correlation(rates_a, rates_b));
  }
  r.sign_flip_p = sign_flip_p(diffs, opts.permutation_samples,
                              derive_seed(opts.seed, {"sign-flip", r.candidate, r.baseline}));
  if (single_trials) {
    mc.p_value = mcnemar_exact_p(mc.b, mc.c);
    r.mcnemar = mc;
  }
  const double alpha = 1.0 - opts.level;
  const bool detected = r.ci && r.ci->excludes_zero() && *r.sign_flip_p < alpha &&
                        (!r.mcnemar || r.mcnemar->p_value < alpha);
  if (!detected) {
    r.verdict = verdict_no_difference;
  } else {
    r.verdict = *r.mean_difference > 0 ? verdict_better : verdict_worse;
  }
  return r;
}

namespace {

// The usage of the outcomes of `candidate` (of all of them when nullopt), in their order.
usage usage_of(std::span<const run_outcome> outcomes, std::optional<std::string_view> candidate) {
  usage u;
  std::vector<double> in, out, wall;
  double cost = 0.0;
  for (const run_outcome& o : outcomes) {
    if (candidate && o.candidate != *candidate) continue;
    ++u.runs;
    if (o.input_tokens) in.push_back(static_cast<double>(*o.input_tokens));
    if (o.output_tokens) out.push_back(static_cast<double>(*o.output_tokens));
    if (o.wall_ms) wall.push_back(*o.wall_ms);
    if (o.cost_usd) {
      ++u.cost.known;
      cost += *o.cost_usd;
    } else {
      ++u.cost.unknown;
    }
  }
  if (u.cost.known > 0) u.cost.known_usd = cost;
  // The judge's, over the judged runs only.
  std::vector<double> jin, jout;
  double jcost = 0.0;
  for (const run_outcome& o : outcomes) {
    if ((candidate && o.candidate != *candidate) || !o.judged) continue;
    ++u.judge.runs;
    if (o.judge_input_tokens) jin.push_back(static_cast<double>(*o.judge_input_tokens));
    if (o.judge_output_tokens) jout.push_back(static_cast<double>(*o.judge_output_tokens));
    if (o.judge_cost_usd) {
      ++u.judge.cost.known;
      jcost += *o.judge_cost_usd;
    } else {
      ++u.judge.cost.unknown;
    }
  }
  if (u.judge.cost.known > 0) u.judge.cost.known_usd = jcost;
  // The gateway runs'.
  std::vector<double> ttfb, call;
  for (const run_outcome& o : outcomes) {
    if ((candidate && o.candidate != *candidate) || !o.gateway) continue;
    ++u.gateway.runs;
    if (o.ttfb_ms) ttfb.push_back(*o.ttfb_ms);
    if (o.call_ms) call.push_back(*o.call_ms);
    if (o.budget_exhausted) ++u.gateway.budget_exhausted;
  }
  // Each count of runs without a figure is taken before its figures move: the order in which a
  // call's arguments are evaluated is unspecified.
  auto of = [](std::vector<double>& values, uint64_t runs) {
    const uint64_t missing = runs - values.size();
    return describe(std::move(values), missing);
  };
  u.judge.input_tokens = of(jin, u.judge.runs);
  u.judge.output_tokens = of(jout, u.judge.runs);
  u.input_tokens = of(in, u.runs);
  u.output_tokens = of(out, u.runs);
  u.wall_ms = of(wall, u.runs);
  u.gateway.ttfb_ms = of(ttfb, u.gateway.runs);
  u.gateway.call_ms = of(call, u.gateway.runs);
  // The runs that waited for a credential lease.
  std::vector<double> waits;
  for (const run_outcome& o : outcomes)
    if ((!candidate || o.candidate == *candidate) && o.credential_wait_ms &&
        *o.credential_wait_ms > 0)
      waits.push_back(*o.credential_wait_ms);
  u.credentials.runs = waits.size();
  u.credentials.wait_ms = describe(std::move(waits), 0);
  return u;
}

}  // namespace

usage summarize_usage(std::span<const run_outcome> outcomes) {
  return usage_of(outcomes, std::nullopt);
}

result<summary> summarize(std::span<const run_outcome> outcomes, const options& opts) {
  if (!(opts.level > 0.0 && opts.level < 1.0)) {
    return make_error(error_kind::invalid_argument, "confidence level {} is not in (0, 1)",
                      opts.level);
  }
  if (opts.bootstrap_samples < 1 || opts.permutation_samples < 1) {
    return make_error(error_kind::invalid_argument,
                      "bootstrap and permutation samples must be positive");
  }
  summary s;
  s.settings = opts;
  s.runs = outcomes.size();
  s.cells = EB_TRY_CTX(tabulate(outcomes, opts.level), "summarize results");

  // Cells are sorted by candidate, so each candidate is one contiguous span.
  std::map<std::string_view, std::span<const cell>> by_candidate;
  for (size_t i = 0; i < s.cells.size();) {
    size_t j = i;
    while (j < s.cells.size() && s.cells[j].candidate == s.cells[i].candidate) ++j;
    by_candidate[s.cells[i].candidate] = std::span<const cell>(s.cells).subspan(i, j - i);
    i = j;
  }
  if (opts.baseline && !by_candidate.contains(*opts.baseline)) {
    return make_error(error_kind::invalid_argument, "baseline candidate {} has no runs",
                      *opts.baseline);
  }

  for (const auto& [name, cells] : by_candidate) {
    candidate_summary c = summarize_candidate(cells, opts);
    // Filtered in place rather than copied per candidate: outcomes are one per run.
    c.use = usage_of(outcomes, name);
    s.candidates.push_back(std::move(c));
  }
  if (opts.baseline) {
    for (const auto& [name, cells] : by_candidate) {
      if (name == *opts.baseline || name == opts.oracle) continue;
      s.comparisons.push_back(compare(cells, by_candidate[*opts.baseline], opts));
    }
  }

  std::map<std::string_view, flaky_fixture> flaky;
  for (const cell& c : s.cells) {
    if (c.passes == 0 || c.passes == c.n) continue;
    flaky_fixture& f = flaky[c.fixture];
    f.fixture = c.fixture;
    f.candidates.push_back(c.candidate);
    f.oracle = f.oracle || c.candidate == opts.oracle;
  }
  for (auto& [name, f] : flaky) s.flaky.push_back(std::move(f));

  for (const run_outcome& o : outcomes) {
    if (o.outcome == run_outcome::verdict::error) {
      s.errors.push_back({o.candidate, o.fixture, o.trial, o.error_message});
    }
  }
  std::sort(s.errors.begin(), s.errors.end(), [](const error_entry& a, const error_entry& b) {
    return std::tie(a.candidate, a.fixture, a.trial) < std::tie(b.candidate, b.fixture, b.trial);
  });
  s.overall = summarize_usage(outcomes);
  std::map<std::string_view, std::set<std::string_view>> by_fixture;
  for (const run_outcome& o : outcomes) {
    ++s.grading.digests[o.grading_digest];
    if (o.regraded) ++s.grading.regraded;
    by_fixture[o.fixture].insert(o.grading_digest);
  }
  for (const auto& [f, digests] : by_fixture)
    if (digests.size() > 1) s.grading.mixed_fixtures.emplace_back(f);
  return s;
}

}  // namespace stats
}  // namespace report
}  // namespace evalbox::harness
