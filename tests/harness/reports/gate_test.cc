// Gate between two real results.db files (temporary files filled through
// ResultsDb, read back with SelectRuns): like is compared with like, a
// figure past the threshold or missing fails, timings are gated only when
// asked for, only on the same CPU model, and by a Mann–Whitney U test over
// every run of each side (regressed, unchanged or inconclusive); UpdateBaseline copies runs with
// their provenance and records why, read back with SQLite itself.
#include "harness/reports/gate.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "harness/reports/run_selection.h"
#include "nimble/vm/error.h"
#include "tests/harness/reports/reports_test_util.h"

namespace nimble::reports {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::StartsWith;

// A one-layer LSTM run on `host`.
bench::RunInfo Info(const std::string& host = "box-1") {
  return test_util::RunInfoOf("lstm", R"({"input_size":300,"hidden_size":512,"layers":1})", host);
}

bench::RunInfo Bert(const std::string& host = "box-1") {
  bench::RunInfo info = Info(host);
  info.model = "bert";
  info.configuration = R"({"hidden_size":768,"layers":12,"heads":12,"ffn_size":3072})";
  return info;
}

// Figures as a run records them: deterministic counts and one timing.
std::vector<bench::Measurement> Figures(double peak_bytes = 1000, double us_per_token = 50) {
  return {{"allocations_written_planned", 12, "count"},
          {"alloc_storage_per_sentence_planned", 40, "count"},
          {"peak_bytes_planned", peak_bytes, "bytes"},
          {"us_per_token", us_per_token, "us"}};
}

// The rows of `sql` on `path`, each column as text, read outside ResultsDb.
std::vector<std::vector<std::string>> Query(const std::string& path, const std::string& sql) {
  std::vector<std::vector<std::string>> rows;
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    ADD_FAILURE() << "cannot open " << path;
    sqlite3_close(db);
    return rows;
  }
  sqlite3_stmt* statement = nullptr;
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &statement, nullptr) != SQLITE_OK) {
    ADD_FAILURE() << sql << ": " << sqlite3_errmsg(db);
  } else {
    while (sqlite3_step(statement) == SQLITE_ROW) {
      std::vector<std::string> row;
      for (int i = 0; i < sqlite3_column_count(statement); ++i) {
        const unsigned char* text = sqlite3_column_text(statement, i);
        row.emplace_back(text ? reinterpret_cast<const char*>(text) : "NULL");
      }
      rows.push_back(std::move(row));
    }
  }
  sqlite3_finalize(statement);
  sqlite3_close(db);
  return rows;
}

std::string Scalar(const std::string& path, const std::string& sql) {
  const auto rows = Query(path, sql);
  return rows.size() == 1 && rows[0].size() == 1 ? rows[0][0] : "(not one value)";
}

class GateTest : public test_util::ScratchTest {
 protected:
  void SetUp() override {
    ScratchTest::SetUp();
    baseline_ = std::make_unique<bench::ResultsDb>(Path("baseline.db"));
    current_ = std::make_unique<bench::ResultsDb>(Path("current.db"));
  }
  void TearDown() override {
    baseline_.reset();
    current_.reset();
    ScratchTest::TearDown();
  }

  GateResult GateAll(const GateOptions& options = {}) const {
    return Gate(SelectRuns(*baseline_, {}), SelectRuns(*current_, {}), options);
  }
  std::string GateError(const GateOptions& options) const {
    try {
      GateAll(options);
    } catch (const Error& error) {
      return error.what();
    }
    return "";
  }

  std::unique_ptr<bench::ResultsDb> baseline_;
  std::unique_ptr<bench::ResultsDb> current_;
};

// The row of `metric`, or nullptr.
const GateRow* Row(const GateResult& result, const std::string& metric) {
  for (const GateRow& row : result.rows) {
    if (row.metric == metric) return &row;
  }
  return nullptr;
}

std::vector<GateVerdict> Verdicts(const GateResult& result) {
  std::vector<GateVerdict> verdicts;
  for (const GateRow& row : result.rows) verdicts.push_back(row.verdict);
  return verdicts;
}

std::string LastLine(const std::string& text) {
  const std::string trimmed = text.substr(0, text.find_last_not_of('\n') + 1);
  return trimmed.substr(trimmed.find_last_of('\n') + 1);
}

