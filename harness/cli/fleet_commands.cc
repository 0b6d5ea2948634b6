#include "harness/cli/fleet_commands.h"

#include <unistd.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <set>
#include <sstream>
#include <thread>

#include "harness/agent/agent.h"
#include "harness/baselines/peer_baseline.h"
#include "harness/bench/build_info.h"
#include "harness/bench/host_info.h"
#include "harness/bench/results_db.h"
#include "harness/cli/run_command.h"
#include "harness/coordinator/coordinator.h"
#include "harness/coordinator/job_store.h"
#include "harness/fleet/slurm.h"
#include "harness/fleet/ssh_launch.h"
#include "harness/protocol/auth.h"
#include "harness/protocol/client.h"
#include "harness/protocol/tls.h"
#include "nimble/vm/error.h"
#include "nimble/vm/string_join.h"

namespace nimble::bench {

namespace {

using protocol::Json;

// Where the fleet is: every client command takes these two.
struct FleetAddress {
  std::string coordinator;
  std::string secret_file;
  std::string tls_ca;  // set: TLS, the coordinator's certificate checked against it
};

void AddFleetAddress(CLI::App* command, FleetAddress& address) {
  command->add_option("--coordinator", address.coordinator, "The coordinator's HOST:PORT")
      ->required();
  command->add_option("--secret-file", address.secret_file, "The fleet's shared secret (chmod 600)")
      ->required();
  command->add_option("--tls-ca", address.tls_ca,
                      "Connect with TLS, checking the coordinator's certificate against this CA");
}

std::shared_ptr<protocol::TlsContext> ClientTlsFor(const FleetAddress& address) {
  return address.tls_ca.empty() ? nullptr : protocol::ClientTls(address.tls_ca);
}

protocol::Client Connect(const FleetAddress& address) {
  return protocol::Client(address.coordinator, protocol::ReadSecretFile(address.secret_file),
                          ClientTlsFor(address));
}

// Requests and replies are split so that no frame nears the 1 MiB cap: a
// job's spec is a few hundred bytes, a finished run job's reply (its figures
// included) a few kilobytes.
constexpr size_t kSubmitBatch = 1000;
constexpr size_t kQueryBatch = 100;

// `items` in slices of at most `size`, each through `request`; the replies'
// `member` arrays joined.
Json InBatches(const Json& items, size_t size, const std::function<Json(const Json&)>& request) {
  Json joined = Json::array();
  for (size_t start = 0; start < items.size(); start += size) {
    const size_t end = std::min(items.size(), start + size);
    const Json slice(items.begin() + static_cast<std::ptrdiff_t>(start),
                     items.begin() + static_cast<std::ptrdiff_t>(end));
    for (const Json& item : request(slice)) joined.push_back(item);
  }
  return joined;
}

std::string ProbeJson() {
  const HostInfo host = DescribeHost();
  protocol::AgentInfo info;
  info.name = host.host;
  info.host = host;
  info.commit_id = kBuildCommit;
  info.peers = baselines::InstalledPeers();
  return protocol::ToJson(info).dump();
}

// ---- coordinator ----

struct CoordinatorCommand {
  std::string listen = "127.0.0.1:7450";
  std::string db = "results.db";
  std::string secret_file;
  std::string port_file;
  std::string tls_cert;
  std::string tls_key;
  coordinator::CoordinatorOptions options;
};

int RunCoordinator(const CoordinatorCommand& command) {
  coordinator::CoordinatorOptions options = command.options;
  const protocol::HostPort listen = protocol::ParseHostPort(command.listen);
  options.host = listen.host;
  options.port = listen.port;
  options.secret = protocol::ReadSecretFile(command.secret_file);
  if (command.tls_cert.empty() != command.tls_key.empty()) {
    throw Error("--tls-cert and --tls-key go together");
  }
  if (!command.tls_cert.empty())
    options.tls = protocol::ServerTls(command.tls_cert, command.tls_key);
  ResultsDb db(command.db);
  boost::asio::io_context io;
  coordinator::Coordinator server(io, db, options);
  server.Start();
  if (!command.port_file.empty()) {
    // Written whole, then renamed, so a reader never sees half a number.
    const std::string partial = command.port_file + ".partial";
    std::ofstream(partial) << server.port() << "\n";
    std::filesystem::rename(partial, command.port_file);
  }
  boost::asio::signal_set signals(io, SIGTERM, SIGINT);
  signals.async_wait([&](boost::system::error_code error, int) {
    if (error) return;
    server.Stop();
    io.stop();
  });
  io.run();
  return 0;
}

// ---- agent ----

struct AgentCommand {
  FleetAddress address;
  std::string name;
  std::string job_binary;
  double give_up_s = 120;
};

int RunAgentCommand(const AgentCommand& command) {
  agent::AgentOptions options;
  options.coordinator = protocol::ParseHostPort(command.address.coordinator);
  options.secret = protocol::ReadSecretFile(command.address.secret_file);
  options.tls = ClientTlsFor(command.address);
  options.give_up_s = command.give_up_s;
  agent::JobContext& jobs = options.jobs;
  const std::string self = SelfExecutable();
  jobs.nimble_bench = command.job_binary.empty() ? self : command.job_binary;
  jobs.bench_dir = std::filesystem::path(self).parent_path().parent_path().parent_path() / "bench";
  // Under qemu-user without binfmt, a child of an emulated agent must be
  // started through the emulator too (NIMBLE_EMULATOR names it).
  if (const char* emulator = std::getenv("NIMBLE_EMULATOR"); emulator && *emulator) {
    std::istringstream words(emulator);
    for (std::string word; words >> word;) jobs.emulator.push_back(word);
  }
  protocol::AgentInfo& info = jobs.agent;
  info.host = DescribeHost();
  info.commit_id = kBuildCommit;
  info.peers = baselines::InstalledPeers();
  const char* slurm_job = std::getenv("SLURM_JOB_ID");
  info.slurm_job_id = slurm_job ? slurm_job : "";
  info.name = !command.name.empty()        ? command.name
              : !info.slurm_job_id.empty() ? info.host.host + "-slurm" + info.slurm_job_id
                                           : info.host.host + "-" + std::to_string(getpid());
  return agent::RunAgent(options);
}

// ---- submit ----

struct SubmitCommand {
  FleetAddress address;
  RunCommand run;
  std::string kind = "run";
  std::string suite = "kernels";
  std::string filter;
  double min_time = 0;
  // microbench dispatch: what the agent measures (empty or 0: its defaults).
  std::vector<std::string> shapes;
  std::vector<std::string> lengths;
  std::vector<std::string> degrees;
  int rounds = 0;
  BaselineCommand baseline;
  int count = 1;
  int max_failures = 3;
  double timeout_s = 0;
  std::vector<std::string> cpu_flags;
  int min_cores = 0;
  bool wait = false;
  bool json = false;
};

int RunSubmit(const SubmitCommand& command, const CLI::App* cli) {
  protocol::JobSpec spec;
  spec.kind = command.kind;
  spec.target =
      command.kind == "probe" && cli->count("--target") == 0 ? "any" : command.run.bench.target;
  spec.allow_emulated = command.run.emulate || command.kind == "probe";
  spec.cpu_flags = command.cpu_flags;
  spec.min_cores = command.min_cores;
  spec.max_failures = command.max_failures;
  spec.timeout_s = command.timeout_s;
  // One spec per job to queue before --count copies (a baseline: one per variant).
  std::vector<protocol::JobSpec> specs;
  if (command.kind == "run" || command.kind == "baseline") {
    if (command.run.bench.model.empty() && command.run.bench.onnx.empty())
      throw Error("submit --kind " + command.kind + " needs --model or --onnx");
    spec.options = {{"args", ForwardedRunArgs(cli)}};
  }
  if (command.kind == "microbench") {
    spec.options = {{"suite", command.suite}};
    if (command.suite == "dispatch") {
      // `nimble-bench microbench dispatch` on the agent, with the options
      // given here and its defaults (BERT-base's shapes) for the rest.
      Json args = Json::array();
      const auto forward = [&](const std::string& option, const std::vector<std::string>& values) {
        if (values.empty()) return;
        args.push_back(option);
        for (const std::string& value : values) args.push_back(value);
      };
      forward("--shapes", command.shapes);
      forward("--lengths", command.lengths);
      forward("--degrees", command.degrees);
      if (command.rounds > 0) forward("--rounds", {std::to_string(command.rounds)});
      if (command.run.threads > 0) forward("--threads", {std::to_string(command.run.threads)});
      if (command.min_time > 0) forward("--min-time", {std::to_string(command.min_time)});
      spec.options["args"] = args;
    } else {
      if (!command.filter.empty()) spec.options["filter"] = command.filter;
      if (command.min_time > 0) spec.options["min_time"] = command.min_time;
    }
  }
  if (command.kind == "baseline") {
    const BaselineCommand& baseline = command.baseline;
    if (baseline.framework.empty()) throw Error("submit --kind baseline needs --framework");
    // A peer is timed natively, never under an emulator.
    if (command.run.emulate) throw Error("submit --kind baseline: a peer does not run emulated");
    const std::string& model = command.run.bench.model;
    const std::vector<std::string> variants =
        baseline.variants.empty() ? baselines::PeerVariants(baseline.framework, model)
                                  : baseline.variants;
    if (variants.empty()) throw Error(baseline.framework + " has no baseline for " + model);
    spec.options["framework"] = baseline.framework;
    if (!baseline.python.empty()) spec.options["python"] = baseline.python;
    for (const std::string& variant : variants) {
      specs.push_back(spec);
      specs.back().options["variant"] = variant;
    }
  } else {
    specs.push_back(spec);
  }
  Json jobs = Json::array();
  for (const protocol::JobSpec& each : specs) {
    for (int i = 0; i < command.count; ++i) jobs.push_back(protocol::ToJson(each));
  }
  protocol::Client client = Connect(command.address);
  const Json ids = InBatches(jobs, kSubmitBatch, [&](const Json& slice) {
    return client.Request({{"type", "submit"}, {"jobs", slice}}).at("job_ids");
  });
  if (!command.wait) {
    std::cout << (command.json ? Json{{"job_ids", ids}}.dump(2)
                               : "submitted jobs " + ids.front().dump() + ".." + ids.back().dump())
              << "\n";
    return 0;
  }
  // Follow the jobs until every one is done or failed.
  while (true) {
    const Json jobs_now = InBatches(ids, kQueryBatch, [&](const Json& slice) {
      return client.Request({{"type", "jobs"}, {"job_ids", slice}}).at("jobs");
    });
    int open = 0, failed = 0;
    for (const Json& job : jobs_now) {
      const std::string state = job.at("state");
      open += state == "queued" || state == "leased";
      failed += state == "failed" || state == "unknown";
    }
    if (open == 0) {
      if (command.json) {
        std::cout << jobs_now.dump(2) << "\n";
      } else {
        std::cout << ids.size() - failed << " done, " << failed << " failed\n";
        for (const Json& job : jobs_now) {
          if (job.at("state") != "done") {
            std::cout << "  job " << job.at("id") << ": " << job.value("error", std::string())
                      << "\n";
          }
        }
      }
      return failed ? 1 : 0;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
}

// ---- status ----

int RunStatus(const FleetAddress& address, bool json) {
  const Json status = Connect(address).Request({{"type", "status"}});
  if (json) {
    std::cout << status.dump(2) << "\n";
    return 0;
  }
  std::cout << "jobs:";
  for (const auto& [state, count] : status.at("jobs").items())
    std::cout << " " << state << " " << count;
  std::cout << "\nagents:\n";
  for (const Json& agent : status.at("agents")) {
    std::cout << "  " << std::left << std::setw(28) << agent.at("name").get<std::string>() << " "
              << std::setw(12) << agent.at("state").get<std::string>() << " "
              << agent.at("arch").get<std::string>()
              << (agent.at("emulated").get<bool>() ? " (emulated)" : "") << ", "
              << agent.at("cores") << " cores, " << agent.at("jobs_done") << " jobs done"
              << (agent.at("slurm_job_id").get<std::string>().empty()
                      ? ""
                      : ", slurm job " + agent.at("slurm_job_id").get<std::string>())
              << "\n";
  }
  if (!status.at("failures").empty()) std::cout << "failed jobs:\n";
  for (const Json& job : status.at("failures")) {
    std::cout << "  job " << job.at("id") << " (" << job.at("kind").get<std::string>() << ", "
              << job.at("target").get<std::string>() << "): " << job.at("error").get<std::string>()
              << "\n";
  }
  return 0;
}

// ---- agents start|stop ----

struct AgentsStartCommand {
  FleetAddress address;
  std::string via;
  int count = 1;
  fleet::SlurmAgentLaunch launch;
  fleet::SshAgentLaunch ssh;
  double give_up_s = 120;
  double wait_s = 30;
};

// Options only one engine reads: naming them for the other is a mistake
// worth an error, not silence.
const std::vector<std::string> kSlurmOnly = {"--constraint", "--gres",      "--partition",
                                             "--time",       "--exclusive", "--output-dir"};
const std::vector<std::string> kSshOnly = {"HOST",         "--bundle",     "--remote-dir",
                                           "--supervisor", "--ssh-config", "--ssh-option",
                                           "--parallel",   "--wait"};

void RefuseOptions(const CLI::App* cli, const std::vector<std::string>& names,
                   const std::string& via) {
  for (const std::string& name : names) {
    if (cli->count(name) > 0) {
      throw Error("agents start --via " + via + ": " + (name == "HOST" ? "hosts" : name) +
                  " belong" + (name == "HOST" ? "" : "s") + " to --via " +
                  (via == "slurm" ? "ssh" : "slurm"));
    }
  }
}

std::vector<std::string> AgentArgv(const AgentsStartCommand& command) {
  std::vector<std::string> argv = {
      SelfExecutable(), "agent",
      "--coordinator",  command.address.coordinator,
      "--secret-file",  std::filesystem::absolute(command.address.secret_file),
      "--give-up",      std::to_string(command.give_up_s)};
  if (!command.address.tls_ca.empty()) {
    argv.insert(argv.end(), {"--tls-ca", std::filesystem::absolute(command.address.tls_ca)});
  }
  return argv;
}

int RunSlurmStart(AgentsStartCommand command) {
  fleet::SlurmAgentLaunch& launch = command.launch;
  launch.count = command.count;
  if (launch.output_dir.empty()) launch.output_dir = std::filesystem::current_path();
  launch.agent_argv = AgentArgv(command);
  // Check the coordinator and the secret before asking Slurm for anything.
  protocol::Client client = Connect(command.address);
  const std::vector<std::string> ids = fleet::SubmitAgents(launch);
  const Json options = {{"count", launch.count},     {"constraint", launch.constraint},
                        {"gres", launch.gres},       {"partition", launch.partition},
                        {"time", launch.time_limit}, {"exclusive", launch.exclusive}};
  Json launches = Json::array();
  for (const std::string& id : ids) {
    launches.push_back({{"via", "slurm"}, {"slurm_job_id", id}, {"options", options}});
  }
  client.Request({{"type", "launched"}, {"launches", launches}});
  std::cout << "submitted " << ids.size() << " agent(s) to Slurm: jobs";
  for (const std::string& id : ids) std::cout << " " << id;
  std::cout << "\n";
  return 0;
}

// The names of the coordinator's connected agents.
std::set<std::string> ConnectedAgents(const FleetAddress& address) {
  std::set<std::string> names;
  const Json status = Connect(address).Request({{"type", "status"}});
  for (const Json& agent : status.at("agents")) {
    if (agent.at("state") == "connected") names.insert(agent.at("name").get<std::string>());
  }
  return names;
}

std::string Describe(const fleet::SshAgent& agent) {
  return agent.name + " (" +
         (agent.unit.empty() ? "pid " + std::to_string(agent.pid) : "unit " + agent.unit) +
         "; log " + agent.Log() + ")";
}

int RunSshStart(AgentsStartCommand command) {
  fleet::SshAgentLaunch& launch = command.ssh;
  if (launch.hosts.empty()) throw Error("agents start --via ssh needs one or more HOSTs");
  if (launch.bundle.empty()) {
    throw Error("agents start --via ssh needs --bundle (scripts/bundle-agent.sh makes one)");
  }
  std::set<std::string> seen;
  for (const std::string& host : launch.hosts) {
    fleet::CheckDestination(host);
    // Set up twice at once, a host's agents could take one name.
    if (!seen.insert(host).second) throw Error(host + " is named twice (--count N starts N there)");
  }
  if (!launch.remote_dir.empty()) fleet::ExpandRemoteDir(launch.remote_dir, "check");
  const std::string commit = fleet::BundleCommit(launch.bundle);
  launch.bundle = std::filesystem::absolute(launch.bundle);
  if (!launch.ssh.config_file.empty()) {
    std::error_code error;
    if (!std::filesystem::is_regular_file(launch.ssh.config_file, error)) {
      throw Error("--ssh-config '" + launch.ssh.config_file + "' is not a file");
    }
    // Absolute, so that `agents stop` run from elsewhere reaches the hosts too.
    launch.ssh.config_file = std::filesystem::absolute(launch.ssh.config_file);
  }
  if (!command.address.tls_ca.empty()) {
    launch.tls_ca = std::filesystem::absolute(command.address.tls_ca);
  }
  launch.count = command.count;
  launch.give_up_s = command.give_up_s;
  launch.coordinator = command.address.coordinator;
  // Check the coordinator and the secret before touching any host. The
  // hosts get the file's bytes as they are (ReadSecretFile checked them).
  protocol::ReadSecretFile(command.address.secret_file);
  ConnectedAgents(command.address);
  {
    std::ifstream file(command.address.secret_file, std::ios::binary);
    std::stringstream bytes;
    bytes << file.rdbuf();
    launch.secret = bytes.str();
  }

  const Json options = {{"count", launch.count},
                        {"supervisor", launch.supervisor},
                        {"remote_dir", launch.remote_dir},
                        {"give_up", launch.give_up_s},
                        {"bundle", launch.bundle},
                        {"bundle_commit", commit},
                        {"ssh_config", launch.ssh.config_file},
                        {"ssh_options", launch.ssh.options},
                        {"tls", !launch.tls_ca.empty()}};
  std::vector<fleet::SshAgent> started;
  std::vector<std::string> failed_hosts;
  std::vector<std::string> unrecorded;
  const auto finished = [&](const fleet::SshHostOutcome& host) {
    for (const fleet::SshAgent& agent : host.started) {
      std::cout << host.host << ": started " << Describe(agent) << "\n";
    }
    std::cout.flush();
    if (!host.error.empty()) {
      std::cerr << "agents start: " << host.host << ": " << host.error << "\n";
      failed_hosts.push_back(host.host);
    }
    if (host.started.empty()) return;
    started.insert(started.end(), host.started.begin(), host.started.end());
    // Recorded as each host finishes, on a connection of its own: a slow
    // copy to a later host must not leave these unrecorded, nor hold a
    // client connection past its read deadline.
    Json launches = Json::array();
    for (const fleet::SshAgent& agent : host.started) {
      Json record = {{"via", "ssh"},
                     {"host", agent.host},
                     {"agent", agent.name},
                     {"remote_dir", agent.remote_dir},
                     {"options", options}};
      if (agent.unit.empty()) {
        record["pid"] = agent.pid;
      } else {
        record["unit"] = agent.unit;
      }
      launches.push_back(record);
    }
    try {
      Connect(command.address).Request({{"type", "launched"}, {"launches", launches}});
    } catch (const std::exception& error) {
      std::cerr << "agents start: " << host.host << ": the coordinator did not record its "
                << host.started.size() << " agent(s) (" << error.what()
                << "); `agents stop` will not know them\n";
      for (const fleet::SshAgent& agent : host.started) unrecorded.push_back(agent.name);
    }
  };
  fleet::StartAgents(launch, finished);

  const size_t hosts_ok = launch.hosts.size() - failed_hosts.size();
  std::cout << "started " << started.size() << " agent(s) on " << hosts_ok << " of "
            << launch.hosts.size() << " host(s), bundle " << commit;
  if (!failed_hosts.empty()) std::cout << "; failed: " << JoinStrings(failed_hosts, " ");
  std::cout << "\n";
  bool connected = true;
  if (command.wait_s > 0 && !started.empty()) {
    // Started is a process; joined is what the fleet can use.
    std::set<std::string> joined;
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::duration<double>(command.wait_s);
    while (true) {
      joined = ConnectedAgents(command.address);
      const bool all = std::all_of(started.begin(), started.end(),
                                   [&](const fleet::SshAgent& a) { return joined.count(a.name); });
      if (all || std::chrono::steady_clock::now() >= deadline) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
    size_t count = 0;
    for (const fleet::SshAgent& agent : started) {
      if (joined.count(agent.name)) {
        ++count;
        continue;
      }
      connected = false;
      std::cerr << "agents start: " << agent.host << ": " << agent.name
                << " has not connected after " << command.wait_s << " s; see " << agent.Log()
                << "\n";
    }
    std::cout << count << " of " << started.size() << " agent(s) connected\n";
  }
  return failed_hosts.empty() && unrecorded.empty() && connected ? 0 : 1;
}

int RunAgentsStart(const AgentsStartCommand& command, const CLI::App* cli) {
  if (command.via == "slurm") {
    RefuseOptions(cli, kSshOnly, "slurm");
    return RunSlurmStart(command);
  }
  RefuseOptions(cli, kSlurmOnly, "ssh");
  return RunSshStart(command);
}

struct AgentsStopCommand {
  FleetAddress address;
  std::string ssh_config;
  std::vector<std::string> ssh_options;
  double grace_s = 10;
  int parallel = 8;
};

// How to reach the host of an ssh launch: this command's --ssh-config and
// --ssh-option where given, else those it was started with.
fleet::SshTransport TransportOf(const coordinator::LaunchRecord& launch,
                                const AgentsStopCommand& command, const CLI::App* cli) {
  fleet::SshTransport ssh;
  const Json options = Json::parse(launch.options);
  ssh.config_file =
      cli->count("--ssh-config") ? command.ssh_config : options.value("ssh_config", std::string());
  ssh.options = cli->count("--ssh-option")
                    ? command.ssh_options
                    : options.value("ssh_options", std::vector<std::string>());
  return ssh;
}

int RunAgentsStop(const AgentsStopCommand& command, const CLI::App* cli) {
  const Json reply = Connect(command.address).Request({{"type", "stop_agents"}});
  const std::vector<std::string> ids = reply.at("slurm_job_ids");
  bool ok = true;
  std::cout << "asked " << reply.at("agents").size() << " agent(s) to stop";
  std::string slurm_error;
  if (!ids.empty()) {
    // The agents hand their jobs back on the stop message; scancel ends
    // the allocations, also of agents that never connected.
    try {
      fleet::CancelJobs(ids);
      std::cout << "; cancelled Slurm jobs";
      for (const std::string& id : ids) std::cout << " " << id;
    } catch (const Error& error) {
      slurm_error = error.what();
    }
  }
  std::cout << "\n" << std::flush;
  // The ssh launches are stopped all the same.
  if (!slurm_error.empty()) {
    std::cerr << "agents stop: " << slurm_error << "\n";
    ok = false;
  }

  // The ssh launches, one ssh session per host (and way to reach it).
  std::vector<fleet::SshStopGroup> groups;
  for (const Json& json : reply.value("launches", Json::array())) {
    // One unreadable record must not keep the others from being stopped.
    coordinator::LaunchRecord launch;
    fleet::SshTransport ssh;
    try {
      launch = coordinator::LaunchFromJson(json);
      if (launch.via != "ssh") continue;
      ssh = TransportOf(launch, command, cli);
    } catch (const std::exception& error) {
      std::cerr << "agents stop: a launch the coordinator sent cannot be stopped (" << error.what()
                << "): " << protocol::Abbreviated(json.dump()) << "\n";
      ok = false;
      continue;
    }
    auto group = std::find_if(groups.begin(), groups.end(), [&](const fleet::SshStopGroup& g) {
      return g.host == launch.host && g.ssh.config_file == ssh.config_file &&
             g.ssh.options == ssh.options;
    });
    if (group == groups.end()) {
      group = groups.insert(groups.end(), fleet::SshStopGroup{launch.host, ssh, {}});
    }
    group->agents.push_back(
        {launch.host, launch.agent, launch.remote_dir, launch.unit, launch.pid});
  }
  const auto finished = [&](const std::vector<fleet::SshStopOutcome>& outcomes) {
    for (const fleet::SshStopOutcome& outcome : outcomes) {
      const fleet::SshAgent& agent = outcome.agent;
      const std::string what =
          agent.name + " (" +
          (agent.unit.empty() ? "pid " + std::to_string(agent.pid) : "unit " + agent.unit) + ")";
      if (!outcome.error.empty()) {
        // Its launch reads stopped all the same: say what is left behind.
        std::cerr << "agents stop: " << agent.host << ": could not stop " << what << ": "
                  << outcome.error << "; it may still run there\n";
        ok = false;
      } else if (outcome.how == "gone") {
        std::cout << agent.host << ": " << what << " had exited\n";
      } else if (outcome.how == "killed") {
        std::cout << agent.host << ": killed " << agent.name << " (pid " << agent.pid
                  << ": still running " << command.grace_s << " s after SIGTERM)\n";
      } else {
        std::cout << agent.host << ": stopped " << what << "\n";
      }
    }
    std::cout.flush();
  };
  fleet::StopAgents(groups, command.grace_s, command.parallel, finished);
  return ok ? 0 : 1;
}

}  // namespace

std::vector<std::pair<CLI::App*, CommandRunner>> AddFleetCommands(CLI::App& app) {
  std::vector<std::pair<CLI::App*, CommandRunner>> commands;

  auto coordinator = std::make_shared<CoordinatorCommand>();
  CLI::App* coordinator_command =
      app.add_subcommand("coordinator", "Serve the job queue and results.db to agents and clients");
  coordinator_command->add_option("--listen", coordinator->listen, "HOST:PORT (port 0: any free)")
      ->capture_default_str();
  coordinator_command->add_option("--db", coordinator->db, "The results database")
      ->capture_default_str();
  coordinator_command
      ->add_option("--secret-file", coordinator->secret_file,
                   "The fleet's shared secret (chmod 600)")
      ->required();
  coordinator_command->add_option("--port-file", coordinator->port_file,
                                  "Write the port it listens on to this file");
  coordinator_command->add_option("--tls-cert", coordinator->tls_cert,
                                  "Serve TLS with this certificate (PEM chain)");
  coordinator_command->add_option("--tls-key", coordinator->tls_key, "The certificate's key (PEM)");
  coordinator_command
      ->add_option("--heartbeat", coordinator->options.heartbeat_s,
                   "Seconds between heartbeats; a peer silent for three is cut off")
      ->check(CLI::Range(0.05, 600.0))
      ->capture_default_str();
  coordinator_command
      ->add_option("--lease", coordinator->options.lease_s,
                   "Seconds a job stays leased without a heartbeat")
      ->check(CLI::Range(0.1, 86400.0))
      ->capture_default_str();
  coordinator_command
      ->add_option("--max-connections", coordinator->options.max_connections,
                   "Connections served at once; more are refused")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  coordinator_command
      ->add_option("--max-connections-per-address",
                   coordinator->options.max_connections_per_address,
                   "Connections served at once from one source address")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  coordinator_command
      ->add_option("--max-handshakes-per-address", coordinator->options.max_handshakes_per_address,
                   "Handshakes under way at once from one source address")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  coordinator_command->add_option("--require-commit", coordinator->options.require_commit,
                                  "Refuse agents built from another commit (as probe reports it)");
  commands.emplace_back(coordinator_command,
                        [coordinator] { return RunCoordinator(*coordinator); });

  auto agent = std::make_shared<AgentCommand>();
  CLI::App* agent_command = app.add_subcommand(
      "agent", "Run jobs of a coordinator on this host, each in a child process");
  AddFleetAddress(agent_command, agent->address);
  agent_command->add_option("--name", agent->name, "Its name (default: HOST-PID or HOST-slurmJOB)");
  agent_command
      ->add_option("--give-up", agent->give_up_s,
                   "Exit when the coordinator is unreachable for this many seconds")
      ->check(CLI::Range(1.0, 1e7))
      ->capture_default_str();
  agent_command->add_option("--job-binary", agent->job_binary,
                            "The nimble-bench that runs run and probe jobs (default: this one)");
  commands.emplace_back(agent_command, [agent] { return RunAgentCommand(*agent); });

  CLI::App* probe_command =
      app.add_subcommand("probe", "Print this host as an agent reports it (JSON)");
  commands.emplace_back(probe_command, [] {
    std::cout << ProbeJson() << "\n";
    return 0;
  });

  auto submit = std::make_shared<SubmitCommand>();
  CLI::App* submit_command = app.add_subcommand("submit", "Queue jobs on a coordinator");
  AddFleetAddress(submit_command, submit->address);
  submit_command->add_option("--kind", submit->kind, "The job kind")
      ->check(CLI::IsMember({"run", "baseline", "microbench", "probe"}))
      ->capture_default_str();
  AddRunOptions(submit_command, submit->run);
  submit_command->add_flag("--emulate", submit->run.emulate,
                           "Emulated agents may take it (a correctness run, never a latency)");
  submit_command
      ->add_option("--suite", submit->suite,
                   "microbench: kernels or vm (Google Benchmark), or dispatch (Figure 3)")
      ->check(CLI::IsMember({"kernels", "vm", "dispatch"}))
      ->capture_default_str();
  submit_command->add_option("--filter", submit->filter, "microbench: --benchmark_filter");
  submit_command->add_option("--shapes", submit->shapes, "microbench dispatch: INxOUT shapes");
  submit_command->add_option("--lengths", submit->lengths, "microbench dispatch: row counts");
  submit_command->add_option("--degrees", submit->degrees, "microbench dispatch: degrees k");
  submit_command->add_option("--rounds", submit->rounds, "microbench dispatch: rounds");
  submit_command->add_option("--framework", submit->baseline.framework, "baseline: the peer")
      ->check(CLI::IsMember(baselines::PeerFrameworks()));
  submit_command->add_option("--variant", submit->baseline.variants,
                             "baseline: a job for each of these variants (default: all)");
  submit_command->add_option(
      "--python", submit->baseline.python,
      "baseline: the agent's interpreter with the framework (default: found)");
  submit_command->add_option("--min-time", submit->min_time,
                             "microbench: --benchmark_min_time (dispatch: --min-time)");
  submit_command->add_option("--count", submit->count, "Copies of the job")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  submit_command
      ->add_option("--max-failures", submit->max_failures,
                   "Failed or lost attempts before the job fails")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  submit_command->add_option("--timeout", submit->timeout_s, "The job's hard limit in seconds");
  submit_command->add_option("--cpu-flag", submit->cpu_flags, "A CPU flag the agent must have");
  submit_command->add_option("--min-cores", submit->min_cores, "Cores the agent must have");
  submit_command->add_flag("--wait", submit->wait, "Wait until every job is done or failed");
  submit_command->add_flag("--json", submit->json, "Print JSON");
  commands.emplace_back(submit_command,
                        [submit, submit_command] { return RunSubmit(*submit, submit_command); });

  auto status = std::make_shared<std::pair<FleetAddress, bool>>();
  CLI::App* status_command =
      app.add_subcommand("status", "The coordinator's agents, jobs, failures");
  AddFleetAddress(status_command, status->first);
  status_command->add_flag("--json", status->second, "Print JSON");
  commands.emplace_back(status_command,
                        [status] { return RunStatus(status->first, status->second); });

  CLI::App* agents_command =
      app.add_subcommand("agents", "Launch or stop agents through Slurm or ssh");
  agents_command->require_subcommand(1);
  auto start = std::make_shared<AgentsStartCommand>();
  CLI::App* start_command = agents_command->add_subcommand(
      "start",
      "Start agents: as Slurm batch jobs (sbatch + srun), or over ssh on the HOSTs named, from "
      "an agent bundle (scripts/bundle-agent.sh). Through ssh, each host gets the bundle (scp) "
      "unpacked in --remote-dir and the secret (over ssh's stdin, mode 0600) beside it; its "
      "agents, named HOST-sshN, run under systemd-run --unit=nimble-agent-NAME where the remote "
      "user is root and systemd runs there, else under nohup setsid with a pid file and the log "
      "REMOTE_DIR/agent-NAME.log. ssh runs with BatchMode=yes (a host that asks for a password "
      "fails at once). Every host is tried; the exit status is 1 if any failed.");
  AddFleetAddress(start_command, start->address);
  start_command->add_option("--via", start->via, "The engine that places agents")
      ->check(CLI::IsMember({"slurm", "ssh"}))
      ->required();
  start_command->add_option("HOST", start->ssh.hosts, "ssh: the hosts ([user@]host)");
  start_command->add_option("--count", start->count, "Agents to start (ssh: on each host)")
      ->check(CLI::Range(1, 10000))
      ->capture_default_str();
  start_command->add_option("--constraint", start->launch.constraint, "sbatch --constraint");
  start_command->add_option("--gres", start->launch.gres, "sbatch --gres (e.g. gpu:1)");
  start_command->add_option("--partition", start->launch.partition, "sbatch --partition");
  start_command->add_option("--time", start->launch.time_limit, "sbatch --time (e.g. 2:00:00)");
  start_command->add_flag("--exclusive", start->launch.exclusive, "sbatch --exclusive");
  start_command->add_option("--output-dir", start->launch.output_dir,
                            "Where Slurm writes the agents' logs (default: here)");
  start_command->add_option("--bundle", start->ssh.bundle,
                            "ssh: the agent bundle (scripts/bundle-agent.sh)");
  start_command->add_option(
      "--remote-dir", start->ssh.remote_dir,
      "ssh: where the bundle goes on each host; %h is the host (use it where hosts share a "
      "filesystem) (default: /opt/nimble-agent when the remote user is root, else "
      "~/nimble-agent)");
  start_command
      ->add_option("--supervisor", start->ssh.supervisor,
                   "ssh: what keeps the agents: systemd (a transient unit, as root), nohup, or "
                   "auto (systemd where it runs and the user is root)")
      ->check(CLI::IsMember({"auto", "systemd", "nohup"}))
      ->capture_default_str();
  start_command->add_option("--ssh-config", start->ssh.ssh.config_file,
                            "ssh: the ssh config file (ssh -F, scp -F)");
  start_command
      ->add_option("--ssh-option", start->ssh.ssh.options,
                   "ssh: an ssh option KEY=VALUE for ssh and scp -o (repeatable; "
                   "ConnectTimeout=10 unless given)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  start_command->add_option("--parallel", start->ssh.parallel, "ssh: hosts set up at once")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  start_command
      ->add_option("--wait", start->wait_s,
                   "ssh: seconds to wait for the agents to connect (0: do not wait); one that "
                   "has not is an error")
      ->check(CLI::Range(0.0, 86400.0))
      ->capture_default_str();
  start_command
      ->add_option("--give-up", start->give_up_s,
                   "Agents exit after this many seconds without a coordinator")
      ->capture_default_str();
  commands.emplace_back(start_command,
                        [start, start_command] { return RunAgentsStart(*start, start_command); });
  auto stop = std::make_shared<AgentsStopCommand>();
  CLI::App* stop_command = agents_command->add_subcommand(
      "stop",
      "Stop every agent: each connected one is told to stop; Slurm launches are scancelled; "
      "ssh launches are stopped on their hosts (systemctl stop of the unit, or SIGTERM to the "
      "pid while it is still that agent, SIGKILL after --grace)");
  AddFleetAddress(stop_command, stop->address);
  stop_command->add_option(
      "--ssh-config", stop->ssh_config,
      "ssh launches: the ssh config file (default: the one they started with)");
  stop_command
      ->add_option("--ssh-option", stop->ssh_options,
                   "ssh launches: an ssh -o option (repeatable; default: those they started with)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  stop_command
      ->add_option("--grace", stop->grace_s,
                   "ssh launches: seconds from SIGTERM to SIGKILL for an agent under nohup")
      ->check(CLI::Range(0.0, 3600.0))
      ->capture_default_str();
  stop_command->add_option("--parallel", stop->parallel, "ssh launches: hosts at once")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  commands.emplace_back(stop_command,
                        [stop, stop_command] { return RunAgentsStop(*stop, stop_command); });
  return commands;
}

}  // namespace nimble::bench
