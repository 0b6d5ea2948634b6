// The fleet end to end: the real nimble-bench coordinator, agents (native,
// aarch64 under qemu-user in a network namespace of its own, and placed by
// a real Slurm) and clients, over real loopback and veth TCP, recording into
// a real results.db. Every outcome is read back from results.db and from the
// CLI's output and exit status; nothing is mocked. The timings (a 0.5 s
// heartbeat, 3 s leases, tiny models) keep the suite to about 20 s.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "harness/bench/emulation.h"
#include "harness/fleet/slurm.h"
#include "nimble/vm/error.h"
#include "tests/harness/fleet/fleet_fixture.h"
#include "tests/harness/fleet/fleet_processes.h"
#include "tests/harness/fleet/slurm_cluster.h"

namespace nimble::fleet_test {
namespace {

using ::testing::AnyOf;
using ::testing::Contains;
using ::testing::Each;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

// The LSTM at its default size over 400 sentences: a run of about a second,
// long enough to be caught (and killed) in the middle.
const std::vector<std::string> kLongRun = {"--kind",      "run", "--model",  "lstm",
                                           "--sentences", "400", "--warmup", "0",
                                           "--repeat",    "1",   "--target", "intel"};

class FleetTest : public FleetFixture {
 protected:
  FleetTest() : FleetFixture("fleet") {}

  void DumpLogs() override {
    FleetFixture::DumpLogs();
    // The logs of agents that Slurm started (%x-%j.out).
    std::error_code ignored;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(dir_->path(), ignored)) {
      if (entry.path().extension() == ".out") {
        std::cerr << "---- " << entry.path() << "\n" << ReadFile(entry.path()) << "\n";
      }
    }
  }

  void Stop() override {
    FleetFixture::Stop();
    slurm_.reset();
  }

  Process& StartAgent(const std::string& name, const std::vector<std::string>& extra = {}) {
    return Start(name, Concat({NIMBLE_BENCH_BINARY, "agent", "--coordinator", address_,
                               "--secret-file", secret_file_, "--name", name, "--give-up", "30"},
                              extra));
  }

  // Submits kLongRun once `agent` has connected and waits until the job is
  // leased to it and its child runs it; the job's id, or "" (test failed).
  std::string LongRunUnderWay(Process& agent, const std::string& name) {
    if (!AgentConnects(name)) return "";
    const std::vector<int64_t> ids = Submit(kLongRun);
    EXPECT_EQ(ids.size(), 1u);
    if (ids.size() != 1) return "";
    const std::string job = std::to_string(ids[0]);
    const bool running = WaitFor(
        [&] {
          return db_->Scalar("SELECT state || ' ' || agent FROM jobs WHERE id = " + job) ==
                     "leased " + name &&
                 !Descendants(agent.pid()).empty();
        },
        15s);
    EXPECT_TRUE(running) << "job " << job << " never ran on " << name;
    return running ? job : "";
  }

