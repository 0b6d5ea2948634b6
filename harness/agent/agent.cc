#include "harness/agent/agent.h"

#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <csignal>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <thread>

#include "harness/agent/child_process.h"
#include "nimble/vm/error.h"

// GCC 12 reports Boost.Asio's coroutine frames, allocated by its recycling
// operator new and freed by the matching sized operator delete of the same
// class, as a mismatched pair once both are inlined into a co_spawn: a false
// positive of -Wmismatched-new-delete, reported at Main's spawn.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

namespace nimble::agent {

namespace {

namespace asio = boost::asio;
using protocol::Connection;
using protocol::Field;
using protocol::Json;
using Clock = std::chrono::steady_clock;

Clock::duration Seconds(double seconds) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

void Log(const std::string& name, const std::string& line) {
  std::cerr << "agent " << name << ": " << line << std::endl;
}

// A child ended by SIGTERM, SIGINT or SIGHUP that the agent did not send
// (its own cancels and timeouts are other outcomes): stopped from outside,
// not failed.
bool InterruptedFromOutside(const ChildResult& result) {
  return result.outcome == ChildResult::Outcome::kSignaled &&
         (result.signal == SIGTERM || result.signal == SIGINT || result.signal == SIGHUP);
}

// The job in hand: its child runs on a thread of its own (RunChild
// blocks), which posts the outcome back to the agent's io_context.
struct RunningJob {
  int64_t job_id = 0;
  int64_t attempt = 0;
  std::atomic<bool> cancel{false};
  bool handing_back = false;  // cancelled because the agent stops
  std::thread thread;
};

class Agent {
 public:
  explicit Agent(const AgentOptions& options)
      : options_(options), name_(options.jobs.agent.name), signals_(io_, SIGTERM, SIGINT) {}

  int Run() {
    signals_.async_wait([this](boost::system::error_code error, int signal) {
      if (!error) Stop(signal == SIGTERM ? "SIGTERM" : "SIGINT");
    });
    asio::co_spawn(io_, Main(), asio::detached);
    io_.run();
    if (job_ && job_->thread.joinable()) job_->thread.join();
    return exit_code_;
  }

 private:
  asio::awaitable<void> Main() {
    auto last_contact = Clock::now();
    double backoff = 0.1;
    std::mt19937 jitter(std::random_device{}());
    while (!stopping_) {
      try {
        co_await Session();
        last_contact = Clock::now();
        backoff = 0.1;
      } catch (const protocol::Refused& refused) {
        if (!refused.temporary()) {
          // A wrong secret or protocol version does not mend itself.
          Log(name_, std::string(refused.what()) + "; exiting");
          exit_code_ = 1;
          break;
        }
        Log(name_, std::string(refused.what()) + "; retrying");
      } catch (const std::exception& error) {
        if (connection_) last_contact = Clock::now();
        Log(name_, std::string("connection to the coordinator: ") + error.what());
      }
      connection_.reset();
      if (stopping_) break;
      if (Clock::now() - last_contact > Seconds(options_.give_up_s)) {
        Log(name_, "no coordinator for " + std::to_string(static_cast<int>(options_.give_up_s)) +
                       " s; exiting");
        exit_code_ = 1;
        break;
      }
      // Exponential backoff with jitter, so a fleet does not reconnect in
      // lockstep after a coordinator restart.
      backoff = std::min(backoff * 2, options_.max_backoff_s);
      asio::steady_timer timer(
          io_, Seconds(std::uniform_real_distribution<>(0.5, 1.0)(jitter) * backoff));
      boost::system::error_code ignored;
      co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ignored));
    }
    Finish();
  }

  // One connection: handshake, then messages until it drops.
  asio::awaitable<void> Session() {
    protocol::Socket socket = co_await protocol::ConnectTo(options_.coordinator, Seconds(5));
    auto connection =
        std::make_shared<Connection>(std::move(socket), Seconds(10), options_.tls.get());
    connection->Start();
    connection_ = connection;
    co_await connection->TlsHandshake(/*as_server=*/false, options_.coordinator.host, Seconds(10));
    Json running = Json::array();
    if (job_) running.push_back({{"job_id", job_->job_id}, {"attempt", job_->attempt}});
    // Built before the co_await: GCC 12 miscompiles braced JSON literals
    // inside a co_await expression ("array used as initializer").
    const Json hello = {{"hardware", protocol::ToJson(options_.jobs.agent)}, {"running", running}};
    const Json welcome =
        co_await protocol::PeerHandshake(*connection, options_.secret, "agent", name_, hello);
    heartbeat_s_ = Field<double>(welcome, "heartbeat_s");
    Log(name_, "connected to " + connection->peer());
    for (const auto& [key, result] : unacknowledged_) connection->Send(result);
    if (!job_ && unacknowledged_.empty()) connection->Send({{"type", "ready"}});
    asio::co_spawn(io_, Heartbeats(connection), asio::detached);
    // Runs until the connection drops, or Finish() closes it once a stop
    // has handed the job back.
    try {
      while (connection->open()) {
        OnMessage(co_await connection->Read(Seconds(3 * heartbeat_s_)));
      }
    } catch (...) {
      connection->Close();
      if (!stopping_) throw;
    }
  }

