#include "harness/coordinator/coordinator.h"

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <iostream>
#include <sstream>

#include "harness/bench/run_record.h"
#include "harness/protocol/handshake.h"
#include "harness/protocol/messages.h"
#include "nimble/vm/error.h"

namespace nimble::coordinator {

namespace asio = boost::asio;
using protocol::Connection;
using protocol::Field;
using protocol::Json;
using protocol::MessageType;
using protocol::ProtocolError;

namespace {

std::chrono::steady_clock::duration Seconds(double seconds) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(seconds));
}

bool HasFlag(const std::string& flags, const std::string& flag) {
  std::istringstream words(flags);
  std::string word;
  while (words >> word) {
    if (word == flag) return true;
  }
  return false;
}

Json Ack(int64_t job_id, int64_t attempt, Outcome outcome) {
  static constexpr const char* kOutcomes[] = {"recorded", "duplicate", "unknown"};
  return {{"type", "ack"},
          {"job_id", job_id},
          {"attempt", attempt},
          {"outcome", kOutcomes[static_cast<int>(outcome)]}};
}

// The job kinds this coordinator queues (an agent refuses kinds it lacks).
bool KnownKind(const std::string& kind) {
  return kind == "run" || kind == "baseline" || kind == "microbench" || kind == "probe" ||
         kind == "tune";
}

// Why a run record is not what `agent` may report for `job`: the hardware
// it names must be the agent's own, as the agent described itself when it
// joined, the target the job's, the framework a peer's only for a baseline
// job, and the kind microbench only for a microbench job.
std::string WhyNotHonest(const bench::RunRecord& record, const protocol::AgentInfo& agent,
                         const JobView& job) {
  const bench::RunInfo& info = record.info;
  const std::string& target = job.target;
  if ((job.kind == "baseline") != (info.framework != "nimble")) {
    return "the run is of framework " + info.framework + ", the job a " + job.kind + " job";
  }
  if ((job.kind == "microbench") != (info.kind == "microbench")) {
    return "the run is of kind " + info.kind + ", the job a " + job.kind + " job";
  }
  if (info.arch != agent.host.arch || info.emulated != agent.host.emulated) {
    return "the run says it ran on " + info.arch + (info.emulated ? " (emulated)" : "") +
           ", the agent reported " + agent.host.arch + (agent.host.emulated ? " (emulated)" : "");
  }
  if (target != "any" && info.target != target) {
    return "the run is for target " + info.target + ", the job for " + target;
  }
  return "";
}

// Why a tune job's result is not what `agent` may report: its records must
// name the agent's own architecture (the CPU model follows it), as the agent
// described itself when it joined.
std::string WhyNotHonestTuning(const Json& result, const protocol::AgentInfo& agent) {
  const Json* tune = result.contains("tune") ? &result["tune"] : nullptr;
  if (!tune || !tune->is_object() || !tune->contains("host") || !(*tune)["host"].is_string()) {
    return "a tune result without its host";
  }
  const std::string host = (*tune)["host"].get<std::string>();
  if (!host.starts_with(agent.host.arch + " ")) {
    return "the records say they were measured on " + host + ", the agent reported " +
           agent.host.arch;
  }
  return "";
}

// The targets whose jobs an agent may take, to narrow the queue's scan.
std::vector<std::string> TargetsOf(const protocol::AgentInfo& agent) {
  std::vector<std::string> targets = {"any", bench::NativeTarget(agent.host)};
  if (!agent.host.gpus.empty()) targets.push_back("nvidia");
  return targets;
}

}  // namespace

