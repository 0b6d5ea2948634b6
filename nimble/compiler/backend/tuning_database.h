// The SQLite file that keeps kernel measurements between compiles
// (docs/codegen.md names its tables):
//   kernel_measurements  what a compile measured to choose a site's kernel
//                        (kernel_tuning.h): one time per (host, threads,
//                        kernel, attrs, measured shapes);
//   tuning_records       what `nimble-bench tune` measured (template_tuning.h):
//                        one row per (host, threads, op, attrs, shape class,
//                        configuration, extent), a time or the reason the
//                        configuration failed there (never measured again);
//   tuned_sites          the configuration tuning chose per (host, threads,
//                        op, attrs, shape class), which later compiles use.
// Several processes may share the file (a compile while tuning runs): every
// write is one statement, and a busy database is waited on.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

struct sqlite3;

namespace nimble::backend {

// Where a kernel runs, as the tables key it.
struct TuningHost {
  std::string host;  // HostKey()
  int threads = 0;   // the runtime's thread pool
};

// A matrix-product site's key: op, attributes and shape class (`?` kept).
struct TuningSiteKey {
  std::string op;
  std::string attrs;
  std::string shapes;
};

struct TuningRecord {
  TuningHost host;
  std::string target;
  TuningSiteKey site;
  std::string configuration;      // "generated tile 4x3" or a runtime kernel name
  int64_t extent = 0;             // the value of every `?`; 0 at a static site
  std::optional<double> seconds;  // per call; none when it failed
  std::string error;              // why it failed
};

struct TunedSite {
  std::string kernel;        // the best configuration: "generated tile 4x3" or a kernel name
  std::string generated;     // the best generated configuration (empty: none ran)
  double mean_relative = 0;  // kernel's time over the best at each extent, averaged
  int configurations = 0;    // how many were measured
};

class TuningDatabase {
 public:
  // Opens (creating it and its folder if need be) the file at `path`; an
  // empty path is a database that keeps nothing. Throws nimble::Error naming
  // the file when it cannot be opened or its tables created.
  explicit TuningDatabase(const std::string& path);
  ~TuningDatabase();
  TuningDatabase(const TuningDatabase&) = delete;
  TuningDatabase& operator=(const TuningDatabase&) = delete;

  std::optional<double> FindMeasurement(const TuningHost& host, const std::string& kernel,
                                        const std::string& attrs, const std::string& shapes);
  void RecordMeasurement(const TuningHost& host, const std::string& kernel,
                         const std::string& attrs, const std::string& shapes, double seconds);

  // A site's records on `host` (time or failure), every configuration and extent.
  std::vector<TuningRecord> Records(const TuningHost& host, const TuningSiteKey& site);
  // Inserts or replaces the records, in one transaction.
  void AddRecords(const std::vector<TuningRecord>& records);

  std::optional<TunedSite> FindTuned(const TuningHost& host, const TuningSiteKey& site);
  void RecordTuned(const TuningHost& host, const std::string& target, const TuningSiteKey& site,
                   const TunedSite& tuned);

 private:
  std::string label_;  // "tuning database PATH", as errors name it
  sqlite3* db_ = nullptr;
};

}  // namespace nimble::backend
