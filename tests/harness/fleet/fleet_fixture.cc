#include "tests/harness/fleet/fleet_fixture.h"

#include <unistd.h>

#include <exception>
#include <fstream>
#include <iostream>
#include <sstream>

namespace nimble::fleet_test {

void FleetFixture::SetUp() {
  dir_ = std::make_unique<TempDir>("nimble-" + suite_);
  secret_ = suite_ + "-test-secret-" + std::to_string(getpid());
  secret_file_ = *dir_ / "secret";
  WriteFile(secret_file_, secret_ + "\n", 0600);
  db_path_ = *dir_ / "results.db";
  db_ = std::make_unique<ResultsReader>(db_path_);
}

void FleetFixture::TearDown() {
  if (HasFailure()) DumpLogs();
  Stop();
  dir_.reset();
}

void FleetFixture::DumpLogs() {
  for (const auto& [name, process] : processes_) {
    std::cerr << "---- log of " << name << " (pid " << process->pid() << ")\n"
              << Tail(process->Log(), 6000) << "\n";
  }
}

void FleetFixture::Stop() {
  // Each Process kills its whole tree and reaps it.
  for (auto it = processes_.rbegin(); it != processes_.rend(); ++it) it->second.reset();
  processes_.clear();
  netns_.reset();
}

std::string FleetFixture::WhyNoNetNamespaces(const std::string& needs_root) {
  if (geteuid() != 0) return needs_root + "; this is uid " + std::to_string(geteuid());
  try {
    RunCommand({"ip", "-V"}, 10s);
  } catch (const std::exception& missing) {
    return std::string("no `ip` (iproute2): ") + missing.what();
  }
  return "";
}

void FleetFixture::UseNetNamespace(const std::string& needs_root) {
  const std::string why_not = WhyNoNetNamespaces(needs_root);
  if (!why_not.empty()) GTEST_SKIP() << why_not;
  netns_ = std::make_unique<NetNamespace>();
  ASSERT_EQ(netns_->Create(), "") << "cannot set up the network namespace";
}

Process& FleetFixture::Start(const std::string& name, const std::vector<std::string>& argv,
                             const std::map<std::string, std::string>& environment) {
  processes_.emplace_back(name,
                          std::make_unique<Process>(argv, *dir_ / (name + ".log"), environment));
  return *processes_.back().second;
}

uint16_t FleetFixture::StartCoordinator(const std::string& listen,
                                        const std::vector<std::string>& extra,
                                        const std::string& name) {
  const std::string port_file = *dir_ / (name + ".port");
  coordinator_ =
      &Start(name, Concat({NIMBLE_BENCH_BINARY, "coordinator", "--listen", listen, "--db", db_path_,
                           "--secret-file", secret_file_, "--port-file", port_file, "--heartbeat",
                           "0.5", "--lease", "3"},
                          extra));
  uint16_t port = 0;
  const bool up = WaitFor(
      [&] {
        std::ifstream file(port_file);
        return static_cast<bool>(file >> port) && port > 0;
      },
      15s, 20ms);
  EXPECT_TRUE(up) << "no port file from the coordinator: " << coordinator_->Log();
  const std::string host = listen.substr(0, listen.rfind(':'));
  address_ = (host == "0.0.0.0" ? "127.0.0.1" : host) + ":" + std::to_string(port);
  return up ? port : 0;
}

CliResult FleetFixture::Client(const std::vector<std::string>& command,
                               const std::vector<std::string>& args,
                               std::optional<Clock::duration> limit) {
  return RunCommand(
      Concat(Concat(Concat(Concat({NIMBLE_BENCH_BINARY}, command),
                           {"--coordinator", address_, "--secret-file", secret_file_}),
                    client_tls_),
             args),
      limit.value_or(client_limit_));
}

std::vector<int64_t> FleetFixture::Submit(const std::vector<std::string>& args) {
  const CliResult result = Client({"submit"}, Concat(args, {"--json"}));
  EXPECT_EQ(result.exit_code, 0) << result.err;
  std::vector<int64_t> ids;
  try {
    const Json reply = Json::parse(result.out);
    for (const Json& id : reply.at("job_ids")) ids.push_back(id.get<int64_t>());
  } catch (const Json::exception& error) {
    ADD_FAILURE() << "submit printed no job ids (" << error.what() << "): " << result.out;
  }
  return ids;
}

Json FleetFixture::Status() {
  const CliResult result = Client({"status"}, {"--json"});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  try {
    return Json::parse(result.out);
  } catch (const Json::exception& error) {
    ADD_FAILURE() << "status --json printed no JSON (" << error.what() << "): " << result.out;
    return Json::object();
  }
}

std::string FleetFixture::AgentState(const Json& status, const std::string& name) {
  for (const Json& agent : status.value("agents", Json::array())) {
    if (agent.value("name", "") == name) return agent.value("state", "");
  }
  return "";
}

::testing::AssertionResult FleetFixture::AgentConnects(const std::string& name,
                                                       Clock::duration limit) {
  const std::string sql =
      "SELECT count(*) FROM agents WHERE state = 'connected' AND name = " + SqlQuote(name);
  if (WaitFor([&] { return db_->Count(sql) == 1; }, limit)) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure()
         << "agent " << name << " did not connect (" << db_->error() << ")";
}

::testing::AssertionResult FleetFixture::JobsFinish(const std::vector<int64_t>& ids,
                                                    Clock::duration limit) {
  const std::string open = "SELECT count(*) FROM jobs WHERE id IN (" + Join(ids) +
                           ") AND state NOT IN ('done', 'failed')";
  if (!ids.empty() &&
      WaitFor([&] { return db_->Count(open) == 0 && db_->error().empty(); }, limit)) {
    return ::testing::AssertionSuccess();
  }
  ::testing::AssertionResult failure = ::testing::AssertionFailure();
  failure << "jobs still open after the deadline:";
  for (const auto& row : db_->Rows("SELECT id, state, agent, attempts, error FROM jobs")) {
    failure << " [" << row[0] << " " << row[1] << " on " << row[2] << ", attempt " << row[3] << ": "
            << row[4] << "]";
  }
  return failure << " " << db_->error();
}

std::vector<std::string> FleetFixture::LinesWith(const std::string& log, const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);) {
    if (line.find(text) != std::string::npos) lines.push_back(line);
  }
  return lines;
}

}  // namespace nimble::fleet_test
