// SelectRuns on a real results.db (a file in a temporary folder, rows
// written through ResultsDb): every finished run of the kinds asked for, the
// user's filters, and the errors for run ids that cannot be
// reported; ComparisonKey's notion of "the same thing measured".
#include "harness/reports/run_selection.h"
#include "tests/harness/reports/reports_test_util.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "nimble/vm/error.h"

namespace nimble::reports {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

// An LSTM run on `host`.
bench::RunInfo Info(const std::string& host) {
  return test_util::RunInfoOf("lstm", R"({"input_size":300,"hidden_size":512,"layers":1})", host);
}

class RunSelectionTest : public test_util::ResultsDbTest {
 protected:
  // A finished run with one figure.
  int64_t Record(const bench::RunInfo& info, double us_per_token = 50) {
    return db_->RecordRun(info, {{"us_per_token", us_per_token, "us"}});
  }
  std::vector<int64_t> Ids(const RunFilter& filter = {}) const {
    std::vector<int64_t> ids;
    for (const SelectedRun& run : SelectRuns(*db_, filter)) ids.push_back(run.id);
    return ids;
  }
  std::string SelectError(const RunFilter& filter) const {
    try {
      SelectRuns(*db_, filter);
    } catch (const Error& error) {
      return error.what();
    }
    return "";
  }
};

TEST_F(RunSelectionTest, AnEmptyDatabaseSelectsNothing) {
  EXPECT_THAT(Ids(), IsEmpty());
}

TEST_F(RunSelectionTest, KeepsEveryFinishedRunOfEachConfigurationAndHost) {
  const int64_t first = Record(Info("a"), 60);
  const int64_t later = Record(Info("a"), 55);
  const int64_t other_host = Record(Info("b"), 70);
  db_->BeginRun(Info("a"));  // still running
  const int64_t failed = db_->BeginRun(Info("a"));
  db_->FailRun(failed, "out of memory");
  bench::RunInfo microbench = Info("a");
  microbench.kind = "microbench";
  Record(microbench, 1);

  const std::vector<SelectedRun> runs = SelectRuns(*db_, {});
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[0].id, first);
  EXPECT_DOUBLE_EQ(runs[0].Find("us_per_token")->value, 60);
  EXPECT_EQ(runs[1].id, later);
  EXPECT_EQ(runs[1].record.info.host, "a");
  EXPECT_THAT(runs[1].finished_at, Not(IsEmpty()));
  EXPECT_LE(runs[0].finished_at, runs[1].finished_at);
  ASSERT_NE(runs[1].Find("us_per_token"), nullptr);
  EXPECT_DOUBLE_EQ(runs[1].Find("us_per_token")->value, 55);
  EXPECT_EQ(runs[1].Find("latency_p99"), nullptr);
  EXPECT_EQ(runs[2].id, other_host);
  EXPECT_EQ(runs[2].record.info.host, "b");
  EXPECT_DOUBLE_EQ(runs[2].Find("us_per_token")->value, 70);
}

TEST_F(RunSelectionTest, OrdersRunsByModelAndConfiguration) {
  const int64_t one_layer = Record(Info("a"));
  bench::RunInfo two_layers_info = Info("a");
  two_layers_info.configuration = R"({"input_size":300,"hidden_size":512,"layers":2})";
  const int64_t two_layers = Record(two_layers_info);
  bench::RunInfo bert_info = Info("a");
  bert_info.model = "bert";
  bert_info.configuration = R"({"layers":12})";
  const int64_t bert = Record(bert_info);
  // In (model, configuration, ...) order.
  EXPECT_THAT(Ids(), ElementsAre(bert, one_layer, two_layers));
}

TEST_F(RunSelectionTest, ARunIdFilterKeepsOnlyThoseRuns) {
  const int64_t first = Record(Info("a"), 60);
  const int64_t second = Record(Info("a"), 55);
  const int64_t other_host = Record(Info("b"), 70);
  RunFilter filter;
  filter.run_ids = {first};
  EXPECT_THAT(Ids(filter), ElementsAre(first));
  filter.run_ids = {other_host, first};
  EXPECT_THAT(Ids(filter), ElementsAre(first, other_host));
  filter.run_ids = {};
  EXPECT_THAT(Ids(filter), ElementsAre(first, second, other_host));
}

TEST_F(RunSelectionTest, AnUnknownRunIdIsAnErrorNamingIt) {
  Record(Info("a"));
  RunFilter filter;
  filter.run_ids = {4242};
  EXPECT_THAT(SelectError(filter), HasSubstr("no run 4242"));
  EXPECT_THAT(SelectError(filter), HasSubstr((dir_ / "results.db").string()));

  bench::RunInfo microbench = Info("a");
  microbench.kind = "microbench";
  filter.run_ids = {Record(microbench)};
  EXPECT_THAT(SelectError(filter),
              HasSubstr("no run " + std::to_string(filter.run_ids[0]) + " of kind run"));
}

