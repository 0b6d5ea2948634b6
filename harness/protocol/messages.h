// The protocol's version and the records its messages carry: a job's
// specification and an agent's self-reported hardware. docs/harness.md
// lists every message; the coordinator and the agent build and read them
// through these functions only, so the two sides cannot drift apart.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "harness/bench/host_info.h"
#include "harness/protocol/frame.h"

namespace nimble::protocol {

// Bumped on any incompatible change; a peer of another version is refused
// in the handshake with both versions named.
constexpr int kProtocolVersion = 2;

// What to run and where it may run.
struct JobSpec {
  std::string kind;               // run, baseline, microbench, tune or probe (agent/job_kinds.h)
  std::string target = "any";     // intel, arm, nvidia, or any
  Json options = Json::object();  // the kind's options (run: {"args": [...]})
  // An emulated agent (qemu-user) may take it: correctness, not latency.
  bool allow_emulated = false;
  std::vector<std::string> cpu_flags;  // every one required, e.g. avx512f
  int64_t min_cores = 0;
  int64_t max_failures = 3;  // failed or lost attempts before the job fails
  double timeout_s = 0;      // the child's hard limit; 0: the kind's default
};

Json ToJson(const JobSpec& spec);
// Throws ProtocolError naming the bad member.
JobSpec JobSpecFromJson(const Json& json);

// An agent: its name and what it reported about its host.
struct AgentInfo {
  std::string name;
  bench::HostInfo host;
  std::string commit_id;
  std::string slurm_job_id;  // from SLURM_JOB_ID when Slurm placed it
  // The peer frameworks it can run baselines of (baselines::InstalledPeers).
  std::vector<std::string> peers;
};

Json ToJson(const AgentInfo& agent);
AgentInfo AgentInfoFromJson(const Json& json);

}  // namespace nimble::protocol
