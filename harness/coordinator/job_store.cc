#include "harness/coordinator/job_store.h"

#include <algorithm>

#include "nimble/compiler/support/sqlite_util.h"

namespace nimble::coordinator {

using sqlite::InTransaction;
using sqlite::NowUtc;
using sqlite::Statement;

JobStore::JobStore(bench::ResultsDb& db) : db_(db) {
  // In WAL mode, NORMAL syncs at checkpoints instead of every commit: a
  // killed coordinator loses nothing (the WAL is in the OS's hands), only a
  // power cut may lose the last commits. Leases and results commit at the
  // queue's rate, which FULL would bound by the disk's flush latency.
  sqlite::Execute(db.handle(), db.path(), "PRAGMA synchronous = NORMAL");
}

void JobStore::Recover(double now, double grace_s) {
  InTransaction(db_.handle(), db_.path(), [&] {
    sqlite::Execute(db_.handle(), db_.path(),
                    "UPDATE agents SET state = 'disconnected' WHERE state = 'connected'");
    Statement grace(db_.handle(), "UPDATE jobs SET lease_expires = ? WHERE state = 'leased'",
                    db_.path());
    grace.Bind(1, now + grace_s).Step();
  });
}

std::vector<int64_t> JobStore::Submit(const std::vector<protocol::JobSpec>& jobs) {
  std::vector<int64_t> ids;
  InTransaction(db_.handle(), db_.path(), [&] {
    Statement insert(db_.handle(),
                     "INSERT INTO jobs (kind, target, spec, state, max_failures, submitted_at) "
                     "VALUES (?, ?, ?, 'queued', ?, ?)",
                     db_.path());
    const std::string now = NowUtc();
    for (const protocol::JobSpec& spec : jobs) {
      insert.Bind(1, spec.kind)
          .Bind(2, spec.target)
          .Bind(3, protocol::ToJson(spec).dump())
          .Bind(4, spec.max_failures)
          .Bind(5, now);
      insert.Step();
      insert.Reset();
      ids.push_back(sqlite3_last_insert_rowid(db_.handle()));
    }
  });
  return ids;
}

std::optional<Lease> JobStore::LeaseNext(
    const std::string& agent, const std::vector<std::string>& targets,
    const std::function<bool(const protocol::JobSpec&)>& accepts, double now, double lease_s) {
  std::optional<Lease> lease;
  InTransaction(db_.handle(), db_.path(), [&] {
    std::string placeholders;
    for (size_t i = 0; i < targets.size(); ++i) placeholders += i ? ", ?" : "?";
    Statement queued(db_.handle(),
                     "SELECT id, spec FROM jobs WHERE state = 'queued' AND target IN (" +
                         placeholders + ") ORDER BY id",
                     db_.path());
    for (size_t i = 0; i < targets.size(); ++i) queued.Bind(static_cast<int>(i + 1), targets[i]);
    while (queued.Step()) {
      protocol::JobSpec spec = protocol::JobSpecFromJson(protocol::Json::parse(queued.Text(1)));
      if (accepts(spec)) {
        lease = Lease{queued.Integer(0), 0, std::move(spec)};
        break;
      }
    }
    if (!lease) return;
    Statement take(db_.handle(),
                   "UPDATE jobs SET state = 'leased', attempts = attempts + 1, agent = ?, "
                   "lease_expires = ? WHERE id = ? RETURNING attempts",
                   db_.path());
    take.Bind(1, agent).Bind(2, now + lease_s).Bind(3, lease->job_id);
    take.Step();
    lease->attempt = take.Integer(0);
    Statement attempt(db_.handle(),
                      "INSERT INTO job_attempts (job_id, attempt, agent, started_at, outcome) "
                      "VALUES (?, ?, ?, ?, 'running')",
                      db_.path());
    attempt.Bind(1, lease->job_id).Bind(2, lease->attempt).Bind(3, agent).Bind(4, NowUtc());
    attempt.Step();
  });
  return lease;
}

bool JobStore::Renew(int64_t job_id, int64_t attempt, const std::string& agent, double now,
                     double lease_s) {
  Statement renew(db_.handle(),
                  "UPDATE jobs SET lease_expires = ? WHERE id = ? AND state = 'leased' AND "
                  "agent = ? AND attempts = ?",
                  db_.path());
  renew.Bind(1, now + lease_s).Bind(2, job_id).Bind(3, agent).Bind(4, attempt);
  renew.Step();
  return sqlite3_changes(db_.handle()) == 1;
}

Outcome JobStore::Complete(int64_t job_id, int64_t attempt, const std::string& agent,
                           const std::string& result, const std::function<int64_t()>& record) {
  Outcome outcome = Outcome::kUnknown;
  InTransaction(db_.handle(), db_.path(), [&] {
    Statement job(db_.handle(), "SELECT state, attempts FROM jobs WHERE id = ?", db_.path());
    job.Bind(1, job_id);
    Statement tried(db_.handle(),
                    "SELECT outcome FROM job_attempts WHERE job_id = ? AND attempt = ? AND "
                    "agent = ?",
                    db_.path());
    tried.Bind(1, job_id).Bind(2, attempt).Bind(3, agent);
    if (!job.Step() || !tried.Step()) return;
    const std::string state = job.Text(0);
    const int64_t current_attempt = job.Integer(1);
    if (state == "done" || state == "failed" || tried.Text(0) == "done") {
      outcome = Outcome::kDuplicate;
      return;
    }
    const int64_t run_id = record();
    Statement done(db_.handle(),
                   "UPDATE jobs SET state = 'done', finished_at = ?, run_id = ?, result = ?, "
                   "agent = NULL, lease_expires = NULL WHERE id = ?",
                   db_.path());
    done.Bind(1, NowUtc());
    if (run_id > 0) {
      done.Bind(2, run_id);
    } else {
      done.BindNull(2);
    }
    done.Bind(3, result).Bind(4, job_id).Step();
    Statement finish(db_.handle(),
                     "UPDATE job_attempts SET outcome = CASE WHEN attempt = ? THEN 'done' "
                     "ELSE 'superseded' END, finished_at = ? WHERE job_id = ? AND "
                     "(attempt = ? OR (attempt = ? AND outcome = 'running'))",
                     db_.path());
    finish.Bind(1, attempt)
        .Bind(2, NowUtc())
        .Bind(3, job_id)
        .Bind(4, attempt)
        .Bind(5, current_attempt)
        .Step();
    outcome = Outcome::kRecorded;
  });
  return outcome;
}

Outcome JobStore::EndAttempt(int64_t job_id, int64_t attempt, const std::string& agent,
                             const std::string& outcome, const std::string& reason, bool counts) {
  Outcome result = Outcome::kUnknown;
  InTransaction(db_.handle(), db_.path(), [&] {
    Statement tried(db_.handle(),
                    "SELECT outcome FROM job_attempts WHERE job_id = ? AND attempt = ? AND "
                    "agent = ?",
                    db_.path());
    tried.Bind(1, job_id).Bind(2, attempt).Bind(3, agent);
    if (!tried.Step()) return;
    if (tried.Text(0) != "running") {
      result = Outcome::kDuplicate;
      return;
    }
    Statement end(db_.handle(),
                  "UPDATE job_attempts SET outcome = ?, reason = ?, finished_at = ? "
                  "WHERE job_id = ? AND attempt = ?",
                  db_.path());
    end.Bind(1, outcome)
        .Bind(2, reason.substr(0, protocol::kMaxReasonBytes))
        .Bind(3, NowUtc())
        .Bind(4, job_id)
        .Bind(5, attempt);
    end.Step();
    result = Outcome::kRecorded;
    // Only the job's current lease moves the job; an older attempt that
    // ends late changes nothing but its own row.
    Statement requeue(db_.handle(),
                      "UPDATE jobs SET failures = failures + ?, agent = NULL, "
                      "lease_expires = NULL, state = CASE WHEN failures + ? >= max_failures "
                      "THEN 'failed' ELSE 'queued' END WHERE id = ? AND state = 'leased' AND "
                      "attempts = ? RETURNING state",
                      db_.path());
    requeue.Bind(1, int64_t{counts}).Bind(2, int64_t{counts}).Bind(3, job_id).Bind(4, attempt);
    if (!requeue.Step() || requeue.Text(0) != "failed") return;
    requeue.Reset();
    std::string error;
    for (const std::string& line : AttemptReasons(job_id)) {
      error += (error.empty() ? "" : "; ") + line;
    }
    Statement failed(db_.handle(), "UPDATE jobs SET error = ?, finished_at = ? WHERE id = ?",
                     db_.path());
    failed.Bind(1, error).Bind(2, NowUtc()).Bind(3, job_id).Step();
  });
  return result;
}

Outcome JobStore::Fail(int64_t job_id, int64_t attempt, const std::string& agent,
                       const std::string& reason) {
  return EndAttempt(job_id, attempt, agent, "failed", reason, /*counts=*/true);
}

Outcome JobStore::Release(int64_t job_id, int64_t attempt, const std::string& agent,
                          const std::string& reason) {
  return EndAttempt(job_id, attempt, agent, "released", reason, /*counts=*/false);
}

int JobStore::ExpireLeases(double now) {
  std::vector<std::pair<int64_t, int64_t>> expired;
  std::vector<std::string> holders;
  {
    Statement select(db_.handle(),
                     "SELECT id, attempts, agent FROM jobs WHERE state = 'leased' AND "
                     "lease_expires < ?",
                     db_.path());
    select.Bind(1, now);
    while (select.Step()) {
      expired.emplace_back(select.Integer(0), select.Integer(1));
      holders.push_back(select.Text(2));
    }
  }
  for (size_t i = 0; i < expired.size(); ++i) {
    EndAttempt(expired[i].first, expired[i].second, holders[i], "lost",
               "lease expired: no heartbeat from " + holders[i], /*counts=*/true);
  }
  return static_cast<int>(expired.size());
}

int JobStore::AbandonAgent(const std::string& agent, const std::string& reason) {
  std::vector<std::pair<int64_t, int64_t>> held;
  {
    Statement select(db_.handle(),
                     "SELECT id, attempts FROM jobs WHERE state = 'leased' AND agent = ?",
                     db_.path());
    select.Bind(1, agent);
    while (select.Step()) held.emplace_back(select.Integer(0), select.Integer(1));
  }
  for (const auto& [job_id, attempt] : held) {
    EndAttempt(job_id, attempt, agent, "lost", reason, /*counts=*/true);
  }
  return static_cast<int>(held.size());
}

void JobStore::AgentConnected(const protocol::AgentInfo& agent) {
  const bench::HostInfo& host = agent.host;
  std::string gpus;
  for (const std::string& gpu : host.gpus) gpus += (gpus.empty() ? "" : ",") + gpu;
  Statement upsert(
      db_.handle(),
      "INSERT INTO agents (name, host, arch, emulated, emulator, cpu_model, cpu_flags, cores, "
      "memory_bytes, gpus, commit_id, slurm_job_id, first_seen, last_seen, state) VALUES "
      "(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?13, 'connected') "
      "ON CONFLICT (name) DO UPDATE SET host = ?2, arch = ?3, emulated = ?4, emulator = ?5, "
      "cpu_model = ?6, cpu_flags = ?7, cores = ?8, memory_bytes = ?9, gpus = ?10, "
      "commit_id = ?11, slurm_job_id = ?12, last_seen = ?13, state = 'connected'",
      db_.path());
  upsert.Bind(1, agent.name)
      .Bind(2, host.host)
      .Bind(3, host.arch)
      .Bind(4, int64_t{host.emulated})
      .Bind(5, host.emulator)
      .Bind(6, host.cpu_model)
      .Bind(7, host.cpu_flags)
      .Bind(8, host.cores)
      .Bind(9, host.memory_bytes)
      .Bind(10, gpus)
      .Bind(11, agent.commit_id)
      .Bind(12, agent.slurm_job_id)
      .Bind(13, NowUtc());
  upsert.Step();
}

void JobStore::AgentDisconnected(const std::string& agent) {
  Statement update(db_.handle(),
                   "UPDATE agents SET state = 'disconnected', last_seen = ? WHERE name = ?",
                   db_.path());
  update.Bind(1, NowUtc()).Bind(2, agent).Step();
}

int64_t JobStore::RecordLaunch(const std::string& slurm_job_id, const std::string& options_json) {
  LaunchRecord launch;
  launch.via = "slurm";
  launch.slurm_job_id = slurm_job_id;
  launch.options = options_json;
  return RecordLaunch(launch);
}

int64_t JobStore::RecordLaunch(const LaunchRecord& launch) {
  // A Slurm job id is Slurm's key: recorded twice, it is one launch.
  Statement insert(db_.handle(),
                   "INSERT INTO launches (via, slurm_job_id, host, agent, unit, pid, remote_dir, "
                   "launched_at, options, state) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'active') "
                   "ON CONFLICT (slurm_job_id) DO UPDATE SET launched_at = excluded.launched_at, "
                   "options = excluded.options, state = 'active', stopped_at = NULL RETURNING id",
                   db_.path());
  const auto text_or_null = [&](int index, const std::string& value) {
    if (value.empty()) {
      insert.BindNull(index);
    } else {
      insert.Bind(index, value);
    }
  };
  insert.Bind(1, launch.via);
  text_or_null(2, launch.slurm_job_id);
  text_or_null(3, launch.host);
  text_or_null(4, launch.agent);
  text_or_null(5, launch.unit);
  if (launch.pid > 0) {
    insert.Bind(6, launch.pid);
  } else {
    insert.BindNull(6);
  }
  text_or_null(7, launch.remote_dir);
  insert.Bind(8, NowUtc()).Bind(9, launch.options.empty() ? "{}" : launch.options);
  insert.Step();
  return insert.Integer(0);
}

std::vector<LaunchRecord> JobStore::StopLaunchesVia(const std::string& via) {
  std::vector<LaunchRecord> stopped;
  InTransaction(db_.handle(), db_.path(), [&] {
    Statement stop(db_.handle(),
                   "UPDATE launches SET state = 'stopped', stopped_at = ? WHERE state = 'active' "
                   "AND via = ? RETURNING id, via, slurm_job_id, host, agent, unit, pid, "
                   "remote_dir, options, launched_at, state",
                   db_.path());
    stop.Bind(1, NowUtc()).Bind(2, via);
    while (stop.Step()) {
      stopped.push_back({stop.Integer(0), stop.Text(1), stop.Text(2), stop.Text(3), stop.Text(4),
                         stop.Text(5), stop.Integer(6), stop.Text(7), stop.Text(8), stop.Text(9),
                         stop.Text(10)});
    }
  });
  // RETURNING gives no order; launches are acted on in the order they began.
  std::sort(stopped.begin(), stopped.end(),
            [](const LaunchRecord& a, const LaunchRecord& b) { return a.id < b.id; });
  return stopped;
}

std::vector<std::string> JobStore::StopLaunches() {
  std::vector<std::string> ids;
  for (const LaunchRecord& launch : StopLaunchesVia("slurm")) ids.push_back(launch.slurm_job_id);
  return ids;
}

protocol::Json ToJson(const LaunchRecord& launch) {
  protocol::Json json = {
      {"id", launch.id},
      {"via", launch.via},
      {"options",
       launch.options.empty() ? protocol::Json::object() : protocol::Json::parse(launch.options)}};
  if (launch.via == "slurm") {
    json["slurm_job_id"] = launch.slurm_job_id;
  } else {
    json["host"] = launch.host;
    json["agent"] = launch.agent;
    json["remote_dir"] = launch.remote_dir;
    if (!launch.unit.empty()) json["unit"] = launch.unit;
    if (launch.pid > 0) json["pid"] = launch.pid;
  }
  return json;
}

LaunchRecord LaunchFromJson(const protocol::Json& json) {
  using protocol::Field;
  LaunchRecord launch;
  launch.via = Field<std::string>(json, "via");
  const protocol::Json options = Field<protocol::Json>(json, "options");
  if (!options.is_object()) throw protocol::ProtocolError("a launch's 'options' is not an object");
  launch.options = options.dump();
  if (launch.via == "slurm") {
    launch.slurm_job_id = Field<std::string>(json, "slurm_job_id");
    if (launch.slurm_job_id.empty()) {
      throw protocol::ProtocolError("a Slurm launch without a job id");
    }
    return launch;
  }
  if (launch.via != "ssh") {
    throw protocol::ProtocolError("a launch via '" + protocol::Abbreviated(launch.via) +
                                  "' (slurm or ssh)");
  }
  launch.host = Field<std::string>(json, "host");
  launch.agent = Field<std::string>(json, "agent");
  launch.remote_dir = Field<std::string>(json, "remote_dir");
  if (json.contains("unit")) launch.unit = Field<std::string>(json, "unit");
  if (json.contains("pid")) launch.pid = Field<int64_t>(json, "pid");
  // How it is stopped: exactly one of the two.
  if (launch.host.empty() || launch.agent.empty() || launch.remote_dir.empty() ||
      launch.unit.empty() == (launch.pid <= 0)) {
    throw protocol::ProtocolError(
        "an ssh launch needs 'host', 'agent', 'remote_dir' and either 'unit' or a 'pid' above 0");
  }
  return launch;
}

namespace {

constexpr const char* kJobColumns =
    "SELECT id, kind, target, state, attempts, failures, agent, run_id, result, error FROM jobs ";

JobView ReadJob(const Statement& row) {
  return JobView{row.Integer(0), row.Text(1), row.Text(2),    row.Text(3), row.Integer(4),
                 row.Integer(5), row.Text(6), row.Integer(7), row.Text(8), row.Text(9)};
}

}  // namespace

std::optional<JobView> JobStore::Job(int64_t job_id) const {
  Statement select(db_.handle(), std::string(kJobColumns) + "WHERE id = ?", db_.path());
  select.Bind(1, job_id);
  if (!select.Step()) return std::nullopt;
  return ReadJob(select);
}

std::map<std::string, int64_t> JobStore::CountsByState() const {
  std::map<std::string, int64_t> counts = {
      {"queued", 0}, {"leased", 0}, {"done", 0}, {"failed", 0}};
  Statement select(db_.handle(), "SELECT state, count(*) FROM jobs GROUP BY state", db_.path());
  while (select.Step()) counts[select.Text(0)] = select.Integer(1);
  return counts;
}

std::vector<JobView> JobStore::FailedJobs(int64_t limit) const {
  Statement select(db_.handle(),
                   std::string(kJobColumns) + "WHERE state = 'failed' ORDER BY id DESC LIMIT ?",
                   db_.path());
  select.Bind(1, limit);
  std::vector<JobView> jobs;
  while (select.Step()) jobs.push_back(ReadJob(select));
  return jobs;
}

std::vector<AgentView> JobStore::Agents() const {
  Statement select(
      db_.handle(),
      "SELECT name, host, arch, emulated, emulator, cpu_model, cpu_flags, cores, memory_bytes, "
      "gpus, commit_id, slurm_job_id, state, last_seen, (SELECT count(*) FROM job_attempts "
      "WHERE agent = name AND outcome = 'done') FROM agents ORDER BY name",
      db_.path());
  std::vector<AgentView> agents;
  while (select.Step()) {
    AgentView view;
    view.info.name = select.Text(0);
    bench::HostInfo& host = view.info.host;
    host.host = select.Text(1);
    host.arch = select.Text(2);
    host.emulated = select.Integer(3) != 0;
    host.emulator = select.Text(4);
    host.cpu_model = select.Text(5);
    host.cpu_flags = select.Text(6);
    host.cores = select.Integer(7);
    host.memory_bytes = select.Integer(8);
    const std::string gpus = select.Text(9);
    for (size_t start = 0; start < gpus.size();) {
      const size_t comma = std::min(gpus.find(',', start), gpus.size());
      host.gpus.push_back(gpus.substr(start, comma - start));
      start = comma + 1;
    }
    view.info.commit_id = select.Text(10);
    view.info.slurm_job_id = select.Text(11);
    view.state = select.Text(12);
    view.last_seen = select.Text(13);
    view.jobs_done = select.Integer(14);
    agents.push_back(std::move(view));
  }
  return agents;
}

std::vector<std::string> JobStore::AttemptReasons(int64_t job_id) const {
  Statement select(db_.handle(),
                   "SELECT attempt, agent, outcome, reason FROM job_attempts WHERE job_id = ? "
                   "ORDER BY attempt",
                   db_.path());
  select.Bind(1, job_id);
  std::vector<std::string> reasons;
  while (select.Step()) {
    reasons.push_back("attempt " + std::to_string(select.Integer(0)) + " on " + select.Text(1) +
                      " " + select.Text(2) + ": " + select.Text(3));
  }
  return reasons;
}

}  // namespace nimble::coordinator
