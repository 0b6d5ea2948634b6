// `nimble-bench coordinator`: the fleet's queue and results store. Accepts
// agents and clients on one TCP port (Boost.Asio, C++20 coroutines, one
// thread), authenticates each by challenge-response on the shared secret,
// matches queued jobs to idle agents by what they report of their hardware,
// leases each job with a deadline that heartbeats renew, re-queues the jobs
// of agents that go silent or disconnect, and records every result once in
// results.db. All state is in the database: a restarted coordinator picks
// up where the killed one stopped. docs/harness.md has the protocol.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "harness/coordinator/job_store.h"
#include "harness/protocol/connection.h"
#include "harness/protocol/tls.h"

namespace nimble::coordinator {

struct CoordinatorOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 0;  // 0: any free port (see Coordinator::port())
  std::string secret;
  double heartbeat_s = 2;  // both ways; a peer silent for 3 beats is cut off
  double lease_s = 10;     // a leased job without a heartbeat for this long is lost
  double handshake_s = 5;  // the whole handshake, against slow or silent clients
  int max_connections = 256;
  // Per source address, so that one host's idle flood cannot hold every
  // slot for the handshake deadline (agents behind one NAT share one).
  int max_connections_per_address = 64;
  int max_handshakes_per_address = 8;
  // Set: agents of another build (their reported commit) are refused.
  std::string require_commit;
  std::shared_ptr<protocol::TlsContext> tls;  // null: plain TCP
};

// What a job of `spec` needs from `agent`: "" when it can run there, else
// why not (target, emulation, CPU flags, cores).
std::string WhyNotRunnable(const protocol::JobSpec& spec, const protocol::AgentInfo& agent);

class Coordinator {
 public:
  Coordinator(boost::asio::io_context& io, bench::ResultsDb& db, CoordinatorOptions options);
  ~Coordinator();

  // Binds and starts serving on the io_context (which the caller runs).
  // Throws nimble::Error when the address cannot be bound.
  void Start();
  // Stops accepting and closes every connection.
  void Stop();
  uint16_t port() const;

 private:
  struct AgentSession;
  struct AddressCounts {
    int connections = 0;
    int handshakes = 0;
  };
  class AddressSlot;

  boost::asio::awaitable<void> AcceptLoop();
  // Why a new connection from `address` is refused at once ("": served).
  std::string WhyRefuseConnection(const std::string& address) const;
  boost::asio::awaitable<void> Serve(std::shared_ptr<protocol::Connection> connection,
                                     std::string address);
  boost::asio::awaitable<void> ServeAgent(std::shared_ptr<AgentSession> session);
  boost::asio::awaitable<void> ServeClient(std::shared_ptr<protocol::Connection> connection);
  boost::asio::awaitable<void> Heartbeats(std::shared_ptr<protocol::Connection> connection);
  boost::asio::awaitable<void> ExpireLeases();

  void OnAgentMessage(AgentSession& session, const protocol::Json& message);
  void RecordResult(AgentSession& session, const protocol::Json& message);
  protocol::Json ClientReply(const protocol::Json& request);
  protocol::Json JobReply(int64_t job_id) const;
  // Hands queued jobs to idle agents.
  void Dispatch();
  void Log(const std::string& line) const;
  double Now() const;

  boost::asio::io_context& io_;
  bench::ResultsDb& db_;
  JobStore store_;
  CoordinatorOptions options_;
  boost::asio::ip::tcp::acceptor acceptor_;
  std::set<std::shared_ptr<protocol::Connection>> open_;
  std::map<std::string, std::shared_ptr<AgentSession>> agents_;
  std::map<std::string, AddressCounts> by_address_;
};

}  // namespace nimble::coordinator
