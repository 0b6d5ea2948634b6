// The tuner's harness side: the JSON that tasks, records, sites and an
// agent's result travel as (round trips, and errors that name the member),
// and the child-process task runner's failures.
#include "harness/tuning/tuner.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/error_of.h"

namespace nimble::tuning {
namespace {

using ::testing::HasSubstr;

backend::TuningRecord ARecord() {
  return {{"x86_64 Test CPU", 2},
          "intel",
          {"nn.dense", "units=4", "(?,8), (4,8)"},
          "generated tile 2x3",
          16,
          2.5e-6,
          ""};
}

backend::TunableSite ASite() {
  return {{"nn.dense", "units=4", "(?,8), (4,8)"}, true, "def @main() { 0 }"};
}

TEST(TuningJson, TasksRecordsSitesAndOptionsRoundTrip) {
  const backend::TuningTask task{
      "arm", "def @main() { 0 }", {"nn.dense", "generated tile 1x2"}, {1, 2, 4}};
  const backend::TuningTask task_again = TaskFromJson(Json::parse(ToJson(task).dump()));
  EXPECT_EQ(task_again.target, task.target);
  EXPECT_EQ(task_again.program, task.program);
  EXPECT_EQ(task_again.configurations, task.configurations);
  EXPECT_EQ(task_again.extents, task.extents);

  backend::TuningRecord failed = ARecord();
  failed.seconds.reset();
  failed.error = "timed out after 300 s";
  for (const backend::TuningRecord& record : {ARecord(), failed}) {
    const backend::TuningRecord again = RecordFromJson(Json::parse(ToJson(record).dump()));
    EXPECT_EQ(again.host.host, record.host.host);
    EXPECT_EQ(again.host.threads, record.host.threads);
    EXPECT_EQ(again.site.shapes, record.site.shapes);
    EXPECT_EQ(again.configuration, record.configuration);
    EXPECT_EQ(again.extent, record.extent);
    EXPECT_EQ(again.seconds, record.seconds);
    EXPECT_EQ(again.error, record.error);
  }

  const backend::TunableSite site = SiteFromJson(ToJson(ASite()));
  EXPECT_EQ(site.key.attrs, "units=4");
  EXPECT_TRUE(site.dynamic);

  backend::TuneOptions options;
  options.trials = 7;
  options.extents = {3, 9};
  const backend::TuneOptions options_again = TuneOptionsFromJson(ToJson(options));
  EXPECT_EQ(options_again.trials, 7);
  EXPECT_EQ(options_again.extents, options.extents);
  EXPECT_EQ(options_again.top_k, options.top_k);
}

TEST(TuningJson, ErrorsNameTheMember) {
  Json task = ToJson(backend::TuningTask{"intel", "p", {"nn.dense"}, {1}});
  task.erase("program");
  EXPECT_THAT(ErrorOf([&] { TaskFromJson(task); }), HasSubstr("member 'program' is missing"));
  Json record = ToJson(ARecord());
  record["extent"] = "sixteen";
  EXPECT_THAT(ErrorOf([&] { RecordFromJson(record); }), HasSubstr("'extent' has the wrong type"));
  record = ToJson(ARecord());
  record["error"] = "both a time and an error";
  EXPECT_THAT(ErrorOf([&] { RecordFromJson(record); }), HasSubstr("either a time or an error"));
  Json options = ToJson(backend::TuneOptions{});
  options["extents"] = Json::array({4, -1});
  EXPECT_THAT(ErrorOf([&] { TuneOptionsFromJson(options); }), HasSubstr("must be positive"));
}

TEST(TuningJson, AnAgentsResultHoldsOnlyItsOwnSitesRecords) {
  HereResult result;
  result.outcome.site = ASite();
  result.outcome.host = {"x86_64 Test CPU", 2};
  result.outcome.tuned = {"generated tile 2x3", "generated tile 2x3", 1.02, 4};
  result.records = {ARecord()};
  const HereResult again = HereResultFromJson(ToJson(result));
  EXPECT_EQ(again.outcome.tuned.kernel, "generated tile 2x3");
  EXPECT_EQ(again.records.size(), 1u);

  result.records.front().host.host = "aarch64 Other CPU";
  EXPECT_THAT(ErrorOf([&] { HereResultFromJson(ToJson(result)); }),
              HasSubstr("a record of another host or site"));
  result.records.front() = ARecord();
  result.records.front().site.shapes = "(?,8), (5,8)";
  EXPECT_THAT(ErrorOf([&] { HereResultFromJson(ToJson(result)); }),
              HasSubstr("a record of another host or site"));
}

TEST(ChildTaskRunner, AChildThatFailsOrPrintsSomethingElseFailsTheTask) {
  const backend::TuningTask task{"intel", "p", {"nn.dense"}, {1}};
  EXPECT_THAT(ChildTaskRunner("/nonexistent/nimble-bench", 1, 10)(task).error,
              HasSubstr("could not start /nonexistent/nimble-bench"));
  EXPECT_THAT(ChildTaskRunner("/bin/false", 1, 10)(task).error, HasSubstr("exit status 1"));
  EXPECT_THAT(ChildTaskRunner("/bin/true", 1, 10)(task).error,
              HasSubstr("tune-task printed something else than its records"));
}

}  // namespace
}  // namespace nimble::tuning