TEST_F(GateTest, IdenticalRunsAreAllTheSame) {
  const int64_t before = baseline_->RecordRun(Info(), Figures());
  const int64_t after = current_->RecordRun(Info(), Figures());
  const GateResult result = GateAll();
  // The deterministic figures the runs recorded, in DeterministicMetrics() order.
  std::vector<std::string> metrics;
  for (const GateRow& row : result.rows) metrics.push_back(row.metric);
  EXPECT_THAT(metrics, ElementsAre("allocations_written_planned",
                                   "alloc_storage_per_sentence_planned", "peak_bytes_planned"));
  EXPECT_THAT(Verdicts(result),
              ElementsAre(GateVerdict::kSame, GateVerdict::kSame, GateVerdict::kSame));
  EXPECT_FALSE(result.failed());
  const GateRow* peak = Row(result, "peak_bytes_planned");
  ASSERT_NE(peak, nullptr);
  EXPECT_EQ(peak->baseline, 1000);
  EXPECT_EQ(peak->current, 1000);
  EXPECT_EQ(peak->baseline_run, before);
  EXPECT_EQ(peak->current_run, after);
  EXPECT_THAT(peak->configuration, HasSubstr("nimble lstm"));
  EXPECT_THAT(peak->configuration, HasSubstr("intel, 1 thread, x86_64"));
}

TEST_F(GateTest, TenPercentMoreThanAFivePercentThresholdRegresses) {
  baseline_->RecordRun(Info(), Figures(1000));
  current_->RecordRun(Info(), Figures(1100));
  const GateResult result = GateAll();
  const GateRow* peak = Row(result, "peak_bytes_planned");
  ASSERT_NE(peak, nullptr);
  EXPECT_EQ(peak->verdict, GateVerdict::kRegressed);
  EXPECT_EQ(peak->current, 1100);
  EXPECT_EQ(Row(result, "allocations_written_planned")->verdict, GateVerdict::kSame);
  EXPECT_TRUE(result.failed());
}

TEST_F(GateTest, TenPercentLessIsAnImprovement) {
  baseline_->RecordRun(Info(), Figures(1000));
  current_->RecordRun(Info(), Figures(900));
  const GateResult result = GateAll();
  EXPECT_EQ(Row(result, "peak_bytes_planned")->verdict, GateVerdict::kImproved);
  EXPECT_FALSE(result.failed());
}

TEST_F(GateTest, ExactlyAtTheThresholdIsTheSame) {
  baseline_->RecordRun(Info(), Figures(1000));
  current_->RecordRun(Info(), Figures(1050));
  const GateResult result = GateAll();
  EXPECT_EQ(Row(result, "peak_bytes_planned")->verdict, GateVerdict::kSame);
  EXPECT_FALSE(result.failed());
}

TEST_F(GateTest, AWiderThresholdLetsTenPercentThrough) {
  baseline_->RecordRun(Info(), Figures(1000));
  current_->RecordRun(Info(), Figures(1100));
  GateOptions options;
  options.max_regression = 0.2;
  const GateResult result = GateAll(options);
  EXPECT_EQ(Row(result, "peak_bytes_planned")->verdict, GateVerdict::kSame);
  EXPECT_FALSE(result.failed());
}

TEST_F(GateTest, AZeroBaselineGainsNoSlack) {
  baseline_->RecordRun(Info(), {{"device_allocs_per_sentence", 0, "count"}});
  current_->RecordRun(Info(), {{"device_allocs_per_sentence", 1, "count"}});
  const GateResult result = GateAll();
  ASSERT_EQ(result.rows.size(), 1u);
  EXPECT_EQ(result.rows[0].verdict, GateVerdict::kRegressed);
  EXPECT_TRUE(result.failed());
  EXPECT_THAT(FormatGate(result, {}), HasSubstr("from 0"));
}

TEST_F(GateTest, AFigureMissingInTheCurrentRunFails) {
  baseline_->RecordRun(Info(), Figures());
  current_->RecordRun(Info(), {{"peak_bytes_planned", 1000, "bytes"}});
  const GateResult result = GateAll();
  const GateRow* missing = Row(result, "allocations_written_planned");
  ASSERT_NE(missing, nullptr);
  EXPECT_EQ(missing->verdict, GateVerdict::kMissingCurrent);
  EXPECT_EQ(missing->baseline, 12);
  EXPECT_FALSE(missing->current.has_value());
  EXPECT_TRUE(result.failed());
}