  std::unique_ptr<fleet::SlurmCluster> slurm_;
};

// An x86-64 agent and an aarch64 one (the cross-built nimble-bench under
// qemu-aarch64, in its own network namespace) share one queue: each job goes
// to an agent that can run it, and each run says truthfully what ran it.
TEST_F(FleetTest, TwoAgentsDrainAMixedQueue) {
  UseNetNamespace("a network namespace needs root");
  if (IsSkipped() || HasFatalFailure()) return;
  // The same search and checks as `nimble-bench run --emulate`.
  bench::Emulator emulator;
  try {
    emulator = bench::FindArmEmulator();
  } catch (const nimble::Error& missing) {
    GTEST_SKIP() << missing.what();
  }
  const std::string& qemu = emulator.qemu;
  const std::string& arm_bench = emulator.arm_nimble_bench;

  // On every address, so that the namespace reaches it over the veth link.
  const uint16_t port = StartCoordinator("0.0.0.0:0");
  ASSERT_GT(port, 0);
  StartAgent("x86-agent");
  const std::string arm_coordinator = netns_->host_address() + ":" + std::to_string(port);
  Start("arm-agent", {"ip", "netns", "exec", netns_->name(), "env", "NIMBLE_EMULATOR=qemu-aarch64",
                      qemu, arm_bench, "agent", "--coordinator", arm_coordinator, "--secret-file",
                      secret_file_, "--name", "arm-agent", "--give-up", "30"});
  // The ARM job first, so the emulated agent starts on it at once.
  const std::vector<int64_t> arm = Submit(Concat(kTinyRun, {"--target", "arm", "--emulate"}));
  const std::vector<int64_t> intel =
      Submit(Concat(kTinyRun, {"--target", "intel", "--count", "2"}));
  const std::vector<int64_t> probes = Submit({"--kind", "probe", "--count", "4"});
  ASSERT_EQ(arm.size(), 1u);
  ASSERT_EQ(intel.size(), 2u);
  ASSERT_EQ(probes.size(), 4u);
  ASSERT_TRUE(AgentConnects("x86-agent"));
  ASSERT_TRUE(AgentConnects("arm-agent", 30s));
  // The ARM agent came in over the veth link, not loopback.
  EXPECT_THAT(LinesWith(coordinator_->Log(), "agent arm-agent joined from"),
              Contains(HasSubstr("from " + netns_->inner_address() + ":")));
  EXPECT_EQ(db_->Scalar("SELECT arch || ' ' || emulated || ' ' || emulator FROM agents WHERE "
                        "name = 'arm-agent'"),
            "aarch64 1 qemu-aarch64");

  std::vector<int64_t> all = Concat(arm, intel), runs = all;
  all.insert(all.end(), probes.begin(), probes.end());
  ASSERT_TRUE(JobsFinish(all, 75s));
  EXPECT_EQ(db_->Count("SELECT count(*) FROM jobs WHERE state = 'done'"), 7);

  // Exactly one run per run job, none for the probes, and each says what ran it.
  EXPECT_EQ(db_->Rows("SELECT job_id, count(*) FROM runs GROUP BY job_id ORDER BY job_id"),
            (Rows{{std::to_string(runs[0]), "1"},
                  {std::to_string(runs[1]), "1"},
                  {std::to_string(runs[2]), "1"}}));
  for (const int64_t id : intel) {
    EXPECT_EQ(db_->Rows("SELECT arch, emulated, agent, target, status FROM runs WHERE job_id = " +
                        std::to_string(id)),
              (Rows{{"x86_64", "0", "x86-agent", "intel", "done"}}))
        << "job " << id;
    // Never leased to the ARM agent, not even for an attempt.
    EXPECT_EQ(db_->Rows("SELECT agent FROM job_attempts WHERE job_id = " + std::to_string(id)),
              (Rows{{"x86-agent"}}));
  }
  EXPECT_EQ(db_->Rows("SELECT arch, emulated, agent, target, status, emulator <> '' FROM runs "
                      "WHERE job_id = " +
                      std::to_string(arm[0])),
            (Rows{{"aarch64", "1", "arm-agent", "arm", "done", "1"}}));
  EXPECT_EQ(db_->Count("SELECT count(*) FROM jobs j JOIN runs r ON r.id = j.run_id AND "
                       "r.job_id = j.id"),
            3);
  // Each probe's host is the one of the agent that ran it.
  for (const auto& row : db_->Rows("SELECT j.result, a.agent FROM jobs j JOIN job_attempts a ON "
                                   "a.job_id = j.id AND a.outcome = 'done' WHERE j.kind = "
                                   "'probe'")) {
    const Json host = Json::parse(row[0]).at("host");
    EXPECT_EQ(host.at("arch"), row[1] == "arm-agent" ? "aarch64" : "x86_64") << row[0];
    EXPECT_EQ(host.at("emulated"), row[1] == "arm-agent") << row[0];
  }
}

// An agent killed mid-run loses its attempt; another agent runs the job
// again, and the job is recorded once.
TEST_F(FleetTest, AgentKilledMidJobIsRerunAndRecordedOnce) {
  ASSERT_GT(StartCoordinator(), 0);
  Process& first = StartAgent("agent-a");
  const std::string job = LongRunUnderWay(first, "agent-a");
  ASSERT_NE(job, "");
  const std::vector<int64_t> ids = {std::stoll(job)};
  std::this_thread::sleep_for(200ms);  // into the run
  first.Kill(SIGKILL);
  ASSERT_EQ(db_->Scalar("SELECT count(*) FROM runs"), "0") << "the run ended before the kill";

  StartAgent("agent-b");
  ASSERT_TRUE(JobsFinish(ids, 60s));
  EXPECT_EQ(db_->Rows("SELECT state, attempts, failures FROM jobs WHERE id = " + job),
            (Rows{{"done", "2", "1"}}));
  EXPECT_EQ(db_->Rows("SELECT attempt, agent, outcome FROM job_attempts WHERE job_id = " + job +
                      " ORDER BY attempt"),
            (Rows{{"1", "agent-a", "lost"}, {"2", "agent-b", "done"}}));
  EXPECT_THAT(
      db_->Scalar("SELECT reason FROM job_attempts WHERE job_id = " + job + " AND attempt = 1"),
      HasSubstr("agent-a"));
  EXPECT_EQ(db_->Rows("SELECT job_id, agent, status FROM runs"), (Rows{{job, "agent-b", "done"}}));
  EXPECT_EQ(db_->Scalar("SELECT run_id = (SELECT id FROM runs) FROM jobs WHERE id = " + job), "1");
}

// Over TLS, an agent and clients that check the coordinator's certificate
// work as over plain TCP; a plain client, or one that dialled a name the
// certificate does not carry, is refused with the reason.
TEST_F(FleetTest, ATlsFleetServesVerifiedPeersOnly) {
  const std::string cert = *dir_ / "cert.pem";
  const std::string key = *dir_ / "key.pem";
  const CliResult made =
      RunCommand({"openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                  "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key, "-out", cert, "-subj",
                  "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-days", "1"},
                 30s);
  ASSERT_EQ(made.exit_code, 0) << made.err;
  const uint16_t port = StartCoordinator("127.0.0.1:0", {"--tls-cert", cert, "--tls-key", key});
  ASSERT_GT(port, 0);
  StartAgent("agent-tls", {"--tls-ca", cert});
  ASSERT_TRUE(WaitFor(
      [&] {
        return db_->Scalar("SELECT state FROM agents WHERE name = 'agent-tls'") == "connected";
      },
      15s));

  const CliResult probes =
      Client({"submit"}, {"--tls-ca", cert, "--kind", "probe", "--count", "3", "--wait"});
  EXPECT_EQ(probes.exit_code, 0) << probes.err;
  EXPECT_THAT(probes.out, HasSubstr("3 done, 0 failed"));
  const CliResult run = Client({"run"}, {"--tls-ca", cert, "--model", "lstm", "--hidden-size", "8",
                                         "--sentences", "2", "--warmup", "0", "--repeat", "1"});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("on agent agent-tls"));
  EXPECT_EQ(db_->Count("SELECT count(*) FROM runs WHERE agent = 'agent-tls'"), 1);

  const CliResult plain = Client({"status"}, {});
  EXPECT_EQ(plain.exit_code, 1);
  EXPECT_THAT(plain.err, HasSubstr("connect with --tls-ca"));
  const CliResult other_name = RunCommand(
      {NIMBLE_BENCH_BINARY, "status", "--coordinator", "localhost:" + std::to_string(port),
       "--secret-file", secret_file_, "--tls-ca", cert},
      30s);
  EXPECT_EQ(other_name.exit_code, 1);
  EXPECT_THAT(other_name.err, HasSubstr("certificate verify failed"));
}

// More jobs than fit in one frame (1 MiB): the client submits them in
// batches, and every one is queued once.
TEST_F(FleetTest, ALargeSubmissionIsQueuedWhole) {
  ASSERT_GT(StartCoordinator(), 0);
  const std::vector<int64_t> ids = Submit({"--kind", "probe", "--count", "10000"});
  ASSERT_EQ(ids.size(), 10000u);
  EXPECT_EQ(ids.back() - ids.front(), 9999);
  EXPECT_EQ(db_->Count("SELECT count(*) FROM jobs WHERE state = 'queued'"), 10000);
}

