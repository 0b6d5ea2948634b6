// results.db: the schema is created and versioned, runs and figures round
// trip, foreign files and newer schemas are refused, and concurrent writer
// processes (real child processes on one file) lose nothing.
#include "harness/bench/results_db.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "nimble/vm/error.h"

namespace nimble::bench {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class ResultsDbTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("nimble_results_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  fs::path dir_;
};

RunInfo Info(const std::string& model) {
  return RunInfo{.started_at = "",
                 .commit_id = "abc",
                 .host = "h",
                 .cpu_model = "cpu",
                 .cpu_flags = "avx2",
                 .cores = 2,
                 .threads = 2,
                 .target = "intel",
                 .model = model,
                 .configuration = "{\"layers\":1}",
                 .dataset = "synthetic",
                 .split = "test",
                 .sentences = 3,
                 .warmup = 1,
                 .repeat = 1,
                 .kind = "run",
                 .arch = "x86_64",
                 .emulated = false,
                 .emulator = "",
                 .job_id = 0,
                 .agent = ""};
}

// Runs `sql` on `path` directly, outside ResultsDb.
void RawSql(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK) << sql;
  sqlite3_close(db);
}

std::string ErrorOpening(const std::string& path) {
  try {
    ResultsDb db(path);
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

TEST_F(ResultsDbTest, RunsAndFiguresRoundTrip) {
  ResultsDb db(Path("results.db"));
  const int64_t run = db.BeginRun(Info("lstm"));
  EXPECT_EQ(db.Status(run), "running");
  db.FinishRun(run, {{"us_per_token", 61.5, "us"}, {"allocations", 9, "count"}});
  const RunRecord record = db.Run(run);
  EXPECT_EQ(record.info.arch, "x86_64");
  EXPECT_EQ(record.info.model, "lstm");
  EXPECT_EQ(record.measurements.size(), 2u);
  EXPECT_EQ(db.Status(run), "done");
  const std::vector<Measurement> figures = db.Measurements(run);
  ASSERT_EQ(figures.size(), 2u);
  EXPECT_EQ(figures[0].name, "allocations");
  EXPECT_EQ(figures[1].name, "us_per_token");
  EXPECT_DOUBLE_EQ(figures[1].value, 61.5);
  EXPECT_EQ(figures[1].unit, "us");

  EXPECT_EQ(record.info.gpu, "") << "a CPU run names no GPU";
  RunInfo gpu_run = Info("bert");
  gpu_run.target = "nvidia";
  gpu_run.gpu = "NVIDIA H200, sm_90, 139.8 GiB";
  EXPECT_EQ(db.Run(db.BeginRun(gpu_run)).info.gpu, gpu_run.gpu);

  const int64_t failed = db.BeginRun(Info("bert"));
  db.FailRun(failed, "boom");
  EXPECT_EQ(db.Status(failed), "failed");
  EXPECT_NE(run, failed);
}

TEST_F(ResultsDbTest, ReopeningKeepsTheRuns) {
  int64_t run = 0;
  {
    ResultsDb db(Path("results.db"));
    run = db.BeginRun(Info("lstm"));
    db.FinishRun(run, {{"us_per_token", 1, "us"}});
  }
  ResultsDb again(Path("results.db"));
  EXPECT_EQ(again.Status(run), "done");
  EXPECT_EQ(again.Measurements(run).size(), 1u);
}

TEST_F(ResultsDbTest, AFigureTwiceInOneRunIsRejectedAndNothingIsWritten) {
  ResultsDb db(Path("results.db"));
  const int64_t run = db.BeginRun(Info("lstm"));
  EXPECT_THROW(db.FinishRun(run, {{"x", 1, "us"}, {"x", 2, "us"}}), Error);
  EXPECT_EQ(db.Status(run), "running");
  EXPECT_TRUE(db.Measurements(run).empty());
}

TEST_F(ResultsDbTest, RefusesANewerSchemaAndForeignFiles) {
  const std::string newer = Path("newer.db");
  { ResultsDb db(newer); }
  RawSql(newer, "PRAGMA user_version = 99");
  EXPECT_THAT(ErrorOpening(newer), HasSubstr("schema version 99, newer than"));

  const std::string foreign = Path("foreign.db");
  RawSql(foreign, "CREATE TABLE t (x INTEGER)");
  EXPECT_THAT(ErrorOpening(foreign), HasSubstr("not a results database"));

  const std::string text = Path("notes.txt");
  std::ofstream(text) << "this is not a database, it is a text file of some length\n";
  EXPECT_THAT(ErrorOpening(text), HasSubstr(text + ": "));

  EXPECT_THAT(ErrorOpening(Path("missing/dir/results.db")), HasSubstr("cannot open"));
}

// Four processes each record 25 runs into one file at once.
TEST_F(ResultsDbTest, ConcurrentWriterProcessesLoseNothing) {
  const std::string path = Path("shared.db");
  { ResultsDb db(path); }
  constexpr int kWriters = 4;
  constexpr int kRunsEach = 25;
  std::vector<pid_t> children;
  for (int writer = 0; writer < kWriters; ++writer) {
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      try {
        ResultsDb db(path);
        for (int i = 0; i < kRunsEach; ++i) {
          const int64_t run = db.BeginRun(Info("w" + std::to_string(writer)));
          db.FinishRun(run, {{"us_per_token", double(i), "us"}, {"tokens", 10, "count"}});
        }
        _exit(0);
      } catch (...) {
        _exit(1);
      }
    }
    children.push_back(child);
  }
  for (pid_t child : children) {
    int status = 0;
    waitpid(child, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  auto count = [&](const char* sql) {
    sqlite3_stmt* statement = nullptr;
    sqlite3_prepare_v2(db, sql, -1, &statement, nullptr);
    sqlite3_step(statement);
    const std::string value = reinterpret_cast<const char*>(sqlite3_column_text(statement, 0));
    sqlite3_finalize(statement);
    return value;
  };
  EXPECT_EQ(count("SELECT count(*) FROM runs WHERE status = 'done'"),
            std::to_string(kWriters * kRunsEach));
  EXPECT_EQ(count("SELECT count(*) FROM measurements"), std::to_string(2 * kWriters * kRunsEach));
  EXPECT_EQ(count("PRAGMA integrity_check"), "ok");
  sqlite3_close(db);
}

}  // namespace
}  // namespace nimble::bench