TEST_F(GateTest, AFigureOnlyInTheCurrentRunIsReportedNotFailed) {
  baseline_->RecordRun(Info(), {{"peak_bytes_planned", 1000, "bytes"}});
  current_->RecordRun(Info(), Figures());
  const GateResult result = GateAll();
  const GateRow* added = Row(result, "allocations_written_planned");
  ASSERT_NE(added, nullptr);
  EXPECT_EQ(added->verdict, GateVerdict::kMissingBaseline);
  EXPECT_FALSE(added->baseline.has_value());
  EXPECT_EQ(added->current, 12);
  EXPECT_EQ(Row(result, "peak_bytes_planned")->verdict, GateVerdict::kSame);
  EXPECT_FALSE(result.failed());
}

TEST_F(GateTest, AConfigurationOnlyInTheBaselineIsOneNotMeasuredRow) {
  baseline_->RecordRun(Info(), Figures());
  const int64_t bert = baseline_->RecordRun(Bert(), Figures());
  current_->RecordRun(Info(), Figures());
  const GateResult result = GateAll();
  std::vector<const GateRow*> not_measured;
  for (const GateRow& row : result.rows) {
    if (row.verdict == GateVerdict::kNotMeasured) not_measured.push_back(&row);
  }
  ASSERT_EQ(not_measured.size(), 1u);
  EXPECT_THAT(not_measured[0]->metric, IsEmpty());
  EXPECT_THAT(not_measured[0]->configuration, HasSubstr("bert"));
  EXPECT_EQ(not_measured[0]->baseline_run, bert);
  EXPECT_EQ(not_measured[0]->current_run, 0);
  EXPECT_EQ(result.rows.size(), 4u);  // three figures of the LSTM, one line for BERT
  EXPECT_FALSE(result.failed());
}

TEST_F(GateTest, AConfigurationOnlyInTheCurrentRunsIsOneNewRow) {
  baseline_->RecordRun(Info(), Figures());
  current_->RecordRun(Info(), Figures());
  const int64_t bert = current_->RecordRun(Bert(), Figures());
  const GateResult result = GateAll();
  std::vector<const GateRow*> added;
  for (const GateRow& row : result.rows) {
    if (row.verdict == GateVerdict::kMissingBaseline) added.push_back(&row);
  }
  ASSERT_EQ(added.size(), 1u);
  EXPECT_THAT(added[0]->metric, IsEmpty());
  EXPECT_THAT(added[0]->configuration, HasSubstr("bert"));
  EXPECT_EQ(added[0]->baseline_run, 0);
  EXPECT_EQ(added[0]->current_run, bert);
  EXPECT_FALSE(result.failed());
}

TEST_F(GateTest, RunsOnAnotherHostOfTheSameConfigurationAreCompared) {
  baseline_->RecordRun(Info("box-1"), Figures(1000));
  current_->RecordRun(Info("box-2"), Figures(2000));
  const GateResult result = GateAll();
  EXPECT_EQ(Row(result, "peak_bytes_planned")->verdict, GateVerdict::kRegressed);
  EXPECT_TRUE(result.failed());
}

TEST_F(GateTest, TimingsAreNotGatedByDefault) {
  baseline_->RecordRun(Info(), Figures(1000, 50));
  current_->RecordRun(Info(), Figures(1000, 100));
  const GateResult result = GateAll();
  EXPECT_EQ(Row(result, "us_per_token"), nullptr);
  EXPECT_FALSE(result.failed());
}

// `count` runs of Info() with us_per_token = `base` times 1 + a small
// deterministic jitter (-1%, 0, +1%, -0.5%, +0.5%, ...).
void RecordTimings(bench::ResultsDb& db, int count, double base) {
  for (int i = 0; i < count; ++i) {
    db.RecordRun(Info(), Figures(1000, base * (1 + 0.005 * ((i * 7) % 5 - 2))));
  }
}

GateOptions Timings() {
  GateOptions options;
  options.metrics = {"us_per_token"};
  return options;
}