// A partitioned agent neither disconnects nor heartbeats: the coordinator
// cuts it off after three missed beats and re-runs its job elsewhere; when
// it comes back, it reconnects and its late result is not recorded again.
TEST_F(FleetTest, ASilentAgentLosesItsLeaseAndIsNotRecordedTwice) {
  ASSERT_GT(StartCoordinator(), 0);
  Process& silent = StartAgent("agent-s");
  const std::string job = LongRunUnderWay(silent, "agent-s");
  ASSERT_NE(job, "");
  const std::vector<int64_t> ids = {std::stoll(job)};
  // Frozen, its socket still open: only the missing heartbeats tell.
  kill(silent.pid(), SIGSTOP);
  ASSERT_TRUE(WaitFor(
      [&] {
        return db_->Scalar("SELECT state FROM agents WHERE name = 'agent-s'") == "disconnected";
      },
      15s));
  EXPECT_THAT(LinesWith(coordinator_->Log(), "agent agent-s (127.0.0.1:"),
              Contains(HasSubstr(") went silent")));
  StartAgent("agent-t");
  ASSERT_TRUE(JobsFinish(ids, 90s));
  kill(silent.pid(), SIGCONT);
  // It finds its connection gone, reconnects, and reports the job it held.
  ASSERT_TRUE(WaitFor(
      [&] { return db_->Scalar("SELECT state FROM agents WHERE name = 'agent-s'") == "connected"; },
      30s));
  EXPECT_EQ(db_->Rows("SELECT attempt, agent, outcome FROM job_attempts WHERE job_id = " + job +
                      " ORDER BY attempt"),
            (Rows{{"1", "agent-s", "lost"}, {"2", "agent-t", "done"}}));
  EXPECT_EQ(db_->Rows("SELECT job_id, agent FROM runs"), (Rows{{job, "agent-t"}}));
}

// The coordinator's state is all in results.db: killed with jobs queued and
// leased, and restarted on the same port, it loses and duplicates nothing.
TEST_F(FleetTest, CoordinatorKilledAndRestartedLosesNothing) {
  const uint16_t port = StartCoordinator();
  ASSERT_GT(port, 0);
  StartAgent("agent-r");
  ASSERT_TRUE(AgentConnects("agent-r"));
  const std::vector<int64_t> ids = Submit(Concat(kTinyRun, {"--target", "intel", "--count", "6"}));
  ASSERT_EQ(ids.size(), 6u);
  // Kill it once the agent is under way, with most of the queue still open.
  // Polled often: a tiny job takes well under 100 ms.
  ASSERT_TRUE(WaitFor(
      [&] { return db_->Count("SELECT count(*) FROM jobs WHERE state = 'done'") >= 1; }, 30s, 5ms));
  coordinator_->Kill(SIGKILL);
  const int64_t open = db_->Count("SELECT count(*) FROM jobs WHERE state IN ('queued', 'leased')");
  ASSERT_GT(open, 0) << "every job finished before the kill";

  ASSERT_EQ(StartCoordinator("127.0.0.1:" + std::to_string(port), {}, "coordinator-2"), port);
  ASSERT_TRUE(JobsFinish(ids, 60s));
  EXPECT_EQ(db_->Count("SELECT count(*) FROM jobs WHERE state = 'done'"), 6);
  EXPECT_EQ(db_->Count("SELECT count(*) FROM jobs WHERE state = 'failed'"), 0);
  EXPECT_EQ(db_->Rows("SELECT count(*), count(DISTINCT job_id) FROM runs"), (Rows{{"6", "6"}}));
  EXPECT_EQ(db_->Count("SELECT count(*) FROM runs WHERE job_id IN (" + Join(ids) + ")"), 6);
  EXPECT_EQ(db_->Count("SELECT count(*) FROM jobs j JOIN runs r ON r.id = j.run_id AND "
                       "r.job_id = j.id"),
            6);
  // The agent found the new coordinator by itself.
  EXPECT_TRUE(AgentConnects("agent-r"));
  EXPECT_EQ(AgentState(Status(), "agent-r"), "connected");
}

