#include "harness/bench/results_db.h"

#include <sqlite3.h>

#include <chrono>
#include <ctime>

#include "harness/bench/schema_sql.h"
#include "nimble/vm/error.h"

namespace nimble::bench {

namespace {

std::string NowUtc() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

// A prepared statement, finalised on every path.
class Statement {
 public:
  Statement(sqlite3* db, const std::string& sql, const std::string& path) : db_(db), path_(path) {
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &statement_, nullptr) != SQLITE_OK) {
      throw Error(path + ": " + sqlite3_errmsg(db));
    }
  }
  ~Statement() { sqlite3_finalize(statement_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  Statement& Bind(int index, const std::string& value) {
    Check(sqlite3_bind_text(statement_, index, value.c_str(), -1, SQLITE_TRANSIENT));
    return *this;
  }
  Statement& Bind(int index, int64_t value) {
    Check(sqlite3_bind_int64(statement_, index, value));
    return *this;
  }
  Statement& Bind(int index, double value) {
    Check(sqlite3_bind_double(statement_, index, value));
    return *this;
  }
  // Ready to run again with new bindings.
  void Reset() {
    sqlite3_reset(statement_);
    sqlite3_clear_bindings(statement_);
  }
  // True while a row is available.
  bool Step() {
    const int status = sqlite3_step(statement_);
    if (status == SQLITE_ROW) return true;
    if (status != SQLITE_DONE) throw Error(path_ + ": " + sqlite3_errmsg(db_));
    return false;
  }
  std::string Text(int column) const {
    const unsigned char* text = sqlite3_column_text(statement_, column);
    return text ? reinterpret_cast<const char*>(text) : "";
  }
  double Real(int column) const { return sqlite3_column_double(statement_, column); }
  int64_t Integer(int column) const { return sqlite3_column_int64(statement_, column); }

 private:
  void Check(int status) const {
    if (status != SQLITE_OK) throw Error(path_ + ": " + sqlite3_errmsg(db_));
  }

  sqlite3* db_;
  std::string path_;
  sqlite3_stmt* statement_ = nullptr;
};

// Runs `body` in an IMMEDIATE transaction (the write lock taken up front, so
// concurrent writers wait on the busy timeout instead of failing mid-way).
template <typename Body>
void InTransaction(sqlite3* db, const std::string& path, Body body) {
  auto exec = [&](const char* sql) {
    char* message = nullptr;
    if (sqlite3_exec(db, sql, nullptr, nullptr, &message) != SQLITE_OK) {
      const std::string text = message ? message : sqlite3_errmsg(db);
      sqlite3_free(message);
      throw Error(path + ": " + text);
    }
  };
  exec("BEGIN IMMEDIATE");
  try {
    body();
  } catch (...) {
    sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
  exec("COMMIT");
}

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
  char* message = nullptr;
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &message) != SQLITE_OK) {
    const std::string text = message ? message : sqlite3_errmsg(db_);
    sqlite3_free(message);
    throw Error(path_ + ": " + text);
  }
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
    // Version 0 is an empty file; later versions add their steps here.
    Execute(kResultsSchema);
    Execute("PRAGMA user_version = " + std::to_string(kSchemaVersion));
  });
}

int64_t ResultsDb::BeginRun(const RunInfo& info) {
  int64_t id = 0;
  InTransaction(db_, path_, [&] {
    Statement insert(
        db_,
        "INSERT INTO runs (started_at, status, commit_id, host, cpu_model, cpu_flags, "
        "cores, threads, target, model, configuration, dataset, split, sentences, "
        "warmup, repeat) VALUES (?, 'running', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        path_);
    insert.Bind(1, NowUtc())
        .Bind(2, info.commit_id)
        .Bind(3, info.host)
        .Bind(4, info.cpu_model)
        .Bind(5, info.cpu_flags)
        .Bind(6, info.cores)
        .Bind(7, info.threads)
        .Bind(8, info.target)
        .Bind(9, info.model)
        .Bind(10, info.configuration)
        .Bind(11, info.dataset)
        .Bind(12, info.split)
        .Bind(13, info.sentences)
        .Bind(14, info.warmup)
        .Bind(15, info.repeat);
    insert.Step();
    id = sqlite3_last_insert_rowid(db_);
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

}  // namespace nimble::bench
