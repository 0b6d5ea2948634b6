// The coordinator's queue in a real results.db: leases, attempts, retries,
// expiry, hand-backs and exactly-once recording, a restart from the file,
// matching jobs to agents, and the migration of a version-1 database.
#include "harness/coordinator/job_store.h"

#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "harness/bench/migration_001.h"
#include "harness/coordinator/coordinator.h"
#include "nimble/compiler/support/sqlite_util.h"

namespace nimble::coordinator {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class JobStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("nimble_job_store_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / "results.db").string();
    db_ = std::make_unique<bench::ResultsDb>(path_);
    store_ = std::make_unique<JobStore>(*db_);
  }
  void TearDown() override {
    store_.reset();
    db_.reset();
    std::filesystem::remove_all(dir_);
  }

  static protocol::JobSpec Spec(const std::string& target = "intel", int max_failures = 3) {
    protocol::JobSpec spec;
    spec.kind = "run";
    spec.target = target;
    spec.max_failures = max_failures;
    return spec;
  }
  std::optional<Lease> LeaseFor(const std::string& agent, double now = 100) {
    return store_->LeaseNext(
        agent, {"intel", "any"}, [](const protocol::JobSpec&) { return true; }, now, 10);
  }
  int64_t CountRows(const std::string& sql) {
    sqlite::Statement count(db_->handle(), sql, path_);
    count.Step();
    return count.Integer(0);
  }
  // A run record as an agent reports it, recorded by the callback.
  std::function<int64_t()> Recorder(int64_t job_id, const std::string& agent) {
    return [this, job_id, agent] {
      bench::RunInfo info;
      info.commit_id = "c";
      info.host = "h";
      info.cpu_model = "m";
      info.target = "intel";
      info.model = "lstm";
      info.configuration = "{}";
      info.dataset = "synthetic";
      info.split = "test";
      info.arch = "x86_64";
      info.job_id = job_id;
      info.agent = agent;
      return db_->RecordRun(info, {{"us_per_token", 1.5, "us"}});
    };
  }

  std::filesystem::path dir_;
  std::string path_;
  std::unique_ptr<bench::ResultsDb> db_;
  std::unique_ptr<JobStore> store_;
};

TEST_F(JobStoreTest, ALeasedJobIsRecordedExactlyOnce) {
  const std::vector<int64_t> ids = store_->Submit({Spec(), Spec()});
  ASSERT_EQ(ids.size(), 2u);
  const std::optional<Lease> lease = LeaseFor("a");
  ASSERT_TRUE(lease);
  EXPECT_EQ(lease->job_id, ids[0]);
  EXPECT_EQ(lease->attempt, 1);
  EXPECT_EQ(store_->Job(ids[0])->state, "leased");
  EXPECT_EQ(store_->Complete(ids[0], 1, "a", "{}", Recorder(ids[0], "a")), Outcome::kRecorded);
  // The agent resends after a reconnect: nothing more is written.
  EXPECT_EQ(store_->Complete(ids[0], 1, "a", "{}", Recorder(ids[0], "a")), Outcome::kDuplicate);
  EXPECT_EQ(store_->Job(ids[0])->state, "done");
  EXPECT_GT(store_->Job(ids[0])->run_id, 0);
  EXPECT_EQ(CountRows("SELECT count(*) FROM runs"), 1);
  EXPECT_EQ(CountRows("SELECT count(*) FROM runs WHERE job_id = " + std::to_string(ids[0]) +
                      " AND agent = 'a' AND status = 'done'"),
            1);
  // Another agent cannot claim an attempt it never held.
  EXPECT_EQ(store_->Complete(ids[1], 1, "b", "{}", Recorder(ids[1], "b")), Outcome::kUnknown);
}

TEST_F(JobStoreTest, FailuresRetryThenFailWithEveryReason) {
  const int64_t id = store_->Submit({Spec("intel", 2)})[0];
  ASSERT_TRUE(LeaseFor("a"));
  EXPECT_EQ(store_->Fail(id, 1, "a", "killed by signal 11 (SIGSEGV)"), Outcome::kRecorded);
  EXPECT_EQ(store_->Job(id)->state, "queued");
  ASSERT_EQ(LeaseFor("b")->attempt, 2);
  EXPECT_EQ(store_->Fail(id, 2, "b", "exit status 3"), Outcome::kRecorded);
  const JobView job = *store_->Job(id);
  EXPECT_EQ(job.state, "failed");
  EXPECT_EQ(job.failures, 2);
  EXPECT_THAT(job.error, HasSubstr("attempt 1 on a failed: killed by signal 11 (SIGSEGV)"));
  EXPECT_THAT(job.error, HasSubstr("attempt 2 on b failed: exit status 3"));
  EXPECT_FALSE(LeaseFor("c"));
  EXPECT_EQ(store_->FailedJobs(10).size(), 1u);
}