// Clients that do not know the secret, speak garbage or trickle bytes are
// cut off, each with its reason in the log, while others are served.
TEST_F(FleetTest, HostileClientsAreRefusedAndOthersServed) {
  const uint16_t port = StartCoordinator();
  ASSERT_GT(port, 0);
  StartAgent("agent-h");
  ASSERT_TRUE(AgentConnects("agent-h"));

  // (a) The wrong secret.
  const std::string wrong_secret = *dir_ / "wrong-secret";
  WriteFile(wrong_secret, "not-the-fleet-secret", 0600);
  const CliResult refused = RunCommand(
      {NIMBLE_BENCH_BINARY, "status", "--coordinator", address_, "--secret-file", wrong_secret},
      20s);
  EXPECT_EQ(refused.exit_code, 1) << refused.out << refused.err;
  EXPECT_THAT(refused.err, HasSubstr("wrong proof"));
  EXPECT_EQ(refused.out, "");
  // An agent with the wrong secret gives up at once instead of retrying.
  const CliResult impostor = RunCommand({NIMBLE_BENCH_BINARY, "agent", "--coordinator", address_,
                                         "--secret-file", wrong_secret, "--name", "impostor"},
                                        20s);
  EXPECT_EQ(impostor.exit_code, 1) << impostor.err;
  EXPECT_THAT(
      impostor.err,
      HasSubstr("refused: wrong proof of the shared secret (the hello fails its MAC); exiting"));
  EXPECT_EQ(db_->Count("SELECT count(*) FROM agents WHERE name = 'impostor'"), 0);

  // (b) A frame header of 4 GiB: refused before a byte of it is buffered.
  Fd huge(ConnectTcp("127.0.0.1", port));
  const uint16_t huge_port = LocalPort(huge.get());
  const unsigned char header[4] = {0xff, 0xff, 0xff, 0xff};
  ASSERT_EQ(send(huge.get(), header, 4, MSG_NOSIGNAL), 4);
  const Clock::time_point huge_sent = Clock::now();
  EXPECT_TRUE(ClosedWithin(huge.get(), 3s));
  EXPECT_LT(Clock::now() - huge_sent, 2s);

  // (c) 64 random bytes (a fixed seed, so a failure can be replayed).
  std::mt19937 random(20240607);
  std::string garbage(64, '\0');
  for (char& byte : garbage) byte = static_cast<char>(random() & 0xff);
  Fd noise(ConnectTcp("127.0.0.1", port));
  const uint16_t noise_port = LocalPort(noise.get());
  ASSERT_EQ(send(noise.get(), garbage.data(), garbage.size(), MSG_NOSIGNAL), 64);
  // Within the handshake deadline (5 s), whatever length the bytes claim.
  EXPECT_TRUE(ClosedWithin(noise.get(), 7s));

  // (d) A hello trickled at a byte a second, on a thread, while a correct
  // client and an agent's job are served.
  struct Trickle {
    uint16_t local_port = 0;
    bool closed = false;
    Clock::time_point started, closed_at;
  } trickle;
  const Json hello = {{"type", "hello"},
                      {"protocol", 2},
                      {"role", "client"},
                      {"name", "slow-client"},
                      {"nonce", std::string(64, '0')}};
  const std::string body = hello.dump();
  std::string frame = {static_cast<char>(body.size() >> 24), static_cast<char>(body.size() >> 16),
                       static_cast<char>(body.size() >> 8), static_cast<char>(body.size())};
  frame += body;
  const int slow = ConnectTcp("127.0.0.1", port);
  trickle.local_port = LocalPort(slow);
  trickle.started = Clock::now();
  std::jthread trickler([&trickle, slow, frame] {
    for (size_t sent = 0; sent < frame.size() && Clock::now() - trickle.started < 15s; ++sent) {
      if (send(slow, &frame[sent], 1, MSG_NOSIGNAL) != 1) {
        trickle.closed = true;
      } else {
        // A second until the next byte; the challenge may arrive, then EOF.
        const Clock::time_point next = Clock::now() + 1s;
        while (!trickle.closed && Clock::now() < next) {
          pollfd ready = {slow, POLLIN, 0};
          const auto left =
              std::chrono::duration_cast<std::chrono::milliseconds>(next - Clock::now());
          if (poll(&ready, 1, std::max<int>(1, static_cast<int>(left.count()))) <= 0) continue;
          char buffer[512];
          const ssize_t got = read(slow, buffer, sizeof(buffer));
          if (got == 0 || (got < 0 && errno != EINTR)) trickle.closed = true;
        }
      }
      if (trickle.closed) {
        trickle.closed_at = Clock::now();
        break;
      }
    }
    close(slow);
  });
  const Json status = Status();
  EXPECT_EQ(AgentState(status, "agent-h"), "connected");
  const CliResult probe = Client({"submit"}, {"--kind", "probe", "--wait", "--json"}, 30s);
  const Clock::time_point served = Clock::now();
  EXPECT_EQ(probe.exit_code, 0) << probe.err;
  EXPECT_THAT(probe.out, HasSubstr("\"state\": \"done\""));
  trickler.join();
  ASSERT_TRUE(trickle.closed) << "the trickling client was never cut off";
  const double cut_after =
      std::chrono::duration<double>(trickle.closed_at - trickle.started).count();
  EXPECT_GT(cut_after, 4.0);
  EXPECT_LT(cut_after, 8.0);
  EXPECT_LT(served, trickle.closed_at) << "others waited for the trickling client";
  EXPECT_EQ(db_->Count("SELECT count(*) FROM jobs WHERE kind = 'probe' AND state = 'done'"), 1);

  // Still up, still serving, and every refusal is in its log.
  EXPECT_TRUE(coordinator_->Running());
  EXPECT_EQ(AgentState(Status(), "agent-h"), "connected");
  const std::string log = coordinator_->Log();
  EXPECT_THAT(LinesWith(log, "refused: "), Contains(HasSubstr("wrong proof of the shared secret")));
  EXPECT_THAT(LinesWith(log, "127.0.0.1:" + std::to_string(huge_port) + ": "),
              ElementsAre(HasSubstr("frame of 4294967295 bytes")));
  EXPECT_THAT(
      LinesWith(log, "127.0.0.1:" + std::to_string(noise_port) + ": "),
      ElementsAre(AnyOf(HasSubstr("frame of"), HasSubstr("not JSON"), HasSubstr("handshake"))));
  EXPECT_THAT(
      LinesWith(log, "127.0.0.1:" + std::to_string(trickle.local_port) + ": "),
      ElementsAre(AnyOf(HasSubstr("handshake"), HasSubstr("deadline"), HasSubstr("timed out"))));
}

// A coordinator at its connection limit refuses in place of the challenge;
// an agent takes that for what it is, a temporary refusal, and connects once
// a slot is free, where it used to exit for good: anyone who could reach the
// port could knock off reconnecting agents by holding its slots.
TEST_F(FleetTest, AnAgentRefusedAtTheConnectionLimitRetries) {
  const uint16_t port = StartCoordinator("127.0.0.1:0", {"--max-connections", "1"});
  ASSERT_GT(port, 0);
  Fd idle(ConnectTcp("127.0.0.1", port));  // holds the only slot until its handshake deadline
  Process& agent = StartAgent("agent-r");
  ASSERT_TRUE(
      WaitFor([&] { return agent.Log().find("(the limit); retrying") != std::string::npos; }, 10s))
      << agent.Log();
  idle.Close();
  EXPECT_TRUE(AgentConnects("agent-r")) << agent.Log();
  EXPECT_TRUE(agent.Running()) << agent.Log();
}

