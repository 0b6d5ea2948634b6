#include "harness/protocol/messages.h"

namespace nimble::protocol {

namespace {

// `json[key]` as T when present, else `fallback`; ProtocolError when it has
// another type.
template <typename T>
T Optional(const Json& json, const char* key, T fallback) {
  const auto found = json.find(key);
  if (found == json.end() || found->is_null()) return fallback;
  std::optional<T> value = Exactly<T>(*found);
  if (!value) throw ProtocolError(std::string("'") + key + "' has the wrong type or range");
  return std::move(*value);
}

}  // namespace

Json ToJson(const JobSpec& spec) {
  return {{"kind", spec.kind},
          {"target", spec.target},
          {"options", spec.options},
          {"allow_emulated", spec.allow_emulated},
          {"cpu_flags", spec.cpu_flags},
          {"min_cores", spec.min_cores},
          {"max_failures", spec.max_failures},
          {"timeout_s", spec.timeout_s}};
}

JobSpec JobSpecFromJson(const Json& json) {
  if (!json.is_object()) throw ProtocolError("a job specification that is not an object");
  JobSpec spec;
  spec.kind = Optional<std::string>(json, "kind", "");
  if (spec.kind.empty()) throw ProtocolError("a job specification without 'kind'");
  spec.target = Optional<std::string>(json, "target", "any");
  if (spec.target != "intel" && spec.target != "arm" && spec.target != "nvidia" &&
      spec.target != "any") {
    throw ProtocolError("unknown target '" + Abbreviated(spec.target) +
                        "' (intel, arm, nvidia or any)");
  }
  spec.options = Optional<Json>(json, "options", Json::object());
  if (!spec.options.is_object()) throw ProtocolError("'options' is not an object");
  spec.allow_emulated = Optional<bool>(json, "allow_emulated", false);
  spec.cpu_flags = Optional<std::vector<std::string>>(json, "cpu_flags", {});
  spec.min_cores = Optional<int64_t>(json, "min_cores", 0);
  if (spec.min_cores < 0) throw ProtocolError("'min_cores' is negative");
  spec.max_failures = Optional<int64_t>(json, "max_failures", 3);
  if (spec.max_failures < 1 || spec.max_failures > 100) {
    throw ProtocolError("'max_failures' must be 1..100");
  }
  spec.timeout_s = Optional<double>(json, "timeout_s", 0.0);
  if (spec.timeout_s < 0) throw ProtocolError("'timeout_s' is negative");
  return spec;
}

Json ToJson(const AgentInfo& agent) {
  const bench::HostInfo& host = agent.host;
  return {{"name", agent.name},
          {"host", host.host},
          {"arch", host.arch},
          {"emulated", host.emulated},
          {"emulator", host.emulator},
          {"cpu_model", host.cpu_model},
          {"cpu_flags", host.cpu_flags},
          {"cores", host.cores},
          {"memory_bytes", host.memory_bytes},
          {"gpus", host.gpus},
          {"commit", agent.commit_id},
          {"slurm_job_id", agent.slurm_job_id},
          {"peers", agent.peers}};
}

AgentInfo AgentInfoFromJson(const Json& json) {
  if (!json.is_object()) throw ProtocolError("'hardware' is not an object");
  AgentInfo agent;
  agent.name = Optional<std::string>(json, "name", "");
  bench::HostInfo& host = agent.host;
  host.host = Optional<std::string>(json, "host", "");
  host.arch = Optional<std::string>(json, "arch", "");
  if (agent.name.empty() || host.host.empty() || host.arch.empty()) {
    throw ProtocolError("'hardware' without name, host or arch");
  }
  host.emulated = Optional<bool>(json, "emulated", false);
  host.emulator = Optional<std::string>(json, "emulator", "");
  host.cpu_model = Optional<std::string>(json, "cpu_model", "unknown");
  host.cpu_flags = Optional<std::string>(json, "cpu_flags", "");
  host.cores = Optional<int64_t>(json, "cores", 0);
  host.memory_bytes = Optional<int64_t>(json, "memory_bytes", 0);
  host.gpus = Optional<std::vector<std::string>>(json, "gpus", {});
  agent.commit_id = Optional<std::string>(json, "commit", "unknown");
  agent.slurm_job_id = Optional<std::string>(json, "slurm_job_id", "");
  agent.peers = Optional<std::vector<std::string>>(json, "peers", {});
  return agent;
}

}  // namespace nimble::protocol