TEST_F(JobStoreTest, ExpiredLeasesAreRequeuedAndALateResultWins) {
  const int64_t id = store_->Submit({Spec()})[0];
  ASSERT_TRUE(LeaseFor("a", 100));
  EXPECT_TRUE(store_->Renew(id, 1, "a", 105, 10));  // now until 115
  EXPECT_EQ(store_->ExpireLeases(114), 0);
  EXPECT_EQ(store_->ExpireLeases(116), 1);
  EXPECT_EQ(store_->Job(id)->state, "queued");
  EXPECT_FALSE(store_->Renew(id, 1, "a", 117, 10));
  ASSERT_EQ(LeaseFor("b", 120)->attempt, 2);
  // Agent a was only partitioned; its result arrives and is taken.
  EXPECT_EQ(store_->Complete(id, 1, "a", "{}", Recorder(id, "a")), Outcome::kRecorded);
  EXPECT_EQ(store_->Complete(id, 2, "b", "{}", Recorder(id, "b")), Outcome::kDuplicate);
  EXPECT_EQ(CountRows("SELECT count(*) FROM runs"), 1);
  EXPECT_THAT(store_->AttemptReasons(id), ElementsAre(HasSubstr("attempt 1 on a done"),
                                                      HasSubstr("attempt 2 on b superseded")));
}

TEST_F(JobStoreTest, ReleasedJobsDoNotCountAndAbandonedOnesDo) {
  const int64_t id = store_->Submit({Spec("intel", 2)})[0];
  ASSERT_TRUE(LeaseFor("a"));
  EXPECT_EQ(store_->Release(id, 1, "a", "agent a stopping (SIGTERM)"), Outcome::kRecorded);
  EXPECT_EQ(store_->Job(id)->failures, 0);
  EXPECT_EQ(store_->Job(id)->state, "queued");
  ASSERT_TRUE(LeaseFor("b"));
  EXPECT_EQ(store_->AbandonAgent("b", "agent b disconnected"), 1);
  EXPECT_EQ(store_->Job(id)->failures, 1);
  EXPECT_EQ(store_->Job(id)->state, "queued");
  EXPECT_EQ(store_->AbandonAgent("b", "again"), 0);
}

TEST_F(JobStoreTest, TheQueueSurvivesARestartFromTheFile) {
  const std::vector<int64_t> ids = store_->Submit({Spec(), Spec(), Spec()});
  ASSERT_TRUE(LeaseFor("a", 100));
  ASSERT_EQ(store_->Complete(ids[0], 1, "a", "{}", Recorder(ids[0], "a")), Outcome::kRecorded);
  ASSERT_TRUE(LeaseFor("a", 100));
  store_.reset();
  db_.reset();  // the coordinator dies with job 2 leased
  db_ = std::make_unique<bench::ResultsDb>(path_);
  store_ = std::make_unique<JobStore>(*db_);
  store_->Recover(1000, 10);
  EXPECT_EQ(
      store_->CountsByState(),
      (std::map<std::string, int64_t>{{"queued", 1}, {"leased", 1}, {"done", 1}, {"failed", 0}}));
  // Its agent reconnects within the grace and reports.
  EXPECT_TRUE(store_->Renew(ids[1], 1, "a", 1001, 10));
  EXPECT_EQ(store_->Complete(ids[1], 1, "a", "{}", Recorder(ids[1], "a")), Outcome::kRecorded);
  EXPECT_EQ(LeaseFor("a", 1002)->job_id, ids[2]);
  EXPECT_EQ(CountRows("SELECT count(*) FROM runs"), 2);
}

TEST_F(JobStoreTest, LeasesOnlyWhatTheAgentAccepts) {
  const std::vector<int64_t> ids = store_->Submit({Spec("arm"), Spec("intel")});
  const std::optional<Lease> lease = store_->LeaseNext(
      "x86", {"intel", "any"}, [](const protocol::JobSpec& spec) { return spec.target == "intel"; },
      0, 10);
  ASSERT_TRUE(lease);
  EXPECT_EQ(lease->job_id, ids[1]);
  EXPECT_FALSE(store_->LeaseNext(
      "x86", {"intel", "any"}, [](const protocol::JobSpec&) { return true; }, 0, 10));
}