// An agent in a network namespace whose only way to the coordinator is a
// man in the middle on the veth path (frame_mitm, a process of its own)
// that attacks the agent's frames once. The coordinator closes the
// connection on the attacked frame, logs it with the address it came from,
// records nothing of it, and the job still finishes once, genuinely, when
// the agent reconnects. Attack()'s `attack` is frame_mitm's; `said` what it
// prints when it attacks, `logged` what the coordinator says of the frame.
class ManInTheMiddleTest : public FleetTest {
 protected:
  void Attack(const std::string& attack, const std::string& said, const std::string& logged) {
    UseNetNamespace("a network namespace needs root");
    if (IsSkipped() || HasFatalFailure()) return;
    const uint16_t port = StartCoordinator();
    ASSERT_GT(port, 0);
    Process& mitm = Start("mitm", {FRAME_MITM_BINARY, "--listen", netns_->host_address() + ":0",
                                   "--to", address_, "--attack", attack});
    std::string mitm_address;
    ASSERT_TRUE(WaitFor(
        [&] {
          const std::vector<std::string> lines = LinesWith(mitm.Log(), "listening on ");
          if (lines.empty()) return false;
          mitm_address = lines[0].substr(lines[0].rfind(' ') + 1);
          return true;
        },
        10s))
        << mitm.Log();
    Start("agent-m",
          netns_->Inside({NIMBLE_BENCH_BINARY, "agent", "--coordinator", mitm_address,
                          "--secret-file", secret_file_, "--name", "agent-m", "--give-up", "30"}));
    const std::vector<int64_t> ids = Submit(Concat(kTinyRun, {"--target", "intel"}));
    ASSERT_EQ(ids.size(), 1u);
    ASSERT_TRUE(JobsFinish(ids, 90s));

    // The attack happened, and cost the attacked connection.
    const std::vector<std::string> attacks = LinesWith(mitm.Log(), said);
    ASSERT_EQ(attacks.size(), 1u) << mitm.Log();
    const std::vector<std::string> cut = LinesWith(coordinator_->Log(), logged);
    ASSERT_EQ(cut.size(), 1u) << coordinator_->Log();
    // Logged with the address the frame came from: the man in the middle's
    // side of the coordinator's loopback connection.
    EXPECT_THAT(cut[0], HasSubstr("agent agent-m (127.0.0.1:"));
    // The agent comes back (a replayed result was recorded before its copy
    // cut the connection, so the job may be done before that).
    EXPECT_TRUE(WaitFor(
        [&] { return LinesWith(coordinator_->Log(), "agent agent-m joined from").size() >= 2; },
        20s))
        << coordinator_->Log();
    // Nothing of the attack recorded: one run, the job done, no attempt
    // failed by a forged result.
    const std::string job = std::to_string(ids[0]);
    EXPECT_EQ(db_->Scalar("SELECT state FROM jobs WHERE id = " + job), "done");
    EXPECT_EQ(db_->Count("SELECT count(*) FROM runs WHERE job_id = " + job), 1);
    EXPECT_EQ(db_->Count("SELECT count(*) FROM job_attempts WHERE outcome = 'failed'"), 0);
    EXPECT_EQ(db_->Count("SELECT count(*) FROM jobs WHERE error LIKE '%forged%'"), 0);
    EXPECT_EQ(db_->Rows("SELECT agent, status FROM runs"), (Rows{{"agent-m", "done"}}));
  }
};

TEST_F(ManInTheMiddleTest, AFlippedByteClosesTheConnection) {
  Attack("flip", "flipped byte", "has a wrong MAC");
}

TEST_F(ManInTheMiddleTest, AReplayedFrameClosesTheConnection) {
  Attack("replay", "replayed a result frame", "(replayed or reordered)");
}

TEST_F(ManInTheMiddleTest, AForgedResultClosesTheConnection) {
  Attack("forge", "forged a result", "has a wrong MAC");
}

// --require-commit admits agents of that build only: another one is refused
// with both commits named and exits 1 (it does not mend itself); one of the
// build's own commit (what `probe` reports) joins. Listening on every
// address without TLS, the coordinator says once what that leaves open;
// on loopback it says nothing.
TEST_F(FleetTest, ACoordinatorRequiringACommitRefusesAgentsOfAnother) {
  const CliResult probe = RunCommand({NIMBLE_BENCH_BINARY, "probe"}, 60s);
  ASSERT_EQ(probe.exit_code, 0) << probe.err;
  const std::string commit = Json::parse(probe.out).at("commit").get<std::string>();
  ASSERT_FALSE(commit.empty());

  ASSERT_GT(StartCoordinator("0.0.0.0:0", {"--require-commit", "0123456789ab"}, "strict"), 0);
  const CliResult other = RunCommand({NIMBLE_BENCH_BINARY, "agent", "--coordinator", address_,
                                      "--secret-file", secret_file_, "--name", "other-build"},
                                     20s);
  EXPECT_EQ(other.exit_code, 1) << other.err;
  EXPECT_THAT(other.err, HasSubstr("the agent is of commit " + commit +
                                   ", this coordinator requires 0123456789ab"));
  EXPECT_EQ(db_->Count("SELECT count(*) FROM agents WHERE name = 'other-build'"), 0);
  EXPECT_THAT(LinesWith(coordinator_->Log(), "no TLS on a non-loopback address"),
              ::testing::SizeIs(1));
  coordinator_->Kill();

  ASSERT_GT(StartCoordinator("127.0.0.1:0", {"--require-commit", commit}, "same-build"), 0);
  StartAgent("same-build");
  EXPECT_TRUE(AgentConnects("same-build"));
  EXPECT_THAT(LinesWith(coordinator_->Log(), "no TLS"), ::testing::IsEmpty());
}

