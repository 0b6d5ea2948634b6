#include "harness/bench/results_db.h"

#include <sqlite3.h>

#include <iterator>

#include "harness/bench/migration_001.h"
#include "harness/bench/migration_002.h"
#include "harness/bench/migration_003.h"
#include "harness/bench/migration_004.h"
#include "harness/bench/migration_005.h"
#include "harness/bench/migration_006.h"
#include "nimble/compiler/support/sqlite_util.h"
#include "nimble/vm/error.h"

namespace nimble::bench {

using sqlite::InTransaction;
using sqlite::NowUtc;
using sqlite::Statement;

namespace {

// results/migrations/NNN.sql, in order: entry i takes version i to i + 1.
constexpr const char* kMigrations[] = {kMigration001, kMigration002, kMigration003,
                                       kMigration004, kMigration005, kMigration006};
static_assert(std::size(kMigrations) == ResultsDb::kSchemaVersion);

}  // namespace

ResultsDb::ResultsDb(const std::string& path) : path_(path) {
  if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) !=
      SQLITE_OK) {
    const std::string message = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    throw Error(path + ": cannot open the results database: " + message);
  }
  try {
    sqlite3_busy_timeout(db_, 30000);
    Execute("PRAGMA journal_mode = WAL");
    Execute("PRAGMA foreign_keys = ON");
    Migrate();
  } catch (...) {
    // A file that is not a database fails here, on the first statement that
    // reads it.
    sqlite3_close(db_);
    throw;
  }
}

ResultsDb::~ResultsDb() {
  sqlite3_close(db_);
}

void ResultsDb::Execute(const std::string& sql) const {
  sqlite::Execute(db_, path_, sql);
}

void ResultsDb::Migrate() {
  InTransaction(db_, path_, [&] {
    Statement version(db_, "PRAGMA user_version", path_);
    version.Step();
    const int64_t found = version.Integer(0);
    if (found == kSchemaVersion) return;
    if (found > kSchemaVersion) {
      throw Error(path_ + ": results database of schema version " + std::to_string(found) +
                  ", newer than this nimble-bench's " + std::to_string(kSchemaVersion) +
                  "; use a newer build");
    }
    Statement tables(db_, "SELECT count(*) FROM sqlite_master", path_);
    tables.Step();
    if (found == 0 && tables.Integer(0) > 0) {
      throw Error(path_ + ": not a results database (it has tables but no schema version)");
    }
    // A migration that drops a table (006) fails while a statement of this
    // connection is still running.
    version.Reset();
    tables.Reset();
    for (int64_t version = found; version < kSchemaVersion; ++version) {
      Execute(kMigrations[version]);
    }
    Execute("PRAGMA user_version = " + std::to_string(kSchemaVersion));
  });
}

int64_t ResultsDb::InsertRun(const RunInfo& info, const std::string& status) {
  Statement insert(
      db_,
      "INSERT INTO runs (started_at, status, commit_id, host, cpu_model, cpu_flags, "
      "cores, threads, target, model, configuration, dataset, split, sentences, "
      "warmup, repeat, kind, arch, emulated, emulator, job_id, agent, framework, gpu) VALUES "
      "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
      path_);
  insert.Bind(1, info.started_at.empty() ? NowUtc() : info.started_at)
      .Bind(2, status)
      .Bind(3, info.commit_id)
      .Bind(4, info.host)
      .Bind(5, info.cpu_model)
      .Bind(6, info.cpu_flags)
      .Bind(7, info.cores)
      .Bind(8, info.threads)
      .Bind(9, info.target)
      .Bind(10, info.model)
      .Bind(11, info.configuration)
      .Bind(12, info.dataset)
      .Bind(13, info.split)
      .Bind(14, info.sentences)
      .Bind(15, info.warmup)
      .Bind(16, info.repeat)
      .Bind(17, info.kind)
      .Bind(18, info.arch)
      .Bind(19, static_cast<int64_t>(info.emulated));
  if (info.emulated) {
    insert.Bind(20, info.emulator);
  } else {
    insert.BindNull(20);
  }
  if (info.job_id > 0) {
    insert.Bind(21, info.job_id).Bind(22, info.agent);
  } else {
    insert.BindNull(21).BindNull(22);
  }
  insert.Bind(23, info.framework);
  if (info.gpu.empty()) {
    insert.BindNull(24);
  } else {
    insert.Bind(24, info.gpu);
  }
  insert.Step();
  return sqlite3_last_insert_rowid(db_);
}

