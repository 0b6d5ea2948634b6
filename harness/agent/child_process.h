// Runs one job in a child process for the benchmark agent, so that a crash,
// an abort or a hang of a model run is a failed attempt with its reason,
// never a dead agent. Plain fork+exec, poll() and waitpid only (no pidfd, no
// signalfd, no helper threads): it must also run under qemu-aarch64 user
// emulation.
#pragma once

#include <atomic>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace nimble::agent {

struct ChildOptions {
  // 0: none. On expiry: SIGTERM to the child's process group, then SIGKILL
  // after kill_grace_s.
  double timeout_s = 0;
  double kill_grace_s = 2;
  // Written to the child's stdin, which is then closed.
  std::string stdin_data;
  // Beyond this stdout is read and discarded (the child is never blocked) and
  // `stdout_truncated` set.
  size_t max_stdout_bytes = 16 << 20;
  // The last bytes of stderr are kept.
  size_t stderr_tail_bytes = 4096;
  // Set (added or overridden) in the child's environment, which is otherwise
  // ours; argv[0] is looked up on the PATH of that environment.
  std::vector<std::pair<std::string, std::string>> environment;
  // When it becomes true: terminate like a timeout (checked at least every
  // 100 ms).
  const std::atomic<bool>* cancel = nullptr;
};

struct ChildResult {
  enum class Outcome { kExited, kSignaled, kTimedOut, kCancelled, kStartFailed };
  Outcome outcome = Outcome::kStartFailed;
  // How the child ended: its exit status, or the signal that killed it (also
  // after a timeout or a cancel).
  int exit_code = 0;
  int signal = 0;
  std::string out;  // stdout
  bool stdout_truncated = false;
  std::string err_tail;     // the last stderr_tail_bytes of stderr
  std::string start_error;  // kStartFailed: "could not start /x/y: No such file or directory"
  double timeout_s = 0;     // kTimedOut: the limit that expired
  double wall_s = 0;

  bool ok() const { return outcome == Outcome::kExited && exit_code == 0; }
  // One line for logs and a job's failure reason: "exit status 3; stderr:
  // <its last line>", "killed by signal 11 (SIGSEGV); stderr: ...", "timed out
  // after 30 s", "cancelled", "could not start /x/y: No such file or
  // directory".
  std::string Describe() const;
};

// Runs argv (argv[0] looked up on PATH when it has no '/') in its own process
// group and waits for it; the child is killed if the calling thread's
// process dies (PR_SET_PDEATHSIG). Never throws for anything the child does. When the
// child ends, whatever it left running in its process group is killed, so a
// job's processes never outlive it. Every path reaps the child and closes
// every descriptor it opened; SIGPIPE from a child that closes its stdin
// early is swallowed without touching the process's signal dispositions.
// Safe to call from several threads at once.
ChildResult RunChild(const std::vector<std::string>& argv, const ChildOptions& options);

}  // namespace nimble::agent