// One host holding idle connections (127.0.0.2, another loopback address)
// fills only its own share of the handshake slots: its next connection is
// refused, naming the per-address limit, while an agent and a client from
// 127.0.0.1 are served at once, not after the handshake deadline.
TEST_F(FleetTest, AnIdleFloodFromOneAddressLocksNobodyElseOut) {
  const uint16_t port = StartCoordinator(
      "127.0.0.1:0", {"--max-handshakes-per-address", "3", "--max-connections-per-address", "4"});
  ASSERT_GT(port, 0);
  std::vector<std::unique_ptr<Fd>> flood;
  for (int i = 0; i < 3; ++i)
    flood.push_back(std::make_unique<Fd>(ConnectTcp("127.0.0.1", port, "127.0.0.2")));
  // Each gets its challenge: the three are in their handshakes.
  for (const auto& fd : flood) {
    pollfd ready = {fd->get(), POLLIN, 0};
    ASSERT_EQ(poll(&ready, 1, 5000), 1);
  }
  Fd refused(ConnectTcp("127.0.0.1", port, "127.0.0.2"));
  EXPECT_TRUE(ClosedWithin(refused.get(), 2s));
  const Clock::time_point start = Clock::now();
  StartAgent("agent-f");
  ASSERT_TRUE(AgentConnects("agent-f", 4s));
  EXPECT_EQ(AgentState(Status(), "agent-f"), "connected");
  EXPECT_LT(Clock::now() - start, 4s) << "others waited for the flood's handshake deadline";
  EXPECT_THAT(LinesWith(coordinator_->Log(), "refused a connection from 127.0.0.2"),
              ElementsAre(HasSubstr("3 handshakes under way from this address (the limit per "
                                    "address)")));
}

// A baseline job per PyTorch variant, each recording one peer run on the
// agent's host; a variant the framework lacks fails its job with the names
// of those it has.
TEST_F(FleetTest, PeerBaselineJobsRecordARunPerVariant) {
  if (RunCommand({"/usr/bin/python3", "-c", "import torch"}, 60s).exit_code != 0) {
    GTEST_SKIP() << "/usr/bin/python3 has no torch (apt install python3-torch)";
  }
  ASSERT_GT(StartCoordinator(), 0);
  StartAgent("agent-p");
  const std::vector<std::string> baseline = {"--kind",        "baseline", "--model",     "lstm",
                                             "--hidden-size", "16",       "--sentences", "3",
                                             "--warmup",      "0",        "--repeat",    "1",
                                             "--framework",   "pytorch",  "--target",    "intel"};
  const std::vector<int64_t> ids = Submit(baseline);
  const std::vector<int64_t> wrong =
      Submit(Concat(baseline, {"--variant", "eager", "--max-failures", "1"}));
  ASSERT_EQ(ids.size(), 2u);
  ASSERT_EQ(wrong.size(), 1u);
  ASSERT_TRUE(AgentConnects("agent-p"));
  ASSERT_TRUE(JobsFinish(Concat(ids, wrong), 120s));

  EXPECT_EQ(db_->Rows("SELECT j.kind, j.state, r.framework, json_extract(r.configuration, "
                      "'$.variant'), r.agent, r.target FROM jobs j JOIN runs r ON r.id = j.run_id "
                      "AND r.job_id = j.id ORDER BY j.id"),
            (Rows{{"baseline", "done", "pytorch", "native", "agent-p", "intel"},
                  {"baseline", "done", "pytorch", "mv_script", "agent-p", "intel"}}));
  EXPECT_EQ(db_->Count("SELECT count(*) FROM measurements m JOIN runs r ON r.id = m.run_id WHERE "
                       "m.name = 'max_abs_error' AND m.value < 1e-4"),
            2);
  EXPECT_EQ(db_->Scalar("SELECT state FROM jobs WHERE id = " + std::to_string(wrong[0])), "failed");
  EXPECT_THAT(db_->Scalar("SELECT error FROM jobs WHERE id = " + std::to_string(wrong[0])),
              HasSubstr("pytorch has no variant 'eager' for lstm (it has native, mv_script)"));
  EXPECT_EQ(db_->Count("SELECT count(*) FROM runs"), 2);
}

// The coordinator takes a peer's run only from a baseline job, and Nimble's
// only from a run job: an agent whose child passes one off as the other
// fails the job and records nothing.
TEST_F(FleetTest, ARunOfAnotherFrameworkIsRejected) {
  const CliResult real =
      RunCommand({NIMBLE_BENCH_BINARY, "run", "--model", "lstm", "--hidden-size", "16",
                  "--sentences", "2", "--warmup", "0", "--repeat", "1", "--record-json"},
                 60s);
  ASSERT_EQ(real.exit_code, 0) << real.err;
  Json record = Json::parse(real.out);
  ASSERT_EQ(record.at("framework"), "nimble");
  record["framework"] = "pytorch";
  WriteFile(*dir_ / "record.json", record.dump() + "\n");
  const std::string forger = *dir_ / "forge.sh";
  WriteFile(forger, "#!/bin/sh\ncat " + (*dir_ / "record.json") + "\n", 0755);

  ASSERT_GT(StartCoordinator(), 0);
  StartAgent("agent-f", {"--job-binary", forger});
  const std::vector<int64_t> ids =
      Submit(Concat(kTinyRun, {"--target", "intel", "--max-failures", "1"}));
  ASSERT_EQ(ids.size(), 1u);
  ASSERT_TRUE(AgentConnects("agent-f"));
  ASSERT_TRUE(JobsFinish(ids, 30s));
  EXPECT_EQ(db_->Scalar("SELECT state FROM jobs WHERE id = " + std::to_string(ids[0])), "failed");
  EXPECT_THAT(db_->Scalar("SELECT error FROM jobs WHERE id = " + std::to_string(ids[0])),
              HasSubstr("result rejected: the run is of framework pytorch, the job a run job"));
  EXPECT_EQ(db_->Count("SELECT count(*) FROM runs"), 0);
}

