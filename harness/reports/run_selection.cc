#include "harness/reports/run_selection.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "nimble/compiler/support/sqlite_util.h"
#include "nimble/vm/error.h"

namespace nimble::reports {

const bench::Measurement* SelectedRun::Find(const std::string& name) const {
  for (const bench::Measurement& figure : record.measurements) {
    if (figure.name == name) return &figure;
  }
  return nullptr;
}

std::string ComparisonKey(const bench::RunInfo& info) {
  // The configuration is compared as parsed JSON, so key order and spacing
  // written by different builds do not split one configuration in two.
  nlohmann::json configuration = nlohmann::json::parse(info.configuration, nullptr, false);
  const nlohmann::json key = {
      info.framework,
      info.model,
      configuration.is_discarded() ? info.configuration : configuration.dump(),
      info.target,
      info.threads,
      info.dataset,
      info.split,
      info.sentences,
      info.arch,
      info.emulated};
  return key.dump();
}

std::vector<SelectedRun> SelectRuns(const bench::ResultsDb& db, const RunFilter& filter) {
  const std::set<int64_t> wanted(filter.run_ids.begin(), filter.run_ids.end());
  const std::set<std::string> kinds(filter.kinds.begin(), filter.kinds.end());
  sqlite::Statement select(db.handle(),
                           "SELECT id, status, finished_at, commit_id, host, kind FROM runs "
                           "ORDER BY finished_at, id",
                           db.path());
  std::set<int64_t> seen;
  std::vector<std::pair<int64_t, std::string>> finished;
  while (select.Step()) {
    const int64_t id = select.Integer(0);
    if (!kinds.contains(select.Text(5))) continue;
    if (!wanted.empty() && !wanted.contains(id)) continue;
    seen.insert(id);
    if (select.Text(1) != "done") {
      if (!wanted.empty()) {
        throw Error(db.path() + ": run " + std::to_string(id) + " is " + select.Text(1) +
                    ", not a finished run");
      }
      continue;
    }
    if (!filter.commit.empty() && !select.Text(3).starts_with(filter.commit)) continue;
    if (!filter.host.empty() && select.Text(4) != filter.host) continue;
    finished.emplace_back(id, select.Text(2));
  }
  for (int64_t id : wanted) {
    if (!seen.contains(id)) {
      std::string names;
      for (const std::string& kind : kinds) names += (names.empty() ? "" : " or ") + kind;
      throw Error(db.path() + ": no run " + std::to_string(id) + " of kind " + names);
    }
  }
  std::vector<SelectedRun> runs;
  for (const auto& [id, finished_at] : finished) runs.push_back({id, finished_at, db.Run(id)});
  std::sort(runs.begin(), runs.end(), [](const SelectedRun& a, const SelectedRun& b) {
    const bench::RunInfo& x = a.record.info;
    const bench::RunInfo& y = b.record.info;
    return std::tie(x.model, x.configuration, x.framework, x.target, x.host, a.id) <
           std::tie(y.model, y.configuration, y.framework, y.target, y.host, b.id);
  });
  return runs;
}

}  // namespace nimble::reports
