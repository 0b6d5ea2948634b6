// `nimble-bench agents start --via ssh` and `agents stop` end to end. Each
// "host" is a network namespace of its own running a real sshd on its own
// address (a host key made for the test, a client key authorized for root);
// the agent bundle is the one scripts/bundle-agent.sh makes (or, where that
// script is absent, a tarball of the same layout around this build's
// nimble-bench). The agents started through ssh connect back to a real
// coordinator here over the veth links, run real jobs into results.db under
// the names they were launched with, and `agents stop` leaves none of them
// running. Nothing is mocked; what happened is read from the CLI's output
// and exit status, results.db and /proc.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sqlite3.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <list>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "harness/bench/results_db.h"
#include "harness/coordinator/job_store.h"
#include "harness/fleet/ssh_launch.h"
#include "harness/protocol/frame.h"
#include "nimble/vm/error.h"
#include "tests/harness/fleet/fleet_fixture.h"
#include "tests/harness/fleet/fleet_processes.h"

namespace nimble::fleet_test {
namespace {

using ::testing::AnyOf;
using ::testing::ContainsRegex;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

// /proc/PID/cmdline with its NULs as spaces; "" for a process that is gone
// or a zombie (whose cmdline is empty).
std::string CommandLine(pid_t pid) {
  std::string text = ReadFile("/proc/" + std::to_string(pid) + "/cmdline");
  std::replace(text.begin(), text.end(), '\0', ' ');
  return text;
}

// Every live process whose command line mentions `text`.
std::vector<pid_t> ProcessesMentioning(const std::string& text) {
  std::vector<pid_t> found;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", error)) {
    const std::string name = entry.path().filename();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(name));
    if (pid != getpid() && CommandLine(pid).find(text) != std::string::npos) found.push_back(pid);
  }
  return found;
}

// Whether `pid` runs in network namespace `name` (ip netns's bind mount).
bool InNamespace(pid_t pid, const std::string& name) {
  struct stat process = {};
  struct stat netns = {};
  return stat(("/proc/" + std::to_string(pid) + "/ns/net").c_str(), &process) == 0 &&
         stat(("/run/netns/" + name).c_str(), &netns) == 0 && process.st_ino == netns.st_ino &&
         process.st_dev == netns.st_dev;
}

// The agent bundle, made once for the suite: scripts/bundle-agent.sh where
// it exists, else the same layout by hand (this build's nimble-bench finds
// its libraries on this host).
class Bundle {
 public:
  static const Bundle& Get() {
    static const Bundle bundle;
    return bundle;
  }
  const std::string& path() const { return path_; }
  const std::string& error() const { return error_; }
  const std::string& how() const { return how_; }

 private:
  Bundle() : dir_("nimble-ssh-bundle") {
    path_ = dir_ / "nimble-agent.tar.gz";
    const std::string script = NIMBLE_SOURCE_DIR "/scripts/bundle-agent.sh";
    const std::string build_dir =
        std::filesystem::path(NIMBLE_BENCH_BINARY).parent_path().parent_path().parent_path();
    if (std::filesystem::exists(script)) {
      how_ = "scripts/bundle-agent.sh";
      const CliResult made =
          RunCommand({"bash", script, "--build-dir", build_dir, "--out", path_}, 300s);
      if (made.exit_code != 0) error_ = "scripts/bundle-agent.sh failed: " + made.err + made.out;
      return;
    }
    how_ = "a tarball of " NIMBLE_BENCH_BINARY " (no scripts/bundle-agent.sh)";
    const std::string top = dir_ / "stage/nimble-agent";
    std::filesystem::create_directories(top + "/bin");
    std::filesystem::create_directories(top + "/lib");
    std::filesystem::copy_file(NIMBLE_BENCH_BINARY, top + "/bin/nimble-bench");
    WriteFile(top + "/BUNDLE", "commit test-bundle\narch x86_64\n");
    WriteFile(top + "/nimble-agent.service",
              "[Service]\nExecStart=/opt/nimble-agent/bin/nimble-bench agent\n");
    const CliResult packed =
        RunCommand({"tar", "-C", dir_ / "stage", "-czf", path_, "nimble-agent"}, 120s);
    if (packed.exit_code != 0) error_ = "tar failed: " + packed.err;
  }