// A dispatch microbenchmark job (Figure 3) runs `nimble-bench microbench
// dispatch` on the agent with the options submitted, and its figures land in
// the coordinator's results.db as a microbench run of the agent's host.
TEST_F(FleetTest, ADispatchMicrobenchJobRecordsItsFigures) {
  ASSERT_GT(StartCoordinator(), 0);
  StartAgent("agent-d");
  const std::vector<int64_t> ids =
      Submit({"--kind", "microbench", "--suite", "dispatch", "--target", "intel", "--shapes",
              "16x8", "--lengths", "3", "4", "--degrees", "2", "--rounds", "2", "--threads", "1",
              "--max-failures", "1"});
  ASSERT_EQ(ids.size(), 1u);
  ASSERT_TRUE(AgentConnects("agent-d"));
  ASSERT_TRUE(JobsFinish(ids, 60s));
  const std::string job = std::to_string(ids[0]);
  ASSERT_EQ(db_->Scalar("SELECT state FROM jobs WHERE id = " + job), "done")
      << db_->Scalar("SELECT error FROM jobs WHERE id = " + job);
  EXPECT_EQ(db_->Rows("SELECT kind, model, target, threads, agent, json_extract(configuration, "
                      "'$.rounds') FROM runs WHERE job_id = " +
                      job),
            (Rows{{"microbench", "dispatch", "intel", "1", "agent-d", "2"}}));
  EXPECT_EQ(db_->Rows("SELECT m.name FROM measurements m JOIN runs r ON r.id = m.run_id WHERE "
                      "r.job_id = " +
                      job + " ORDER BY m.name"),
            (Rows{{"dense_16x8.dispatch2_relative"},
                  {"dense_16x8.dispatch2_us"},
                  {"dense_16x8.dispatch2_worst_relative"},
                  {"dense_16x8.static_us"}}));
}

// `tune --coordinator`: one tune job per site, tuned on the agent's host
// (measuring children and all, into the agent's own tuning database), and
// every record and choice back in the client's tuning database under the
// agent's host.
TEST_F(FleetTest, TuneJobsFanOutAndTheirRecordsComeBack) {
  ASSERT_GT(StartCoordinator(), 0);
  const std::string agent_db = *dir_ / "agent-tuning.db";
  Start("agent-u",
        {NIMBLE_BENCH_BINARY, "agent", "--coordinator", address_, "--secret-file", secret_file_,
         "--name", "agent-u", "--give-up", "30"},
        {{"NIMBLE_TUNING_DB", agent_db}, {"NIMBLE_NUM_THREADS", "1"}});
  ASSERT_TRUE(AgentConnects("agent-u"));
  const std::string tuning_db = *dir_ / "tuning.db";
  const CliResult tune = Client(
      {"tune"},
      {"--model",    "bert",        "--layers", "1",     "--hidden-size", "32", "--heads",   "2",
       "--ffn-size", "64",          "--trials", "2",     "--top-k",       "1",  "--extents", "1",
       "8",          "--tuning-db", tuning_db,  "--json"},
      240s);
  ASSERT_EQ(tune.exit_code, 0) << tune.err << tune.out;
  const Json sites = Json::parse(tune.out).at("sites");
  ASSERT_FALSE(sites.empty());
  utsname system{};
  ASSERT_EQ(uname(&system), 0);
  for (const Json& site : sites) {
    EXPECT_EQ(site["error"], "") << site.dump();
    EXPECT_NE(site["kernel"], "") << site.dump();
    EXPECT_EQ(site["threads"], 1);
    EXPECT_EQ(site["host"].get<std::string>().rfind(std::string(system.machine) + " ", 0), 0u)
        << site.dump();
  }
  EXPECT_EQ(db_->Rows("SELECT DISTINCT kind || ' ' || state FROM jobs"), (Rows{{"tune done"}}));
  EXPECT_EQ(db_->Count("SELECT count(*) FROM jobs"), static_cast<int64_t>(sites.size()));
  const ResultsReader client_side(tuning_db);
  const ResultsReader agent_side(agent_db);
  EXPECT_EQ(client_side.Count("SELECT count(*) FROM tuned_sites"),
            static_cast<int64_t>(sites.size()));
  EXPECT_EQ(client_side.Rows("SELECT host, configuration, extent, seconds_per_call FROM "
                             "tuning_records ORDER BY 1, 2, 3"),
            agent_side.Rows("SELECT host, configuration, extent, seconds_per_call FROM "
                            "tuning_records ORDER BY 1, 2, 3"));
}

// A job whose child crashes fails after its allowed attempts, each with the
// signal named, and the agent lives on.
TEST_F(FleetTest, CrashingChildFailsAfterRetries) {
  ASSERT_GT(StartCoordinator(), 0);
  const std::string crasher = *dir_ / "crash.sh";
  // No core file: the crash is the point, not its dump.
  WriteFile(crasher, "#!/bin/sh\nulimit -c 0\nkill -SEGV $$\n", 0755);
  Process& agent = StartAgent("agent-c", {"--job-binary", crasher});
  ASSERT_TRUE(AgentConnects("agent-c"));

  const CliResult submit =
      Client({"submit"}, {"--kind", "probe", "--max-failures", "2", "--wait"}, 60s);
  EXPECT_EQ(submit.exit_code, 1) << submit.out << submit.err;
  EXPECT_THAT(submit.out, HasSubstr("0 done, 1 failed"));
  EXPECT_THAT(submit.out, HasSubstr("SIGSEGV"));

  const Rows job = db_->Rows("SELECT id, state, attempts, failures, error FROM jobs");
  ASSERT_EQ(job.size(), 1u);
  EXPECT_EQ(job[0][1], "failed");
  EXPECT_EQ(job[0][2], "2");
  EXPECT_EQ(job[0][3], "2");
  EXPECT_THAT(job[0][4], HasSubstr("attempt 1 on agent-c failed: killed by signal 11 (SIGSEGV)"));
  EXPECT_THAT(job[0][4], HasSubstr("attempt 2 on agent-c failed: killed by signal 11 (SIGSEGV)"));
  EXPECT_EQ(db_->Rows("SELECT attempt, outcome FROM job_attempts ORDER BY attempt"),
            (Rows{{"1", "failed"}, {"2", "failed"}}));
  EXPECT_EQ(db_->Count("SELECT count(*) FROM runs"), 0);

  EXPECT_TRUE(agent.Running());
  const Json status = Status();
  EXPECT_EQ(AgentState(status, "agent-c"), "connected");
  ASSERT_EQ(status.value("failures", Json::array()).size(), 1u);
  EXPECT_THAT(status["failures"][0].value("error", ""), HasSubstr("signal 11"));
}

