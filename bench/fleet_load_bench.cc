// Load test of the fleet (a benchmark: the tests never run it). A real
// coordinator and N real agents on loopback drain M probe jobs, each run
// in a child process as in production. Prints the throughput, the dispatch
// latency (how long an agent waits between reporting a result and holding
// its next job: ack, ready, lease, send) and checks in results.db that no
// job was lost or recorded twice.
//
//   build/bench/nimble_bench_fleet_load [--jobs 10000] [--agents 4]
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "harness/protocol/auth.h"
#include "harness/protocol/client.h"
#include "harness/protocol/messages.h"

extern char** environ;

namespace {

using nimble::protocol::Json;
namespace fs = std::filesystem;

// Starts argv with stderr into `log`; returns its pid.
pid_t Spawn(const std::vector<std::string>& argv, const std::string& log) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, log.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<char*> args;
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ) != 0) {
    std::perror(args[0]);
    std::exit(1);
  }
  posix_spawn_file_actions_destroy(&actions);
  return pid;
}

void Stop(pid_t pid) {
  kill(pid, SIGTERM);
  waitpid(pid, nullptr, 0);
}

double Percentile(std::vector<double> values, double fraction) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return values[std::min(values.size() - 1, static_cast<size_t>(fraction * values.size()))];
}

int64_t Scalar(sqlite3* db, const char* sql) {
  sqlite3_stmt* statement = nullptr;
  sqlite3_prepare_v2(db, sql, -1, &statement, nullptr);
  const int64_t value =
      sqlite3_step(statement) == SQLITE_ROW ? sqlite3_column_int64(statement, 0) : -1;
  sqlite3_finalize(statement);
  return value;
}

}  // namespace

int main(int argc, char** argv) {
  int jobs = 10000, agents = 4;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--jobs") == 0) jobs = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--agents") == 0) agents = std::atoi(argv[i + 1]);
  }
  const fs::path dir =
      fs::temp_directory_path() / ("nimble_fleet_load_" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string secret = dir / "secret";
  std::ofstream(secret) << "load-test-" << getpid() << "\n";
  chmod(secret.c_str(), 0600);
  const std::string binary = NIMBLE_BENCH_BINARY;
  const pid_t coordinator =
      Spawn({binary, "coordinator", "--listen", "127.0.0.1:0", "--port-file", dir / "port", "--db",
             dir / "results.db", "--secret-file", secret},
            dir / "coordinator.log");
  while (!fs::exists(dir / "port")) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::string port;
  std::ifstream(dir / "port") >> port;
  const std::string address = "127.0.0.1:" + port;
  std::vector<pid_t> agent_pids;
  for (int i = 0; i < agents; ++i) {
    const std::string name = "load" + std::to_string(i);
    agent_pids.push_back(
        Spawn({binary, "agent", "--coordinator", address, "--secret-file", secret, "--name", name},
              dir / (name + ".log")));
  }
  nimble::protocol::Client client(address, nimble::protocol::ReadSecretFile(secret));
  auto counts = [&] { return client.Request({{"type", "status"}}); };
  while (counts().at("agents").size() < static_cast<size_t>(agents)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }

  const auto start = std::chrono::steady_clock::now();
  // Batches keep each submit frame far below the frame cap.
  nimble::protocol::JobSpec probe;
  probe.kind = "probe";
  probe.allow_emulated = true;
  for (int submitted = 0; submitted < jobs;) {
    const int batch = std::min(1000, jobs - submitted);
    Json specs = Json::array();
    for (int i = 0; i < batch; ++i) specs.push_back(nimble::protocol::ToJson(probe));
    client.Request({{"type", "submit"}, {"jobs", specs}});
    submitted += batch;
  }
  int64_t finished = 0;
  while (finished < jobs) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    const Json state = counts().at("jobs");
    finished = state.at("done").get<int64_t>() + state.at("failed").get<int64_t>();
    std::cerr << "\r\033[K" << finished << "/" << jobs << std::flush;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cerr << "\r\033[K";
  for (pid_t pid : agent_pids) Stop(pid);
  Stop(coordinator);

  sqlite3* db = nullptr;
  sqlite3_open((dir / "results.db").c_str(), &db);
  // An agent's idle gap: from the end of its previous attempt to the start
  // of its next lease.
  sqlite3_stmt* gaps = nullptr;
  sqlite3_prepare_v2(db,
                     "SELECT (julianday(started_at) - julianday(lag(finished_at) OVER "
                     "(PARTITION BY agent ORDER BY started_at))) * 86400000 FROM job_attempts",
                     -1, &gaps, nullptr);
  std::vector<double> latencies;
  while (sqlite3_step(gaps) == SQLITE_ROW) {
    if (sqlite3_column_type(gaps, 0) != SQLITE_NULL)
      latencies.push_back(sqlite3_column_double(gaps, 0));
  }
  sqlite3_finalize(gaps);
  const int64_t done = Scalar(db, "SELECT count(*) FROM jobs WHERE state = 'done'");
  const int64_t failed = Scalar(db, "SELECT count(*) FROM jobs WHERE state = 'failed'");
  const int64_t done_attempts =
      Scalar(db, "SELECT count(*) FROM job_attempts WHERE outcome = 'done'");
  const int64_t twice = Scalar(db,
                               "SELECT count(*) FROM (SELECT job_id FROM job_attempts WHERE "
                               "outcome = 'done' GROUP BY job_id HAVING count(*) > 1)");
  const int64_t attempts = Scalar(db, "SELECT count(*) FROM job_attempts");
  sqlite3_close(db);

  std::printf("%d probe jobs through %d agents: %.1f s, %.1f jobs/s\n", jobs, agents, seconds,
              jobs / seconds);
  std::printf("dispatch latency (agent idle between jobs): p50 %.2f ms, p90 %.2f ms, p99 %.2f ms\n",
              Percentile(latencies, 0.5), Percentile(latencies, 0.9), Percentile(latencies, 0.99));
  std::printf(
      "jobs done %lld, failed %lld; attempts %lld, done attempts %lld, recorded twice %lld\n",
      static_cast<long long>(done), static_cast<long long>(failed),
      static_cast<long long>(attempts), static_cast<long long>(done_attempts),
      static_cast<long long>(twice));
  const bool intact = done == jobs && done_attempts == jobs && twice == 0;
  if (intact)
    fs::remove_all(dir);
  else
    std::printf("logs and results.db kept in %s\n", dir.c_str());
  return intact ? 0 : 1;
}
