#include "nimble/compiler/backend/tuning_database.h"

#include <sqlite3.h>

#include <filesystem>

#include "nimble/compiler/support/sqlite_util.h"
#include "nimble/vm/error.h"

namespace nimble::backend {

using sqlite::Statement;

namespace {

constexpr const char* kSchema =
    "CREATE TABLE IF NOT EXISTS kernel_measurements ("
    " host TEXT NOT NULL, threads INTEGER NOT NULL, kernel TEXT NOT NULL,"
    " attrs TEXT NOT NULL, shapes TEXT NOT NULL, seconds_per_call REAL NOT NULL,"
    " measured_at TEXT NOT NULL,"
    " PRIMARY KEY (host, threads, kernel, attrs, shapes));"
    "CREATE TABLE IF NOT EXISTS tuning_records ("
    " host TEXT NOT NULL, threads INTEGER NOT NULL, target TEXT NOT NULL, op TEXT NOT NULL,"
    " attrs TEXT NOT NULL, shapes TEXT NOT NULL, configuration TEXT NOT NULL,"
    " extent INTEGER NOT NULL, seconds_per_call REAL, error TEXT NOT NULL,"
    " measured_at TEXT NOT NULL,"
    " PRIMARY KEY (host, threads, op, attrs, shapes, configuration, extent));"
    "CREATE TABLE IF NOT EXISTS tuned_sites ("
    " host TEXT NOT NULL, threads INTEGER NOT NULL, target TEXT NOT NULL, op TEXT NOT NULL,"
    " attrs TEXT NOT NULL, shapes TEXT NOT NULL, kernel TEXT NOT NULL,"
    " generated TEXT NOT NULL, mean_relative REAL NOT NULL, configurations INTEGER NOT NULL,"
    " tuned_at TEXT NOT NULL,"
    " PRIMARY KEY (host, threads, op, attrs, shapes))";

}  // namespace

TuningDatabase::TuningDatabase(const std::string& path) : label_("tuning database " + path) {
  if (path.empty()) return;
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  std::error_code ignored;
  if (!parent.empty()) std::filesystem::create_directories(parent, ignored);
  if (sqlite3_open(path.c_str(), &db_) != SQLITE_OK) {
    const std::string reason = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    db_ = nullptr;
    throw Error(label_ + ": cannot open it (" + reason + ")");
  }
  sqlite3_busy_timeout(db_, 5000);
  try {
    sqlite::Execute(db_, label_, kSchema);
  } catch (const Error&) {
    sqlite3_close(db_);
    db_ = nullptr;
    throw;
  }
}

TuningDatabase::~TuningDatabase() {
  sqlite3_close(db_);
}

std::optional<double> TuningDatabase::FindMeasurement(const TuningHost& host,
                                                      const std::string& kernel,
                                                      const std::string& attrs,
                                                      const std::string& shapes) {
  if (!db_) return std::nullopt;
  Statement find(db_,
                 "SELECT seconds_per_call FROM kernel_measurements WHERE host = ?1 AND"
                 " threads = ?2 AND kernel = ?3 AND attrs = ?4 AND shapes = ?5",
                 label_);
  find.Bind(1, host.host).Bind(2, int64_t{host.threads}).Bind(3, kernel).Bind(4, attrs);
  find.Bind(5, shapes);
  if (!find.Step()) return std::nullopt;
  return find.Real(0);
}

void TuningDatabase::RecordMeasurement(const TuningHost& host, const std::string& kernel,
                                       const std::string& attrs, const std::string& shapes,
                                       double seconds) {
  if (!db_) return;
  Statement record(db_,
                   "INSERT OR REPLACE INTO kernel_measurements VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                   label_);
  record.Bind(1, host.host).Bind(2, int64_t{host.threads}).Bind(3, kernel).Bind(4, attrs);
  record.Bind(5, shapes).Bind(6, seconds).Bind(7, sqlite::NowUtc());
  record.Step();
}

std::vector<TuningRecord> TuningDatabase::Records(const TuningHost& host,
                                                  const TuningSiteKey& site) {
  std::vector<TuningRecord> records;
  if (!db_) return records;
  Statement select(db_,
                   "SELECT target, configuration, extent, seconds_per_call, error"
                   " FROM tuning_records WHERE host = ?1 AND threads = ?2 AND op = ?3"
                   " AND attrs = ?4 AND shapes = ?5 ORDER BY configuration, extent",
                   label_);
  select.Bind(1, host.host).Bind(2, int64_t{host.threads}).Bind(3, site.op);
  select.Bind(4, site.attrs).Bind(5, site.shapes);
  while (select.Step()) {
    TuningRecord record{host, select.Text(0), site, select.Text(1), select.Integer(2), {}, ""};
    if (!select.IsNull(3)) record.seconds = select.Real(3);
    record.error = select.Text(4);
    records.push_back(std::move(record));
  }
  return records;
}

void TuningDatabase::AddRecords(const std::vector<TuningRecord>& records) {
  if (!db_ || records.empty()) return;
  sqlite::InTransaction(db_, label_, [&] {
    Statement insert(db_,
                     "INSERT OR REPLACE INTO tuning_records VALUES"
                     " (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
                     label_);
    const std::string now = sqlite::NowUtc();
    for (const TuningRecord& record : records) {
      insert.Bind(1, record.host.host).Bind(2, int64_t{record.host.threads});
      insert.Bind(3, record.target).Bind(4, record.site.op).Bind(5, record.site.attrs);
      insert.Bind(6, record.site.shapes).Bind(7, record.configuration).Bind(8, record.extent);
      if (record.seconds) {
        insert.Bind(9, *record.seconds);
      } else {
        insert.BindNull(9);
      }
      insert.Bind(10, record.error).Bind(11, now);
      insert.Step();
      insert.Reset();
    }
  });
}

std::optional<TunedSite> TuningDatabase::FindTuned(const TuningHost& host,
                                                   const TuningSiteKey& site) {
  if (!db_) return std::nullopt;
  Statement find(db_,
                 "SELECT kernel, generated, mean_relative, configurations FROM tuned_sites"
                 " WHERE host = ?1 AND threads = ?2 AND op = ?3 AND attrs = ?4 AND shapes = ?5",
                 label_);
  find.Bind(1, host.host).Bind(2, int64_t{host.threads}).Bind(3, site.op);
  find.Bind(4, site.attrs).Bind(5, site.shapes);
  if (!find.Step()) return std::nullopt;
  return TunedSite{find.Text(0), find.Text(1), find.Real(2), static_cast<int>(find.Integer(3))};
}

void TuningDatabase::RecordTuned(const TuningHost& host, const std::string& target,
                                 const TuningSiteKey& site, const TunedSite& tuned) {
  if (!db_) return;
  Statement record(db_,
                   "INSERT OR REPLACE INTO tuned_sites VALUES"
                   " (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
                   label_);
  record.Bind(1, host.host).Bind(2, int64_t{host.threads}).Bind(3, target).Bind(4, site.op);
  record.Bind(5, site.attrs).Bind(6, site.shapes).Bind(7, tuned.kernel);
  record.Bind(8, tuned.generated).Bind(9, tuned.mean_relative);
  record.Bind(10, int64_t{tuned.configurations}).Bind(11, sqlite::NowUtc());
  record.Step();
}

}  // namespace nimble::backend
