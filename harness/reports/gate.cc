#include "harness/reports/gate.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <iomanip>
#include <map>
#include <set>
#include <sstream>

#include "harness/bench/build_info.h"
#include "harness/bench/statistics.h"
#include "harness/reports/statistics.h"
#include "nimble/compiler/support/sqlite_util.h"
#include "nimble/vm/error.h"

namespace nimble::reports {

namespace {

const std::vector<std::string>& TimingMetrics() {
  static const std::vector<std::string> metrics = {
      "us_per_token", "latency_mean",        "latency_p50",        "latency_p90",
      "latency_p99",  "kernel_us_per_token", "other_us_per_token", "other_ns_per_instruction",
      "compile_ms"};
  return metrics;
}

bool Contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

std::string Label(const bench::RunInfo& info) {
  std::string label = info.framework + " " + info.model + " " + info.configuration + " " +
                      info.target + ", " + std::to_string(info.threads) + " thread" +
                      (info.threads == 1 ? "" : "s") + ", " + info.arch;
  if (info.emulated) label += " (emulated)";
  return label;
}

// The runs of each comparison key, oldest first: the gate compares kinds of
// machine, not host names.
std::map<std::string, std::vector<const SelectedRun*>> RunsByKey(
    const std::vector<SelectedRun>& runs) {
  std::map<std::string, std::vector<const SelectedRun*>> by_key;
  for (const SelectedRun& run : runs) by_key[ComparisonKey(run.record.info)].push_back(&run);
  for (auto& [key, group] : by_key) {
    std::sort(group.begin(), group.end(), [](const SelectedRun* a, const SelectedRun* b) {
      return std::tie(a->finished_at, a->id) < std::tie(b->finished_at, b->id);
    });
  }
  return by_key;
}

// The runs among `runs` that recorded `metric` (and, when given, ran on `cpu_model`).
std::vector<const SelectedRun*> Recording(const std::vector<const SelectedRun*>& runs,
                                          const std::string& metric,
                                          const std::string* cpu_model = nullptr) {
  std::vector<const SelectedRun*> recording;
  for (const SelectedRun* run : runs) {
    if (run->Find(metric) != nullptr &&
        (cpu_model == nullptr || run->record.info.cpu_model == *cpu_model))
      recording.push_back(run);
  }
  return recording;
}

std::vector<double> ValuesOf(const std::vector<const SelectedRun*>& runs,
                             const std::string& metric) {
  std::vector<double> values;
  for (const SelectedRun* run : runs) values.push_back(run->Find(metric)->value);
  return values;
}

std::string Short(double value) {
  std::ostringstream out;
  out << std::setprecision(2) << value;
  return out.str();
}

const char* VerdictText(GateVerdict verdict) {
  switch (verdict) {
    case GateVerdict::kSame:
      return "ok";
    case GateVerdict::kImproved:
      return "improved";
    case GateVerdict::kRegressed:
      return "REGRESSED";
    case GateVerdict::kMissingCurrent:
      return "MISSING in current";
    case GateVerdict::kMissingBaseline:
      return "new (not in baseline)";
    case GateVerdict::kNotMeasured:
      return "not measured in current";
    case GateVerdict::kOtherCpu:
      return "not compared (other CPU model)";
    case GateVerdict::kInconclusive:
      return "INCONCLUSIVE";
  }
  return "";
}

std::string FormatValue(const std::optional<double>& value) {
  if (!value) return "-";
  std::ostringstream out;
  if (std::abs(*value - std::round(*value)) < 1e-9 && std::abs(*value) < 1e15) {
    out << static_cast<long long>(std::llround(*value));
  } else {
    out << std::setprecision(6) << *value;
  }
  return out.str();
}

std::string FormatChange(const GateRow& row) {
  if (!row.baseline || !row.current) return "";
  if (*row.baseline == 0) return *row.current == 0 ? "+0.0%" : "from 0";
  std::ostringstream out;
  out << std::showpos << std::fixed << std::setprecision(1)
      << 100 * (*row.current - *row.baseline) / *row.baseline << "%";
  return out.str();
}

GateVerdict Compare(double baseline, double current, double threshold) {
  // A zero baseline gains no slack: any new allocation is a regression.
  const double slack = std::abs(baseline) * threshold;
  if (current > baseline + slack) return GateVerdict::kRegressed;
  if (current < baseline - slack) return GateVerdict::kImproved;
  return GateVerdict::kSame;
}

// A timing over all the runs of each side on the current side's CPU model:
// the two-sided Mann–Whitney U test decides whether the sides differ, the
// medians whether the difference passes the threshold.
void CompareTimings(const std::vector<const SelectedRun*>& before,
                    const std::vector<const SelectedRun*>& after, const std::string& metric,
                    const GateOptions& options, GateRow& row) {
  const std::vector<double> x = ValuesOf(before, metric);
  const std::vector<double> y = ValuesOf(after, metric);
  const int64_t n1 = static_cast<int64_t>(x.size());
  const int64_t n2 = static_cast<int64_t>(y.size());
  row.baseline = bench::Median(x);
  row.current = bench::Median(y);
  row.baseline_runs = n1;
  row.current_runs = n2;
  row.baseline_run = before.back()->id;
  row.current_run = after.back()->id;
  const std::string alpha = Short(options.alpha);
  if (SmallestPValue(n1, n2) > options.alpha) {
    const int64_t needed = RunsPerSideToReach(n1, n2, options.alpha);
    row.verdict = GateVerdict::kInconclusive;
    row.note = "too few runs (" + std::to_string(n1) + " and " + std::to_string(n2) +
               "): none could reach p < " + alpha + "; needs " + std::to_string(needed) +
               " runs a side, " + std::to_string(std::max<int64_t>(0, needed - n1)) +
               " more in the baseline and " + std::to_string(std::max<int64_t>(0, needed - n2)) +
               " more in the current";
    return;
  }
  const MannWhitney test = MannWhitneyU(x, y);
  row.p_value = test.p_value;
  const GateVerdict direction = Compare(*row.baseline, *row.current, options.max_regression);
  row.note = "runs " + std::to_string(n1) + "/" + std::to_string(n2) +
             ", p = " + Short(test.p_value) + (test.exact ? "" : " (normal approximation)");
  if (test.p_value < options.alpha) {
    row.verdict = direction;
  } else if (direction == GateVerdict::kRegressed) {
    // Worse past the threshold, but not significantly: the noise hides it.
    row.verdict = GateVerdict::kInconclusive;
    const int64_t estimate = RunsPerSideForEffect(std::min(n1, n2), test.p_value, options.alpha);
    row.note += " >= " + alpha + ": too noisy to tell" +
                (estimate > 0 ? "; about " + std::to_string(estimate) +
                                    " runs a side might, if the difference is real"
                              : "");
  } else {
    row.verdict = GateVerdict::kSame;
  }
}

}  // namespace

const std::vector<std::string>& DeterministicMetrics() {
  static const std::vector<std::string> metrics = {"allocations_written_planned",
                                                   "allocations_written_unplanned",
                                                   "static_bytes_planned",
                                                   "static_bytes_unplanned",
                                                   "alloc_storage_per_sentence_planned",
                                                   "alloc_storage_per_sentence_unplanned",
                                                   "device_allocs_per_sentence",
                                                   "vm_instructions_per_sentence",
                                                   "peak_bytes_planned",
                                                   "peak_bytes_unplanned",
                                                   "cpu_instructions"};
  return metrics;
}

bool IsTimingMetric(const std::string& metric) {
  return Contains(TimingMetrics(), metric);
}

const std::vector<std::string>& GateableMetrics() {
  static const std::vector<std::string> metrics = [] {
    std::vector<std::string> all = DeterministicMetrics();
    all.insert(all.end(), TimingMetrics().begin(), TimingMetrics().end());
    return all;
  }();
  return metrics;
}

bool GateResult::failed() const {
  return std::any_of(rows.begin(), rows.end(), [](const GateRow& row) {
    return row.verdict == GateVerdict::kRegressed || row.verdict == GateVerdict::kMissingCurrent;
  });
}

bool GateResult::inconclusive() const {
  return !failed() && std::any_of(rows.begin(), rows.end(), [](const GateRow& row) {
    return row.verdict == GateVerdict::kInconclusive;
  });
}

GateResult Gate(const std::vector<SelectedRun>& baseline, const std::vector<SelectedRun>& current,
                const GateOptions& options) {
  if (!(options.max_regression >= 0)) throw Error("--max-regression must be at least 0%");
  if (!(options.alpha > 0 && options.alpha < 1)) throw Error("--alpha must be between 0 and 1");
  const std::vector<std::string>& metrics =
      options.metrics.empty() ? DeterministicMetrics() : options.metrics;
  for (const std::string& metric : metrics) {
    if (!Contains(GateableMetrics(), metric)) {
      std::string known;
      for (const std::string& name : GateableMetrics()) known += " " + name;
      throw Error("cannot gate on '" + metric +
                  "' (not a lower-is-better figure); gateable:" + known);
    }
  }
  const auto baseline_runs = RunsByKey(baseline);
  const auto current_runs = RunsByKey(current);
  using Sides = std::pair<std::vector<const SelectedRun*>, std::vector<const SelectedRun*>>;
  std::map<std::string, Sides> pairs;
  for (const auto& [key, runs] : baseline_runs) pairs[key].first = runs;
  for (const auto& [key, runs] : current_runs) pairs[key].second = runs;

  GateResult result;
  for (const auto& [key, sides] : pairs) {
    const auto& [old_runs, new_runs] = sides;
    // The deterministic figures are the latest run's: every run has the same.
    const SelectedRun* old_run = old_runs.empty() ? nullptr : old_runs.back();
    const SelectedRun* new_run = new_runs.empty() ? nullptr : new_runs.back();
    const bench::RunInfo& info = (old_run ? old_run : new_run)->record.info;
    if (old_run == nullptr || new_run == nullptr) {
      // A configuration measured on one side only: one line, not a row per
      // figure. Gating a subset of the baseline's configurations is allowed.
      GateRow row;
      row.configuration = Label(info);
      row.baseline_run = old_run ? old_run->id : 0;
      row.current_run = new_run ? new_run->id : 0;
      row.verdict = new_run ? GateVerdict::kMissingBaseline : GateVerdict::kNotMeasured;
      result.rows.push_back(std::move(row));
      continue;
    }
    for (const std::string& metric : metrics) {
      const bool timing = IsTimingMetric(metric);
      // A timing's sides: the runs that recorded it; its latest run's otherwise.
      const std::vector<const SelectedRun*> before =
          Recording(timing ? old_runs : std::vector{old_run}, metric);
      const std::vector<const SelectedRun*> after =
          Recording(timing ? new_runs : std::vector{new_run}, metric);
      if (before.empty() && after.empty()) continue;
      GateRow row;
      row.configuration = Label(info);
      row.metric = metric;
      row.baseline_run = before.empty() ? old_run->id : before.back()->id;
      row.current_run = after.empty() ? new_run->id : after.back()->id;
      if (!before.empty()) row.baseline = before.back()->Find(metric)->value;
      if (!after.empty()) row.current = after.back()->Find(metric)->value;
      if (after.empty()) {
        row.verdict = GateVerdict::kMissingCurrent;
      } else if (before.empty()) {
        row.verdict = GateVerdict::kMissingBaseline;
      } else if (!timing) {
        row.verdict = Compare(*row.baseline, *row.current, options.max_regression);
      } else {
        // Timings compare only on the CPU model the current runs last used.
        const std::string& cpu_model = after.back()->record.info.cpu_model;
        const std::vector<const SelectedRun*> same_cpu_before =
            Recording(before, metric, &cpu_model);
        if (same_cpu_before.empty()) {
          row.verdict = GateVerdict::kOtherCpu;
        } else {
          CompareTimings(same_cpu_before, Recording(after, metric, &cpu_model), metric, options,
                         row);
        }
      }
      result.rows.push_back(std::move(row));
    }
  }
  return result;
}

std::string FormatGate(const GateResult& result, const GateOptions& options) {
  std::vector<std::array<std::string, 6>> cells = {
      {"metric", "baseline", "current", "change", "verdict", "test"}};
  std::ostringstream out;
  std::string configuration;
  std::array<size_t, 6> widths{};
  for (const GateRow& row : result.rows) {
    cells.push_back({row.metric.empty() ? "(configuration)" : row.metric, FormatValue(row.baseline),
                     FormatValue(row.current), FormatChange(row), VerdictText(row.verdict),
                     row.note});
  }
  for (const auto& line : cells) {
    for (size_t i = 0; i < line.size(); ++i) widths[i] = std::max(widths[i], line[i].size());
  }
  auto print = [&](const std::array<std::string, 6>& line) {
    std::ostringstream padded;
    padded << " ";
    for (size_t i = 0; i < line.size(); ++i) {
      padded << " " << std::left << std::setw(static_cast<int>(widths[i])) << line[i];
    }
    // The last column is often empty: no trailing blanks.
    const std::string text = padded.str();
    out << text.substr(0, text.find_last_not_of(' ') + 1) << "\n";
  };
  print(cells[0]);
  for (size_t i = 0; i < result.rows.size(); ++i) {
    const GateRow& row = result.rows[i];
    if (row.configuration != configuration) {
      configuration = row.configuration;
      out << configuration << " (runs "
          << (row.baseline_run ? std::to_string(row.baseline_run) : "-") << " -> "
          << (row.current_run ? std::to_string(row.current_run) : "-") << ")\n";
    }
    print(cells[i + 1]);
  }
  const auto count = [&](GateVerdict verdict) {
    return std::count_if(result.rows.begin(), result.rows.end(),
                         [&](const GateRow& row) { return row.verdict == verdict; });
  };
  out << (result.failed()         ? "FAIL: "
          : result.inconclusive() ? "INCONCLUSIVE: "
                                  : "PASS: ")
      << count(GateVerdict::kRegressed) << " regressed past " << 100 * options.max_regression
      << "%, " << count(GateVerdict::kMissingCurrent) << " missing, "
      << count(GateVerdict::kInconclusive) << " inconclusive, " << count(GateVerdict::kImproved)
      << " improved, " << count(GateVerdict::kSame) << " unchanged, "
      << count(GateVerdict::kMissingBaseline) << " new, " << count(GateVerdict::kOtherCpu)
      << " not compared, " << count(GateVerdict::kNotMeasured)
      << " baseline configurations not measured\n";
  return out.str();
}

int64_t UpdateBaseline(const std::string& baseline_path, const std::vector<SelectedRun>& current,
                       const std::string& source, const std::string& reason, bool prune) {
  if (reason.empty()) throw Error("a baseline update needs --reason: say why it changes");
  if (current.empty()) throw Error(source + ": no finished runs to take as the baseline");
  bench::ResultsDb baseline(baseline_path);
  const std::vector<SelectedRun> existing = SelectRuns(baseline, {});
  sqlite::InTransaction(baseline.handle(), baseline.path(), [&] {
    sqlite::Statement remove(baseline.handle(), "DELETE FROM runs WHERE id = ?", baseline.path());
    const auto drop = [&](int64_t id) {
      remove.Bind(1, id);
      remove.Step();
      remove.Reset();
    };
    std::set<std::string> current_hosts;
    for (const SelectedRun& run : current) current_hosts.insert(run.record.info.host);
    for (const SelectedRun& old : existing) {
      if (prune && current_hosts.contains(old.record.info.host)) drop(old.id);
    }
    for (const SelectedRun& run : current) {
      for (const SelectedRun& old : existing) {
        if (prune || old.record.info.host != run.record.info.host ||
            ComparisonKey(old.record.info) != ComparisonKey(run.record.info))
          continue;
        drop(old.id);
      }
      // The baseline has no job queue: the copy keeps who measured it, not
      // the job that asked for it.
      bench::RunInfo info = run.record.info;
      info.job_id = 0;
      baseline.RecordRun(info, run.record.measurements);
    }
    sqlite::Statement note(baseline.handle(),
                           "INSERT INTO baseline_updates (updated_at, commit_id, source, runs, "
                           "reason) VALUES (?, ?, ?, ?, ?)",
                           baseline.path());
    note.Bind(1, sqlite::NowUtc())
        .Bind(2, std::string(kBuildCommit))
        .Bind(3, source)
        .Bind(4, static_cast<int64_t>(current.size()))
        .Bind(5, reason);
    note.Step();
  });
  return static_cast<int64_t>(current.size());
}

}  // namespace nimble::reports
