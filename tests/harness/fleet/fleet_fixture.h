// The fixture that the fleet's end-to-end suites (fleet_test.cc,
// bundle_test.cc, ssh_launch_test.cc) build on: a fresh directory with the
// fleet's secret and results.db, the processes a test starts (killed in
// reverse order, their logs printed when it fails), a real coordinator, the
// CLI calls the tests make of it (submit, status) and waits on what
// results.db says. Each suite's own hosts (namespaces, bare roots, sshds,
// Slurm) stay in its own file.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tests/harness/fleet/fleet_processes.h"

namespace nimble::fleet_test {

using Json = nlohmann::json;
using Rows = std::vector<std::vector<std::string>>;

// A run job small enough for qemu: the LSTM at hidden size 16, three
// sentences, one timed pass (the target is the test's to add).
inline const std::vector<std::string> kTinyRun = {"--kind",        "run", "--model",     "lstm",
                                                  "--hidden-size", "16",  "--sentences", "3",
                                                  "--warmup",      "0",   "--repeat",    "1"};

class FleetFixture : public ::testing::Test {
 protected:
  // `suite` names the temporary directory (/tmp/nimble-SUITE-XXXXXX) and
  // the secret.
  explicit FleetFixture(std::string suite) : suite_(std::move(suite)) {}

  // The directory, the secret file (0600) and results.db's reader.
  void SetUp() override;
  // DumpLogs() when the test failed, Stop(), then the directory.
  void TearDown() override;
  // Prints the tail of each process's log; suites add their own logs.
  virtual void DumpLogs();
  // Ends the processes in reverse order of starting (agents before their
  // coordinator), each with its whole tree, then netns_; suites stop what
  // else they hold around it.
  virtual void Stop();

  // Why network namespaces cannot be made here (`needs_root` when this is
  // not root, or no `ip` from iproute2), or "".
  static std::string WhyNoNetNamespaces(const std::string& needs_root);
  // Skips the test as WhyNoNetNamespaces says, else makes netns_ (a fatal
  // failure when it cannot); callers return when IsSkipped() ||
  // HasFatalFailure().
  void UseNetNamespace(const std::string& needs_root);

  // Starts a process whose output goes to NAME.log in the directory.
  Process& Start(const std::string& name, const std::vector<std::string>& argv,
                 const std::map<std::string, std::string>& environment = {});

  // Starts a coordinator on `listen` (port 0 picks a free one) with `extra`
  // options, waits for its port file and points address_ at it (127.0.0.1
  // for 0.0.0.0). Its port, or 0 with the test failed when it does not
  // come up.
  uint16_t StartCoordinator(const std::string& listen = "127.0.0.1:0",
                            const std::vector<std::string>& extra = {},
                            const std::string& name = "coordinator");

  // nimble-bench `command` against the coordinator (with client_tls_), with
  // `args` after it, within `limit` (client_limit_ when not given).
  CliResult Client(const std::vector<std::string>& command, const std::vector<std::string>& args,
                   std::optional<Clock::duration> limit = std::nullopt);
  // Queues jobs with `submit ... --json`; their ids.
  std::vector<int64_t> Submit(const std::vector<std::string>& args);
  // `status --json`, or an empty object with the test failed.
  Json Status();
  // The state an agent's own status entry shows, or "" when it is not listed.
  static std::string AgentState(const Json& status, const std::string& name);
  // Waits until results.db has agent `name` connected.
  ::testing::AssertionResult AgentConnects(const std::string& name, Clock::duration limit = 20s);
  // Waits until none of `ids` is queued or leased.
  ::testing::AssertionResult JobsFinish(const std::vector<int64_t>& ids, Clock::duration limit);
  // The lines of `log` that mention `text`.
  static std::vector<std::string> LinesWith(const std::string& log, const std::string& text);

  std::unique_ptr<TempDir> dir_;
  std::string secret_;  // what secret_file_ holds (with a newline)
  std::string secret_file_;
  std::string db_path_;
  std::unique_ptr<ResultsReader> db_;
  std::string address_;  // the coordinator's, for clients and agents
  Process* coordinator_ = nullptr;
  std::vector<std::pair<std::string, std::unique_ptr<Process>>> processes_;
  // A second "host", for the suites that need one (UseNetNamespace).
  std::unique_ptr<NetNamespace> netns_;
  // Every client's options after the address and secret (a TLS CA).
  std::vector<std::string> client_tls_;
  Clock::duration client_limit_ = 60s;

 private:
  std::string suite_;
};

}  // namespace nimble::fleet_test
