// `nimble-bench tune`: the template tuner (nimble/compiler/backend/
// template_tuning.h) on a model's matrix-product sites, here or fanned out
// to a coordinator's agents.
//
// Here, each measuring task runs in a child process (`nimble-bench
// tune-task`, the task as JSON on its stdin) under a time limit, so a
// candidate that crashes or hangs fails alone and is recorded as failed.
// Through a coordinator, each site is one `tune` job: an agent of the
// target tunes it on its own host the same way (its own tuning database,
// so an interrupted job resumes there) and sends every record of the site
// and its choice back; they go into this side's database under the agent's
// host, where compiles on hosts of that class find them.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "harness/bench/model_runner.h"
#include "harness/protocol/client.h"
#include "nimble/compiler/backend/template_tuning.h"

namespace nimble::tuning {

using Json = nlohmann::json;

// The distinct matrix-product sites of the model `options` names, as
// `nimble-bench run` compiles it (target, kernels, fusion).
std::vector<backend::TunableSite> ModelSites(const bench::BenchOptions& options);

// JSON forms, as tasks, jobs and their results carry them; the FromJson
// functions throw nimble::Error naming the member that is missing or of the
// wrong type.
Json ToJson(const backend::TuningTask& task);
backend::TuningTask TaskFromJson(const Json& json);
Json ToJson(const backend::TuningRecord& record);
backend::TuningRecord RecordFromJson(const Json& json);
Json ToJson(const backend::TunableSite& site);
backend::TunableSite SiteFromJson(const Json& json);
Json ToJson(const backend::TuneOptions& options);
backend::TuneOptions TuneOptionsFromJson(const Json& json);

// Runs each task as `nimble_bench tune-task` with `threads` runtime threads,
// killed after timeout_s.
backend::TaskRunner ChildTaskRunner(const std::string& nimble_bench, int threads, double timeout_s);

// One site's outcome, from here or from an agent.
struct SiteOutcome {
  backend::TunableSite site;
  backend::TuningHost host;  // where it was tuned
  backend::TunedSite tuned;
  int measured = 0;   // measurements made by this tuning (others were recorded before)
  int failed = 0;     // configurations recorded as failed
  std::string error;  // the site could not be tuned (others go on)
};

// Tunes `site` here with `run`, recording in `database`, and returns its
// outcome with every record of the site on this host (what an agent sends
// back).
struct HereResult {
  SiteOutcome outcome;
  std::vector<backend::TuningRecord> records;
};
HereResult TuneHere(const backend::TunableSite& site, const backend::TuneOptions& options,
                    int threads, backend::TuningDatabase& database, const backend::TaskRunner& run,
                    const backend::TuneProgress& progress);

// A tune job's result as the agent sends it, and back.
Json ToJson(const HereResult& result);
HereResult HereResultFromJson(const Json& json);

// Submits one `tune` job per site to the coordinator `client` talks to and
// follows them; each result's records and choice go into `database`.
// `progress` counts finished jobs.
std::vector<SiteOutcome> TuneViaCoordinator(protocol::Client& client,
                                            const std::vector<backend::TunableSite>& sites,
                                            const backend::TuneOptions& options,
                                            double task_timeout_s,
                                            backend::TuningDatabase& database,
                                            const backend::TuneProgress& progress);

}  // namespace nimble::tuning
