#include "harness/fleet/slurm.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>

#include "nimble/vm/error.h"
#include "tests/error_of.h"
#include "tests/harness/fleet/slurm_cluster.h"

namespace nimble::fleet {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// Arguments that a shell would split, expand, glob or unquote.
const std::vector<std::string> kAwkwardWords = {
    "",      "plain",      "arg with spaces", "it's", "'", "''\\''", "\"double\"",
    "$HOME", "`id`",       "$(id)",           "\\",   "*", "a\nb",   "-n",
    "~",     "caf\xc3\xa9"};

std::string ReadFile(const std::string& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

template <typename Predicate>
bool WaitUntil(Predicate done, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return true;
}

TEST(ShellQuoteTest, QuotesEveryWordSingly) {
  EXPECT_EQ(ShellQuote(""), "''");
  EXPECT_EQ(ShellQuote("arg with spaces"), "'arg with spaces'");
  EXPECT_EQ(ShellQuote("it's"), "'it'\\''s'");
  EXPECT_EQ(ShellQuote("$HOME"), "'$HOME'");
}

TEST(ShellQuoteTest, ARealShellReadsBackTheExactWords) {
  std::string script = "printf '%s\\0'";
  for (const std::string& word : kAwkwardWords) script += " " + ShellQuote(word);
  const CommandResult result = RunCommand({"/bin/sh"}, script);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  std::string expected;
  for (const std::string& word : kAwkwardWords) expected += word + '\0';
  EXPECT_EQ(result.out, expected);
}

TEST(BatchScriptTest, RunsTheQuotedAgentWithSrun) {
  SlurmAgentLaunch launch;
  launch.agent_argv = {"/opt/nimble-bench", "agent", "--coordinator", "10.0.0.1:7000", "it's"};
  EXPECT_EQ(BatchScript(launch),
            "#!/bin/sh\n"
            "# A nimble-bench agent: Slurm places it; its jobs' outcomes come from the "
            "coordinator.\n"
            "exec srun --ntasks=1 --cpus-per-task=\"$SLURM_CPUS_ON_NODE\" '/opt/nimble-bench' "
            "'agent' '--coordinator' '10.0.0.1:7000' 'it'\\''s'\n");
}

TEST(BatchScriptTest, RejectsWhatSrunOrSbatchWouldMisread) {
  SlurmAgentLaunch launch;
  EXPECT_THAT(ErrorOf([&] { BatchScript(launch); }), HasSubstr("agent_argv is empty"));
  launch.agent_argv = {"--help"};
  EXPECT_THAT(ErrorOf([&] { BatchScript(launch); }), HasSubstr("'--help' is not a program"));
  launch.agent_argv = {"/bin/echo", std::string("a\0b", 3)};
  EXPECT_THAT(ErrorOf([&] { BatchScript(launch); }), HasSubstr("NUL byte"));
}

TEST(SlurmArgumentsTest, RejectsBadLaunchesAndJobIdsBeforeRunningAnything) {
  SlurmAgentLaunch launch;
  launch.agent_argv = {"/bin/true"};
  launch.output_dir = "/nonexistent/nimble";
  EXPECT_THAT(ErrorOf([&] { SubmitAgents(launch); }), HasSubstr("'/nonexistent/nimble'"));
  launch.output_dir = ::testing::TempDir();
  launch.count = 0;
  EXPECT_THAT(ErrorOf([&] { SubmitAgents(launch); }), HasSubstr("count must be at least 1"));
  launch.count = 1;
  launch.environment = {{"NOT A NAME", "x"}};
  EXPECT_THAT(ErrorOf([&] { SubmitAgents(launch); }), HasSubstr("'NOT A NAME'"));
  EXPECT_THAT(ErrorOf([] { CancelJobs({"12", "-u"}); }), HasSubstr("not a Slurm job id: '-u'"));
  EXPECT_THAT(ErrorOf([] { JobStates({"12 13"}); }), HasSubstr("'12 13'"));
}

TEST(SlurmArgumentsTest, MissingSlurmCommandsAreErrorsNamingThem) {
  const char* path = std::getenv("PATH");
  const std::string saved = path == nullptr ? "" : path;
  std::string empty_dir = ::testing::TempDir() + "/nimble-empty-path-XXXXXX";
  ASSERT_NE(mkdtemp(empty_dir.data()), nullptr);
  setenv("PATH", empty_dir.c_str(), 1);
  SlurmAgentLaunch launch;
  launch.agent_argv = {"/bin/true"};
  launch.output_dir = ::testing::TempDir();
  const std::string submit_error = ErrorOf([&] { SubmitAgents(launch); });
  const std::string cancel_error = ErrorOf([] { CancelJobs({"12"}); });
  const std::string states_error = ErrorOf([] { JobStates({"12"}); });
  setenv("PATH", saved.c_str(), 1);
  std::filesystem::remove(empty_dir);
  EXPECT_THAT(submit_error, HasSubstr("could not start sbatch: No such file or directory"));
  EXPECT_THAT(cancel_error, HasSubstr("could not start scancel"));
  EXPECT_THAT(states_error, HasSubstr("could not start squeue"));
}

// Everything below runs real sbatch, srun, scancel and squeue against one
// real cluster, shared by the suite: starting it costs the first job ~3 s of
// scheduling latency (../shared/slurm.md §1.7 item 12).
class SlurmTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    cluster_ = std::make_unique<SlurmCluster>();
    if (!cluster_->Start(&why_not_)) cluster_.reset();
  }
  static void TearDownTestSuite() { cluster_.reset(); }