int64_t ResultsDb::BeginRun(const RunInfo& info) {
  int64_t id = 0;
  InTransaction(db_, path_, [&] { id = InsertRun(info, "running"); });
  return id;
}

int64_t ResultsDb::RecordRun(const RunInfo& info, const std::vector<Measurement>& measurements) {
  int64_t id = 0;
  InTransaction(db_, path_, [&] {
    id = InsertRun(info, "running");
    FinishRun(id, measurements);
  });
  return id;
}

void ResultsDb::FinishRun(int64_t run_id, const std::vector<Measurement>& measurements) {
  InTransaction(db_, path_, [&] {
    Statement insert(
        db_, "INSERT INTO measurements (run_id, name, value, unit) VALUES (?, ?, ?, ?)", path_);
    for (const Measurement& measurement : measurements) {
      insert.Bind(1, run_id)
          .Bind(2, measurement.name)
          .Bind(3, measurement.value)
          .Bind(4, measurement.unit);
      insert.Step();
      insert.Reset();
    }
    Statement finish(db_, "UPDATE runs SET status = 'done', finished_at = ? WHERE id = ?", path_);
    finish.Bind(1, NowUtc()).Bind(2, run_id);
    finish.Step();
  });
}

void ResultsDb::FailRun(int64_t run_id, const std::string& error) {
  InTransaction(db_, path_, [&] {
    Statement fail(
        db_, "UPDATE runs SET status = 'failed', finished_at = ?, error = ? WHERE id = ?", path_);
    fail.Bind(1, NowUtc()).Bind(2, error).Bind(3, run_id);
    fail.Step();
  });
}

std::vector<Measurement> ResultsDb::Measurements(int64_t run_id) const {
  Statement select(db_, "SELECT name, value, unit FROM measurements WHERE run_id = ? ORDER BY name",
                   path_);
  select.Bind(1, run_id);
  std::vector<Measurement> result;
  while (select.Step()) result.push_back({select.Text(0), select.Real(1), select.Text(2)});
  return result;
}

std::string ResultsDb::Status(int64_t run_id) const {
  Statement select(db_, "SELECT status FROM runs WHERE id = ?", path_);
  select.Bind(1, run_id);
  if (!select.Step()) throw Error(path_ + ": no run " + std::to_string(run_id));
  return select.Text(0);
}

RunRecord ResultsDb::Run(int64_t run_id) const {
  Statement select(db_,
                   "SELECT started_at, commit_id, host, cpu_model, cpu_flags, cores, threads, "
                   "target, model, configuration, dataset, split, sentences, warmup, repeat, kind, "
                   "arch, emulated, emulator, job_id, agent, framework, gpu FROM runs WHERE id = ?",
                   path_);
  select.Bind(1, run_id);
  if (!select.Step()) throw Error(path_ + ": no run " + std::to_string(run_id));
  RunRecord record;
  record.info = RunInfo{.started_at = select.Text(0),
                        .commit_id = select.Text(1),
                        .host = select.Text(2),
                        .cpu_model = select.Text(3),
                        .cpu_flags = select.Text(4),
                        .cores = select.Integer(5),
                        .threads = select.Integer(6),
                        .target = select.Text(7),
                        .model = select.Text(8),
                        .configuration = select.Text(9),
                        .dataset = select.Text(10),
                        .split = select.Text(11),
                        .sentences = select.Integer(12),
                        .warmup = select.Integer(13),
                        .repeat = select.Integer(14),
                        .kind = select.Text(15),
                        .arch = select.Text(16),
                        .emulated = select.Integer(17) != 0,
                        .emulator = select.Text(18),
                        .job_id = select.Integer(19),
                        .agent = select.Text(20),
                        .framework = select.Text(21),
                        .gpu = select.Text(22)};
  record.measurements = Measurements(run_id);
  return record;
}

}  // namespace nimble::bench