TEST_F(GateTest, ATwentyPercentSlowdownOverEightRunsASideRegresses) {
  RecordTimings(*baseline_, 8, 50);
  RecordTimings(*current_, 8, 60);
  const GateResult result = GateAll(Timings());
  ASSERT_EQ(result.rows.size(), 1u);
  const GateRow& row = result.rows[0];
  EXPECT_EQ(row.metric, "us_per_token");
  EXPECT_EQ(row.verdict, GateVerdict::kRegressed);
  EXPECT_EQ(row.baseline_runs, 8);
  EXPECT_EQ(row.current_runs, 8);
  EXPECT_NEAR(*row.baseline, 50, 0.5);  // the medians
  EXPECT_NEAR(*row.current, 60, 0.6);
  ASSERT_TRUE(row.p_value.has_value());
  EXPECT_NEAR(*row.p_value, 2.0 / 12870, 1e-12);  // no overlap: 2 / C(16, 8)
  EXPECT_TRUE(result.failed());
  EXPECT_FALSE(result.inconclusive());
  const std::string text = FormatGate(result, Timings());
  EXPECT_THAT(LastLine(text), StartsWith("FAIL"));
  EXPECT_THAT(text, HasSubstr("runs 8/8, p = 0.00016"));
}

TEST_F(GateTest, EqualDistributionsAreUnchanged) {
  RecordTimings(*baseline_, 8, 50);
  RecordTimings(*current_, 8, 50);
  const GateResult result = GateAll(Timings());
  ASSERT_EQ(result.rows.size(), 1u);
  EXPECT_EQ(result.rows[0].verdict, GateVerdict::kSame);
  EXPECT_GT(*result.rows[0].p_value, 0.05);
  EXPECT_FALSE(result.failed());
  EXPECT_FALSE(result.inconclusive());
  EXPECT_THAT(LastLine(FormatGate(result, Timings())), StartsWith("PASS"));
}

TEST_F(GateTest, ASignificantSlowdownWithinTheThresholdIsUnchanged) {
  RecordTimings(*baseline_, 8, 50);
  RecordTimings(*current_, 8, 51.5);  // +3%, every run slower
  const GateResult result = GateAll(Timings());
  EXPECT_LT(*result.rows[0].p_value, 0.05);
  EXPECT_EQ(result.rows[0].verdict, GateVerdict::kSame);
}

TEST_F(GateTest, TwoRunsASideAreInconclusiveAndSayHowManyMoreAreNeeded) {
  RecordTimings(*baseline_, 2, 50);
  RecordTimings(*current_, 2, 60);
  const GateResult result = GateAll(Timings());
  ASSERT_EQ(result.rows.size(), 1u);
  const GateRow& row = result.rows[0];
  EXPECT_EQ(row.verdict, GateVerdict::kInconclusive);
  EXPECT_FALSE(row.p_value.has_value());
  // Two and two runs can give p = 1/3 at best.
  EXPECT_EQ(row.note,
            "too few runs (2 and 2): none could reach p < 0.05; needs 4 runs a side, 2 more in "
            "the baseline and 2 more in the current");
  EXPECT_FALSE(result.failed());
  EXPECT_TRUE(result.inconclusive());
  const std::string text = FormatGate(result, Timings());
  EXPECT_THAT(LastLine(text), StartsWith("INCONCLUSIVE"));
  EXPECT_THAT(LastLine(text), HasSubstr("1 inconclusive"));
}

TEST_F(GateTest, ANoisySlowdownIsInconclusive) {
  for (const double us : {40.0, 70.0, 45.0, 65.0, 50.0, 60.0, 42.0, 68.0}) {
    baseline_->RecordRun(Info(), Figures(1000, us));
  }
  for (const double us : {44.0, 75.0, 52.0, 69.0, 58.0, 63.0, 47.0, 71.0}) {
    current_->RecordRun(Info(), Figures(1000, us));
  }
  const GateResult result = GateAll(Timings());
  ASSERT_EQ(result.rows.size(), 1u);
  const GateRow& row = result.rows[0];
  EXPECT_EQ(row.verdict, GateVerdict::kInconclusive);
  EXPECT_GT(*row.p_value, 0.05);
  EXPECT_GT(*row.current, *row.baseline * 1.05);
  EXPECT_THAT(row.note, HasSubstr("too noisy to tell; about "));
  EXPECT_THAT(row.note, HasSubstr(" runs a side might"));
  EXPECT_TRUE(result.inconclusive());
}

