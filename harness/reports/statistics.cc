#include "harness/reports/statistics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <numeric>

#include "harness/bench/statistics.h"

namespace nimble::reports {

namespace {

// P(B = k), B ~ Binomial(n, 1/2), through logarithms so that n in the
// hundreds neither overflows nor underflows.
double HalfBinomial(int64_t n, int64_t k) {
  return std::exp(std::lgamma(n + 1.0) - std::lgamma(k + 1.0) - std::lgamma(n - k + 1.0) -
                  static_cast<double>(n) * std::log(2.0));
}

// C(n, k) as a double (exact up to C(40, 20), the exact test's largest).
double Choose(int64_t n, int64_t k) {
  double result = 1;
  for (int64_t i = 1; i <= k; ++i) result = result * static_cast<double>(n - k + i) / i;
  return result;
}

// The mid-ranks (1-based, ties sharing their mean rank) of `values`,
// doubled so that they are integers.
std::vector<int64_t> DoubledMidRanks(const std::vector<double>& values) {
  std::vector<size_t> order(values.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return values[a] < values[b]; });
  std::vector<int64_t> ranks(values.size());
  for (size_t first = 0; first < order.size();) {
    size_t last = first;
    while (last + 1 < order.size() && values[order[last + 1]] == values[order[first]]) ++last;
    // Ranks first+1 .. last+1 share their mean; doubled: first + last + 2.
    for (size_t i = first; i <= last; ++i) ranks[order[i]] = static_cast<int64_t>(first + last + 2);
    first = last + 1;
  }
  return ranks;
}

// P(|2W - E[2W]| >= |observed - E[2W]|) for the sum 2W of `n1` of the
// doubled ranks drawn without replacement, every subset equally likely:
// the counts of subsets by size and sum, built one rank at a time.
double ExactRankSumPValue(const std::vector<int64_t>& doubled_ranks, int64_t n1, int64_t observed) {
  const int64_t total = std::accumulate(doubled_ranks.begin(), doubled_ranks.end(), int64_t{0});
  std::vector<std::vector<double>> ways(n1 + 1, std::vector<double>(total + 1, 0.0));
  ways[0][0] = 1;
  for (const int64_t rank : doubled_ranks) {
    for (int64_t size = n1; size >= 1; --size) {
      for (int64_t sum = total; sum >= rank; --sum) ways[size][sum] += ways[size - 1][sum - rank];
    }
  }
  const int64_t n = static_cast<int64_t>(doubled_ranks.size());
  // E[2W] = n1 (n + 1): the doubled ranks sum to n (n + 1) whatever the ties.
  const int64_t mean = n1 * (n + 1);
  const int64_t distance = std::abs(observed - mean);
  double extreme = 0;
  for (int64_t sum = 0; sum <= total; ++sum) {
    if (std::abs(sum - mean) >= distance) extreme += ways[n1][sum];
  }
  return std::min(1.0, extreme / Choose(n, n1));
}

// The standard normal quantile of `probability` in (0, 1), by bisection on
// erfc: precise enough for a run count.
double NormalQuantile(double probability) {
  double low = -40, high = 40;
  for (int i = 0; i < 200; ++i) {
    const double middle = (low + high) / 2;
    (0.5 * std::erfc(-middle / std::sqrt(2.0)) < probability ? low : high) = middle;
  }
  return (low + high) / 2;
}

// "1", "0.95": a claim's bound as written.
std::string ShortestText(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%g", value);
  return buffer;
}

}  // namespace

std::optional<OrderStatisticRanks> MedianIntervalRanks(int64_t n, double confidence) {
  std::vector<double> pmf(n + 1);
  for (int64_t k = 0; k <= n; ++k) pmf[k] = HalfBinomial(n, k);
  for (int64_t span = 1; span < n; ++span) {
    std::optional<OrderStatisticRanks> best;
    for (int64_t lower = 1; lower + span <= n; ++lower) {
      OrderStatisticRanks ranks{lower, lower + span, 0};
      for (int64_t k = ranks.lower; k < ranks.upper; ++k) ranks.coverage += pmf[k];
      // Equal spans tie in coverage only as mirror images; take the lower.
      if (ranks.coverage >= confidence && (!best || ranks.coverage > best->coverage + 1e-12))
        best = ranks;
    }
    if (best) return best;
  }
  return std::nullopt;
}

