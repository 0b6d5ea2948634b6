#include "harness/reports/gate.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <iomanip>
#include <map>
#include <set>
#include <sstream>

#include "harness/bench/build_info.h"
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

// The latest run per comparison key: the gate compares kinds of machine,
// not host names.
std::map<std::string, const SelectedRun*> LatestByKey(const std::vector<SelectedRun>& runs) {
  std::map<std::string, const SelectedRun*> latest;
  for (const SelectedRun& run : runs) {
    const SelectedRun*& slot = latest[ComparisonKey(run.record.info)];
    if (slot == nullptr ||
        std::tie(slot->finished_at, slot->id) < std::tie(run.finished_at, run.id))
      slot = &run;
  }
  return latest;
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

GateResult Gate(const std::vector<SelectedRun>& baseline, const std::vector<SelectedRun>& current,
                const GateOptions& options) {
  if (!(options.max_regression >= 0)) throw Error("--max-regression must be at least 0%");
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
  const auto baseline_runs = LatestByKey(baseline);
  const auto current_runs = LatestByKey(current);
  std::map<std::string, std::pair<const SelectedRun*, const SelectedRun*>> pairs;
  for (const auto& [key, run] : baseline_runs) pairs[key].first = run;
  for (const auto& [key, run] : current_runs) pairs[key].second = run;

  GateResult result;
  for (const auto& [key, pair] : pairs) {
    const auto [old_run, new_run] = pair;
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
      const bench::Measurement* before = old_run->Find(metric);
      const bench::Measurement* after = new_run->Find(metric);
      if (before == nullptr && after == nullptr) continue;
      GateRow row;
      row.configuration = Label(info);
      row.metric = metric;
      if (before) row.baseline = before->value;
      if (after) row.current = after->value;
      row.baseline_run = old_run->id;
      row.current_run = new_run->id;
      if (!after) {
        row.verdict = GateVerdict::kMissingCurrent;
      } else if (!before) {
        row.verdict = GateVerdict::kMissingBaseline;
      } else if (Contains(TimingMetrics(), metric) &&
                 old_run->record.info.cpu_model != new_run->record.info.cpu_model) {
        row.verdict = GateVerdict::kOtherCpu;
      } else {
        row.verdict = Compare(*row.baseline, *row.current, options.max_regression);
      }
      result.rows.push_back(std::move(row));
    }
  }
  return result;
}

std::string FormatGate(const GateResult& result, const GateOptions& options) {
  std::vector<std::array<std::string, 5>> cells = {
      {"metric", "baseline", "current", "change", "verdict"}};
  std::ostringstream out;
  std::string configuration;
  std::array<size_t, 5> widths{};
  for (const GateRow& row : result.rows) {
    cells.push_back({row.metric.empty() ? "(configuration)" : row.metric, FormatValue(row.baseline),
                     FormatValue(row.current), FormatChange(row), VerdictText(row.verdict)});
  }
  for (const auto& line : cells) {
    for (size_t i = 0; i < line.size(); ++i) widths[i] = std::max(widths[i], line[i].size());
  }
  auto print = [&](const std::array<std::string, 5>& line) {
    out << " ";
    for (size_t i = 0; i < line.size(); ++i) {
      out << " " << std::left << std::setw(static_cast<int>(widths[i])) << line[i];
    }
    out << "\n";
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
  out << (result.failed() ? "FAIL: " : "PASS: ") << count(GateVerdict::kRegressed)
      << " regressed past " << 100 * options.max_regression << "%, "
      << count(GateVerdict::kMissingCurrent) << " missing, " << count(GateVerdict::kImproved)
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