TEST_F(GateTest, TheDeterministicGateReadsTheLatestRunPerKey) {
  baseline_->RecordRun(Info(), Figures(900));
  const int64_t latest = baseline_->RecordRun(Info(), Figures(1000));
  current_->RecordRun(Info(), Figures(2000));
  const int64_t now = current_->RecordRun(Info(), Figures(1000));
  const GateResult result = GateAll();
  const GateRow* peak = Row(result, "peak_bytes_planned");
  ASSERT_NE(peak, nullptr);
  EXPECT_EQ(peak->verdict, GateVerdict::kSame);
  EXPECT_EQ(peak->baseline_run, latest);
  EXPECT_EQ(peak->current_run, now);
  EXPECT_EQ(peak->baseline_runs, 0);  // not a test over runs
  EXPECT_FALSE(result.failed());
}

TEST_F(GateTest, ATimingOnAnotherCpuModelIsNotCompared) {
  baseline_->RecordRun(Info(), Figures(1000, 50));
  bench::RunInfo other_cpu = Info();
  other_cpu.cpu_model = "AMD EPYC 7R13";
  current_->RecordRun(other_cpu, Figures(1000, 60));
  GateOptions options;
  options.metrics = {"us_per_token"};
  const GateResult result = GateAll(options);
  ASSERT_EQ(result.rows.size(), 1u);
  EXPECT_EQ(result.rows[0].verdict, GateVerdict::kOtherCpu);
  EXPECT_FALSE(result.failed());
  // A deterministic figure is compared across CPU models.
  options.metrics = {"peak_bytes_planned"};
  EXPECT_EQ(GateAll(options).rows[0].verdict, GateVerdict::kSame);
}

TEST_F(GateTest, AnUnknownOrNonGateableMetricIsAnErrorNamingIt) {
  baseline_->RecordRun(Info(), Figures());
  current_->RecordRun(Info(), Figures());
  GateOptions options;
  options.metrics = {"no_such_figure"};
  EXPECT_THAT(GateError(options), HasSubstr("'no_such_figure'"));
  options.metrics = {"peak_bytes_planned", "kernel_fraction"};
  EXPECT_THAT(GateError(options), HasSubstr("'kernel_fraction'"));
  EXPECT_THAT(GateError(options), HasSubstr("peak_bytes_planned"));  // the gateable list
}

TEST_F(GateTest, ANegativeThresholdIsAnError) {
  GateOptions options;
  options.max_regression = -0.01;
  EXPECT_THAT(GateError(options), HasSubstr("--max-regression"));
  options.max_regression = 0.05;
  options.alpha = 0;
  EXPECT_THAT(GateError(options), HasSubstr("--alpha"));
}

TEST(GateMetrics, DeterministicMetricsAreGateableAndHaveNoTimings) {
  for (const std::string& metric : DeterministicMetrics()) {
    EXPECT_THAT(GateableMetrics(), testing::Contains(metric));
  }
  EXPECT_THAT(DeterministicMetrics(), Not(testing::Contains("us_per_token")));
  EXPECT_THAT(GateableMetrics(), testing::Contains("us_per_token"));
  EXPECT_THAT(GateableMetrics(), Not(testing::Contains("kernel_fraction")));
}

TEST_F(GateTest, FormatGateSaysFailLastAndShowsTheChanges) {
  baseline_->RecordRun(Info(), Figures(1000));
  current_->RecordRun(Info(), Figures(1100));
  const GateOptions options;
  const std::string text = FormatGate(GateAll(options), options);
  EXPECT_THAT(LastLine(text), StartsWith("FAIL"));
  EXPECT_THAT(LastLine(text), HasSubstr("1 regressed past 5%"));
  EXPECT_THAT(text, HasSubstr("peak_bytes_planned"));
  EXPECT_THAT(text, HasSubstr("allocations_written_planned"));
  EXPECT_THAT(text, HasSubstr("+10.0%"));
  EXPECT_THAT(text, HasSubstr("+0.0%"));
  EXPECT_THAT(text, HasSubstr("REGRESSED"));
  EXPECT_THAT(text, HasSubstr("1100"));
  EXPECT_THAT(text, EndsWith("\n"));
}

TEST_F(GateTest, FormatGateSaysPassLastWhenNothingGotWorse) {
  baseline_->RecordRun(Info(), Figures(1000));
  current_->RecordRun(Info(), Figures(900));
  const GateOptions options;
  const std::string text = FormatGate(GateAll(options), options);
  EXPECT_THAT(LastLine(text), StartsWith("PASS"));
  EXPECT_THAT(LastLine(text), HasSubstr("1 improved"));
  EXPECT_THAT(text, HasSubstr("-10.0%"));
  EXPECT_THAT(text, HasSubstr("improved"));
  EXPECT_THAT(text, Not(HasSubstr("FAIL")));
}