int64_t FewestForMedianInterval(double confidence) {
  int64_t n = 2;
  while (!MedianIntervalRanks(n, confidence)) ++n;
  return n;
}

MedianSummary SummariseMedian(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  MedianSummary summary;
  summary.n = static_cast<int64_t>(values.size());
  summary.median = bench::Median(values);
  if (const auto ranks = MedianIntervalRanks(summary.n)) {
    summary.interval = true;
    summary.low = values[ranks->lower - 1];
    summary.high = values[ranks->upper - 1];
    summary.coverage = ranks->coverage;
  } else {
    summary.low = values.front();
    summary.high = values.back();
  }
  return summary;
}

Claim SideOfOne(double paper) {
  constexpr double kInfinity = std::numeric_limits<double>::infinity();
  return paper > 1 ? Claim{1, kInfinity} : Claim{-kInfinity, 1};
}

Judgement Judge(const MedianSummary& ours, const Claim& claim, const std::string& noun) {
  if (!ours.interval) {
    const int64_t more = FewestForMedianInterval() - ours.n;
    return {Verdict::kTooFew, "inconclusive: " + std::to_string(more) + " more " + noun +
                                  (more == 1 ? "" : "s") + " needed"};
  }
  if (ours.low > claim.low && ours.high < claim.high) return {Verdict::kHolds, "holds"};
  if (ours.high <= claim.low || ours.low >= claim.high)
    return {Verdict::kDoesNotHold, "does not hold"};
  const double crossed = ours.low <= claim.low ? claim.low : claim.high;
  return {Verdict::kInconclusive, "inconclusive: the interval spans " + ShortestText(crossed)};
}

MannWhitney MannWhitneyU(const std::vector<double>& x, const std::vector<double>& y) {
  const int64_t n1 = static_cast<int64_t>(x.size());
  const int64_t n2 = static_cast<int64_t>(y.size());
  std::vector<double> pooled = x;
  pooled.insert(pooled.end(), y.begin(), y.end());
  const std::vector<int64_t> ranks = DoubledMidRanks(pooled);
  const int64_t doubled_sum = std::accumulate(ranks.begin(), ranks.begin() + n1, int64_t{0});
  MannWhitney result;
  result.u = doubled_sum / 2.0 - static_cast<double>(n1 * (n1 + 1)) / 2;
  if (n1 <= kExactMannWhitney && n2 <= kExactMannWhitney) {
    result.exact = true;
    result.p_value = ExactRankSumPValue(ranks, n1, doubled_sum);
    return result;
  }
  // Ties shrink the variance of U by sum(t^3 - t) / (n (n - 1)) over tie groups.
  const double n = static_cast<double>(n1 + n2);
  double ties = 0;
  std::vector<int64_t> sorted = ranks;
  std::sort(sorted.begin(), sorted.end());
  for (size_t first = 0; first < sorted.size();) {
    size_t last = first;
    while (last + 1 < sorted.size() && sorted[last + 1] == sorted[first]) ++last;
    const double t = static_cast<double>(last - first + 1);
    ties += t * t * t - t;
    first = last + 1;
  }
  const double mean = static_cast<double>(n1 * n2) / 2;
  const double variance = static_cast<double>(n1 * n2) / 12 * ((n + 1) - ties / (n * (n - 1)));
  if (variance <= 0) return result;  // every value equal: no evidence either way
  const double z = std::max(0.0, std::abs(result.u - mean) - 0.5) / std::sqrt(variance);
  result.p_value = std::min(1.0, std::erfc(z / std::sqrt(2.0)));
  return result;
}

double SmallestPValue(int64_t n1, int64_t n2) {
  return std::min(1.0, 2 / Choose(n1 + n2, std::min(n1, n2)));
}

int64_t RunsPerSideToReach(int64_t n1, int64_t n2, double alpha) {
  int64_t m = std::min(n1, n2);
  while (SmallestPValue(std::max(n1, m), std::max(n2, m)) > alpha) ++m;
  return m;
}

int64_t RunsPerSideForEffect(int64_t n, double p, double alpha) {
  const double observed = NormalQuantile(1 - std::clamp(p, 1e-300, 1.0 - 1e-12) / 2);
  const double needed = NormalQuantile(1 - alpha / 2);
  if (observed <= 1e-6) return -1;  // no effect to scale: no run count will show one
  return std::max(n + 1, static_cast<int64_t>(std::ceil(n * std::pow(needed / observed, 2))));
}

}  // namespace nimble::reports