std::string WhyNotRunnable(const protocol::JobSpec& spec, const protocol::AgentInfo& agent) {
  const bench::HostInfo& host = agent.host;
  if (spec.target == "intel" && host.arch != "x86_64") return "target intel needs an x86_64 host";
  if (spec.target == "arm" && host.arch != "aarch64") return "target arm needs an aarch64 host";
  if (spec.target == "nvidia" && host.gpus.empty()) return "target nvidia needs a GPU";
  if (host.emulated && !spec.allow_emulated) {
    return "the agent is emulated (" + host.emulator + ") and the job wants real hardware";
  }
  for (const std::string& flag : spec.cpu_flags) {
    if (!HasFlag(host.cpu_flags, flag)) return "the CPU lacks " + flag;
  }
  if (host.cores < spec.min_cores) return "fewer than " + std::to_string(spec.min_cores) + " cores";
  // A baseline with a named interpreter (--python) trusts it.
  if (spec.kind == "baseline" && !spec.options.contains("python")) {
    const auto named = spec.options.find("framework");
    const std::string framework =
        named != spec.options.end() && named->is_string() ? named->get<std::string>() : "";
    if (std::find(agent.peers.begin(), agent.peers.end(), framework) == agent.peers.end()) {
      return "the agent has no " + framework + " (scripts/install-peers.sh " + framework + ")";
    }
  }
  return "";
}

struct Coordinator::AgentSession {
  std::shared_ptr<Connection> connection;
  protocol::AgentInfo info;
  bool idle = false;
  std::set<std::pair<int64_t, int64_t>> running;  // (job, attempt)
};

Coordinator::Coordinator(asio::io_context& io, bench::ResultsDb& db, CoordinatorOptions options)
    : io_(io), db_(db), store_(db), options_(std::move(options)), acceptor_(io) {}

Coordinator::~Coordinator() = default;

void Coordinator::Start() {
  // A coordinator killed mid-run left leases behind: their agents get one
  // lease period to reconnect and report before the jobs are re-queued.
  store_.Recover(Now(), options_.lease_s);
  boost::system::error_code error;
  const auto address = asio::ip::make_address(options_.host, error);
  if (error) throw Error("cannot listen on '" + options_.host + "': not an IP address");
  const asio::ip::tcp::endpoint endpoint(address, options_.port);
  acceptor_.open(endpoint.protocol(), error);
  if (!error) acceptor_.set_option(asio::socket_base::reuse_address(true), error);
  if (!error) acceptor_.bind(endpoint, error);
  if (!error) acceptor_.listen(asio::socket_base::max_listen_connections, error);
  if (error) {
    throw Error("cannot listen on " + options_.host + ":" + std::to_string(options_.port) + ": " +
                error.message());
  }
  asio::co_spawn(io_, AcceptLoop(), asio::detached);
  asio::co_spawn(io_, ExpireLeases(), asio::detached);
  Log("listening on " + options_.host + ":" + std::to_string(port()) + ", results in " +
      db_.path());
  if (!options_.tls && !address.is_loopback()) {
    Log("no TLS on a non-loopback address: every frame is authenticated (integrity), but jobs "
        "and results are readable on the wire; --tls-cert and --tls-key add confidentiality");
  }
}

void Coordinator::Stop() {
  boost::system::error_code ignored;
  acceptor_.close(ignored);
  for (const auto& connection : open_) connection->Close();
}

uint16_t Coordinator::port() const {
  boost::system::error_code error;
  return acceptor_.local_endpoint(error).port();
}