TEST_F(GateTest, UpdateBaselineCreatesTheBaselineWithFiguresAndProvenance) {
  const std::string path = Path("committed.db");
  bench::RunInfo info = Info("box-7");
  info.commit_id = "fedcba9";
  info.started_at = "2021-03-02T11:12:13.456Z";
  current_->RecordRun(info, Figures(1234, 56.5));
  current_->RecordRun(Bert("box-7"), Figures());
  ASSERT_FALSE(fs::exists(path));

  EXPECT_EQ(UpdateBaseline(path, SelectRuns(*current_, {}), Path("current.db"), "first baseline"),
            2);
  ASSERT_TRUE(fs::exists(path));
  const bench::ResultsDb committed(path);
  const std::vector<SelectedRun> runs = SelectRuns(committed, {});
  ASSERT_EQ(runs.size(), 2u);
  const SelectedRun& lstm = runs[1];  // bert sorts first
  EXPECT_EQ(lstm.record.info.model, "lstm");
  EXPECT_EQ(lstm.record.info.host, "box-7");
  EXPECT_EQ(lstm.record.info.commit_id, "fedcba9");
  EXPECT_EQ(lstm.record.info.started_at, "2021-03-02T11:12:13.456Z");
  EXPECT_EQ(lstm.record.info.cpu_model, "Xeon Platinum 8259CL");
  EXPECT_EQ(ComparisonKey(lstm.record.info), ComparisonKey(info));
  ASSERT_EQ(lstm.record.measurements.size(), 4u);
  ASSERT_NE(lstm.Find("peak_bytes_planned"), nullptr);
  EXPECT_DOUBLE_EQ(lstm.Find("peak_bytes_planned")->value, 1234);
  EXPECT_EQ(lstm.Find("peak_bytes_planned")->unit, "bytes");
  EXPECT_DOUBLE_EQ(lstm.Find("us_per_token")->value, 56.5);
}

TEST_F(GateTest, UpdateBaselineReplacesTheRunsOfTheSameConfigurationAndHost) {
  const std::string path = Path("committed.db");
  current_->RecordRun(Info(), Figures(1000));
  current_->RecordRun(Bert(), Figures(3000));
  UpdateBaseline(path, SelectRuns(*current_, {}), Path("current.db"), "first baseline");
  EXPECT_EQ(Scalar(path, "SELECT count(*) FROM runs"), "2");

  // A new measurement of the LSTM on the same host replaces the old one.
  bench::ResultsDb next(Path("next.db"));
  next.RecordRun(Info(), Figures(900));
  EXPECT_EQ(UpdateBaseline(path, SelectRuns(next, {}), Path("next.db"), "planner got better"), 1);
  EXPECT_EQ(Scalar(path, "SELECT count(*) FROM runs"), "2");
  EXPECT_EQ(Scalar(path, "SELECT count(*) FROM runs WHERE model = 'lstm'"), "1");
  EXPECT_EQ(Scalar(path, "SELECT count(*) FROM measurements"), "8");  // its figures went with it
  {
    const bench::ResultsDb committed(path);
    const std::vector<SelectedRun> runs = SelectRuns(committed, {});
    ASSERT_EQ(runs.size(), 2u);
    EXPECT_EQ(runs[1].record.info.model, "lstm");
    EXPECT_DOUBLE_EQ(runs[1].Find("peak_bytes_planned")->value, 900);
    EXPECT_DOUBLE_EQ(runs[0].Find("peak_bytes_planned")->value, 3000);  // BERT untouched
  }

  // The same configuration measured on another host is kept beside it.
  bench::ResultsDb other(Path("other.db"));
  other.RecordRun(Info("box-2"), Figures(950));
  UpdateBaseline(path, SelectRuns(other, {}), Path("other.db"), "a second machine");
  EXPECT_EQ(Scalar(path, "SELECT count(*) FROM runs WHERE model = 'lstm'"), "2");
}