TEST_F(JobStoreTest, AgentsAndLaunchesAreKept) {
  protocol::AgentInfo agent;
  agent.name = "a";
  agent.host.host = "h";
  agent.host.arch = "aarch64";
  agent.host.emulated = true;
  agent.host.emulator = "qemu-aarch64";
  agent.host.cpu_model = "m";
  agent.host.cpu_flags = "neon";
  agent.host.cores = 2;
  agent.host.memory_bytes = 1 << 30;
  agent.host.gpus = {"G1", "G2"};
  agent.commit_id = "abc";
  store_->AgentConnected(agent);
  std::vector<AgentView> agents = store_->Agents();
  ASSERT_EQ(agents.size(), 1u);
  EXPECT_EQ(agents[0].state, "connected");
  EXPECT_EQ(protocol::ToJson(agents[0].info), protocol::ToJson(agent));
  store_->AgentDisconnected("a");
  EXPECT_EQ(store_->Agents()[0].state, "disconnected");
  store_->RecordLaunch("41", "{}");
  store_->RecordLaunch("42", "{}");
  EXPECT_THAT(store_->StopLaunches(), ElementsAre("41", "42"));
  EXPECT_TRUE(store_->StopLaunches().empty());
}

TEST(Matching, JobsGoOnlyToHardwareThatProducesTheirFigures) {
  protocol::AgentInfo x86;
  x86.host.arch = "x86_64";
  x86.host.cpu_flags = "avx2 fma";
  x86.host.cores = 2;
  protocol::AgentInfo arm_emulated;
  arm_emulated.host.arch = "aarch64";
  arm_emulated.host.emulated = true;
  arm_emulated.host.emulator = "qemu-aarch64";
  arm_emulated.host.cores = 2;
  protocol::JobSpec job;
  job.kind = "run";
  job.target = "intel";
  EXPECT_EQ(WhyNotRunnable(job, x86), "");
  EXPECT_EQ(WhyNotRunnable(job, arm_emulated), "target intel needs an x86_64 host");
  job.target = "arm";
  EXPECT_EQ(WhyNotRunnable(job, x86), "target arm needs an aarch64 host");
  EXPECT_THAT(WhyNotRunnable(job, arm_emulated), HasSubstr("emulated (qemu-aarch64)"));
  job.allow_emulated = true;
  EXPECT_EQ(WhyNotRunnable(job, arm_emulated), "");
  job.target = "nvidia";
  EXPECT_EQ(WhyNotRunnable(job, x86), "target nvidia needs a GPU");
  job.target = "any";
  job.cpu_flags = {"avx512f"};
  EXPECT_EQ(WhyNotRunnable(job, x86), "the CPU lacks avx512f");
  job.cpu_flags = {"avx2"};
  job.min_cores = 4;
  EXPECT_EQ(WhyNotRunnable(job, x86), "fewer than 4 cores");
}

// A baseline job goes only to an agent that reported the framework's
// environment, unless the job names its interpreter.
TEST(Matching, BaselineJobsGoOnlyToAgentsWithTheirFramework) {
  protocol::AgentInfo agent;
  agent.host.arch = "x86_64";
  agent.host.cores = 2;
  agent.peers = {"pytorch", "openvino"};
  protocol::JobSpec job;
  job.kind = "baseline";
  job.target = "intel";
  job.options = {{"framework", "openvino"}, {"variant", "f32"}};
  EXPECT_EQ(WhyNotRunnable(job, agent), "");
  job.options["framework"] = "mxnet";
  EXPECT_EQ(WhyNotRunnable(job, agent), "the agent has no mxnet (scripts/install-peers.sh mxnet)");
  job.options["python"] = "/opt/mxnet/bin/python";
  EXPECT_EQ(WhyNotRunnable(job, agent), "");
  // Reported and read back through the handshake's `hardware`.
  agent.name = "a";
  agent.host.host = "h";
  EXPECT_EQ(protocol::AgentInfoFromJson(protocol::ToJson(agent)).peers, agent.peers);
}

TEST(Migration, AVersionOneDatabaseMovesToVersionTwo) {
  const std::string path =
      std::filesystem::temp_directory_path() / ("nimble_v1_" + std::to_string(getpid()) + ".db");
  std::filesystem::remove(path);
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &raw), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(raw, kMigration001, nullptr, nullptr, nullptr), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(raw,
                         "PRAGMA user_version = 1; INSERT INTO runs (started_at, status, "
                         "commit_id, host, cpu_model, cpu_flags, cores, threads, target, model, "
                         "configuration, dataset, split, sentences, warmup, repeat) VALUES "
                         "('t', 'done', 'c', 'h', 'm', '', 2, 2, 'arm', 'lstm', '{}', "
                         "'synthetic', 'test', 1, 0, 1)",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(raw);
  {
    bench::ResultsDb db(path);
    const bench::RunRecord run = db.Run(1);
    // What ran a version-1 row was not recorded: it stays unknown, never
    // the target's name.
    EXPECT_EQ(run.info.arch, "unknown");
    EXPECT_FALSE(run.info.emulated);
    EXPECT_EQ(run.info.target, "arm");
    JobStore store(db);
    protocol::JobSpec probe;
    probe.kind = "probe";
    EXPECT_EQ(store.Submit({probe}).size(), 1u);
  }
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace nimble::coordinator