  asio::awaitable<void> Heartbeats(std::shared_ptr<Connection> connection) {
    asio::steady_timer timer(io_);
    while (connection->open()) {
      timer.expires_after(Seconds(heartbeat_s_));
      boost::system::error_code ignored;
      co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ignored));
      Json jobs = Json::array();
      if (job_) jobs.push_back({{"job_id", job_->job_id}, {"attempt", job_->attempt}});
      connection->Send({{"type", "heartbeat"}, {"jobs", jobs}});
    }
  }

  void OnMessage(const Json& message) {
    const std::string type = protocol::MessageType(message);
    if (type == "job") {
      StartJob(Field<int64_t>(message, "job_id"), Field<int64_t>(message, "attempt"),
               protocol::JobSpecFromJson(Field<Json>(message, "spec")));
    } else if (type == "ack") {
      unacknowledged_.erase(
          {Field<int64_t>(message, "job_id"), Field<int64_t>(message, "attempt")});
      if (!job_ && unacknowledged_.empty() && !stopping_) Send({{"type", "ready"}});
    } else if (type == "cancel") {
      if (job_ && job_->job_id == Field<int64_t>(message, "job_id")) {
        Log(name_, "job " + std::to_string(job_->job_id) +
                       " cancelled: " + Field<std::string>(message, "reason"));
        job_->cancel = true;
      }
    } else if (type == "stop") {
      Stop("the coordinator's stop: " + Field<std::string>(message, "reason"));
    } else if (type == "error") {
      throw protocol::ProtocolError("the coordinator says: " +
                                    Field<std::string>(message, "reason"));
    } else if (type != "heartbeat") {
      throw protocol::ProtocolError("unexpected '" + protocol::Abbreviated(type) +
                                    "' from the coordinator");
    }
  }

  void StartJob(int64_t job_id, int64_t attempt, const protocol::JobSpec& spec) {
    if (stopping_) {
      // Crossed with our stop: never started, so handed straight back.
      Send(Release(job_id, attempt, StopReason()));
      return;
    }
    if (job_) {
      Send(Result(job_id, attempt, false,
                  "the agent is busy with job " + std::to_string(job_->job_id)));
      return;
    }
    job_ = std::make_unique<RunningJob>();
    job_->job_id = job_id;
    job_->attempt = attempt;
    Log(name_,
        "job " + std::to_string(job_id) + " attempt " + std::to_string(attempt) + ": " + spec.kind);
    job_->thread = std::thread([this, spec, job = job_.get()] {
      Json outcome;
      try {
        const JobCommand command = CommandFor(spec, options_.jobs);
        ChildOptions child;
        child.timeout_s = command.timeout_s;
        child.cancel = &job->cancel;
        const ChildResult result = RunChild(command.argv, child);
        if (result.ok()) {
          outcome = Result(job->job_id, job->attempt, true, "",
                           ResultOf(spec, result.out, options_.jobs));
        } else if (InterruptedFromOutside(result)) {
          // Someone else stopped the job (scancel signals every process of
          // the Slurm step, an operator's kill): hand it back uncounted.
          outcome =
              Release(job->job_id, job->attempt,
                      "its process was interrupted from outside the agent: " + result.Describe());
        } else {
          outcome = Result(job->job_id, job->attempt, false, result.Describe());
        }
      } catch (const std::exception& error) {
        outcome = Result(job->job_id, job->attempt, false, error.what());
      }
      asio::post(io_, [this, outcome] { FinishJob(outcome); });
    });
  }

  void FinishJob(const Json& outcome) {
    job_->thread.join();
    const bool cancelled = job_->cancel;
    const int64_t job_id = job_->job_id, attempt = job_->attempt;
    const bool handing_back = job_->handing_back;
    job_.reset();
    if (handing_back) {
      Send(Release(job_id, attempt, StopReason()));
      Finish();
      return;
    }
    if (cancelled) {
      if (!stopping_) Send({{"type", "ready"}});
      return;
    }
    // A release needs no resend: if it is lost, the lease expires.
    if (protocol::MessageType(outcome) == "result") unacknowledged_[{job_id, attempt}] = outcome;
    Send(outcome);
  }

  std::string StopReason() const { return "agent " + name_ + " stopping (" + stop_reason_ + ")"; }

  static Json Release(int64_t job_id, int64_t attempt, const std::string& reason) {
    return {{"type", "release"}, {"job_id", job_id}, {"attempt", attempt}, {"reason", reason}};
  }

  Json Result(int64_t job_id, int64_t attempt, bool ok, const std::string& reason,
              const Json& result = nullptr) {
    Json message = {{"type", "result"}, {"job_id", job_id}, {"attempt", attempt}, {"ok", ok}};
    if (ok) {
      message["result"] = result;
    } else {
      message["reason"] = reason;
    }
    return message;
  }

  void Send(const Json& message) {
    if (connection_) connection_->Send(message);
  }

  // SIGTERM, SIGINT or the coordinator's stop: hand the job back and leave.
  void Stop(const std::string& reason) {
    if (stopping_) return;
    stopping_ = true;
    stop_reason_ = reason;
    Log(name_, "stopping: " + reason);
    if (job_) {
      job_->handing_back = true;
      job_->cancel = true;  // FinishJob releases it, then finishes
      return;
    }
    Finish();
  }

  // Leaves once queued messages are written (bounded by the write timeout).
  void Finish() {
    if (job_) return;
    signals_.cancel();
    if (!connection_) {
      io_.stop();
      return;
    }
    auto connection = connection_;
    asio::co_spawn(
        io_,
        [this, connection]() -> asio::awaitable<void> {
          co_await connection->Drain();
          connection->Close();
          io_.stop();
        },
        asio::detached);
  }

  const AgentOptions& options_;
  const std::string name_;
  asio::io_context io_;
  asio::signal_set signals_;
  std::shared_ptr<Connection> connection_;
  double heartbeat_s_ = 2;
  std::unique_ptr<RunningJob> job_;
  std::map<std::pair<int64_t, int64_t>, Json> unacknowledged_;
  bool stopping_ = false;
  std::string stop_reason_;
  int exit_code_ = 0;
};

}  // namespace

int RunAgent(const AgentOptions& options) {
  return Agent(options).Run();
}

}  // namespace nimble::agent