double Coordinator::Now() const {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void Coordinator::Log(const std::string& line) const {
  std::cerr << "coordinator: " << line << std::endl;
}

std::string Coordinator::WhyRefuseConnection(const std::string& address) const {
  if (open_.size() >= static_cast<size_t>(options_.max_connections)) {
    return std::to_string(open_.size()) + " connections open (the limit)";
  }
  const auto counts = by_address_.find(address);
  if (counts == by_address_.end()) return "";
  if (counts->second.connections >= options_.max_connections_per_address) {
    return std::to_string(counts->second.connections) +
           " connections open from this address (the limit per address)";
  }
  if (counts->second.handshakes >= options_.max_handshakes_per_address) {
    return std::to_string(counts->second.handshakes) +
           " handshakes under way from this address (the limit per address)";
  }
  return "";
}

asio::awaitable<void> Coordinator::AcceptLoop() {
  while (acceptor_.is_open()) {
    boost::system::error_code error;
    protocol::Socket socket =
        co_await acceptor_.async_accept(asio::redirect_error(asio::use_awaitable, error));
    if (error) continue;
    boost::system::error_code no_endpoint;
    const std::string address = socket.remote_endpoint(no_endpoint).address().to_string();
    const std::string reason = WhyRefuseConnection(address);
    if (!reason.empty()) {
      Log("refused a connection from " + address + ": " + reason);
      // Said in place of the challenge, so that the peer does not take the
      // closed connection for a TLS mismatch; a TLS peer cannot read it.
      if (!options_.tls) {
        boost::system::error_code ignored;
        asio::write(socket,
                    asio::buffer(protocol::EncodeFrame({{"type", "refused"}, {"reason", reason}})),
                    ignored);
      }
      continue;  // the socket closes here
    }
    auto connection = std::make_shared<Connection>(std::move(socket), Seconds(options_.lease_s),
                                                   options_.tls.get());
    connection->Start();
    asio::co_spawn(io_, Serve(std::move(connection), address), asio::detached);
  }
}

// Counts a connection against its source address while it is open, and
// while its handshake is under way.
class Coordinator::AddressSlot {
 public:
  AddressSlot(std::map<std::string, AddressCounts>& counts, std::string address)
      : counts_(counts), address_(std::move(address)) {
    ++counts_[address_].connections;
    ++counts_[address_].handshakes;
  }
  ~AddressSlot() {
    Done();
    if (--counts_[address_].connections == 0) counts_.erase(address_);
  }
  AddressSlot(const AddressSlot&) = delete;
  AddressSlot& operator=(const AddressSlot&) = delete;
  // The handshake is over.
  void Done() {
    if (handshaking_) --counts_[address_].handshakes;
    handshaking_ = false;
  }

 private:
  std::map<std::string, AddressCounts>& counts_;
  std::string address_;
  bool handshaking_ = true;
};

asio::awaitable<void> Coordinator::Serve(std::shared_ptr<Connection> connection,
                                         std::string address) {
  open_.insert(connection);
  AddressSlot handshaking(by_address_, std::move(address));
  const std::string peer = connection->peer();
  std::string cut_off;
  try {
    // The handshake (docs/harness.md); every read has the handshake's
    // deadline, so a client trickling bytes is cut off.
    co_await connection->TlsHandshake(/*as_server=*/true, "", Seconds(options_.handshake_s));
    const auto why_refused = [this](const Json& hello) -> std::string {
      const std::string role = Field<std::string>(hello, "role");
      if (role != "agent" && role != "client") {
        return "unknown role '" + protocol::Abbreviated(role) + "'";
      }
      if (role == "agent" && !options_.require_commit.empty()) {
        const std::string commit =
            protocol::AgentInfoFromJson(Field<Json>(hello, "hardware")).commit_id;
        if (commit != options_.require_commit) {
          return "the agent is of commit " + protocol::Abbreviated(commit) +
                 ", this coordinator requires " + options_.require_commit;
        }
      }
      return "";
    };
    // Built before the co_await: GCC 12 miscompiles braced JSON literals
    // inside a co_await expression ("array used as initializer").
    const Json welcome = {{"heartbeat_s", options_.heartbeat_s}, {"lease_s", options_.lease_s}};
    const protocol::Admission admission = co_await protocol::CoordinatorHandshake(
        *connection, options_.secret, Seconds(options_.handshake_s), why_refused, welcome);
    handshaking.Done();
    const Json& hello = admission.hello;
    if (!admission.refusal.empty()) {
      Log(peer + ": refused: " + admission.refusal);
    } else if (Field<std::string>(hello, "role") == "agent") {
      auto session = std::make_shared<AgentSession>();
      session->connection = connection;
      session->info = protocol::AgentInfoFromJson(Field<Json>(hello, "hardware"));
      session->info.name = Field<std::string>(hello, "name");
      const std::vector<Json> running = hello.contains("running")
                                            ? Field<std::vector<Json>>(hello, "running")
                                            : std::vector<Json>{};
      for (const Json& job : running) {
        session->running.emplace(Field<int64_t>(job, "job_id"), Field<int64_t>(job, "attempt"));
      }
      co_await ServeAgent(session);
    } else {
      co_await ServeClient(connection);
    }
  } catch (const ProtocolError& error) {
    Log(peer + ": cut off: " + error.what());
    cut_off = error.what();
  } catch (const boost::system::system_error& error) {
    if (error.code() != asio::error::eof) Log(peer + ": connection lost: " + error.what());
  } catch (const std::exception& error) {
    Log(peer + ": " + error.what());
  }
  // The peer learns why before the connection closes (a catch block cannot
  // wait for the write). The reason is cut so that its frame always fits.
  if (!cut_off.empty()) {
    connection->Send({{"type", "error"}, {"reason", cut_off.substr(0, protocol::kMaxReasonBytes)}});
    co_await connection->Drain();
  }
  connection->Close();
  open_.erase(connection);
}

asio::awaitable<void> Coordinator::Heartbeats(std::shared_ptr<Connection> connection) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  while (connection->open()) {
    connection->Send({{"type", "heartbeat"}});
    timer.expires_after(Seconds(options_.heartbeat_s));
    boost::system::error_code ignored;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ignored));
  }
}

