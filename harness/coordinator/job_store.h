// The coordinator's durable state in results.db (results/migrations/002.sql):
// the job queue, every attempt of every job, the agents that connected and
// the launches of agents (through Slurm or ssh, 006.sql). Every change is
// one transaction, so a coordinator killed at any instant restarts from the
// file with nothing lost; a result is recorded exactly once (keyed by job and
// attempt), whatever an agent resends after reconnecting.
//
// Job states: queued -> leased (an agent holds it until its deadline,
// renewed by heartbeats) -> done | failed; a lease that expires, an agent
// that disconnects or a failed attempt sends the job back to queued until
// `max_failures` attempts have failed or been lost. A job handed back by a
// stopping agent (released) is re-queued without counting against it.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "harness/bench/results_db.h"
#include "harness/protocol/messages.h"

namespace nimble::coordinator {

struct Lease {
  int64_t job_id = 0;
  int64_t attempt = 0;
  protocol::JobSpec spec;
};

struct JobView {
  int64_t id = 0;
  std::string kind;
  std::string target;
  std::string state;
  int64_t attempts = 0;
  int64_t failures = 0;
  std::string agent;
  int64_t run_id = 0;
  std::string result;  // JSON text
  std::string error;
};

struct AgentView {
  protocol::AgentInfo info;
  std::string state;  // connected or disconnected
  std::string last_seen;
  int64_t jobs_done = 0;
};

// Agents placed by `nimble-bench agents start`: where they went and how to
// end them. A launch is never an outcome: what an agent did comes only from
// the protocol.
struct LaunchRecord {
  int64_t id = 0;            // assigned by the store
  std::string via;           // slurm or ssh
  std::string slurm_job_id;  // slurm: its batch job
  std::string host;          // ssh: the destination it was started through ([user@]host)
  std::string agent;         // ssh: the name it was started with
  std::string unit;          // ssh under systemd: its unit, else ""
  int64_t pid = 0;           // ssh under nohup: its pid on the host, else 0
  std::string remote_dir;    // ssh: where its bundle was unpacked
  std::string options;       // JSON text: what `agents start` was given
  std::string launched_at;   // set by the store
  std::string state;         // active or stopped (set by the store)
};

// A launch as the `launched` and `stopping` client messages carry it
// (docs/harness.md), `options` as a JSON object. FromJson reads members
// exactly (protocol::Field) and throws protocol::ProtocolError for a record
// that names no engine or lacks what that engine's launches need.
protocol::Json ToJson(const LaunchRecord& launch);
LaunchRecord LaunchFromJson(const protocol::Json& json);

// What an accepted result or failure did.
enum class Outcome {
  kRecorded,   // the job's outcome was written now
  kDuplicate,  // this attempt's outcome, or the job's, was already written
  kUnknown,    // no such job or attempt of that agent
};

class JobStore {
 public:
  // Uses `db`'s file and connection (one writer: the coordinator).
  explicit JobStore(bench::ResultsDb& db);

  // After a restart: every agent is disconnected, and every lease gets
  // `grace_s` from `now` for its agent to reconnect and report.
  void Recover(double now, double grace_s);

  std::vector<int64_t> Submit(const std::vector<protocol::JobSpec>& jobs);

  // Leases the oldest queued job of one of `targets` that `accepts` takes
  // to `agent`, until now + lease_s; nullopt when none.
  std::optional<Lease> LeaseNext(const std::string& agent, const std::vector<std::string>& targets,
                                 const std::function<bool(const protocol::JobSpec&)>& accepts,
                                 double now, double lease_s);

  // Extends a lease that `agent` still holds; false when it does not (the
  // job was re-queued or finished meanwhile: the agent should stop it).
  bool Renew(int64_t job_id, int64_t attempt, const std::string& agent, double now, double lease_s);

  // A successful attempt. `record` runs inside the transaction and returns
  // the run it recorded (0: none); `result` is stored with the job. A
  // success of an older attempt of a still-open job is taken (the newer
  // attempt is superseded); after the job is done or failed, nothing is
  // written.
  Outcome Complete(int64_t job_id, int64_t attempt, const std::string& agent,
                   const std::string& result, const std::function<int64_t()>& record);

  // A failed attempt: counted; the job is re-queued, or failed with every
  // attempt's reason once `max_failures` is reached.
  Outcome Fail(int64_t job_id, int64_t attempt, const std::string& agent,
               const std::string& reason);

  // An attempt handed back unfinished (the agent is stopping): re-queued,
  // not counted.
  Outcome Release(int64_t job_id, int64_t attempt, const std::string& agent,
                  const std::string& reason);

  // Leases past their deadline: lost (counted), re-queued or failed.
  // Returns how many.
  int ExpireLeases(double now);

  // The agent is gone: its leases are lost like expired ones.
  int AbandonAgent(const std::string& agent, const std::string& reason);

  void AgentConnected(const protocol::AgentInfo& agent);
  void AgentDisconnected(const std::string& agent);

  // A Slurm launch (recorded again, it is active again); returns its id.
  int64_t RecordLaunch(const std::string& slurm_job_id, const std::string& options_json);
  // Any launch; returns its id.
  int64_t RecordLaunch(const LaunchRecord& launch);
  // The active launches of engine `via`, marked stopped in one transaction
  // (so two `agents stop` never both act on one).
  std::vector<LaunchRecord> StopLaunchesVia(const std::string& via);
  // The Slurm job ids of StopLaunchesVia("slurm").
  std::vector<std::string> StopLaunches();

  std::optional<JobView> Job(int64_t job_id) const;
  std::map<std::string, int64_t> CountsByState() const;
  std::vector<JobView> FailedJobs(int64_t limit) const;
  std::vector<AgentView> Agents() const;
  // The reasons of a job's attempts, in order ("attempt 1 on A: reason").
  std::vector<std::string> AttemptReasons(int64_t job_id) const;

 private:
  // Ends attempt (job, attempt) with `outcome` and counts it when it is the
  // job's current lease: re-queued, or failed after max_failures.
  Outcome EndAttempt(int64_t job_id, int64_t attempt, const std::string& agent,
                     const std::string& outcome, const std::string& reason, bool counts);

  bench::ResultsDb& db_;
};

}  // namespace nimble::coordinator
