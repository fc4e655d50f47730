// Report statistics: estimators, intervals, tests and the summary of a set of run outcomes.
#include "harness/report/stats.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <numbers>
#include <numeric>
#include <ostream>
#include <random>
#include <set>
#include <tuple>

namespace evalbox::harness::stats {
namespace {

// Sign patterns are enumerated exactly up to this many non-zero differences (2^16 sums).
constexpr size_t exact_sign_flip_limit = 16;

// Sums of rates are compared with this slack so that floating-point noise never turns a tie
// (which counts as "at least as extreme") into a miss.
constexpr double tie_tolerance = 1e-9;

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

// Uniform in [0, n) by rejection: std::uniform_int_distribution is implementation-defined, and
// a report must give the same interval on every standard library.
uint64_t uniform_index(std::mt19937_64& rng, uint64_t n) {
  const uint64_t limit =
      std::numeric_limits<uint64_t>::max() - std::numeric_limits<uint64_t>::max() % n;
  uint64_t x = rng();
  while (x >= limit) x = rng();
  return x % n;
}

double mean(std::span<const double> values) {
  return std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
}

// Linear interpolation between order statistics (Hyndman & Fan type 7) of sorted values.
double quantile_sorted(std::span<const double> sorted, double q) {
  const double h = static_cast<double>(sorted.size() - 1) * q;
  const auto lo = static_cast<size_t>(std::floor(h));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (h - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
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

// Acklam's rational approximation, then one Halley step against erfc for full precision.
double normal_quantile(double p) {
  if (!(p > 0.0 && p < 1.0)) return std::numeric_limits<double>::quiet_NaN();
  static constexpr double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,
                                 -2.759285104469687e+02, 1.383577518672690e+02,
                                 -3.066479806614716e+01, 2.506628277459239e+00};
  static constexpr double b[] = {-5.447609879822406e+01, 1.615858368580409e+02,
                                 -1.556989798598866e+02, 6.680131188771972e+01,
                                 -1.328068155288572e+01};
  static constexpr double c[] = {-7.784894002430293e-03, -3.223964580411365e-01,
                                 -2.400758277161838e+00, -2.549732539343734e+00,
                                 4.374664141464968e+00,  2.938163982698783e+00};
  static constexpr double d[] = {7.784695709041462e-03, 3.224671290700398e-01,
                                 2.445134137142996e+00, 3.754408661907416e+00};
  constexpr double p_low = 0.02425;
  double x = 0.0;
  if (p < p_low) {
    const double q = std::sqrt(-2.0 * std::log(p));
    x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1.0);
  } else if (p <= 1.0 - p_low) {
    const double q = p - 0.5;
    const double r = q * q;
    x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
        (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1.0);
  } else {
    const double q = std::sqrt(-2.0 * std::log1p(-p));
    x = -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1.0);
  }
  const double e = 0.5 * std::erfc(-x / std::sqrt(2.0)) - p;
  const double u = e * std::sqrt(2.0 * std::numbers::pi) * std::exp(x * x / 2.0);
  return x - u / (1.0 + x * u / 2.0);
}

interval wilson(uint64_t successes, uint64_t n, double level) {
  if (n == 0 || successes > n) return {0.0, 1.0, level};
  const double z = normal_quantile(1.0 - (1.0 - level) / 2.0);
  const double nn = static_cast<double>(n);
  const double p = static_cast<double>(successes) / nn;
  const double z2 = z * z;
  const double denom = 1.0 + z2 / nn;
  const double center = (p + z2 / (2.0 * nn)) / denom;
  const double half = z * std::sqrt(p * (1.0 - p) / nn + z2 / (4.0 * nn * nn)) / denom;
  // At p = 0 or 1 the bound is exactly 0 or 1; say so rather than print 1e-17.
  const double lo = successes == 0 ? 0.0 : std::max(0.0, center - half);
  const double hi = successes == n ? 1.0 : std::min(1.0, center + half);
  return {lo, hi, level};
}

std::optional<double> pass_at_k(uint64_t n, uint64_t c, uint64_t k) {
  if (k < 1 || k > n || c > n) return std::nullopt;
  if (n - c < k) return 1.0;  // every k-subset contains a pass
  // C(n−c, k)/C(n, k) = Π_{i=n−c+1}^{n} (1 − k/i): no binomial is ever formed.
  double all_fail = 1.0;
  for (uint64_t i = n - c + 1; i <= n; ++i) {
    all_fail *= 1.0 - static_cast<double>(k) / static_cast<double>(i);
  }
  return 1.0 - all_fail;
}

std::optional<double> pass_hat_k(uint64_t n, uint64_t c, uint64_t k) {
  if (k < 1 || k > n || c > n) return std::nullopt;
  if (c < k) return 0.0;
  // C(c, k)/C(n, k) = Π_{i=0}^{k−1} (c − i)/(n − i).
  double all_pass = 1.0;
  for (uint64_t i = 0; i < k; ++i) {
    all_pass *= static_cast<double>(c - i) / static_cast<double>(n - i);
  }
  return all_pass;
}

double mcnemar_exact_p(uint64_t b, uint64_t c) {
  const uint64_t m = b + c;
  if (m == 0) return 1.0;
  const uint64_t x = std::min(b, c);
  // In log space so that a large m cannot underflow 0.5^m.
  const double md = static_cast<double>(m);
  const double log_half_m = -md * std::log(2.0);
  double tail = 0.0;
  for (uint64_t i = 0; i <= x; ++i) {
    const double id = static_cast<double>(i);
    tail +=
        std::exp(std::lgamma(md + 1) - std::lgamma(id + 1) - std::lgamma(md - id + 1) + log_half_m);
  }
  return std::min(1.0, 2.0 * tail);
}

double sign_flip_p(std::span<const double> differences, int samples, uint64_t seed) {
  std::vector<double> nonzero;
  for (double d : differences) {
    if (std::abs(d) > tie_tolerance) nonzero.push_back(d);
  }
  if (nonzero.empty()) return 1.0;
  const double observed = std::abs(std::accumulate(nonzero.begin(), nonzero.end(), 0.0));
  const size_t m = nonzero.size();
  auto at_least_as_extreme = [&](uint64_t signs) {
    double s = 0.0;
    for (size_t j = 0; j < m; ++j) s += (signs >> (j % 64) & 1) ? -nonzero[j] : nonzero[j];
    return std::abs(s) >= observed - tie_tolerance;
  };
  if (m <= exact_sign_flip_limit) {
    const uint64_t patterns = uint64_t{1} << m;
    uint64_t hits = 0;
    for (uint64_t signs = 0; signs < patterns; ++signs) hits += at_least_as_extreme(signs);
    return static_cast<double>(hits) / static_cast<double>(patterns);
  }
  std::mt19937_64 rng(seed);
  uint64_t hits = 0;
  const int draws = std::max(samples, 1);
  for (int i = 0; i < draws; ++i) {
    double s = 0.0;
    uint64_t bits = 0;
    for (size_t j = 0; j < m; ++j) {
      if (j % 64 == 0) bits = rng();
      s += (bits >> (j % 64) & 1) ? -nonzero[j] : nonzero[j];
    }
    hits += std::abs(s) >= observed - tie_tolerance;
  }
  return static_cast<double>(hits + 1) / static_cast<double>(draws + 1);
}

namespace {

double normal_cdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }

// P(|T| ≤ t) for Student's t with integer df, by the finite series of Abramowitz & Stegun
// 26.7.3–26.7.4 (exact up to rounding; df terms at most).
double student_t_central(double t, uint64_t df) {
  const double theta = std::atan(t / std::sqrt(static_cast<double>(df)));
  const double s = std::sin(theta);
  const double c = std::cos(theta);
  if (df % 2 == 1) {
    double sum = 0.0;
    if (df > 1) {
      double term = c;
      sum = term;
      for (uint64_t k = 3; k + 2 <= df; k += 2) {
        term *= c * c * static_cast<double>(k - 1) / static_cast<double>(k);
        sum += term;
      }
    }
    return 2.0 / std::numbers::pi * (theta + s * sum);
  }
  double term = 1.0;
  double sum = 1.0;
  for (uint64_t k = 2; k + 2 <= df; k += 2) {
    term *= c * c * static_cast<double>(k - 1) / static_cast<double>(k);
    sum += term;
  }
  return s * sum;
}

}  // namespace

