// Tuning the matrix-product template for symbolic shapes, the paper's method
// [4.5]: measure every configuration of the template (te/matmul_schedule.h)
// at a representative size (each `?` at 64), keep the top 100, measure those
// and the runtime's library kernels on every power of two up to 256, and
// keep the one best on average: its time over the fastest at each extent,
// averaged over the extents, so that no one size dominates. A static site
// has one size: all candidates are measured there and the fastest is kept.
//
// What `nimble-bench tune` runs (harness/bench/tuner.h): the records of every
// measurement, and the choice per site, go to the tuning database
// (tuning_database.h), where ChooseMatMulKernels (kernel_tuning.h) finds the
// choice in later compiles. Measurements are tasks run by a caller-given
// runner, in child processes there, so that a candidate that crashes or
// hangs fails alone: a task that fails is split into one task per
// configuration, and a configuration that fails alone is recorded as failed,
// with the reason, and never measured again. Tuning resumes: what the
// database already holds for this host is not measured again.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "nimble/compiler/backend/matmul_sites.h"
#include "nimble/compiler/backend/tuning_database.h"
#include "nimble/compiler/ir/module.h"

namespace nimble::backend {

// "generated tile 4x3": a template configuration as records name it (full
// dispatch on a symbolic row count); nullopt for any other text.
std::string GeneratedConfiguration(const te::MatMulKnobs& knobs);
std::optional<te::MatMulKnobs> ParseGeneratedConfiguration(const std::string& configuration);

// Every configuration of the template: each tile within CheckMatMulKnobs'
// limits, in a fixed order that mixes shapes (so that the first N trials
// cover the space rather than one corner of it).
std::vector<te::MatMulKnobs> TemplateSearchSpace();

// A site to tune: its key and a program of its own (Relay text: @main calls
// the op once on parameters of the site's types) that a measuring process
// compiles to get the same primitive.
struct TunableSite {
  TuningSiteKey key;
  bool dynamic = false;
  std::string program;
};

// The distinct matrix-product sites of `module` (after the pipeline), in
// order of first appearance.
std::vector<TunableSite> TunableSites(const ir::IRModule& module);

// One measuring process's work: `configurations` of one site at each of
// `extents` (empty at a static site).
struct TuningTask {
  std::string target;
  std::string program;
  std::vector<std::string> configurations;
  std::vector<int64_t> extents;
};

// Measures `task` in this process: the configurations take turns at each
// extent (InterleavedSecondsPerCall). A configuration that cannot run (knobs
// out of range, a kernel not in this build) is a record with its error.
// Throws nimble::Error for a program that is not one matrix-product site,
// or a target other than this host's.
std::vector<TuningRecord> MeasureTuningTask(const TuningTask& task);

// What a task runner gives back: the records, or why the task failed (the
// measuring process crashed, timed out, printed something else).
struct TaskOutcome {
  std::vector<TuningRecord> records;
  std::string error;  // empty: ok
};
using TaskRunner = std::function<TaskOutcome(const TuningTask&)>;

struct TuneOptions {
  std::string target = "intel";
  int trials = 0;  // template configurations measured first; 0: the whole space
  int top_k = 100;
  int64_t representative_extent = kDynamicExtent;
  std::vector<int64_t> extents = {1, 2, 4, 8, 16, 32, 64, 128, 256};
  int batch = 8;  // configurations per task
};

// Throws nimble::Error naming the first option out of range.
void CheckTuneOptions(const TuneOptions& options);

// Called as work advances: `done` of `total` measurements in `phase`
// ("representative", "extents").
using TuneProgress = std::function<void(const std::string& phase, size_t done, size_t total)>;

struct TuneResult {
  TunedSite tuned;
  int measured = 0;  // measurements made now (the others were in the database)
  int failed = 0;    // configurations recorded as failed (now or before)
};

// Tunes `site` on this host (`host`: HostKey() and the thread count the
// runner's processes use), recording as it goes in `database`, and records
// the choice. Throws nimble::Error when no candidate ran at all.
TuneResult TuneSite(const TunableSite& site, const TuneOptions& options, const TuningHost& host,
                    TuningDatabase& database, const TaskRunner& run, const TuneProgress& progress);

// The candidate best on average over `extents` among those with a time at
// every one of them (failed ones never win), and the best generated one;
// nullopt when none has.
std::optional<TunedSite> BestOnAverage(const std::vector<TuningRecord>& records,
                                       const std::vector<int64_t>& extents);

}  // namespace nimble::backend
