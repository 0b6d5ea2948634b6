// `nimble-bench gate`: compares the runs of a current results.db with a
// baseline's, like with like (run_selection.h's comparison key), and says
// which figures got worse past a threshold. Every gateable figure is lower-
// is-better. By default only deterministic figures are gated (allocation
// counts and bytes, VM instructions, peak memory), the latest run per key on
// each side. Timings drift on shared machines, so they are compared only
// when asked for by name, only between runs on the same CPU model, and by a
// two-sided Mann–Whitney U test over all the runs of each side
// (statistics.h): regressed, unchanged, or inconclusive when the runs are
// too few or too noisy to tell.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "harness/reports/run_selection.h"

namespace nimble::reports {

struct GateOptions {
  double max_regression = 0.05;      // a figure (a timing's median) more than 5% higher fails
  std::vector<std::string> metrics;  // empty: DeterministicMetrics()
  double alpha = 0.05;               // a timing's test: significant below this p-value
};

// The figures gated by default: they do not depend on timing.
const std::vector<std::string>& DeterministicMetrics();
// Every figure the gate accepts in --metrics (all lower-is-better).
const std::vector<std::string>& GateableMetrics();
// The timings among them: tested over all runs, never the latest alone.
bool IsTimingMetric(const std::string& metric);

enum class GateVerdict {
  kSame,             // within the threshold either way
  kImproved,         // lower by more than the threshold
  kRegressed,        // higher by more than the threshold: the gate fails
  kMissingCurrent,   // the baseline has it, the current runs do not: fails
  kMissingBaseline,  // new in the current runs: reported
  kNotMeasured,      // a configuration of the baseline with no current run: reported
  kOtherCpu,         // a timing measured on another CPU model: not compared
  kInconclusive,     // a timing whose runs are too few or too noisy to decide
};

struct GateRow {
  std::string configuration;  // model, configuration, target, threads, ...
  std::string metric;         // empty: the whole configuration (kNotMeasured, kMissingBaseline)
  std::optional<double> baseline;
  std::optional<double> current;
  int64_t baseline_run = 0;  // the latest run compared
  int64_t current_run = 0;
  GateVerdict verdict = GateVerdict::kSame;
  // A timing: baseline and current are the sides' medians over these runs,
  // and the test's p-value and what the verdict rests on.
  int64_t baseline_runs = 0;
  int64_t current_runs = 0;
  std::optional<double> p_value;
  std::string note;
};

struct GateResult {
  std::vector<GateRow> rows;
  bool failed() const;        // a figure regressed or is missing: exit 1
  bool inconclusive() const;  // not failed, but a timing could not be decided: exit 3
};

// Throws nimble::Error for a metric outside GateableMetrics() or a negative
// threshold.
GateResult Gate(const std::vector<SelectedRun>& baseline, const std::vector<SelectedRun>& current,
                const GateOptions& options);

// The rows as an aligned table with a last line saying pass, fail or
// inconclusive.
std::string FormatGate(const GateResult& result, const GateOptions& options);

// Replaces the runs of `baseline_path` that `current` measures again (same
// comparison key and host) with them (all of them, so a timing keeps every
// round), copying their figures and provenance,
// and records why in baseline_updates, in one transaction. With `prune`, the
// baseline's runs on current's hosts that current does not measure again go
// too (a configuration that no longer exists). Returns the runs copied. An
// empty reason is an error: a baseline never changes silently.
int64_t UpdateBaseline(const std::string& baseline_path, const std::vector<SelectedRun>& current,
                       const std::string& source, const std::string& reason, bool prune = false);

}  // namespace nimble::reports