asio::awaitable<void> Coordinator::ServeAgent(std::shared_ptr<AgentSession> session) {
  const std::string name = session->info.name;
  if (const auto previous = agents_.find(name); previous != agents_.end()) {
    // The same agent reconnected before its old connection timed out.
    previous->second->connection->Close();
  }
  agents_[name] = session;
  store_.AgentConnected(session->info);
  Log("agent " + name + " joined from " + session->connection->peer() + " (" +
      session->info.host.arch + (session->info.host.emulated ? ", emulated" : "") + ", " +
      std::to_string(session->info.host.cores) + " cores)");
  // Jobs it says it is still running (after a coordinator restart or a
  // reconnect) are its again if their leases are; otherwise it stops them.
  for (auto it = session->running.begin(); it != session->running.end();) {
    if (store_.Renew(it->first, it->second, name, Now(), options_.lease_s)) {
      ++it;
    } else {
      session->connection->Send({{"type", "cancel"},
                                 {"job_id", it->first},
                                 {"attempt", it->second},
                                 {"reason", "the lease is no longer this agent's"}});
      it = session->running.erase(it);
    }
  }
  asio::co_spawn(io_, Heartbeats(session->connection), asio::detached);
  std::string why = "disconnected";
  std::string bad_message;
  try {
    while (session->connection->open()) {
      const Json message = co_await session->connection->Read(Seconds(3 * options_.heartbeat_s));
      OnAgentMessage(*session, message);
    }
  } catch (const boost::system::system_error& error) {
    why = error.code() == asio::error::eof ? "disconnected"
                                           : "went silent or failed: " + std::string(error.what());
  } catch (const std::exception& error) {
    why = std::string("sent a bad message: ") + error.what();
    bad_message = error.what();
  }
  if (!bad_message.empty()) {
    session->connection->Send({{"type", "error"}, {"reason", bad_message}});
    co_await session->connection->Drain();
  }
  session->connection->Close();
  if (const auto current = agents_.find(name);
      current != agents_.end() && current->second == session) {
    agents_.erase(current);
    const int lost = store_.AbandonAgent(name, "agent " + name + " " + why);
    store_.AgentDisconnected(name);
    Log("agent " + name + " (" + session->connection->peer() + ") " + why +
        (lost ? "; re-queued " + std::to_string(lost) + " job(s)" : ""));
    Dispatch();
  }
}

