// The report's and the timing gate's statistics against values worked out
// by hand: order-statistic ranks from the binomial(n, 1/2) coverage, medians
// with their intervals, verdicts, and the Mann–Whitney U test (the exact
// distribution enumerated on paper for a small case with ties).
#include "harness/reports/statistics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace nimble::reports {
namespace {

using ::testing::DoubleNear;

TEST(MedianIntervalRanks, FiveValuesCannotGiveA95PercentInterval) {
  // [min, max] of 5 covers the median with 1 - 2/32 = 0.9375.
  EXPECT_FALSE(MedianIntervalRanks(5).has_value());
  EXPECT_FALSE(MedianIntervalRanks(1).has_value());
  EXPECT_EQ(FewestForMedianInterval(), 6);
}

TEST(MedianIntervalRanks, SixValuesGiveTheirRange) {
  const auto ranks = MedianIntervalRanks(6);
  ASSERT_TRUE(ranks.has_value());
  EXPECT_EQ(ranks->lower, 1);
  EXPECT_EQ(ranks->upper, 6);
  EXPECT_NEAR(ranks->coverage, 1 - 2.0 / 64, 1e-12);
}

TEST(MedianIntervalRanks, TenValuesGiveTheSecondAndNinth) {
  // P(2 <= B <= 8) = 1 - 2 (1 + 10) / 1024; (3, 8) would cover 1 - 2 * 56 / 1024 = 0.89.
  const auto ranks = MedianIntervalRanks(10);
  ASSERT_TRUE(ranks.has_value());
  EXPECT_EQ(ranks->lower, 2);
  EXPECT_EQ(ranks->upper, 9);
  EXPECT_NEAR(ranks->coverage, 1 - 22.0 / 1024, 1e-12);
}

TEST(MedianIntervalRanks, EightValuesTakeTheSmallerSpanEvenIfLopsided) {
  // (1, 7) covers 1 - (1 + 8 + 1) / 256 = 0.961, a span of 6 where (1, 8) spans 7.
  const auto ranks = MedianIntervalRanks(8);
  ASSERT_TRUE(ranks.has_value());
  EXPECT_EQ(ranks->lower, 1);
  EXPECT_EQ(ranks->upper, 7);
  EXPECT_NEAR(ranks->coverage, 246.0 / 256, 1e-12);
}

TEST(MedianIntervalRanks, TwentyValuesGiveTheSixthAndFifteenth) {
  const auto ranks = MedianIntervalRanks(20);
  ASSERT_TRUE(ranks.has_value());
  EXPECT_EQ(ranks->lower, 6);
  EXPECT_EQ(ranks->upper, 15);
  EXPECT_NEAR(ranks->coverage, 0.9586, 1e-4);
}

TEST(SummariseMedian, TooFewValuesShowTheirRange) {
  // ONNX Runtime / Nimble over five rounds of LSTM-1 (issue 46).
  const MedianSummary summary = SummariseMedian({1.43, 1.24, 0.97, 1.60, 0.93});
  EXPECT_EQ(summary.n, 5);
  EXPECT_DOUBLE_EQ(summary.median, 1.24);
  EXPECT_FALSE(summary.interval);
  EXPECT_DOUBLE_EQ(summary.low, 0.93);
  EXPECT_DOUBLE_EQ(summary.high, 1.60);
}

TEST(SummariseMedian, TenValuesBoundTheMedianByTheirSecondAndNinth) {
  const MedianSummary summary = SummariseMedian({10, 1, 9, 2, 8, 3, 7, 4, 6, 5});
  EXPECT_EQ(summary.n, 10);
  EXPECT_DOUBLE_EQ(summary.median, 5.5);
  EXPECT_TRUE(summary.interval);
  EXPECT_DOUBLE_EQ(summary.low, 2);
  EXPECT_DOUBLE_EQ(summary.high, 9);
}

MedianSummary Interval(double low, double high, int64_t n = 8) {
  MedianSummary summary;
  summary.n = n;
  summary.median = (low + high) / 2;
  summary.low = low;
  summary.high = high;
  summary.interval = n >= 6;
  return summary;
}

TEST(Judge, AnIntervalAboveOneHoldsWhereThePaperIsAboveOne) {
  EXPECT_EQ(Judge(Interval(1.1, 1.4), SideOfOne(1.66), "round").text, "holds");
  EXPECT_EQ(Judge(Interval(1.1, 1.4), SideOfOne(1.66), "round").verdict, Verdict::kHolds);
}

TEST(Judge, AnIntervalBelowOneDoesNotHoldWhereThePaperIsAboveOne) {
  const Judgement judgement = Judge(Interval(0.7, 0.95), SideOfOne(1.66), "round");
  EXPECT_EQ(judgement.verdict, Verdict::kDoesNotHold);
  EXPECT_EQ(judgement.text, "does not hold");
  // A paper figure below 1 claims the other side.
  EXPECT_EQ(Judge(Interval(0.7, 0.95), SideOfOne(0.8), "round").verdict, Verdict::kHolds);
  EXPECT_EQ(Judge(Interval(1.1, 1.4), SideOfOne(0.8), "round").verdict, Verdict::kDoesNotHold);
}

TEST(Judge, AnIntervalSpanningOneIsInconclusive) {
  const Judgement judgement = Judge(Interval(0.93, 1.6), SideOfOne(1.66), "round");
  EXPECT_EQ(judgement.verdict, Verdict::kInconclusive);
  EXPECT_EQ(judgement.text, "inconclusive: the interval spans 1");
}

TEST(Judge, TooFewRoundsSayHowManyMoreAreNeeded) {
  const Judgement judgement =
      Judge(SummariseMedian({1.43, 1.24, 0.97, 1.60, 0.93}), SideOfOne(1.66), "round");
  EXPECT_EQ(judgement.verdict, Verdict::kTooFew);
  EXPECT_EQ(judgement.text, "inconclusive: 1 more round needed");
  EXPECT_EQ(Judge(SummariseMedian({2.0, 2.1}), SideOfOne(1.66), "run").text,
            "inconclusive: 4 more runs needed");
}

TEST(Judge, ABoundedClaimHoldsOnlyInside) {
  const Claim nearly_one{0.95, 1.05};
  EXPECT_EQ(Judge(Interval(0.98, 1.03), nearly_one, "run").verdict, Verdict::kHolds);
  EXPECT_EQ(Judge(Interval(1.2, 1.3), nearly_one, "run").verdict, Verdict::kDoesNotHold);
  const Judgement across = Judge(Interval(1.01, 1.2), nearly_one, "run");
  EXPECT_EQ(across.verdict, Verdict::kInconclusive);
  EXPECT_EQ(across.text, "inconclusive: the interval spans 1.05");
}

TEST(MannWhitneyU, SeparatedSamplesGetTheSmallestExactPValue) {
  const MannWhitney three = MannWhitneyU({1, 2, 3}, {4, 5, 6});
  EXPECT_TRUE(three.exact);
  EXPECT_DOUBLE_EQ(three.u, 0);
  EXPECT_NEAR(three.p_value, 2.0 / 20, 1e-12);
  const MannWhitney four = MannWhitneyU({8, 7, 6, 5}, {1, 2, 3, 4});
  EXPECT_DOUBLE_EQ(four.u, 16);
  EXPECT_NEAR(four.p_value, 2.0 / 70, 1e-12);
}

TEST(MannWhitneyU, TiesUseTheExactDistributionOfMidRanks) {
  // Pooled 1 2 2 2 3: mid-ranks 1 3 3 3 5. Of the 10 ways to pick x's three,
  // 6 give a rank sum as far from its mean 9 as x's 7 (1 + 3 + 3).
  const MannWhitney test = MannWhitneyU({1, 2, 2}, {2, 3});
  EXPECT_TRUE(test.exact);
  EXPECT_DOUBLE_EQ(test.u, 1);
  EXPECT_NEAR(test.p_value, 0.6, 1e-12);
  EXPECT_DOUBLE_EQ(MannWhitneyU({1, 1}, {1, 1}).p_value, 1);
}

TEST(MannWhitneyU, LargeSamplesUseTheNormalApproximation) {
  std::vector<double> low, high, same(25, 1.0);
  for (int i = 1; i <= 25; ++i) {
    low.push_back(i);
    high.push_back(25 + i);
  }
  const MannWhitney separated = MannWhitneyU(low, high);
  EXPECT_FALSE(separated.exact);
  EXPECT_DOUBLE_EQ(separated.u, 0);
  // z = (312.5 - 0.5) / sqrt(25 * 25 * 51 / 12)
  EXPECT_NEAR(separated.p_value, std::erfc(312.0 / std::sqrt(2656.25) / std::sqrt(2.0)), 1e-15);
  EXPECT_LT(separated.p_value, 1e-8);
  EXPECT_DOUBLE_EQ(MannWhitneyU(same, same).p_value, 1);
  // Interleaved samples show no difference.
  std::vector<double> odd, even;
  for (int i = 0; i < 50; ++i) (i % 2 ? odd : even).push_back(i);
  EXPECT_GT(MannWhitneyU(odd, even).p_value, 0.5);
}

TEST(MannWhitneyU, TheExactAndApproximateTestsAgreeNearTheirBoundary) {
  std::vector<double> x, y;
  for (int i = 0; i < 20; ++i) {
    x.push_back(i + (i % 3 == 0 ? 6 : 0));
    y.push_back(i + 3.5);
  }
  const MannWhitney exact = MannWhitneyU(x, y);
  std::vector<double> x21 = x, y21 = y;
  x21.push_back(19.25);
  y21.push_back(19.75);
  const MannWhitney approximate = MannWhitneyU(x21, y21);
  EXPECT_TRUE(exact.exact);
  EXPECT_FALSE(approximate.exact);
  EXPECT_NEAR(exact.p_value, approximate.p_value, 0.05);
}

TEST(SmallestPValue, TwoRunsASideCanNeverBeSignificant) {
  EXPECT_NEAR(SmallestPValue(2, 2), 1.0 / 3, 1e-12);
  EXPECT_NEAR(SmallestPValue(3, 3), 0.1, 1e-12);
  EXPECT_NEAR(SmallestPValue(4, 4), 2.0 / 70, 1e-12);
  EXPECT_DOUBLE_EQ(SmallestPValue(1, 1), 1);
  EXPECT_EQ(RunsPerSideToReach(2, 2, 0.05), 4);
  EXPECT_EQ(RunsPerSideToReach(1, 8, 0.05), 2);  // 2 and 8: 2/45
  EXPECT_EQ(RunsPerSideToReach(3, 10, 0.05), 3);
  EXPECT_EQ(RunsPerSideToReach(2, 2, 0.01), 5);  // 2/252
}

TEST(RunsPerSideForEffect, ScalesByTheSquaredRatioOfQuantiles) {
  // z(0.9) = 1.2816, z(0.975) = 1.9600: 8 (1.96 / 1.2816)^2 = 18.7.
  EXPECT_EQ(RunsPerSideForEffect(8, 0.2, 0.05), 19);
  EXPECT_EQ(RunsPerSideForEffect(8, 1.0, 0.05), -1);
}

}  // namespace
}  // namespace nimble::reports
