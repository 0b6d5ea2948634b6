#include "nimble/compiler/support/sqlite_util.h"

#include <chrono>
#include <cstdio>
#include <ctime>

#include "nimble/vm/error.h"

namespace nimble::sqlite {

std::string NowUtc() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  const auto millis =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char text[40];
  const size_t length = std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%S", &utc);
  std::snprintf(text + length, sizeof(text) - length, ".%03dZ", static_cast<int>(millis));
  return text;
}

Statement::Statement(sqlite3* db, const std::string& sql, const std::string& path)
    : db_(db), path_(path) {
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &statement_, nullptr) != SQLITE_OK) {
    throw Error(path + ": " + sqlite3_errmsg(db));
  }
}

Statement::~Statement() {
  sqlite3_finalize(statement_);
}

Statement& Statement::Bind(int index, const std::string& value) {
  Check(sqlite3_bind_text(statement_, index, value.c_str(), -1, SQLITE_TRANSIENT));
  return *this;
}

Statement& Statement::Bind(int index, int64_t value) {
  Check(sqlite3_bind_int64(statement_, index, value));
  return *this;
}

Statement& Statement::Bind(int index, double value) {
  Check(sqlite3_bind_double(statement_, index, value));
  return *this;
}

Statement& Statement::BindNull(int index) {
  Check(sqlite3_bind_null(statement_, index));
  return *this;
}

void Statement::Reset() {
  sqlite3_reset(statement_);
  sqlite3_clear_bindings(statement_);
}

bool Statement::Step() {
  const int status = sqlite3_step(statement_);
  if (status == SQLITE_ROW) return true;
  if (status != SQLITE_DONE) throw Error(path_ + ": " + sqlite3_errmsg(db_));
  return false;
}

std::string Statement::Text(int column) const {
  const unsigned char* text = sqlite3_column_text(statement_, column);
  return text ? reinterpret_cast<const char*>(text) : "";
}

double Statement::Real(int column) const {
  return sqlite3_column_double(statement_, column);
}

int64_t Statement::Integer(int column) const {
  return sqlite3_column_int64(statement_, column);
}

bool Statement::IsNull(int column) const {
  return sqlite3_column_type(statement_, column) == SQLITE_NULL;
}

void Statement::Check(int status) const {
  if (status != SQLITE_OK) throw Error(path_ + ": " + sqlite3_errmsg(db_));
}

void Execute(sqlite3* db, const std::string& path, const std::string& sql) {
  char* message = nullptr;
  if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &message) != SQLITE_OK) {
    const std::string text = message ? message : sqlite3_errmsg(db);
    sqlite3_free(message);
    throw Error(path + ": " + text);
  }
}

}  // namespace nimble::sqlite
