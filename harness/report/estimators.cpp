// The estimators and tests on plain numbers (see stats.h): quantiles, intervals, pass@k and
// pass^k, and the paired tests. No names, no outcomes: what summary.cpp computes them over.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <numeric>
#include <random>
#include <vector>

#include <boost/math/special_functions/beta.hpp>

#include "harness/report/stats.h"

namespace evalbox::harness {
inline namespace report {
namespace stats {
namespace {

// Sign patterns are enumerated exactly up to this many non-zero differences (2^16 sums).
constexpr size_t exact_sign_flip_limit = 16;

// Sums of rates are compared with this slack so that floating-point noise never turns a tie
// (which counts as "at least as extreme") into a miss.
constexpr double tie_tolerance = 1e-9;

// Uniform in [0, n) by rejection: std::uniform_int_distribution is implementation-defined, and
// a report must give the same interval on every standard library.
uint64_t uniform_index(std::mt19937_64& rng, uint64_t n) {
  const uint64_t limit =
      std::numeric_limits<uint64_t>::max() - std::numeric_limits<uint64_t>::max() % n;
  uint64_t x = rng();
  while (x >= limit) x = rng();
  return x % n;
}

// Linear interpolation between order statistics (Hyndman & Fan type 7) of sorted values.
double quantile_sorted(std::span<const double> sorted, double q) {
  const double h = static_cast<double>(sorted.size() - 1) * q;
  const auto lo = static_cast<size_t>(std::floor(h));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (h - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
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

std::optional<interval> clustered_rate(std::span<const double> rates,
                                       std::span<const uint64_t> trials, double level) {
  const size_t f = rates.size();
  if (f == 0 || trials.size() != f) return std::nullopt;
  double sum = 0.0, inverse_trials = 0.0;
  for (size_t i = 0; i < f; ++i) {
    if (trials[i] == 0 || !(rates[i] >= 0.0 && rates[i] <= 1.0)) return std::nullopt;
    sum += rates[i];
    inverse_trials += 1.0 / static_cast<double>(trials[i]);
  }
  const auto ff = static_cast<double>(f);
  const double m = sum / ff;
  // The most the trials can say: the binomial size with the variance of this mean when every
  // cluster had the same rate.
  const double n_trials = ff * ff / inverse_trials;
  double n_eff = n_trials;
  const double alpha = 1.0 - level;
  const bool single_trials =
      std::all_of(trials.begin(), trials.end(), [](uint64_t n) { return n == 1; });
  // One trial per cluster: each is a Bernoulli of the mean rate, and their count is binomial —
  // nothing to estimate.
  if (f >= 2 && !single_trials) {
    double ss = 0.0;
    for (double r : rates) ss += (r - m) * (r - m);
    const double var_mean = ss / (ff - 1.0) / ff;
    if (var_mean > 0.0 && m > 0.0 && m < 1.0) {
      // The design effect: how much more the mean varies than if every cluster had its rate.
      // Only its excess over 1 is estimated from the clusters, so only that is widened for
      // their few degrees of freedom.
      const double deff = n_trials * var_mean / (m * (1.0 - m));
      if (deff > 1.0) {
        const double z = normal_quantile(1.0 - alpha / 2.0);
        const double t = student_t_quantile(1.0 - alpha / 2.0, f - 1);
        n_eff = n_trials / (1.0 + (deff - 1.0) * (t / z) * (t / z));
      }
    }
  }
  // At x = m·n_eff successes of n_eff (beta quantiles take a real x): Jeffreys' interval, near
  // nominal; Clopper–Pearson's where fewer than `few` passes or failures make Jeffreys' undercover.
  constexpr double few = 5.0;
  const double x = m * n_eff;
  interval out{0.0, 1.0, level};
  if (std::min(x, n_eff - x) < few) {
    if (x > 0.0) out.lo = boost::math::ibeta_inv(x, n_eff - x + 1.0, alpha / 2.0);
    if (x < n_eff) out.hi = boost::math::ibeta_inv(x + 1.0, n_eff - x, 1.0 - alpha / 2.0);
  } else {
    out.lo = boost::math::ibeta_inv(x + 0.5, n_eff - x + 0.5, alpha / 2.0);
    out.hi = boost::math::ibeta_inv(x + 0.5, n_eff - x + 0.5, 1.0 - alpha / 2.0);
  }
  return out;
}

interval mover_difference(double a, const interval& ia, double b, const interval& ib, double r) {
  r = std::clamp(std::isfinite(r) ? r : 0.0, -1.0, 1.0);
  const double la = a - ia.lo, ua = ia.hi - a, lb = b - ib.lo, ub = ib.hi - b;
  const double down = std::sqrt(std::max(0.0, la * la + ub * ub - 2.0 * r * la * ub));
  const double up = std::sqrt(std::max(0.0, ua * ua + lb * lb - 2.0 * r * ua * lb));
  const double d = a - b;
  return {std::max(-1.0, d - down), std::min(1.0, d + up), ia.level};
}

}  // namespace stats
}  // namespace report
}  // namespace evalbox::harness
