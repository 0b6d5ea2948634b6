// The dispatch microbenchmark (paper Figure 3) on small shapes: every shape
// and degree gets its figures, relative latencies are consistent with the
// times, progress reaches its totals, and options out of range are refused
// with a message that names them.
#include "harness/bench/dispatch_microbench.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>

#include "harness/bench/dispatch_figures.h"
#include "nimble/vm/error.h"

namespace nimble::bench {
namespace {

using ::testing::HasSubstr;

DispatchBenchOptions Small() {
  DispatchBenchOptions options;
  options.shapes = {{8, 16}, {20, 12}};
  options.lengths = {5, 6, 7};
  options.degrees = {4, 1};
  options.rounds = 2;
  options.min_seconds = 0;
  return options;
}

std::string ErrorOf(const DispatchBenchOptions& options) {
  try {
    CheckDispatchBenchOptions(options);
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

TEST(DispatchMicrobench, EveryShapeAndDegreeHasItsFigures) {
  std::map<std::string, size_t> last_done, totals;
  const std::vector<Measurement> figures =
      RunDispatchBench(Small(), [&](const std::string& phase, size_t done, size_t total) {
        last_done[phase] = done;
        totals[phase] = total;
      });
  std::map<std::string, Measurement> by_name;
  for (const Measurement& figure : figures) by_name[figure.name] = figure;
  // Per shape: the static time, and per degree its time, mean and worst ratio.
  EXPECT_EQ(figures.size(), 2u * (1 + 2 * 3));
  EXPECT_EQ(by_name.size(), figures.size());
  for (const DenseShape& shape : Small().shapes) {
    const Measurement& base = by_name.at(DispatchFigureName(shape.in, shape.out, 0, "us"));
    EXPECT_GT(base.value, 0);
    EXPECT_EQ(base.unit, "us");
    EXPECT_EQ(by_name.count(DispatchFigureName(shape.in, shape.out, 0, "relative")), 0u);
    for (int degree : {4, 1}) {
      EXPECT_GT(by_name.at(DispatchFigureName(shape.in, shape.out, degree, "us")).value, 0);
      const Measurement& mean =
          by_name.at(DispatchFigureName(shape.in, shape.out, degree, "relative"));
      const Measurement& worst =
          by_name.at(DispatchFigureName(shape.in, shape.out, degree, "worst_relative"));
      EXPECT_EQ(mean.unit, "ratio");
      EXPECT_GT(mean.value, 0);
      EXPECT_GE(worst.value, mean.value);
    }
  }
  // 2 shapes x (3 static + 2 symbolic) programs; 2 x 3 lengths x 3 variants x 2 rounds timings.
  EXPECT_EQ(totals.at("compile"), 10u);
  EXPECT_EQ(last_done.at("compile"), 10u);
  EXPECT_EQ(totals.at("time"), 36u);
  EXPECT_EQ(last_done.at("time"), 36u);
}

TEST(DispatchMicrobench, FigureNamesSpellTheShapeAndVariant) {
  EXPECT_EQ(DispatchFigureName(768, 3072, 0, "us"), "dense_768x3072.static_us");
  EXPECT_EQ(DispatchFigureName(3072, 768, 8, "worst_relative"),
            "dense_3072x768.dispatch8_worst_relative");
}

TEST(DispatchMicrobench, TheConfigurationNamesWhatWasMeasured) {
  const nlohmann::json configuration = nlohmann::json::parse(DispatchConfigurationJson(Small()));
  EXPECT_EQ(configuration["shapes"], nlohmann::json::parse("[[8,16],[20,12]]"));
  EXPECT_EQ(configuration["lengths"], nlohmann::json::parse("[5,6,7]"));
  EXPECT_EQ(configuration["degrees"], nlohmann::json::parse("[4,1]"));
  EXPECT_EQ(configuration["rounds"], 2);
  EXPECT_EQ(configuration["kernels"], "generated");
  EXPECT_EQ(configuration["matmul_tile"], "4x3");
}

TEST(DispatchMicrobench, OptionsOutOfRangeAreRefused) {
  EXPECT_EQ(ErrorOf(Small()), "");
  DispatchBenchOptions options = Small();
  options.target = "nvidia";
  EXPECT_THAT(ErrorOf(options), HasSubstr("target 'nvidia'"));
  options = Small();
  options.lengths = {4, 0};
  EXPECT_THAT(ErrorOf(options), HasSubstr("length 0"));
  options = Small();
  options.degrees = {65};
  EXPECT_THAT(ErrorOf(options), HasSubstr("dispatch degree 65"));
  options = Small();
  options.shapes = {{8, 0}};
  EXPECT_THAT(ErrorOf(options), HasSubstr("shape 8x0"));
  options = Small();
  options.shapes.clear();
  EXPECT_THAT(ErrorOf(options), HasSubstr("at least one shape"));
  options = Small();
  options.rounds = 0;
  EXPECT_THAT(ErrorOf(options), HasSubstr("rounds 0"));
  options = Small();
  options.min_seconds = -1;
  EXPECT_THAT(ErrorOf(options), HasSubstr("min time"));
}

}  // namespace
}  // namespace nimble::bench