  void SetUp() override {
    if (cluster_ == nullptr) GTEST_SKIP() << "no Slurm cluster: " << why_not_;
    output_dir_ = cluster_->work_dir() + "/" +
                  ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::create_directories(output_dir_);
  }

  SlurmAgentLaunch Launch(const std::string& job_name, std::vector<std::string> argv) const {
    SlurmAgentLaunch launch;
    launch.job_name = job_name;
    launch.output_dir = output_dir_;
    launch.agent_argv = std::move(argv);
    return launch;
  }

  // Waits until every job is in `state`; false (and what they are in) past `limit`.
  static ::testing::AssertionResult ReachState(const std::vector<std::string>& job_ids,
                                               const std::string& state,
                                               std::chrono::seconds limit) {
    std::map<std::string, std::string> states;
    const bool reached = WaitUntil(
        [&] {
          states = JobStates(job_ids);
          for (const auto& [id, job_state] : states) {
            if (job_state != state) return false;
          }
          return true;
        },
        limit);
    if (reached) return ::testing::AssertionSuccess();
    ::testing::AssertionResult failure = ::testing::AssertionFailure();
    failure << "not all " << state << " after " << limit.count() << " s:";
    for (const auto& [id, job_state] : states) failure << " " << id << "=" << job_state;
    return failure;
  }

  static std::unique_ptr<SlurmCluster> cluster_;
  static std::string why_not_;
  std::string output_dir_;
};

std::unique_ptr<SlurmCluster> SlurmTest::cluster_;
std::string SlurmTest::why_not_;

TEST_F(SlurmTest, AgentsRunWithTheExportedEnvironmentAndTheExactArguments) {
  SlurmAgentLaunch launch = Launch(
      "nimble-echo",
      {"/bin/sh", "-c", "printf '%s|%s|%s|%s\\n' \"$NIMBLE_LAUNCH_TOKEN\" \"$#\" \"$1\" \"$2\"",
       "sh", "arg with spaces", "it's \"quoted\" $HOME `id` \\ *"});
  launch.count = 2;
  launch.constraint = "ci";
  // A comma would end the value in --export=K=V; here it travels intact.
  launch.environment = {{"NIMBLE_LAUNCH_TOKEN", "t0k3n,with=commas and spaces"}};
  const std::vector<std::string> ids = SubmitAgents(launch);
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_NE(ids[0], ids[1]);
  ASSERT_TRUE(ReachState(ids, "COMPLETED", std::chrono::seconds(30)));
  // The exit code proves nothing (../shared/slurm.md §1.7 item 4): the output does.
  for (const std::string& id : ids) {
    EXPECT_EQ(ReadFile(output_dir_ + "/nimble-echo-" + id + ".out"),
              "t0k3n,with=commas and spaces|2|arg with spaces|it's \"quoted\" $HOME `id` \\ *\n")
        << "job " << id;
  }
}

