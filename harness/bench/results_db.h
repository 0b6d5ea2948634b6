// results.db (results/migrations/, docs/results.md): the SQLite database
// every benchmark run writes into. WAL journaling and a busy timeout let
// several nimble-bench processes write one file at once; each run is
// created, filled and finished in transactions, so a crash leaves a
// 'running' row and never a half-written figure.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

struct sqlite3;

namespace nimble::bench {

struct RunInfo {
  std::string started_at;  // ISO 8601 UTC; empty: now
  std::string commit_id;
  std::string host;
  std::string cpu_model;
  std::string cpu_flags;
  int64_t cores = 0;
  int64_t threads = 0;
  std::string target;
  std::string model;
  std::string configuration;  // JSON
  std::string dataset;
  std::string split;
  int64_t sentences = 0;
  int64_t warmup = 0;
  int64_t repeat = 0;
  std::string kind = "run";  // run or microbench
  // What really executed the run (HostInfo): never the target's name.
  std::string arch;
  bool emulated = false;
  std::string emulator;
  // The coordinator's job and the agent that ran it; 0 and "" for a local run.
  int64_t job_id = 0;
  std::string agent;
  // nimble, or the peer that produced the figures (pytorch, onnxruntime).
  std::string framework = "nimble";
  // The GPU that ran a target nvidia run's kernels (DeviceAPI::Describe);
  // empty for a CPU run.
  std::string gpu = {};
};

struct Measurement {
  std::string name;
  double value = 0;
  std::string unit;
};

// A finished run: its description and figures.
struct RunRecord {
  RunInfo info;
  std::vector<Measurement> measurements;
};

class ResultsDb {
 public:
  // The schema version this build writes (PRAGMA user_version).
  static constexpr int kSchemaVersion = 6;

  // Opens or creates `path`. A new file gets the schema; an older version is
  // migrated in one transaction; a newer version, or a file that is not a
  // results database, is refused with nimble::Error naming the path and the
  // versions.
  explicit ResultsDb(const std::string& path);
  ~ResultsDb();
  ResultsDb(const ResultsDb&) = delete;
  ResultsDb& operator=(const ResultsDb&) = delete;

  // A new run in state 'running'; returns its id.
  int64_t BeginRun(const RunInfo& info);
  // Records the figures and marks the run 'done', in one transaction.
  void FinishRun(int64_t run_id, const std::vector<Measurement>& measurements);
  // A finished run and its figures at once (a run an agent reported).
  int64_t RecordRun(const RunInfo& info, const std::vector<Measurement>& measurements);
  // Marks the run 'failed' with `error`.
  void FailRun(int64_t run_id, const std::string& error);

  // The figures of a run, in name order (for reports and tests).
  std::vector<Measurement> Measurements(int64_t run_id) const;
  // The run's status column.
  std::string Status(int64_t run_id) const;
  // The run's row and figures; throws nimble::Error for an unknown id.
  RunRecord Run(int64_t run_id) const;

  // The open database and its path, for the coordinator's job queue, which
  // lives in the same file and records runs in its own transactions (every
  // method above nests into a caller's transaction).
  sqlite3* handle() const { return db_; }
  const std::string& path() const { return path_; }

 private:
  void Execute(const std::string& sql) const;
  void Migrate();
  int64_t InsertRun(const RunInfo& info, const std::string& status);

  std::string path_;
  sqlite3* db_ = nullptr;
};

}  // namespace nimble::bench