void Coordinator::OnAgentMessage(AgentSession& session, const Json& message) {
  const std::string type = MessageType(message);
  const std::string& name = session.info.name;
  if (type == "ready") {
    session.idle = true;
    Dispatch();
  } else if (type == "heartbeat") {
    const std::vector<Json> jobs =
        message.contains("jobs") ? Field<std::vector<Json>>(message, "jobs") : std::vector<Json>{};
    for (const Json& job : jobs) {
      const int64_t job_id = Field<int64_t>(job, "job_id");
      const int64_t attempt = Field<int64_t>(job, "attempt");
      if (!store_.Renew(job_id, attempt, name, Now(), options_.lease_s)) {
        session.running.erase({job_id, attempt});
        session.connection->Send({{"type", "cancel"},
                                  {"job_id", job_id},
                                  {"attempt", attempt},
                                  {"reason", "the lease expired or the job is finished"}});
      }
    }
  } else if (type == "result") {
    RecordResult(session, message);
  } else if (type == "release") {
    const int64_t job_id = Field<int64_t>(message, "job_id");
    const int64_t attempt = Field<int64_t>(message, "attempt");
    const Outcome outcome =
        store_.Release(job_id, attempt, name, Field<std::string>(message, "reason"));
    session.running.erase({job_id, attempt});
    session.connection->Send(Ack(job_id, attempt, outcome));
    Dispatch();
  } else {
    throw ProtocolError("unexpected '" + protocol::Abbreviated(type) + "' from an agent");
  }
}

void Coordinator::RecordResult(AgentSession& session, const Json& message) {
  const std::string& name = session.info.name;
  const int64_t job_id = Field<int64_t>(message, "job_id");
  const int64_t attempt = Field<int64_t>(message, "attempt");
  session.running.erase({job_id, attempt});
  const std::optional<JobView> job = store_.Job(job_id);
  Outcome outcome = Outcome::kUnknown;
  std::string summary;
  if (!job) {
    summary = "a result for unknown job " + std::to_string(job_id);
  } else if (!Field<bool>(message, "ok")) {
    summary = Field<std::string>(message, "reason");
    outcome = store_.Fail(job_id, attempt, name, summary);
  } else {
    Json result = Field<Json>(message, "result");
    std::optional<bench::RunRecord> record;
    std::string invalid;
    if (result.contains("run")) {
      try {
        record = bench::RunRecordFromJson(result["run"]);
        invalid = WhyNotHonest(*record, session.info, *job);
      } catch (const Error& error) {
        invalid = error.what();
      }
      result.erase("run");  // its figures go into runs and measurements
    }
    if (job->kind == "tune") invalid = WhyNotHonestTuning(result, session.info);
    if (!invalid.empty()) {
      summary = "result rejected: " + invalid;
      outcome = store_.Fail(job_id, attempt, name, summary);
    } else {
      outcome = store_.Complete(job_id, attempt, name, result.dump(), [&]() -> int64_t {
        if (!record) return 0;
        record->info.job_id = job_id;
        record->info.agent = name;
        return db_.RecordRun(record->info, record->measurements);
      });
      summary = "done";
    }
  }
  session.connection->Send(Ack(job_id, attempt, outcome));
  std::string ignored;
  if (outcome == Outcome::kDuplicate) ignored = " (already recorded)";
  if (outcome == Outcome::kUnknown && job) ignored = " (not an attempt this agent holds: ignored)";
  Log("job " + std::to_string(job_id) + " attempt " + std::to_string(attempt) + " on " + name +
      ": " + summary.substr(0, protocol::kMaxReasonBytes) + ignored);
}

asio::awaitable<void> Coordinator::ServeClient(std::shared_ptr<Connection> connection) {
  // A client sends requests and reads replies; idle for a minute, it is
  // cut off like any silent peer.
  while (connection->open()) {
    const Json request = co_await connection->Read(std::chrono::seconds(60));
    connection->Send(ClientReply(request));
  }
}

Json Coordinator::JobReply(int64_t job_id) const {
  const std::optional<JobView> job = store_.Job(job_id);
  if (!job) return {{"id", job_id}, {"state", "unknown"}};
  Json reply = {{"id", job->id},       {"kind", job->kind},         {"target", job->target},
                {"state", job->state}, {"attempts", job->attempts}, {"failures", job->failures},
                {"agent", job->agent}, {"error", job->error}};
  if (!job->result.empty()) reply["result"] = Json::parse(job->result);
  if (job->run_id > 0) {
    reply["run_id"] = job->run_id;
    reply["run"] = bench::ToJson(db_.Run(job->run_id));
  }
  return reply;
}