  TempDir dir_;
  std::string path_, error_, how_;
};

// One "host": a network namespace with a real sshd on its inner address.
struct SshHost {
  std::unique_ptr<NetNamespace> netns;
  std::unique_ptr<Process> sshd;
  std::string address;  // the namespace's (inner) address
  std::string dir;      // its sshd's files
  std::string Destination() const { return "root@" + address; }
};

class SshLaunchTest : public FleetFixture {
 protected:
  // The CLI waits for ssh: longer than the fleet suite gives it.
  SshLaunchTest() : FleetFixture("ssh-launch") { client_limit_ = 120s; }

  static void SetUpTestSuite() {
    // Agents started through ssh outlive their ssh session and are
    // re-parented: to us, so that the test reaps them (PID 1 here may not).
    prctl(PR_SET_CHILD_SUBREAPER, 1);
  }

  void SetUp() override {
    const std::string why_not = WhyNoNetNamespaces("network namespaces and sshd need root");
    if (!why_not.empty()) GTEST_SKIP() << why_not;
    for (const char* program :
         {"/usr/sbin/sshd", "/usr/bin/ssh", "/usr/bin/scp", "/usr/bin/ssh-keygen"}) {
      if (access(program, X_OK) != 0) {
        GTEST_SKIP() << "no " << program << " (scripts/install-deps.sh installs openssh-server)";
      }
    }
    FleetFixture::SetUp();
    // The client's key, and one that no host authorizes.
    Keygen(*dir_ / "client_key");
    Keygen(*dir_ / "other_key");
    ssh_config_ = *dir_ / "ssh_config";
    WriteFile(ssh_config_, "Host *\n  IdentityFile " + (*dir_ / "client_key") +
                               "\n  IdentitiesOnly yes\n  UserKnownHostsFile " +
                               (*dir_ / "known_hosts") +
                               "\n  GlobalKnownHostsFile /dev/null\n"
                               "  StrictHostKeyChecking accept-new\n  LogLevel ERROR\n");
    // Where the host's own systemd runs, `auto` would start system units,
    // which run outside the namespaces; nohup keeps the agents in them.
    const CliResult systemd = RunCommand({"sh", "-c", "systemctl is-system-running || :"}, 10s);
    if (systemd.out.find("running") != std::string::npos ||
        systemd.out.find("degraded") != std::string::npos) {
      supervisor_ = {"--supervisor", "nohup"};
    }
  }