TEST_F(SlurmTest, GresExclusiveAndTimeLimitReachTheAllocation) {
  SlurmAgentLaunch launch =
      Launch("nimble-flags",
             {"/bin/sh", "-c", "echo \"gpu=$CUDA_VISIBLE_DEVICES cpus=$SLURM_CPUS_PER_TASK\""});
  launch.gres = "gpu:1";
  launch.exclusive = true;
  launch.time_limit = "7:00";
  launch.partition = cluster_->partition();
  const std::vector<std::string> ids = SubmitAgents(launch);
  ASSERT_TRUE(ReachState(ids, "COMPLETED", std::chrono::seconds(30)));
  // --exclusive gives the job every CPU, and the agent's step gets them all.
  EXPECT_EQ(ReadFile(output_dir_ + "/nimble-flags-" + ids[0] + ".out"),
            "gpu=0 cpus=" + std::to_string(sysconf(_SC_NPROCESSORS_ONLN)) + "\n");
  const CommandResult limit =
      RunCommand({"squeue", "--noheader", "--states=all", "--jobs=" + ids[0], "--format=%l"});
  EXPECT_EQ(limit.out, "7:00\n") << limit.err;
}

TEST_F(SlurmTest, CancelStopsARunningAgentAndItsProcess) {
  const std::string pid_file = output_dir_ + "/agent.pid";
  const std::vector<std::string> ids = SubmitAgents(Launch(
      "nimble-sleep", {"/bin/sh", "-c", "echo $$ > \"$1\"; exec sleep 300", "sh", pid_file}));
  ASSERT_TRUE(ReachState(ids, "RUNNING", std::chrono::seconds(30)));
  pid_t pid = 0;
  ASSERT_TRUE(WaitUntil(
      [&] {
        std::ifstream file(pid_file);
        return static_cast<bool>(file >> pid);
      },
      std::chrono::seconds(10)));
  const std::string stat_path = "/proc/" + std::to_string(pid) + "/stat";
  ASSERT_THAT(ReadFile(stat_path), HasSubstr("(sleep)"));

  CancelJobs(ids);
  EXPECT_TRUE(ReachState(ids, "CANCELLED", std::chrono::seconds(15)));
  // Gone, or a zombie that PID 1 has yet to reap.
  EXPECT_TRUE(WaitUntil(
      [&] {
        const std::string stat = ReadFile(stat_path);
        return stat.find("(sleep)") == std::string::npos || stat.find(") Z") != std::string::npos;
      },
      std::chrono::seconds(10)))
      << ReadFile(stat_path);
  // Cancelling jobs that ended, or that Slurm never knew, is not an error.
  EXPECT_NO_THROW(CancelJobs(ids));
  EXPECT_NO_THROW(CancelJobs({"987654"}));
  EXPECT_EQ(JobStates({"987654"}).at("987654"), "UNKNOWN");
}

TEST_F(SlurmTest, BadPartitionAndConstraintAreErrorsNamingThem) {
  SlurmAgentLaunch launch = Launch("nimble-bad", {"/bin/true"});
  launch.partition = "no-such-partition";
  EXPECT_THAT(ErrorOf([&] { SubmitAgents(launch); }),
              AllOf(HasSubstr("--partition=no-such-partition"), HasSubstr("Invalid partition")));
  launch.partition = "";
  launch.constraint = "no-such-feature";
  EXPECT_THAT(ErrorOf([&] { SubmitAgents(launch); }),
              AllOf(HasSubstr("--constraint=no-such-feature"), HasSubstr("feature")));
}

}  // namespace
}  // namespace nimble::fleet