Json Coordinator::ClientReply(const Json& request) {
  const std::string type = MessageType(request);
  if (type == "submit") {
    std::vector<protocol::JobSpec> specs;
    for (const Json& job : Field<std::vector<Json>>(request, "jobs")) {
      specs.push_back(protocol::JobSpecFromJson(job));
      if (!KnownKind(specs.back().kind)) {
        return {{"type", "error"},
                {"reason", "unknown job kind '" + protocol::Abbreviated(specs.back().kind) + "'"}};
      }
    }
    const std::vector<int64_t> ids = store_.Submit(specs);
    Dispatch();
    return {{"type", "submitted"}, {"job_ids", ids}};
  }
  if (type == "jobs") {
    Json jobs = Json::array();
    for (const int64_t id : Field<std::vector<int64_t>>(request, "job_ids")) {
      jobs.push_back(JobReply(id));
    }
    return {{"type", "jobs"}, {"jobs", jobs}};
  }
  if (type == "status") {
    Json agents = Json::array();
    for (const AgentView& agent : store_.Agents()) {
      Json entry = protocol::ToJson(agent.info);
      entry["state"] = agent.state;
      entry["last_seen"] = agent.last_seen;
      entry["jobs_done"] = agent.jobs_done;
      agents.push_back(entry);
    }
    Json failures = Json::array();
    for (const JobView& job : store_.FailedJobs(20)) {
      failures.push_back(
          {{"id", job.id}, {"kind", job.kind}, {"target", job.target}, {"error", job.error}});
    }
    return {{"type", "status"},
            {"agents", agents},
            {"jobs", store_.CountsByState()},
            {"failures", failures}};
  }
  if (type == "launched") {
    // `launches`: records of any engine. A client of before ssh launches
    // sends Slurm's job ids and their options instead.
    if (request.contains("launches")) {
      for (const Json& launch : Field<std::vector<Json>>(request, "launches")) {
        store_.RecordLaunch(LaunchFromJson(launch));
      }
    } else {
      for (const std::string& id : Field<std::vector<std::string>>(request, "slurm_job_ids")) {
        store_.RecordLaunch(id, Field<Json>(request, "options").dump());
      }
    }
    return {{"type", "ok"}};
  }
  if (type == "stop_agents") {
    Json names = Json::array();
    for (const auto& [name, session] : agents_) {
      session->connection->Send({{"type", "stop"}, {"reason", "nimble-bench agents stop"}});
      names.push_back(name);
    }
    // The client stops the ssh launches itself, over ssh, as it scancels
    // the Slurm ones.
    Json ssh = Json::array();
    for (const LaunchRecord& launch : store_.StopLaunchesVia("ssh")) ssh.push_back(ToJson(launch));
    return {{"type", "stopping"},
            {"agents", names},
            {"slurm_job_ids", store_.StopLaunches()},
            {"launches", ssh}};
  }
  throw ProtocolError("unexpected '" + protocol::Abbreviated(type) + "' from a client");
}

void Coordinator::Dispatch() {
  for (const auto& [name, session] : agents_) {
    if (!session->idle || !session->connection->open()) continue;
    const protocol::AgentInfo& agent = session->info;
    const std::optional<Lease> lease = store_.LeaseNext(
        name, TargetsOf(agent),
        [&](const protocol::JobSpec& spec) {
          return KnownKind(spec.kind) && WhyNotRunnable(spec, agent).empty();
        },
        Now(), options_.lease_s);
    if (!lease) continue;
    session->idle = false;
    session->running.emplace(lease->job_id, lease->attempt);
    session->connection->Send({{"type", "job"},
                               {"job_id", lease->job_id},
                               {"attempt", lease->attempt},
                               {"spec", protocol::ToJson(lease->spec)}});
  }
}

asio::awaitable<void> Coordinator::ExpireLeases() {
  asio::steady_timer timer(io_);
  const double period = std::clamp(options_.lease_s / 4, 0.1, 1.0);
  while (acceptor_.is_open()) {
    timer.expires_after(Seconds(period));
    boost::system::error_code ignored;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ignored));
    if (const int expired = store_.ExpireLeases(Now()); expired > 0) {
      Log("re-queued " + std::to_string(expired) + " job(s) whose lease expired");
      Dispatch();
    }
  }
}

}  // namespace nimble::coordinator