// Agents placed by a real Slurm join the coordinator, run real jobs, survive
// one of them being scancelled mid-job, and stop with `agents stop`. What
// happened comes from results.db, never from Slurm's exit codes.
TEST_F(FleetTest, SlurmLaunchedAgentsFinishRealJobs) {
  slurm_ = std::make_unique<fleet::SlurmCluster>();
  std::string why_not;
  if (!slurm_->Start(&why_not)) GTEST_SKIP() << "no Slurm cluster: " << why_not;
  ASSERT_GT(StartCoordinator("127.0.0.1:0"), 0);
  const std::string output_dir = *dir_ / "slurm-out";
  std::filesystem::create_directories(output_dir);

  const CliResult start =
      Client({"agents", "start"},
             {"--via", "slurm", "--count", "2", "--output-dir", output_dir, "--give-up", "30"});
  ASSERT_EQ(start.exit_code, 0) << start.out << start.err;
  EXPECT_THAT(start.out, HasSubstr("submitted 2 agent(s) to Slurm"));
  const Rows launches = db_->Rows("SELECT slurm_job_id, state FROM launches ORDER BY 1");
  ASSERT_EQ(launches.size(), 2u);
  EXPECT_THAT(launches, Each(ElementsAre(Not(""), "active")));

  const std::string connected =
      "SELECT name, slurm_job_id FROM agents WHERE state = 'connected' ORDER BY name";
  ASSERT_TRUE(WaitFor([&] { return db_->Rows(connected).size() == 2; }, 30s))
      << "the Slurm agents did not connect; squeue says:\n"
      << fleet::RunCommand({"squeue", "--states=all"}).out;
  std::map<std::string, std::string> slurm_job_of;  // agent name -> its Slurm job
  for (const auto& row : db_->Rows(connected)) {
    EXPECT_THAT(row[0], HasSubstr("slurm"));
    EXPECT_THAT(launches, Contains(ElementsAre(row[1], "active"))) << row[0];
    slurm_job_of[row[0]] = row[1];
  }
  ASSERT_EQ(slurm_job_of.size(), 2u);
  const Json status = Status();
  for (const auto& [name, slurm_job] : slurm_job_of) {
    EXPECT_EQ(AgentState(status, name), "connected");
  }

  // Real jobs, done by the Slurm agents.
  const std::vector<int64_t> probes = Submit({"--kind", "probe", "--count", "4"});
  const std::vector<int64_t> run = Submit(Concat(kTinyRun, {"--target", "intel"}));
  ASSERT_EQ(run.size(), 1u);
  std::vector<int64_t> all = Concat(probes, run);
  ASSERT_TRUE(JobsFinish(all, 60s));
  EXPECT_EQ(db_->Count("SELECT count(*) FROM jobs WHERE state = 'done'"), 5);
  const Rows run_rows =
      db_->Rows("SELECT agent FROM runs WHERE job_id = " + std::to_string(run[0]));
  ASSERT_EQ(run_rows.size(), 1u);
  EXPECT_EQ(slurm_job_of.count(run_rows[0][0]), 1u) << run_rows[0][0];
  for (const auto& row : db_->Rows("SELECT agent FROM job_attempts WHERE outcome = 'done'")) {
    EXPECT_EQ(slurm_job_of.count(row[0]), 1u) << row[0];
  }

  // scancel of the agent that holds a longer run: the other one finishes it.
  const std::vector<int64_t> held = Submit(kLongRun);
  ASSERT_EQ(held.size(), 1u);
  const std::string job = std::to_string(held[0]);
  std::string holder;
  ASSERT_TRUE(WaitFor(
      [&] {
        holder = db_->Scalar("SELECT agent FROM jobs WHERE state = 'leased' AND id = " + job);
        return !holder.empty();
      },
      15s));
  ASSERT_EQ(slurm_job_of.count(holder), 1u) << holder;
  std::string other;
  for (const auto& [name, slurm_job] : slurm_job_of) {
    if (name != holder) other = name;
  }
  std::this_thread::sleep_for(300ms);  // into the run
  const fleet::CommandResult cancel = fleet::RunCommand({"scancel", slurm_job_of[holder]});
  ASSERT_EQ(cancel.exit_code, 0) << cancel.err;
  ASSERT_TRUE(JobsFinish(held, 60s));
  EXPECT_EQ(db_->Scalar("SELECT state FROM jobs WHERE id = " + job), "done");
  EXPECT_EQ(db_->Rows("SELECT agent, status FROM runs WHERE job_id = " + job),
            (Rows{{other, "done"}}));
  const Rows attempts = db_->Rows("SELECT agent, outcome FROM job_attempts WHERE job_id = " + job +
                                  " ORDER BY attempt");
  // SIGTERM from scancel makes the agent hand its job back: not a failure.
  EXPECT_EQ(attempts, (Rows{{holder, "released"}, {other, "done"}}));
  EXPECT_EQ(db_->Scalar("SELECT failures FROM jobs WHERE id = " + job), "0");
  EXPECT_TRUE(WaitFor(
      [&] {
        return db_->Scalar("SELECT state FROM agents WHERE name = " + SqlQuote(holder)) ==
               "disconnected";
      },
      10s));

  // agents stop: the remaining agent leaves and every Slurm job ends.
  const CliResult stop = Client({"agents", "stop"}, {});
  EXPECT_EQ(stop.exit_code, 0) << stop.out << stop.err;
  EXPECT_THAT(stop.out, HasSubstr("asked 1 agent(s) to stop"));
  std::vector<std::string> slurm_ids;
  for (const auto& row : launches) slurm_ids.push_back(row[0]);
  std::map<std::string, std::string> states;
  EXPECT_TRUE(WaitFor(
      [&] {
        states = fleet::JobStates(slurm_ids);
        return std::none_of(states.begin(), states.end(), [](const auto& entry) {
          return entry.second == "RUNNING" || entry.second == "PENDING";
        });
      },
      20s, 200ms))
      << "Slurm jobs still live: " << Json(states).dump();
  EXPECT_EQ(db_->Rows("SELECT DISTINCT state FROM launches"), (Rows{{"stopped"}}));
  EXPECT_TRUE(WaitFor(
      [&] { return db_->Count("SELECT count(*) FROM agents WHERE state = 'connected'") == 0; },
      10s));
}

}  // namespace
}  // namespace nimble::fleet_test
