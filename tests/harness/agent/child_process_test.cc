// RunChild with real processes: exit statuses, signals, timeouts and cancels
// (grandchildren included), start failures, stdin and stdout both ways
// without deadlock, the stdout cap and stderr tail, the environment, a child
// that closes its stdin early, and no leaked descriptors.
#include "harness/agent/child_process.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace nimble::agent {
namespace {

using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using Outcome = ChildResult::Outcome;

ChildResult Shell(const std::string& script, const ChildOptions& options = {}) {
  return RunChild({"/bin/sh", "-c", script}, options);
}

// Whether `pid` is gone: no such process, or a zombie left to init.
bool Dead(pid_t pid) {
  if (::kill(pid, 0) != 0) return errno == ESRCH;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string pid_field, name, state;
  stat >> pid_field >> name >> state;
  return !stat || state == "Z";
}

// Waits up to 2 s for `pid` to die (init reaps at its own pace).
bool DiesSoon(pid_t pid) {
  for (int i = 0; i < 200; ++i) {
    if (Dead(pid)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

size_t OpenFds() {
  return static_cast<size_t>(std::distance(std::filesystem::directory_iterator("/proc/self/fd"),
                                           std::filesystem::directory_iterator()));
}

TEST(ChildProcessTest, ExitZeroCapturesStdout) {
  const ChildResult result = RunChild({"/bin/echo", "hello", "world"}, {});
  EXPECT_TRUE(result.ok());
  EXPECT_EQ(result.outcome, Outcome::kExited);
  EXPECT_EQ(result.out, "hello world\n");
  EXPECT_FALSE(result.stdout_truncated);
  EXPECT_EQ(result.Describe(), "exit status 0");
  EXPECT_GT(result.wall_s, 0);
}

TEST(ChildProcessTest, LooksUpArgv0OnPath) {
  const ChildResult result = RunChild({"echo", "found"}, {});
  EXPECT_TRUE(result.ok()) << result.Describe();
  EXPECT_EQ(result.out, "found\n");
}

TEST(ChildProcessTest, ExitCodeAndLastStderrLineInDescribe) {
  const ChildResult result = Shell("echo out; echo first >&2; echo '  bad input' >&2; exit 3");
  EXPECT_FALSE(result.ok());
  EXPECT_EQ(result.outcome, Outcome::kExited);
  EXPECT_EQ(result.exit_code, 3);
  EXPECT_EQ(result.out, "out\n");
  EXPECT_EQ(result.err_tail, "first\n  bad input\n");
  EXPECT_EQ(result.Describe(), "exit status 3; stderr: bad input");
}

TEST(ChildProcessTest, KeepsTheTailOfStderr) {
  ChildOptions options;
  options.stderr_tail_bytes = 100;
  const ChildResult result =
      Shell("{ head -c 300000 /dev/zero | tr '\\0' x; echo; echo last words; } >&2", options);
  EXPECT_TRUE(result.ok()) << result.Describe();
  ASSERT_EQ(result.err_tail.size(), 100u);
  EXPECT_THAT(result.err_tail, EndsWith("xxx\nlast words\n"));
  EXPECT_EQ(result.Describe(), "exit status 0; stderr: last words");
}

TEST(ChildProcessTest, DescribeShortensALongLine) {
  const ChildResult result = Shell("head -c 1000 /dev/zero | tr '\\0' y >&2; exit 1");
  const std::string described = result.Describe();
  EXPECT_THAT(described, StartsWith("exit status 1; stderr: yyy"));
  EXPECT_THAT(described, EndsWith("y..."));
  EXPECT_LT(described.size(), 400u);
}

class ChildSignalTest : public ::testing::TestWithParam<std::pair<int, std::string>> {};

TEST_P(ChildSignalTest, KilledBySignalIsNamed) {
  const auto& [sig, name] = GetParam();
  // No core file: the signal is the point, not the dump.
  const ChildResult result =
      Shell("ulimit -c 0; echo dying >&2; kill -" + name.substr(3) + " $$; sleep 5");
  EXPECT_EQ(result.outcome, Outcome::kSignaled);
  EXPECT_EQ(result.signal, sig);
  EXPECT_EQ(result.Describe(),
            "killed by signal " + std::to_string(sig) + " (" + name + "); stderr: dying");
}

INSTANTIATE_TEST_SUITE_P(Signals, ChildSignalTest,
                         ::testing::Values(std::pair{SIGSEGV, std::string("SIGSEGV")},
                                           std::pair{SIGABRT, std::string("SIGABRT")},
                                           std::pair{SIGKILL, std::string("SIGKILL")}));

TEST(ChildProcessTest, TimesOut) {
  ChildOptions options;
  options.timeout_s = 0.5;
  const ChildResult result = RunChild({"sleep", "30"}, options);
  EXPECT_EQ(result.outcome, Outcome::kTimedOut);
  EXPECT_EQ(result.signal, SIGTERM);
  EXPECT_GE(result.wall_s, 0.5);
  EXPECT_LT(result.wall_s, 1.5);
  EXPECT_EQ(result.Describe(), "timed out after 0.5 s");
}

TEST(ChildProcessTest, TimeoutKillsGrandchildren) {
  ChildOptions options;
  options.timeout_s = 0.5;
  const ChildResult result = Shell("sleep 30 & echo $!; wait", options);
  EXPECT_EQ(result.outcome, Outcome::kTimedOut);
  EXPECT_LT(result.wall_s, 1.5);
  const pid_t grandchild = std::stoi(result.out);
  EXPECT_TRUE(DiesSoon(grandchild)) << "pid " << grandchild;
}

TEST(ChildProcessTest, SigkillAfterTheGraceWhenSigtermIsIgnored) {
  ChildOptions options;
  options.timeout_s = 0.3;
  options.kill_grace_s = 0.3;
  const ChildResult result = Shell("trap '' TERM; echo ready; sleep 30; sleep 30", options);
  EXPECT_EQ(result.outcome, Outcome::kTimedOut);
  EXPECT_EQ(result.signal, SIGKILL);
  EXPECT_EQ(result.out, "ready\n");
  EXPECT_GE(result.wall_s, 0.6);
  EXPECT_LT(result.wall_s, 1.5);
}

TEST(ChildProcessTest, WhatTheChildLeavesRunningIsKilledWhenItExits) {
  // The background sleep holds stdout open: RunChild must not wait for it.
  const ChildResult result = Shell("sleep 30 & echo $!");
  EXPECT_TRUE(result.ok()) << result.Describe();
  EXPECT_LT(result.wall_s, 1.0);
  const pid_t grandchild = std::stoi(result.out);
  EXPECT_TRUE(DiesSoon(grandchild)) << "pid " << grandchild;
}

TEST(ChildProcessTest, CancelFromAnotherThread) {
  std::atomic<bool> cancel = false;
  ChildOptions options;
  options.cancel = &cancel;
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    cancel = true;
  });
  const ChildResult result = RunChild({"sleep", "30"}, options);
  canceller.join();
  EXPECT_EQ(result.outcome, Outcome::kCancelled);
  EXPECT_LT(result.wall_s, 1.0);
  EXPECT_EQ(result.Describe(), "cancelled");
}

TEST(ChildProcessTest, MissingExecutableIsAStartFailure) {
  const ChildResult result = RunChild({"/nonexistent/nimble-no-such-program", "x"}, {});
  EXPECT_EQ(result.outcome, Outcome::kStartFailed);
  EXPECT_FALSE(result.ok());
  EXPECT_EQ(result.Describe(),
            "could not start /nonexistent/nimble-no-such-program: No such file or directory");

  const ChildResult on_path = RunChild({"nimble-no-such-program"}, {});
  EXPECT_EQ(on_path.outcome, Outcome::kStartFailed);
  EXPECT_THAT(on_path.Describe(), HasSubstr("No such file or directory"));
}

TEST(ChildProcessTest, NotExecutableIsAStartFailure) {
  const ChildResult result = RunChild({"/etc/passwd"}, {});
  EXPECT_EQ(result.outcome, Outcome::kStartFailed);
  EXPECT_EQ(result.Describe(), "could not start /etc/passwd: Permission denied");
}

TEST(ChildProcessTest, StdinIsEchoedByCat) {
  ChildOptions options;
  options.stdin_data = "some input\nmore\n";
  const ChildResult result = RunChild({"/bin/cat"}, options);
  EXPECT_TRUE(result.ok()) << result.Describe();
  EXPECT_EQ(result.out, options.stdin_data);
}

TEST(ChildProcessTest, LargeStdinAndStdoutWithoutDeadlock) {
  ChildOptions options;
  options.stdin_data.resize(1 << 20);
  for (size_t i = 0; i < options.stdin_data.size(); ++i) {
    options.stdin_data[i] = static_cast<char>('a' + i % 26);
  }
  const ChildResult result = RunChild({"/bin/cat"}, options);
  EXPECT_TRUE(result.ok()) << result.Describe();
  EXPECT_TRUE(result.out == options.stdin_data) << result.out.size() << " bytes back";
}

TEST(ChildProcessTest, StdoutBeyondTheCapIsDiscardedAndTheChildFinishes) {
  ChildOptions options;
  options.max_stdout_bytes = 1000;
  const ChildResult result = Shell("head -c 1000000 /dev/zero; echo finished >&2", options);
  EXPECT_TRUE(result.ok()) << result.Describe();
  EXPECT_EQ(result.out, std::string(1000, '\0'));
  EXPECT_TRUE(result.stdout_truncated);
  EXPECT_EQ(result.err_tail, "finished\n");
}

TEST(ChildProcessTest, EnvironmentIsSetAndOverridden) {
  ChildOptions options;
  options.environment = {{"NIMBLE_CHILD_TEST", "first"},
                         {"HOME", "/nimble-home"},
                         {"NIMBLE_CHILD_TEST", "value with spaces"}};
  const ChildResult result =
      Shell("echo \"$NIMBLE_CHILD_TEST|$HOME\"; env | grep -c '^NIMBLE_CHILD_TEST='", options);
  EXPECT_TRUE(result.ok()) << result.Describe();
  EXPECT_EQ(result.out, "value with spaces|/nimble-home\n1\n");
}

TEST(ChildProcessTest, PathOfTheChildEnvironmentFindsArgv0) {
  ChildOptions options;
  options.environment = {{"PATH", "/nonexistent:/bin"}};
  const ChildResult result = RunChild({"sh", "-c", "echo $PATH"}, options);
  EXPECT_TRUE(result.ok()) << result.Describe();
  EXPECT_EQ(result.out, "/nonexistent:/bin\n");
}

TEST(ChildProcessTest, ChildClosingStdinEarlyDoesNotKillUs) {
  ChildOptions options;
  options.stdin_data.assign(1 << 20, 'z');
  const ChildResult closes = Shell("exec 0<&-; sleep 0.1; echo done", options);
  EXPECT_TRUE(closes.ok()) << closes.Describe();
  EXPECT_EQ(closes.out, "done\n");
  const ChildResult exits = RunChild({"/bin/true"}, options);
  EXPECT_TRUE(exits.ok()) << exits.Describe();

  sigset_t pending;
  ASSERT_EQ(sigpending(&pending), 0);
  EXPECT_FALSE(sigismember(&pending, SIGPIPE));
}

TEST(ChildProcessTest, ChildStartsWithDefaultSignals) {
  // Our thread blocks SIGUSR1 and the process ignores SIGPIPE: neither
  // reaches the job.
  sigset_t usr1, old_mask;
  sigemptyset(&usr1);
  sigaddset(&usr1, SIGUSR1);
  ASSERT_EQ(pthread_sigmask(SIG_BLOCK, &usr1, &old_mask), 0);
  struct sigaction ignore = {}, old_action;
  ignore.sa_handler = SIG_IGN;
  ASSERT_EQ(sigaction(SIGPIPE, &ignore, &old_action), 0);
  const ChildResult result = RunChild({"grep", "-E", "^Sig(Blk|Ign)", "/proc/self/status"}, {});
  sigaction(SIGPIPE, &old_action, nullptr);
  pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  EXPECT_TRUE(result.ok()) << result.Describe();
  EXPECT_EQ(result.out, "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n");
}

TEST(ChildProcessTest, NoDescriptorLeaks) {
  const size_t before = OpenFds();
  ChildOptions with_input;
  with_input.stdin_data = "x";
  for (int i = 0; i < 50; ++i) {
    switch (i % 5) {
      case 0:
        EXPECT_TRUE(RunChild({"/bin/echo", "x"}, {}).ok());
        break;
      case 1:
        EXPECT_TRUE(RunChild({"/bin/cat"}, with_input).ok());
        break;
      case 2:
        EXPECT_EQ(RunChild({"/nonexistent/x"}, {}).outcome, Outcome::kStartFailed);
        break;
      case 3:
        EXPECT_EQ(Shell("kill -KILL $$").outcome, Outcome::kSignaled);
        break;
      default:
        EXPECT_TRUE(Shell("echo to stderr >&2; exit 0").ok());
    }
  }
  EXPECT_EQ(OpenFds(), before);
}

TEST(ChildProcessTest, EmptyArgvIsAStartFailure) {
  const ChildResult result = RunChild({}, {});
  EXPECT_EQ(result.outcome, Outcome::kStartFailed);
  EXPECT_EQ(result.Describe(), "could not start: empty command");
}

TEST(ChildProcessTest, ConcurrentRunsFromSeveralThreads) {
  // Each child must see end of file on its own pipes even while the others
  // are being forked (the pipes are close-on-exec).
  std::vector<std::thread> threads;
  std::atomic<int> ok = 0;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 10; ++i) {
        ChildOptions options;
        options.stdin_data = std::to_string(t * 100 + i);
        const ChildResult result = RunChild({"/bin/cat"}, options);
        if (result.ok() && result.out == options.stdin_data) ++ok;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(ok, 40);
}

}  // namespace
}  // namespace nimble::agent