double student_t_quantile(double p, uint64_t df) {
  if (!(p > 0.0 && p < 1.0) || df == 0) return std::numeric_limits<double>::quiet_NaN();
  if (p < 0.5) return -student_t_quantile(1.0 - p, df);
  if (df > 100000) return normal_quantile(p);  // within 1e-5 of t, and the series is long
  const double target = 2.0 * p - 1.0;
  double lo = 0.0;
  double hi = 1.0;
  while (student_t_central(hi, df) < target && hi < 1e300) hi *= 2.0;
  for (int i = 0; i < 200 && hi - lo > 1e-13 * hi; ++i) {
    const double mid = 0.5 * (lo + hi);
    (student_t_central(mid, df) < target ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

std::optional<interval> bootstrap_mean(std::span<const double> values, double level, int samples,
                                       uint64_t seed) {
  if (values.size() < 2 || samples < 1) return std::nullopt;
  std::mt19937_64 rng(seed);
  std::vector<double> means(static_cast<size_t>(samples));
  for (double& m : means) {
    double sum = 0.0;
    for (size_t i = 0; i < values.size(); ++i) sum += values[uniform_index(rng, values.size())];
    m = sum / static_cast<double>(values.size());
  }
  std::sort(means.begin(), means.end());
  // Expanded percentile interval (Hesterberg 2015): the plain percentile interval is too narrow
  // for few clusters (it uses z, not t, and the plug-in variance is short by (n − 1)/n), so read
  // the bootstrap quantiles at the tail that a t interval with that correction would have.
  const auto n = static_cast<double>(values.size());
  const double t = student_t_quantile(1.0 - (1.0 - level) / 2.0, values.size() - 1);
  const double tail = normal_cdf(-std::sqrt(n / (n - 1.0)) * t);
  return interval{quantile_sorted(means, tail), quantile_sorted(means, 1.0 - tail), level};
}

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
    if (!valid_quantity(o.wall_ms) || !valid_quantity(o.cost_usd)) {
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
  }
  s.fixtures = used.size();
  if (s.trials > 0) {
    s.pooled_rate = static_cast<double>(s.passes) / static_cast<double>(s.trials);
    s.pooled_ci = wilson(s.passes, s.trials, opts.level);
  }
  if (used.empty()) return s;

  s.pass_at_1 = mean(rates);
  s.pass_at_1_ci = bootstrap_mean(rates, opts.level, opts.bootstrap_samples,
                                  derive_seed(opts.seed, {"pass@1", s.candidate}));
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
  std::vector<double> diffs;
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
  u.input_tokens = describe(std::move(in), u.runs - in.size());
  u.output_tokens = describe(std::move(out), u.runs - out.size());
  u.wall_ms = describe(std::move(wall), u.runs - wall.size());
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
  return s;
}

// ---- JSON ----------------------------------------------------------------------------------

namespace {

json opt(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

json opt_count(const std::optional<double>& v) {
  return v ? json(static_cast<uint64_t>(std::llround(*v))) : json(nullptr);
}

json to_json(const interval& i) { return {{"lo", i.lo}, {"hi", i.hi}, {"level", i.level}}; }

json opt(const std::optional<interval>& i) { return i ? to_json(*i) : json(nullptr); }

// Token counts stay integers; wall time keeps its fraction.
json to_json(const distribution& d, bool counts) {
  auto v = [&](const std::optional<double>& x) { return counts ? opt_count(x) : opt(x); };
  return {{"n", d.n},        {"missing", d.missing}, {"total", v(d.total)}, {"min", v(d.min)},
          {"p50", v(d.p50)}, {"p90", v(d.p90)},      {"p99", v(d.p99)},     {"max", v(d.max)}};
}

json to_json(const usage& u) {
  return {{"runs", u.runs},
          {"input_tokens", to_json(u.input_tokens, true)},
          {"output_tokens", to_json(u.output_tokens, true)},
          {"wall_ms", to_json(u.wall_ms, false)},
          {"cost_usd",
           {{"known_total", opt(u.cost.known_usd)},
            {"known", u.cost.known},
            {"unknown", u.cost.unknown}}}};
}

json to_json(const k_estimate& k) { return {{"k", k.k}, {"value", k.value}, {"n", k.fixtures}}; }

json to_json(const std::vector<k_estimate>& ks) {
  json out = json::array();
  for (const k_estimate& k : ks) out.push_back(to_json(k));
  return out;
}

// Each part of the summary below is built on its own, so that to_json and write_json (which
// streams the lists element by element) are made of the same pieces.

json settings_json(const summary& s) {
  return {{"level", s.settings.level},
          {"bootstrap_samples", s.settings.bootstrap_samples},
          {"permutation_samples", s.settings.permutation_samples},
          {"seed", s.settings.seed},
          {"oracle", s.settings.oracle},
          {"baseline", s.settings.baseline ? json(*s.settings.baseline) : json(nullptr)}};
}

json runs_json(const summary& s) {
  json j = {{"total", s.runs}, {"errors", s.errors.size()}};
  if (s.missing) j.update({{"planned", s.missing->planned}, {"missing", s.missing->missing}});
  return j;
}

// A candidate without its pass@k and pass^k lists (one entry per k: as long as the trials).
json candidate_json(const candidate_summary& c) {
  return {{"candidate", c.candidate},
          {"fixtures", {{"n", c.fixtures}, {"without_trials", c.fixtures_without_trials}}},
          {"trials", {{"n", c.trials}, {"passes", c.passes}, {"errors", c.errors}}},
          {"pass_at_1",
           {{"value", opt(c.pass_at_1)},
            {"n", c.fixtures},
            {"ci", opt(c.pass_at_1_ci)},
            {"method", "fixture-clustered expanded percentile bootstrap"}}},
          {"pooled",
           {{"value", opt(c.pooled_rate)},
            {"n", c.trials},
            {"ci", opt(c.pooled_ci)},
            {"method", "wilson"}}},
          {"max_k", c.max_k},
          {"usage", to_json(c.use)}};
}

json cell_json(const cell& c) {
  return {{"candidate", c.candidate},
          {"fixture", c.fixture},
          {"n", c.n},
          {"passes", c.passes},
          {"errors", c.errors},
          {"rate", opt(c.rate)},
          {"ci", c.n > 0 ? to_json(c.ci) : json(nullptr)}};
}

json difference_json(const fixture_difference& d) {
  return {{"fixture", d.fixture},         {"candidate_rate", d.candidate_rate},
          {"candidate_n", d.candidate_n}, {"baseline_rate", d.baseline_rate},
          {"baseline_n", d.baseline_n},   {"difference", d.difference}};
}

// A comparison without its per-fixture differences.
json comparison_json(const paired_comparison& p) {
  json mc = p.mcnemar
                ? json{{"b", p.mcnemar->b}, {"c", p.mcnemar->c}, {"p_value", p.mcnemar->p_value}}
                : json(nullptr);
  return {{"candidate", p.candidate},
          {"baseline", p.baseline},
          {"n", p.n},
          {"mean_difference", opt(p.mean_difference)},
          {"ci", opt(p.ci)},
          {"sign_flip_p", opt(p.sign_flip_p)},
          {"mcnemar", std::move(mc)},
          {"verdict", p.verdict},
          {"candidate_only", p.candidate_only},
          {"baseline_only", p.baseline_only}};
}

json flaky_json(const flaky_fixture& f) {
  return {{"fixture", f.fixture}, {"candidates", f.candidates}, {"oracle", f.oracle}};
}

json error_json(const error_entry& e) {
  return {{"candidate", e.candidate},
          {"fixture", e.fixture},
          {"trial", e.trial},
          {"message", e.message}};
}

template <class T, class F>
json array_of(const std::vector<T>& items, F to) {
  json out = json::array();
  for (const T& item : items) out.push_back(to(item));
  return out;
}

// Writes JSON byte for byte as pretty_json does (nlohmann's dump, indent 2), but as it goes:
// containers are opened and closed here, and only their members are json values.
class pretty_writer {
 public:
  explicit pretty_writer(std::ostream& out) : out_(out) {}

  void open_object() { open('{'); }
  void open_array() { open('['); }
  void close_object() { close('}'); }
  void close_array() { close(']'); }
  // The next member of the object being written; its value follows.
  void key(const std::string& k) {
    next();
    out_ << json(k).dump(-1, ' ', false, json::error_handler_t::replace) << ": ";
    after_key_ = true;
  }
  // An array element, the value of the last key, or the whole document.
  void value(const json& v) {
    start_value();
    std::string text = v.dump(2, ' ', false, json::error_handler_t::replace);
    // Strings never hold a raw newline, so each one starts a line of the nested dump.
    const std::string indent(2 * depth_.size(), ' ');
    size_t from = 0;
    for (size_t nl = text.find('\n'); nl != std::string::npos; nl = text.find('\n', from)) {
      out_.write(text.data() + from, static_cast<std::streamsize>(nl + 1 - from));
      out_ << indent;
      from = nl + 1;
    }
    out_.write(text.data() + from, static_cast<std::streamsize>(text.size() - from));
  }
  // An object: the members of `small` in key order, and at their places those of `streamed`
  // (whose callbacks write the value).
  void object(json small, const std::map<std::string, std::function<void()>>& streamed) {
    for (const auto& [k, f] : streamed) small[k] = nullptr;
    open_object();
    for (const auto& [k, v] : small.items()) {
      key(k);
      auto it = streamed.find(k);
      if (it != streamed.end())
        it->second();
      else
        value(v);
    }
    close_object();
  }
  template <class T, class F>
  void array(const std::vector<T>& items, F write_item) {
    open_array();
    for (const T& item : items) write_item(item);
    close_array();
  }

 private:
  void start_value() {
    if (!after_key_) next();
    after_key_ = false;
  }
  void open(char c) {
    start_value();
    out_ << c;
    depth_.push_back(0);
  }
  void close(char c) {
    size_t members = depth_.back();
    depth_.pop_back();
    if (members > 0) out_ << '\n' << std::string(2 * depth_.size(), ' ');
    out_ << c;
  }
  // Before a member of the container being written (nothing at the top level).
  void next() {
    if (depth_.empty()) return;
    out_ << (depth_.back()++ ? ",\n" : "\n") << std::string(2 * depth_.size(), ' ');
  }

  std::ostream& out_;
  std::vector<size_t> depth_;  // per open container: members written so far
  bool after_key_ = false;
};

}  // namespace

json to_json(const summary& s) {
  json j;
  j["schema"] = "evalbox.summary.v1";
  j["settings"] = settings_json(s);
  j["runs"] = runs_json(s);
  j["candidates"] = array_of(s.candidates, [](const candidate_summary& c) {
    json out = candidate_json(c);
    out["pass_at_k"] = to_json(c.pass_at);
    out["pass_hat_k"] = to_json(c.pass_hat);
    return out;
  });
  j["cells"] = array_of(s.cells, cell_json);
  j["comparisons"] = array_of(s.comparisons, [](const paired_comparison& p) {
    json out = comparison_json(p);
    out["differences"] = array_of(p.differences, difference_json);
    return out;
  });
  j["flaky"] = array_of(s.flaky, flaky_json);
  j["errors"] = array_of(s.errors, error_json);
  j["usage"] = to_json(s.overall);
  return j;
}

void write_json(std::ostream& out, const summary& s) {
  pretty_writer w(out);
  auto each = [&](const auto& items, auto to) {
    return [&w, &items, to] { w.array(items, [&](const auto& item) { w.value(to(item)); }); };
  };
  auto ks = [&](const std::vector<k_estimate>& list) {
    return [&w, &list] { w.array(list, [&](const k_estimate& k) { w.value(to_json(k)); }); };
  };
  json small = {{"schema", "evalbox.summary.v1"},
                {"settings", settings_json(s)},
                {"runs", runs_json(s)},
                {"usage", to_json(s.overall)}};
  w.object(
      std::move(small),
      {{"candidates",
        [&] {
          w.array(s.candidates, [&](const candidate_summary& c) {
            w.object(candidate_json(c),
                     {{"pass_at_k", ks(c.pass_at)}, {"pass_hat_k", ks(c.pass_hat)}});
          });
        }},
       {"cells", each(s.cells, cell_json)},
       {"comparisons",
        [&] {
          w.array(s.comparisons, [&](const paired_comparison& p) {
            w.object(comparison_json(p), {{"differences", each(p.differences, difference_json)}});
          });
        }},
       {"flaky", each(s.flaky, flaky_json)},
       {"errors", each(s.errors, error_json)}});
  out << '\n';
}

}  // namespace evalbox::harness::stats
