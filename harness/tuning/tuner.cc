#include "harness/tuning/tuner.h"

#include <chrono>
#include <thread>

#include "harness/agent/child_process.h"
#include "harness/protocol/messages.h"
#include "nimble/compiler/backend/pipeline.h"
#include "nimble/vm/error.h"

namespace nimble::tuning {
namespace {

// A member of `json` as T; throws nimble::Error naming it when it is absent
// or of another type.
template <typename T>
T Member(const Json& json, const char* name) {
  if (!json.is_object() || !json.contains(name)) {
    throw Error(std::string("tuning JSON: member '") + name + "' is missing");
  }
  try {
    return json.at(name).get<T>();
  } catch (const Json::exception&) {
    throw Error(std::string("tuning JSON: member '") + name + "' has the wrong type");
  }
}

}  // namespace

std::vector<backend::TunableSite> ModelSites(const bench::BenchOptions& options) {
  const backend::CompileOptions compile = bench::CompileOptionsOf(options);
  return backend::TunableSites(backend::RunPasses(bench::BuildModel(options).Module(), compile));
}

Json ToJson(const backend::TuningTask& task) {
  return {{"target", task.target},
          {"program", task.program},
          {"configurations", task.configurations},
          {"extents", task.extents}};
}

backend::TuningTask TaskFromJson(const Json& json) {
  return {Member<std::string>(json, "target"), Member<std::string>(json, "program"),
          Member<std::vector<std::string>>(json, "configurations"),
          Member<std::vector<int64_t>>(json, "extents")};
}

Json ToJson(const backend::TuningRecord& record) {
  Json json = {{"host", record.host.host},
               {"threads", record.host.threads},
               {"target", record.target},
               {"op", record.site.op},
               {"attrs", record.site.attrs},
               {"shapes", record.site.shapes},
               {"configuration", record.configuration},
               {"extent", record.extent},
               {"error", record.error}};
  json["seconds"] = record.seconds ? Json(*record.seconds) : Json(nullptr);
  return json;
}

backend::TuningRecord RecordFromJson(const Json& json) {
  backend::TuningRecord record{{Member<std::string>(json, "host"), Member<int>(json, "threads")},
                               Member<std::string>(json, "target"),
                               {Member<std::string>(json, "op"), Member<std::string>(json, "attrs"),
                                Member<std::string>(json, "shapes")},
                               Member<std::string>(json, "configuration"),
                               Member<int64_t>(json, "extent"),
                               std::nullopt,
                               Member<std::string>(json, "error")};
  if (!json.contains("seconds")) throw Error("tuning JSON: member 'seconds' is missing");
  if (!json["seconds"].is_null()) record.seconds = Member<double>(json, "seconds");
  if (record.seconds.has_value() == !record.error.empty()) {
    throw Error("tuning JSON: a record has either a time or an error");
  }
  return record;
}

Json ToJson(const backend::TunableSite& site) {
  return {{"op", site.key.op},
          {"attrs", site.key.attrs},
          {"shapes", site.key.shapes},
          {"dynamic", site.dynamic},
          {"program", site.program}};
}

backend::TunableSite SiteFromJson(const Json& json) {
  return {{Member<std::string>(json, "op"), Member<std::string>(json, "attrs"),
           Member<std::string>(json, "shapes")},
          Member<bool>(json, "dynamic"),
          Member<std::string>(json, "program")};
}

Json ToJson(const backend::TuneOptions& options) {
  return {{"target", options.target},   {"trials", options.trials},
          {"top_k", options.top_k},     {"representative", options.representative_extent},
          {"extents", options.extents}, {"batch", options.batch}};
}

backend::TuneOptions TuneOptionsFromJson(const Json& json) {
  backend::TuneOptions options;
  options.target = Member<std::string>(json, "target");
  options.trials = Member<int>(json, "trials");
  options.top_k = Member<int>(json, "top_k");
  options.representative_extent = Member<int64_t>(json, "representative");
  options.extents = Member<std::vector<int64_t>>(json, "extents");
  options.batch = Member<int>(json, "batch");
  backend::CheckTuneOptions(options);
  return options;
}

backend::TaskRunner ChildTaskRunner(const std::string& nimble_bench, int threads,
                                    double timeout_s) {
  return [nimble_bench, threads, timeout_s](const backend::TuningTask& task) {
    agent::ChildOptions options;
    options.timeout_s = timeout_s;
    options.stdin_data = ToJson(task).dump();
    options.environment = {{"NIMBLE_NUM_THREADS", std::to_string(threads)}};
    const agent::ChildResult child = agent::RunChild({nimble_bench, "tune-task"}, options);
    backend::TaskOutcome outcome;
    if (!child.ok()) {
      outcome.error = child.Describe();
      return outcome;
    }
    try {
      const Json printed = Json::parse(child.out);
      for (const Json& record : printed.at("records")) {
        outcome.records.push_back(RecordFromJson(record));
      }
    } catch (const Json::exception& error) {
      outcome.error =
          std::string("tune-task printed something else than its records: ") + error.what();
    } catch (const Error& error) {
      outcome.error = error.what();
    }
    return outcome;
  };
}

HereResult TuneHere(const backend::TunableSite& site, const backend::TuneOptions& options,
                    int threads, backend::TuningDatabase& database, const backend::TaskRunner& run,
                    const backend::TuneProgress& progress) {
  HereResult result;
  result.outcome.site = site;
  result.outcome.host = {backend::HostKey(), threads};
  try {
    const backend::TuneResult tuned =
        backend::TuneSite(site, options, result.outcome.host, database, run, progress);
    result.outcome.tuned = tuned.tuned;
    result.outcome.measured = tuned.measured;
    result.outcome.failed = tuned.failed;
  } catch (const Error& error) {
    result.outcome.error = error.what();
  }
  result.records = database.Records(result.outcome.host, site.key);
  return result;
}

Json ToJson(const HereResult& result) {
  const SiteOutcome& outcome = result.outcome;
  Json records = Json::array();
  for (const backend::TuningRecord& record : result.records) records.push_back(ToJson(record));
  return {{"site", ToJson(outcome.site)},
          {"host", outcome.host.host},
          {"threads", outcome.host.threads},
          {"tuned",
           {{"kernel", outcome.tuned.kernel},
            {"generated", outcome.tuned.generated},
            {"mean_relative", outcome.tuned.mean_relative},
            {"configurations", outcome.tuned.configurations}}},
          {"measured", outcome.measured},
          {"failed", outcome.failed},
          {"error", outcome.error},
          {"records", records}};
}

HereResult HereResultFromJson(const Json& json) {
  HereResult result;
  SiteOutcome& outcome = result.outcome;
  outcome.site = SiteFromJson(Member<Json>(json, "site"));
  outcome.host = {Member<std::string>(json, "host"), Member<int>(json, "threads")};
  const Json tuned = Member<Json>(json, "tuned");
  outcome.tuned = {Member<std::string>(tuned, "kernel"), Member<std::string>(tuned, "generated"),
                   Member<double>(tuned, "mean_relative"), Member<int>(tuned, "configurations")};
  outcome.measured = Member<int>(json, "measured");
  outcome.failed = Member<int>(json, "failed");
  outcome.error = Member<std::string>(json, "error");
  for (const Json& record : Member<Json>(json, "records")) {
    result.records.push_back(RecordFromJson(record));
    const backend::TuningRecord& added = result.records.back();
    if (added.host.host != outcome.host.host || added.host.threads != outcome.host.threads ||
        added.site.op != outcome.site.key.op || added.site.shapes != outcome.site.key.shapes ||
        added.site.attrs != outcome.site.key.attrs) {
      throw Error("a tune result holds a record of another host or site");
    }
  }
  return result;
}

std::vector<SiteOutcome> TuneViaCoordinator(protocol::Client& client,
                                            const std::vector<backend::TunableSite>& sites,
                                            const backend::TuneOptions& options,
                                            double task_timeout_s,
                                            backend::TuningDatabase& database,
                                            const backend::TuneProgress& progress) {
  backend::CheckTuneOptions(options);
  Json jobs = Json::array();
  for (const backend::TunableSite& site : sites) {
    protocol::JobSpec spec;
    spec.kind = "tune";
    spec.target = options.target;
    spec.options = {
        {"site", ToJson(site)}, {"tune", ToJson(options)}, {"task_timeout", task_timeout_s}};
    jobs.push_back(protocol::ToJson(spec));
  }
  const Json submitted = client.Request({{"type", "submit"}, {"jobs", jobs}});
  const std::vector<int64_t> ids = submitted.at("job_ids").get<std::vector<int64_t>>();
  std::vector<SiteOutcome> outcomes(sites.size());
  std::vector<bool> finished(sites.size(), false);
  size_t done = 0;
  if (progress) progress("jobs", done, sites.size());
  while (done < sites.size()) {
    Json pending = Json::array();
    for (size_t i = 0; i < ids.size(); ++i) {
      if (!finished[i]) pending.push_back(ids[i]);
    }
    const Json replies = client.Request({{"type", "jobs"}, {"job_ids", pending}}).at("jobs");
    for (const Json& job : replies) {
      const int64_t id = job.at("id").get<int64_t>();
      const size_t i = std::find(ids.begin(), ids.end(), id) - ids.begin();
      const std::string state = job.at("state").get<std::string>();
      if (i == ids.size() || (state != "done" && state != "failed" && state != "unknown")) {
        continue;
      }
      finished[i] = true;
      ++done;
      outcomes[i].site = sites[i];
      if (state != "done") {
        outcomes[i].error =
            "job " + std::to_string(id) + " " + state + ": " + job.value("error", std::string());
        continue;
      }
      try {
        const HereResult result = HereResultFromJson(job.at("result").at("tune"));
        database.AddRecords(result.records);
        if (result.outcome.error.empty()) {
          database.RecordTuned(result.outcome.host, options.target, sites[i].key,
                               result.outcome.tuned);
        }
        outcomes[i] = result.outcome;
      } catch (const std::exception& error) {
        outcomes[i].error = "job " + std::to_string(id) + ": " + error.what();
      }
    }
    if (progress) progress("jobs", done, sites.size());
    if (done < sites.size()) std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  return outcomes;
}

}  // namespace nimble::tuning
