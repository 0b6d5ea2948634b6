// `nimble-bench agent`: a long-lived pilot that connects out to the
// coordinator (compute nodes often accept no inbound connections), proves
// it holds the shared secret, reports its own hardware (never a scheduler's
// labels), and runs one job at a time in a child process while heartbeats
// keep its lease. It reconnects with backoff and resends results the
// coordinator has not acknowledged (recorded once there, whatever is
// resent); it exits when the coordinator has been unreachable for
// `give_up_s` (so a Slurm allocation is released), and on SIGTERM or a
// stop message, handing its job back.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "harness/agent/job_kinds.h"
#include "harness/protocol/handshake.h"
#include "harness/protocol/tls.h"

namespace nimble::agent {

struct AgentOptions {
  protocol::HostPort coordinator;
  std::string secret;
  std::shared_ptr<protocol::TlsContext> tls;  // null: plain TCP
  JobContext jobs;                            // jobs.agent: the name and hardware to report
  double give_up_s = 120;                     // no coordinator for this long: exit 1
  double max_backoff_s = 5;
};

// Runs until stopped: 0 after SIGTERM/SIGINT or a stop message, 1 when the
// coordinator stayed unreachable or refused it (a wrong secret).
int RunAgent(const AgentOptions& options);

}  // namespace nimble::agent