TEST_F(RunSelectionTest, OtherKindsAreSelectedOnlyWhenAskedFor) {
  const int64_t run = Record(Info("a"));
  bench::RunInfo microbench = Info("a");
  microbench.kind = "microbench";
  microbench.model = "dispatch";
  const int64_t measured = Record(microbench);
  EXPECT_THAT(Ids({}), ElementsAre(run));
  RunFilter filter;
  filter.kinds = {"run", "microbench"};
  EXPECT_THAT(Ids(filter), ElementsAre(measured, run));
  filter.kinds = {"microbench"};
  filter.run_ids = {run};
  EXPECT_THAT(SelectError(filter),
              HasSubstr("no run " + std::to_string(run) + " of kind microbench"));
}

TEST_F(RunSelectionTest, AnUnfinishedRunIdIsAnErrorNamingIt) {
  const int64_t done = Record(Info("a"));
  const int64_t running = db_->BeginRun(Info("a"));
  const int64_t failed = db_->BeginRun(Info("a"));
  db_->FailRun(failed, "boom");
  RunFilter filter;
  filter.run_ids = {done, running};
  EXPECT_THAT(SelectError(filter), HasSubstr("run " + std::to_string(running) + " is running"));
  filter.run_ids = {failed};
  EXPECT_THAT(SelectError(filter), HasSubstr("run " + std::to_string(failed) + " is failed"));
}

TEST_F(RunSelectionTest, ACommitFilterMatchesAPrefix) {
  bench::RunInfo old_commit = Info("a");
  old_commit.commit_id = "abc1234";
  bench::RunInfo new_commit = Info("a");
  new_commit.commit_id = "def5678";
  const int64_t old_run = Record(old_commit);
  const int64_t new_run = Record(new_commit);
  RunFilter filter;
  EXPECT_THAT(Ids(filter), ElementsAre(old_run, new_run));
  filter.commit = "abc";
  EXPECT_THAT(Ids(filter), ElementsAre(old_run));
  filter.commit = "def5678";
  EXPECT_THAT(Ids(filter), ElementsAre(new_run));
  filter.commit = "bc1";  // not a prefix
  EXPECT_THAT(Ids(filter), IsEmpty());
}

TEST_F(RunSelectionTest, AHostFilterKeepsThatHostsRuns) {
  const int64_t on_a = Record(Info("a"));
  const int64_t on_b = Record(Info("b"));
  RunFilter filter;
  filter.host = "b";
  EXPECT_THAT(Ids(filter), ElementsAre(on_b));
  filter.host = "a";
  EXPECT_THAT(Ids(filter), ElementsAre(on_a));
  filter.host = "c";
  EXPECT_THAT(Ids(filter), IsEmpty());
}

TEST_F(RunSelectionTest, ConfigurationsDifferingOnlyInJsonLayoutAreOneConfiguration) {
  bench::RunInfo compact = Info("a");
  compact.configuration = R"({"layers":1,"hidden_size":512})";
  bench::RunInfo spaced = Info("a");
  spaced.configuration = "{ \"hidden_size\" : 512,\n  \"layers\" : 1 }";
  const int64_t earlier = Record(compact);
  const int64_t later = Record(spaced);
  const std::vector<SelectedRun> runs = SelectRuns(*db_, {});
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(ComparisonKey(runs[0].record.info), ComparisonKey(runs[1].record.info));
  EXPECT_THAT(Ids(), testing::UnorderedElementsAre(earlier, later));
}

TEST(ComparisonKey, IgnoresJsonKeyOrderAndSpacing) {
  bench::RunInfo compact = Info("a");
  compact.configuration = R"({"layers":1,"hidden_size":512,"seed":1})";
  bench::RunInfo spaced = Info("a");
  spaced.configuration = "{ \"seed\": 1,\n  \"hidden_size\" : 512, \"layers\":1 }";
  EXPECT_EQ(ComparisonKey(compact), ComparisonKey(spaced));
}

TEST(ComparisonKey, IgnoresTheHostAndProvenance) {
  bench::RunInfo other = Info("b");
  other.commit_id = "def5678";
  other.cpu_model = "EPYC";
  other.started_at = "2021-01-01T00:00:00Z";
  EXPECT_EQ(ComparisonKey(Info("a")), ComparisonKey(other));
}

TEST(ComparisonKey, DiffersForWhatIsMeasuredAndWhereItRuns) {
  const std::string key = ComparisonKey(Info("a"));
  bench::RunInfo framework = Info("a");
  framework.framework = "pytorch";
  bench::RunInfo threads = Info("a");
  threads.threads = 4;
  bench::RunInfo target = Info("a");
  target.target = "arm";
  bench::RunInfo arch = Info("a");
  arch.arch = "aarch64";
  bench::RunInfo emulated = Info("a");
  emulated.emulated = true;
  bench::RunInfo model = Info("a");
  model.model = "treelstm";
  bench::RunInfo configuration = Info("a");
  configuration.configuration = R"({"input_size":300,"hidden_size":512,"layers":2})";
  bench::RunInfo dataset = Info("a");
  dataset.dataset = "sst";
  EXPECT_NE(ComparisonKey(framework), key);
  EXPECT_NE(ComparisonKey(threads), key);
  EXPECT_NE(ComparisonKey(target), key);
  EXPECT_NE(ComparisonKey(arch), key);
  EXPECT_NE(ComparisonKey(emulated), key);
  EXPECT_NE(ComparisonKey(model), key);
  EXPECT_NE(ComparisonKey(configuration), key);
  EXPECT_NE(ComparisonKey(dataset), key);
}

}  // namespace
}  // namespace nimble::reports
