// Small RAII helpers over the SQLite C API, shared by results.db, the
// coordinator's job queue (which live in one file) and the tuning database: a prepared statement
// finalised on every path, transactions that nest, and UTC timestamps.
// Every error names the database's path and SQLite's message.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <string>

namespace nimble::sqlite {

// The current time as ISO 8601 UTC with milliseconds ("2026-11-24T16:42:08.123Z"),
// which SQLite's date functions read.
std::string NowUtc();

// A prepared statement, finalised on every path.
class Statement {
 public:
  Statement(sqlite3* db, const std::string& sql, const std::string& path);
  ~Statement();
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  Statement& Bind(int index, const std::string& value);
  Statement& Bind(int index, int64_t value);
  Statement& Bind(int index, double value);
  Statement& BindNull(int index);
  // Ready to run again with new bindings.
  void Reset();
  // True while a row is available.
  bool Step();
  std::string Text(int column) const;
  double Real(int column) const;
  int64_t Integer(int column) const;
  bool IsNull(int column) const;

 private:
  void Check(int status) const;

  sqlite3* db_;
  std::string path_;
  sqlite3_stmt* statement_ = nullptr;
};

// Runs `sql` (one or more statements without results).
void Execute(sqlite3* db, const std::string& path, const std::string& sql);

// Runs `body` in a transaction: BEGIN IMMEDIATE at the outermost level (the
// write lock taken up front, so concurrent writers wait on the busy timeout
// instead of failing mid-way), a savepoint when already inside one, so a
// piece of work composes into a caller's transaction. Rolled back when
// `body` throws.
template <typename Body>
void InTransaction(sqlite3* db, const std::string& path, Body body) {
  const bool outermost = sqlite3_get_autocommit(db) != 0;
  Execute(db, path, outermost ? "BEGIN IMMEDIATE" : "SAVEPOINT nested");
  try {
    body();
  } catch (...) {
    sqlite3_exec(db, outermost ? "ROLLBACK" : "ROLLBACK TO nested; RELEASE nested", nullptr,
                 nullptr, nullptr);
    throw;
  }
  Execute(db, path, outermost ? "COMMIT" : "RELEASE nested");
}

}  // namespace nimble::sqlite