// Pruning drops the configurations the current runs no longer measure on
// their host, and keeps other hosts' runs.
TEST_F(GateTest, UpdateBaselineWithPruneDropsWhatIsNoLongerMeasured) {
  const std::string path = Path("committed.db");
  current_->RecordRun(Info(), Figures(1000));
  current_->RecordRun(Bert(), Figures(3000));
  current_->RecordRun(Info("box-2"), Figures(950));
  UpdateBaseline(path, SelectRuns(*current_, {}), Path("current.db"), "first baseline");
  EXPECT_EQ(Scalar(path, "SELECT count(*) FROM runs"), "3");

  bench::ResultsDb next(Path("next.db"));
  next.RecordRun(Info(), Figures(900));
  EXPECT_EQ(UpdateBaseline(path, SelectRuns(next, {}), Path("next.db"), "BERT renamed", true), 1);
  EXPECT_THAT(Query(path, "SELECT model, host FROM runs ORDER BY host"),
              ElementsAre(ElementsAre("lstm", "box-1"), ElementsAre("lstm", "box-2")));
  EXPECT_EQ(Scalar(path,
                   "SELECT value FROM measurements m JOIN runs r ON r.id = m.run_id WHERE "
                   "r.host = 'box-1' AND m.name = 'peak_bytes_planned'"),
            "900.0");
}

TEST_F(GateTest, UpdateBaselineRecordsWhy) {
  const std::string path = Path("committed.db");
  current_->RecordRun(Info(), Figures());
  current_->RecordRun(Bert(), Figures());
  UpdateBaseline(path, SelectRuns(*current_, {}), "results/current.db", "first baseline");
  UpdateBaseline(path, SelectRuns(*current_, {}), "results/again.db", "re-measured on box-1");
  const auto updates =
      Query(path, "SELECT source, runs, reason, updated_at FROM baseline_updates ORDER BY id");
  ASSERT_EQ(updates.size(), 2u);
  EXPECT_THAT(updates[0], ElementsAre("results/current.db", "2", "first baseline", Not(IsEmpty())));
  EXPECT_THAT(updates[1],
              ElementsAre("results/again.db", "2", "re-measured on box-1", Not(IsEmpty())));
  EXPECT_THAT(Scalar(path, "SELECT commit_id FROM baseline_updates WHERE id = 1"), Not(IsEmpty()));
}

TEST_F(GateTest, UpdateBaselineRefusesAnEmptyReason) {
  const std::string path = Path("committed.db");
  current_->RecordRun(Info(), Figures());
  try {
    UpdateBaseline(path, SelectRuns(*current_, {}), Path("current.db"), "");
    ADD_FAILURE() << "an empty reason was accepted";
  } catch (const Error& error) {
    EXPECT_THAT(error.what(), HasSubstr("--reason"));
  }
  EXPECT_FALSE(fs::exists(path));
}

TEST_F(GateTest, UpdateBaselineRefusesNoRuns) {
  const std::string path = Path("committed.db");
  EXPECT_THROW(UpdateBaseline(path, {}, Path("current.db"), "nothing"), Error);
}

TEST_F(GateTest, TheCurrentRunsPassAgainstABaselineTakenFromThem) {
  bench::RunInfo arm = Info("pi-4");
  arm.target = "arm";
  arm.arch = "aarch64";
  arm.cpu_model = "Cortex-A72";
  // Four runs of each: enough for the timings' test to decide.
  for (int round = 0; round < 4; ++round) {
    current_->RecordRun(Info(), Figures(1000, 50));
    current_->RecordRun(Bert(), Figures(2000, 300));
    current_->RecordRun(arm, Figures(1000, 180));
  }
  const std::string path = Path("committed.db");
  EXPECT_EQ(UpdateBaseline(path, SelectRuns(*current_, {}), Path("current.db"), "first baseline"),
            12);

  const bench::ResultsDb committed(path);
  GateOptions options;
  options.metrics = GateableMetrics();
  const GateResult result = Gate(SelectRuns(committed, {}), SelectRuns(*current_, {}), options);
  EXPECT_FALSE(result.failed());
  EXPECT_FALSE(result.inconclusive());
  EXPECT_EQ(result.rows.size(), 12u);  // four figures of three configurations
  for (const GateRow& row : result.rows) {
    EXPECT_EQ(row.verdict, GateVerdict::kSame) << row.configuration << " " << row.metric;
  }
  EXPECT_THAT(LastLine(FormatGate(result, options)), StartsWith("PASS"));
}

}  // namespace
}  // namespace nimble::reports
