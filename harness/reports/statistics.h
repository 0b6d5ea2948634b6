// The statistics behind the report's verdicts and the timing gate
// (docs/reports.md): medians over rounds with distribution-free intervals
// from order statistics, the side of 1 a ratio's interval lies on, and the
// two-sided Mann–Whitney U test. Nothing here assumes timings are normal:
// on a shared host they are skewed by whatever else runs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace nimble::reports {

// The confidence of every interval the report shows.
inline constexpr double kConfidence = 0.95;

// 1-based ranks r < s of sorted values whose order statistics
// [X(r), X(s)] cover the median with probability `coverage` =
// P(r <= B < s), B ~ Binomial(n, 1/2).
struct OrderStatisticRanks {
  int64_t lower = 0;
  int64_t upper = 0;
  double coverage = 0;
};

// The pair with the smallest span s - r whose coverage is at least
// `confidence` (the more central of equal spans), or nullopt when even
// [min, max] covers less (n < 6 at 95%).
std::optional<OrderStatisticRanks> MedianIntervalRanks(int64_t n, double confidence = kConfidence);

// The fewest values whose [min, max] reaches `confidence` (6 at 95%).
int64_t FewestForMedianInterval(double confidence = kConfidence);

// A median over runs or rounds with its interval: the order-statistic
// interval when n allows one, else the range of the values (`interval`
// false: too few for a 95% interval).
struct MedianSummary {
  int64_t n = 0;
  double median = 0;
  double low = 0;
  double high = 0;
  bool interval = false;
  double coverage = 0;  // of [low, high] when `interval`
};

// `values` must not be empty.
MedianSummary SummariseMedian(std::vector<double> values);

// What the paper says of a ratio: its true median lies between `low` and
// `high` (exclusive; infinities for a side of 1).
struct Claim {
  double low = 0;
  double high = 0;
};

// The paper's figure read as a side of 1: above 1 for a figure above 1
// (Nimble faster, the dynamic program slower), below 1 otherwise.
Claim SideOfOne(double paper);

// Whether our interval agrees with the claim: inside it (holds), outside it
// (does not hold), across one of its bounds or too few values for an
// interval (inconclusive).
enum class Verdict { kHolds, kDoesNotHold, kInconclusive, kTooFew };
struct Judgement {
  Verdict verdict = Verdict::kTooFew;
  std::string text;  // "holds", ..., "inconclusive: 3 more rounds needed"
};
// `noun` names what `ours` is a median over ("round", "run").
Judgement Judge(const MedianSummary& ours, const Claim& claim, const std::string& noun);

// The two-sided Mann–Whitney U test of `x` against `y` (both non-empty):
// exact (the permutation distribution of the mid-rank sum, so ties are
// handled) when both have at most kExactMannWhitney values, else the normal
// approximation with the tie correction and a continuity correction.
inline constexpr int64_t kExactMannWhitney = 20;
struct MannWhitney {
  double u = 0;  // U of x: the pairs (x_i, y_j) with x_i > y_j, ties counting one half
  double p_value = 1;
  bool exact = false;
};
MannWhitney MannWhitneyU(const std::vector<double>& x, const std::vector<double>& y);

// The smallest two-sided p-value any n1 and n2 distinct values can give:
// 2 / C(n1 + n2, n1), at most 1.
double SmallestPValue(int64_t n1, int64_t n2);

// The fewest runs a side (at least n1 and n2 already there) with which a
// test at `alpha` can reach significance at all.
int64_t RunsPerSideToReach(int64_t n1, int64_t n2, double alpha);

// Roughly how many runs a side would make an effect as large as the one
// observed with p-value `p` on `n` runs a side significant at `alpha`: n
// scaled by the square of the ratio of normal quantiles.
int64_t RunsPerSideForEffect(int64_t n, double p, double alpha);

}  // namespace nimble::reports
