// Which runs of a results.db a report or a gate reads (docs/reports.md):
// finished runs of the kinds asked for (a gate: `run`), narrowed by the
// user's filters. Every such run is kept: a configuration measured in ten
// rounds is ten values that the report and the timing gate aggregate, never
// one of them standing for the rest.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "harness/bench/results_db.h"

namespace nimble::reports {

struct RunFilter {
  std::vector<std::string> kinds = {"run"};  // runs.kind: run, microbench
  std::vector<int64_t> run_ids;              // only these runs (empty: all)
  std::string commit;                        // runs of commits starting with this
  std::string host;                          // runs on this host
};

// A recorded run with its id and when it finished.
struct SelectedRun {
  int64_t id = 0;
  std::string finished_at;
  bench::RunRecord record;

  // The figure's value, or nullptr when the run did not record it.
  const bench::Measurement* Find(const std::string& name) const;
};

// What makes two runs measurements of the same thing on the same kind of
// machine: framework, model, configuration, target, threads, data, protocol
// size, architecture and emulation. The host name is not part of it.
std::string ComparisonKey(const bench::RunInfo& info);

// The finished runs that pass `filter`, in (model, configuration,
// framework, target, host, id) order.
// A run id in `filter` that is absent or unfinished is an error naming it.
std::vector<SelectedRun> SelectRuns(const bench::ResultsDb& db, const RunFilter& filter);

}  // namespace nimble::reports
