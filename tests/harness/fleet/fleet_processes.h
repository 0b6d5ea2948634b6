// Real processes, sockets and results.db for the fleet's end-to-end suites:
// child processes that are always killed and reaped (with everything they
// started), a command runner with a deadline, bounded polling, a reader of
// the coordinator's SQLite file, network namespaces, and small helpers for
// argument lists and logs. No mocks: the suites drive the real nimble-bench
// binary.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <csignal>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace nimble::fleet_test {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// `head` followed by `tail` (argument lists).
template <typename T>
std::vector<T> Concat(std::vector<T> head, const std::vector<T>& tail) {
  head.insert(head.end(), tail.begin(), tail.end());
  return head;
}

// `ids` comma-separated, for SQL's IN (...).
std::string Join(const std::vector<int64_t>& ids);

// The last `size` characters of `text`, with "..." before them when cut.
std::string Tail(const std::string& text, size_t size);

// Polls `done` every `period` until it holds or `limit` has passed; a last
// check at the deadline, so a slow poll never turns success into failure.
template <typename Predicate>
bool WaitFor(Predicate done, Clock::duration limit, Clock::duration period = 100ms) {
  const Clock::time_point deadline = Clock::now() + limit;
  while (!done()) {
    if (Clock::now() >= deadline) return done();
    std::this_thread::sleep_for(period);
  }
  return true;
}

// A fresh directory under /tmp, removed with everything in it.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

void WriteFile(const std::string& path, const std::string& text, int mode = 0644);
std::string ReadFile(const std::string& path);

// Every live descendant of `pid` (children, their children, ...), from
// /proc. An agent runs each job in a process group of its own, so killing
// the agent's group alone would leave the job running.
std::vector<pid_t> Descendants(pid_t pid);

// A long-lived child (a coordinator, an agent) in a process group of its
// own, with stdout and stderr appended to `log_path`. The destructor kills
// it and all its descendants and reaps it, whatever the test did.
class Process {
 public:
  Process(const std::vector<std::string>& argv, const std::string& log_path,
          const std::map<std::string, std::string>& environment = {});
  ~Process();
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  pid_t pid() const { return pid_; }
  // Not exited yet (reaps it when it has).
  bool Running();
  // Sends `signal` to the process, its group and every descendant;
  // SIGKILL also waits for it and reaps it.
  void Kill(int signal = SIGKILL);
  // Waits up to `limit` for it to exit; its wait status, or nullopt.
  std::optional<int> Wait(Clock::duration limit);
  std::string Log() const { return ReadFile(log_path_); }
  const std::string& log_path() const { return log_path_; }

 private:
  pid_t pid_ = -1;
  std::optional<int> status_;
  std::string log_path_;
};

// What a command did: its exit status (-1 for a signal or a timeout).
struct CliResult {
  int exit_code = -1;
  std::string out;
  std::string err;
  bool timed_out = false;
  double seconds = 0;
};

// Runs argv to completion within `limit` (killed past it), capturing both
// streams, through the agent's child runner; `environment` is added to ours.
CliResult RunCommand(const std::vector<std::string>& argv, Clock::duration limit,
                     const std::map<std::string, std::string>& environment = {});

// Owns a file descriptor.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { Close(); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  void Close();

 private:
  int fd_;
};

// A raw TCP connection for hostile-client tests (throws when refused),
// from `source` when given (any 127.x.y.z is this host's: a second
// "host" on loopback).
int ConnectTcp(const std::string& host, uint16_t port, const std::string& source = "");
uint16_t LocalPort(int fd);
// Reads and discards until the peer closes (EOF or reset) or `limit` passes;
// true when it closed.
bool ClosedWithin(int fd, Clock::duration limit);

// Read-only queries on a results.db that another process writes (WAL).
class ResultsReader {
 public:
  explicit ResultsReader(std::string path) : path_(std::move(path)) {}
  // Every row of `sql`, NULL as "NULL"; empty when the file or the table does
  // not exist yet (the coordinator creates both), with the reason in error().
  std::vector<std::vector<std::string>> Rows(const std::string& sql) const;
  // The first column of the first row, or "" when there is none.
  std::string Scalar(const std::string& sql) const;
  int64_t Count(const std::string& sql) const;
  const std::string& error() const { return error_; }

 private:
  std::string path_;
  mutable std::string error_;
};

// `text` with every `'` doubled, for SQL literals.
std::string SqlQuote(const std::string& text);

// A network namespace joined to ours by a veth pair: a second "host" (an
// ARM agent's, a bare host's, an sshd's) whose only way to the coordinator
// is the veth link, with non-loopback addresses on both ends. Addresses and
// names derive from our PID and `slot` (several per test), so parallel runs
// of the suites do not clash. The destructor removes both.
class NetNamespace {
 public:
  explicit NetNamespace(int slot = 0);
  ~NetNamespace();
  NetNamespace(const NetNamespace&) = delete;
  NetNamespace& operator=(const NetNamespace&) = delete;

  // "" when up, else what failed (no `ip`, no permission).
  std::string Create();
  const std::string& name() const { return name_; }
  // Our end's address, and the namespace's.
  const std::string& host_address() const { return host_address_; }
  const std::string& inner_address() const { return inner_address_; }
  // argv run inside the namespace (`ip netns exec NAME argv...`).
  std::vector<std::string> Inside(const std::vector<std::string>& argv) const;

 private:
  std::string name_, host_link_, inner_link_, host_address_, inner_address_;
  bool created_ = false;
};

}  // namespace nimble::fleet_test