  // The sshds' logs and the agents' own (in their remote directories).
  void DumpLogs() override {
    FleetFixture::DumpLogs();
    for (const SshHost& host : hosts_) {
      if (host.sshd) {
        std::cerr << "---- sshd of " << host.address << "\n" << Tail(host.sshd->Log(), 6000);
      }
    }
    if (!dir_) return;
    std::error_code ignored;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(dir_->path(), ignored)) {
      if (entry.path().extension() == ".log" &&
          entry.path().filename().string().rfind("agent-", 0) == 0) {
        std::cerr << "---- " << entry.path() << "\n" << Tail(ReadFile(entry.path()), 6000) << "\n";
      }
    }
  }

  // Whatever the test left of the agents (they are no one's children but
  // ours, by the subreaper), then the coordinator and the sshds.
  void Stop() override {
    if (dir_) {
      for (const pid_t pid : ProcessesMentioning(dir_->path())) {
        kill(pid, SIGCONT);
        kill(pid, SIGKILL);
      }
    }
    FleetFixture::Stop();
    hosts_.clear();
    while (waitpid(-1, nullptr, WNOHANG) > 0) {
    }
  }

  static void Keygen(const std::string& path) {
    const CliResult made =
        RunCommand({"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "test", "-f", path}, 30s);
    ASSERT_EQ(made.exit_code, 0) << made.err;
  }

  // A host in namespace `slot` whose root authorizes `key` (a file under
  // the temp dir). Its default route goes to our end of its veth link, so it
  // reaches the coordinator on another namespace's link address too.
  SshHost& AddHost(int slot, const std::string& key) {
    hosts_.emplace_back();
    SshHost& host = hosts_.back();
    host.netns = std::make_unique<NetNamespace>(slot);
    const std::string why_not = host.netns->Create();
    if (!why_not.empty()) {
      ADD_FAILURE() << "cannot make a network namespace: " << why_not;
      return host;
    }
    const CliResult route = RunCommand({"ip", "-n", host.netns->name(), "route", "add", "default",
                                        "via", host.netns->host_address()},
                                       10s);
    EXPECT_EQ(route.exit_code, 0) << route.err;
    host.address = host.netns->inner_address();
    host.dir = *dir_ / ("sshd-" + std::to_string(slot));
    std::filesystem::create_directories(host.dir);
    Keygen(host.dir + "/host_key");
    std::filesystem::copy_file(*dir_ / (key + ".pub"), host.dir + "/authorized_keys");
    WriteFile(host.dir + "/sshd_config",
              "ListenAddress " + host.address + ":22\nHostKey " + host.dir + "/host_key\nPidFile " +
                  host.dir + "/sshd.pid\nAuthorizedKeysFile " + host.dir +
                  "/authorized_keys\nStrictModes no\nUsePAM no\n"
                  "PermitRootLogin prohibit-password\nPasswordAuthentication no\n"
                  "KbdInteractiveAuthentication no\nSubsystem sftp internal-sftp\n"
                  "PrintMotd no\n");
    // sshd's privilege separation directory, which its service would make.
    std::filesystem::create_directories("/run/sshd");
    host.sshd = std::make_unique<Process>(
        host.netns->Inside({"/usr/sbin/sshd", "-D", "-e", "-f", host.dir + "/sshd_config"}),
        host.dir + "/sshd.log");
    EXPECT_TRUE(WaitFor(
        [&] { return host.sshd->Log().find("Server listening on") != std::string::npos; }, 15s))
        << "sshd did not come up: " << host.sshd->Log();
    return host;
  }

  // A coordinator on the first host's link address (where every namespace
  // reaches it, and we do); its port, or 0.
  uint16_t StartCoordinatorOnLink(const std::vector<std::string>& extra = {}) {
    return StartCoordinator(hosts_.front().netns->host_address() + ":0", extra);
  }

  CliResult StartAgents(const std::vector<std::string>& hosts,
                        const std::vector<std::string>& extra = {}) {
    return Client(
        {"agents", "start"},
        Concat(Concat(Concat({"--via", "ssh"}, hosts),
                      {"--bundle", Bundle::Get().path(), "--remote-dir", *dir_ / "remote-%h",
                       "--ssh-config", ssh_config_, "--give-up", "30", "--wait", "30"}),
               Concat(supervisor_, extra)),
        240s);
  }

  // The agents the coordinator recorded as launched: {agent, pid}.
  std::map<std::string, pid_t> LaunchedPids() {
    std::map<std::string, pid_t> pids;
    for (const auto& row : db_->Rows("SELECT agent, pid FROM launches WHERE via = 'ssh'")) {
      pids[row[0]] = static_cast<pid_t>(std::stol(row[1]));
    }
    return pids;
  }

  // Gone, or a zombie not yet reaped.
  static bool Ended(pid_t pid) { return CommandLine(pid).empty(); }

  std::string ssh_config_;
  std::vector<std::string> supervisor_;
  std::list<SshHost> hosts_;
};

// Two hosts, one agent each: both start, connect over their veth links,
// run real jobs recorded under their launched names; `agents stop` ends one
// through the protocol and one the protocol cannot reach (frozen, cut off)
// through ssh (SIGTERM, then SIGKILL), and leaves alone a recorded pid that
// is no longer an agent's.
TEST_F(SshLaunchTest, TwoHostsRunJobsAndStop) {
  ASSERT_EQ(Bundle::Get().error(), "") << Bundle::Get().how();
  SshHost& first = AddHost(1, "client_key");
  SshHost& second = AddHost(2, "client_key");
  ASSERT_FALSE(HasFailure());
  ASSERT_GT(StartCoordinatorOnLink(), 0);

  const CliResult start = StartAgents({first.Destination(), second.Destination()});
  ASSERT_EQ(start.exit_code, 0) << start.out << start.err;
  const std::string name1 = first.address + "-ssh1", name2 = second.address + "-ssh1";
  const std::string remote1 = *dir_ / ("remote-" + first.address);
  const std::string remote2 = *dir_ / ("remote-" + second.address);
  EXPECT_THAT(start.out, HasSubstr(first.Destination() + ": started " + name1 + " (pid "));
  EXPECT_THAT(start.out, HasSubstr("log " + remote2 + "/agent-" + name2 + ".log)"));
  EXPECT_THAT(start.out, HasSubstr("started 2 agent(s) on 2 of 2 host(s), bundle "));
  EXPECT_THAT(start.out, HasSubstr("2 of 2 agent(s) connected"));
  EXPECT_LT(start.seconds, 120);

  // What was recorded: where each agent went and how to stop it (in the
  // order the hosts finished).
  Rows launches = db_->Rows(
      "SELECT via, host, agent, unit, remote_dir, state, json_extract(options, "
      "'$.bundle_commit') <> '' FROM launches");
  std::sort(launches.begin(), launches.end());
  Rows expected = {{"ssh", first.Destination(), name1, "NULL", remote1, "active", "1"},
                   {"ssh", second.Destination(), name2, "NULL", remote2, "active", "1"}};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(launches, expected);
  const std::map<std::string, pid_t> pids = LaunchedPids();
  ASSERT_EQ(pids.size(), 2u);
  const pid_t pid1 = pids.at(name1), pid2 = pids.at(name2);
  // Each runs the bundle's nimble-bench on its own "host" (namespace), and
  // reads the secret from a file only it may read: never from its arguments.
  EXPECT_THAT(CommandLine(pid1), HasSubstr(remote1 + "/bin/nimble-bench agent "));
  EXPECT_THAT(CommandLine(pid1), HasSubstr("--secret-file " + remote1 + "/secret "));
  EXPECT_THAT(CommandLine(pid1), Not(HasSubstr(secret_)));
  EXPECT_TRUE(InNamespace(pid1, first.netns->name()));
  EXPECT_TRUE(InNamespace(pid2, second.netns->name()));
  struct stat secret {};
  ASSERT_EQ(stat((remote2 + "/secret").c_str(), &secret), 0);
  EXPECT_EQ(secret.st_mode & 0777, 0600u);
  EXPECT_EQ(ReadFile(remote2 + "/secret"), ReadFile(secret_file_));
  EXPECT_EQ(ReadFile(remote1 + "/agent-" + name1 + ".pid"), std::to_string(pid1) + "\n");
  // They came in over the veth links, each from its own address.
  EXPECT_THAT(coordinator_->Log(), HasSubstr("agent " + name1 + " joined from " + first.address));
  EXPECT_THAT(coordinator_->Log(), HasSubstr("agent " + name2 + " joined from " + second.address));

  // Real jobs, done by the launched agents (both idle: one job each).
  const std::vector<int64_t> ids = Submit(Concat(kTinyRun, {"--target", "intel", "--count", "2"}));
  ASSERT_EQ(ids.size(), 2u);
  ASSERT_TRUE(JobsFinish(ids, 90s));
  EXPECT_EQ(
      db_->Rows("SELECT j.state, r.status, r.agent FROM jobs j JOIN runs r ON r.id = "
                "j.run_id AND r.job_id = j.id ORDER BY r.agent"),
      (Rows{{"done", "done", std::min(name1, name2)}, {"done", "done", std::max(name1, name2)}}));

  // The second agent freezes: the coordinator cuts it off, so only ssh can
  // end it, and SIGTERM does not (a stopped process takes it only once
  // continued): SIGKILL must.
  ASSERT_EQ(kill(pid2, SIGSTOP), 0);
  ASSERT_TRUE(WaitFor(
      [&] {
        return db_->Scalar("SELECT state FROM agents WHERE name = " + SqlQuote(name2)) ==
               "disconnected";
      },
      15s));
  // A launch whose pid the host has since given to another process.
  Process& bystander = Start("bystander", first.netns->Inside({"sleep", "300"}));
  ASSERT_TRUE(WaitFor([&] { return CommandLine(bystander.pid()).rfind("sleep", 0) == 0; }, 10s));
  db_->Rows(
      "INSERT INTO launches (via, host, agent, pid, remote_dir, launched_at, options, state) "
      "VALUES ('ssh', " +
      SqlQuote(first.Destination()) + ", " + SqlQuote(first.address + "-ssh9") + ", " +
      std::to_string(bystander.pid()) + ", " + SqlQuote(remote1) + ", '2026-01-01T00:00:00Z', " +
      SqlQuote(Json{{"ssh_config", ssh_config_}}.dump()) + ", 'active')");
  ASSERT_EQ(db_->error(), "");

  const CliResult stop = Client({"agents", "stop"}, {"--grace", "1"});
  EXPECT_EQ(stop.exit_code, 0) << stop.out << stop.err;
  EXPECT_THAT(stop.out, HasSubstr("asked 1 agent(s) to stop"));
  EXPECT_THAT(stop.out, AnyOf(HasSubstr(first.Destination() + ": stopped " + name1 + " (pid "),
                              HasSubstr(first.Destination() + ": " + name1 + " (pid " +
                                        std::to_string(pid1) + ") had exited")));
  EXPECT_THAT(stop.out, HasSubstr(second.Destination() + ": killed " + name2 + " (pid " +
                                  std::to_string(pid2) + ": still running 1 s after SIGTERM)"));
  EXPECT_THAT(stop.out, HasSubstr(first.address + "-ssh9 (pid " + std::to_string(bystander.pid()) +
                                  ") had exited"));
  EXPECT_TRUE(bystander.Running()) << "a pid that is no longer an agent's was signalled";

  // No agent is left, nor anything else started from the remote
  // directories, and every launch reads stopped.
  EXPECT_TRUE(WaitFor([&] { return Ended(pid1) && Ended(pid2); }, 10s));
  EXPECT_EQ(ProcessesMentioning(remote1), std::vector<pid_t>{});
  EXPECT_EQ(ProcessesMentioning(remote2), std::vector<pid_t>{});
  EXPECT_EQ(db_->Rows("SELECT DISTINCT state, stopped_at IS NOT NULL FROM launches"),
            (Rows{{"stopped", "1"}}));
  EXPECT_FALSE(std::filesystem::exists(remote2 + "/agent-" + name2 + ".pid"));
  // A second stop has nothing left to do.
  const CliResult again = Client({"agents", "stop"}, {});
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(again.out, "asked 0 agent(s) to stop\n");
}

// A host whose sshd does not take our key fails at once, with ssh's own
// words and the host named, and the exit status says so; the other host's
// agent starts all the same, and only it is recorded. When that host's sshd
// is gone by `agents stop`, the stop message still ends the agent, and the
// stop says what it could not do there.
TEST_F(SshLaunchTest, AHostThatRefusesTheKeyFailsAndTheOtherStarts) {
  ASSERT_EQ(Bundle::Get().error(), "") << Bundle::Get().how();
  SshHost& good = AddHost(1, "client_key");
  SshHost& refusing = AddHost(2, "other_key");
  ASSERT_FALSE(HasFailure());
  ASSERT_GT(StartCoordinatorOnLink(), 0);

  const CliResult start = StartAgents({refusing.Destination(), good.Destination()});
  EXPECT_EQ(start.exit_code, 1) << start.out << start.err;
  EXPECT_THAT(start.err, ContainsRegex("agents start: " + refusing.Destination() +
                                       ": .*Permission denied \\(publickey"));
  EXPECT_THAT(start.err, Not(HasSubstr(good.Destination())));
  const std::string name = good.address + "-ssh1";
  EXPECT_THAT(start.out, HasSubstr(good.Destination() + ": started " + name + " (pid "));
  EXPECT_THAT(start.out, HasSubstr("started 1 agent(s) on 1 of 2 host(s), bundle "));
  EXPECT_THAT(start.out, HasSubstr("; failed: " + refusing.Destination() + "\n"));
  EXPECT_THAT(start.out, HasSubstr("1 of 1 agent(s) connected"));
  EXPECT_EQ(db_->Rows("SELECT host, agent, state FROM launches"),
            (Rows{{good.Destination(), name, "active"}}));
  EXPECT_FALSE(std::filesystem::exists(*dir_ / ("remote-" + refusing.address)));

  const std::vector<int64_t> ids = Submit(Concat(kTinyRun, {"--target", "intel"}));
  ASSERT_EQ(ids.size(), 1u);
  ASSERT_TRUE(JobsFinish(ids, 90s));
  EXPECT_EQ(db_->Rows("SELECT agent, status FROM runs"), (Rows{{name, "done"}}));

  const pid_t pid = LaunchedPids().at(name);
  good.sshd->Kill();
  const CliResult stop = Client({"agents", "stop"}, {});
  EXPECT_EQ(stop.exit_code, 1) << stop.out << stop.err;
  EXPECT_THAT(stop.out, HasSubstr("asked 1 agent(s) to stop"));
  EXPECT_THAT(stop.err, ContainsRegex("agents stop: " + good.Destination() + ": could not stop " +
                                      name + " \\(pid " + std::to_string(pid) +
                                      "\\): .*Connection refused.*; it may still run there"));
  EXPECT_TRUE(WaitFor([&] { return Ended(pid); }, 10s));
  EXPECT_EQ(db_->Rows("SELECT state FROM launches"), (Rows{{"stopped"}}));
}

// With a TLS coordinator, the agents get its CA with the bundle and check
// its certificate; a second start on the same host adds agents under names
// of their own beside the one that runs (unpacking the bundle again under
// it), and one stop ends them all.
TEST_F(SshLaunchTest, TlsAndMoreAgentsOnAHost) {
  ASSERT_EQ(Bundle::Get().error(), "") << Bundle::Get().how();
  SshHost& host = AddHost(1, "client_key");
  ASSERT_FALSE(HasFailure());
  const std::string cert = *dir_ / "cert.pem", key = *dir_ / "key.pem";
  const std::string ip = host.netns->host_address();
  const CliResult made =
      RunCommand({"openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                  "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key, "-out", cert, "-subj",
                  "/CN=" + ip, "-addext", "subjectAltName=IP:" + ip, "-days", "1"},
                 30s);
  ASSERT_EQ(made.exit_code, 0) << made.err;
  ASSERT_GT(StartCoordinatorOnLink({"--tls-cert", cert, "--tls-key", key}), 0);
  client_tls_ = {"--tls-ca", cert};

  const CliResult first = StartAgents({host.Destination()});
  ASSERT_EQ(first.exit_code, 0) << first.out << first.err;
  const CliResult more = StartAgents({host.Destination()}, {"--count", "2"});
  ASSERT_EQ(more.exit_code, 0) << more.out << more.err;
  const std::string remote = *dir_ / ("remote-" + host.address);
  for (const std::string suffix : {"-ssh2", "-ssh3"}) {
    EXPECT_THAT(more.out, HasSubstr(host.Destination() + ": started " + host.address + suffix));
  }
  EXPECT_THAT(more.out, HasSubstr("2 of 2 agent(s) connected"));
  const std::map<std::string, pid_t> pids = LaunchedPids();
  ASSERT_EQ(pids.size(), 3u);
  for (const auto& [name, pid] : pids) {
    EXPECT_THAT(CommandLine(pid), HasSubstr("--tls-ca " + remote + "/tls-ca.pem ")) << name;
  }
  EXPECT_EQ(ReadFile(remote + "/tls-ca.pem"), ReadFile(cert));
  EXPECT_EQ(db_->Count("SELECT count(*) FROM agents WHERE state = 'connected'"), 3);

  const CliResult stop = Client({"agents", "stop"}, {});
  EXPECT_EQ(stop.exit_code, 0) << stop.out << stop.err;
  EXPECT_THAT(stop.out, HasSubstr("asked 3 agent(s) to stop"));
  EXPECT_TRUE(WaitFor(
      [&] {
        return std::all_of(pids.begin(), pids.end(),
                           [](const auto& entry) { return Ended(entry.second); });
      },
      10s));
  EXPECT_EQ(ProcessesMentioning(remote), std::vector<pid_t>{});
}

// Mistakes the CLI refuses before it touches the coordinator or any host.
TEST(SshLaunchCli, RefusesWhatCannotWorkBeforeTouchingAnything) {
  TempDir dir("nimble-ssh-cli");
  WriteFile(dir / "secret", "s\n", 0600);
  WriteFile(dir / "not-a-bundle.tar.gz", "");
  const auto cli = [&](const std::vector<std::string>& args) {
    return RunCommand(Concat({NIMBLE_BENCH_BINARY, "agents", "start", "--coordinator",
                              "127.0.0.1:1", "--secret-file", dir / "secret"},
                             args),
                      60s);
  };
  const CliResult hosts_for_slurm = cli({"--via", "slurm", "root@h"});
  EXPECT_EQ(hosts_for_slurm.exit_code, 1);
  EXPECT_THAT(hosts_for_slurm.err, HasSubstr("hosts belong to --via ssh"));
  const CliResult slurm_option = cli({"--via", "ssh", "h", "--gres", "gpu:1"});
  EXPECT_THAT(slurm_option.err, HasSubstr("--gres belongs to --via slurm"));
  EXPECT_THAT(cli({"--via", "ssh", "--bundle", "b"}).err, HasSubstr("needs one or more HOSTs"));
  EXPECT_THAT(cli({"--via", "ssh", "h"}).err, HasSubstr("needs --bundle"));
  EXPECT_THAT(cli({"--via", "ssh", "h", "me@g", "h", "--bundle", "b"}).err,
              HasSubstr("h is named twice (--count N starts N there)"));
  EXPECT_THAT(cli({"--via", "ssh", "--bundle", "b", "--", "-oProxyCommand=x"}).err,
              HasSubstr("'-oProxyCommand=x' is not an ssh destination"));
  EXPECT_THAT(cli({"--via", "ssh", "h", "--bundle", dir / "not-a-bundle.tar.gz"}).err,
              HasSubstr("not-a-bundle.tar.gz"));
  EXPECT_THAT(cli({"--via", "ssh", "h", "--bundle", "b", "--remote-dir", "/x/%u"}).err,
              HasSubstr("only %h (the host) and %% may follow a '%'"));
}

TEST(SshLaunchNames, HostsDirectoriesAndCommandLines) {
  EXPECT_EQ(fleet::HostPart("root@10.0.0.7"), "10.0.0.7");
  EXPECT_EQ(fleet::HostPart("me@gpu-box.lan"), "gpu-box.lan");
  EXPECT_EQ(fleet::HostPart("fe80::1"), "fe80--1");
  EXPECT_EQ(fleet::ExpandRemoteDir("~/agents/%h/100%%", "me@box"), "~/agents/box/100%");
  EXPECT_THROW(fleet::CheckDestination("-oProxyCommand=touch /tmp/x"), Error);
  EXPECT_THROW(fleet::CheckDestination("host name"), Error);
  EXPECT_NO_THROW(fleet::CheckDestination("me@box"));
  fleet::SshTransport ssh;
  ssh.config_file = "/etc/cfg";
  ssh.options = {"ConnectTimeout=3", "Port=2222"};
  const std::vector<std::string> argv = fleet::SshArgv(ssh, "me@box", "true");
  // BatchMode before the caller's options (ssh keeps the first value), the
  // default timeout after them (so theirs wins).
  EXPECT_THAT(argv, ElementsAre("ssh", "-F", "/etc/cfg", "-o", "BatchMode=yes", "-o",
                                "ConnectTimeout=3", "-o", "Port=2222", "-o", "ConnectTimeout=10",
                                "-o", "ServerAliveInterval=15", "-o", "ServerAliveCountMax=4", "--",
                                "me@box", "true"));
  EXPECT_EQ(fleet::ScpArgv({}, "me@fe80::1", "a:b", "/r/x").back(), "me@[fe80::1]:/r/x");
  EXPECT_EQ(fleet::ScpArgv({}, "me@fe80::1", "a:b", "/r/x").end()[-2], "./a:b");
  EXPECT_EQ(fleet::RemoteShell("echo \"$1\"", {"it's"}),
            "sh -c 'echo \"$1\"' nimble-agent 'it'\\''s'");
}

// Migration 006 on a version-5 file keeps its Slurm launches (as Slurm
// launches, in order, with their states), and the store records and stops
// each engine's launches apart.
TEST(SshLaunchRecords, Migration006KeepsSlurmLaunchesAndStoresSsh) {
  TempDir dir("nimble-ssh-db");
  const std::string path = dir / "results.db";
  {
    // A version-5 database as 001-005 make it, with two Slurm launches.
    std::string sql;
    for (const char* version : {"001", "002", "003", "004", "005"}) {
      sql += ReadFile(std::string(NIMBLE_SOURCE_DIR "/results/migrations/") + version + ".sql");
    }
    sql +=
        "INSERT INTO launches VALUES ('42', '2026-01-01T00:00:00Z', '{\"count\":2}', 'active');"
        "INSERT INTO launches VALUES ('41', '2026-01-01T00:00:01Z', '{}', 'stopped');"
        "PRAGMA user_version = 5;";
    sqlite3* raw = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &raw), SQLITE_OK);
    char* error = nullptr;
    const int status = sqlite3_exec(raw, sql.c_str(), nullptr, nullptr, &error);
    const std::string why = error ? error : "";
    sqlite3_free(error);
    sqlite3_close(raw);
    ASSERT_EQ(status, SQLITE_OK) << why;
  }
  bench::ResultsDb db(path);
  const ResultsReader reader(path);
  EXPECT_EQ(reader.Scalar("PRAGMA user_version"), "6");
  EXPECT_EQ(reader.Rows("SELECT id, via, slurm_job_id, options, state, host FROM launches "
                        "ORDER BY id"),
            (Rows{{"1", "slurm", "42", "{\"count\":2}", "active", "NULL"},
                  {"2", "slurm", "41", "{}", "stopped", "NULL"}}));

  coordinator::JobStore store(db);
  coordinator::LaunchRecord ssh =
      coordinator::LaunchFromJson(Json{{"via", "ssh"},
                                       {"host", "root@h"},
                                       {"agent", "h-ssh1"},
                                       {"remote_dir", "/opt/nimble-agent"},
                                       {"pid", 4242},
                                       {"options", {{"count", 1}}}});
  EXPECT_EQ(store.RecordLaunch(ssh), 3);
  // A Slurm job recorded again is the same launch, active again.
  EXPECT_EQ(store.RecordLaunch("41", "{}"), 2);
  EXPECT_THAT(store.StopLaunches(), ElementsAre("42", "41"));
  const std::vector<coordinator::LaunchRecord> stopped = store.StopLaunchesVia("ssh");
  ASSERT_EQ(stopped.size(), 1u);
  EXPECT_EQ(coordinator::ToJson(stopped[0]), (Json{{"id", 3},
                                                   {"via", "ssh"},
                                                   {"host", "root@h"},
                                                   {"agent", "h-ssh1"},
                                                   {"remote_dir", "/opt/nimble-agent"},
                                                   {"pid", 4242},
                                                   {"options", {{"count", 1}}}}));
  EXPECT_TRUE(store.StopLaunchesVia("ssh").empty());
  EXPECT_EQ(reader.Count("SELECT count(*) FROM launches WHERE state = 'stopped' AND stopped_at "
                         "IS NOT NULL"),
            3);

  // A record that could not be stopped is refused, by the message reader
  // and by the table.
  Json both = coordinator::ToJson(stopped[0]);
  both["unit"] = "nimble-agent-h-ssh1.service";
  EXPECT_THROW(coordinator::LaunchFromJson(both), protocol::ProtocolError);
  Json neither = coordinator::ToJson(stopped[0]);
  neither.erase("pid");
  EXPECT_THROW(coordinator::LaunchFromJson(neither), protocol::ProtocolError);
  EXPECT_THROW(coordinator::LaunchFromJson(Json{{"via", "pbs"}, {"options", Json::object()}}),
               protocol::ProtocolError);
  coordinator::LaunchRecord bad = ssh;
  bad.pid = 0;
  EXPECT_THROW(store.RecordLaunch(bad), Error);
}

}  // namespace
}  // namespace nimble::fleet_test
