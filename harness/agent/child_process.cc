#include "harness/agent/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <sstream>
#include <string_view>
#include <system_error>

namespace nimble::agent {

namespace {

using Clock = std::chrono::steady_clock;
using Outcome = ChildResult::Outcome;

// The longest stretch without looking at the cancel flag and at whether the
// child has exited (its pipes may stay open after it: grandchildren).
constexpr std::chrono::milliseconds kMaxPollWait{100};
constexpr size_t kReadChunk = 64 << 10;
constexpr size_t kMaxDescribedLine = 300;

std::string ErrnoText(int error) {
  return std::generic_category().message(error);
}

// Capped at 30 years, which is no limit either: longer would overflow.
Clock::duration Seconds(double seconds) {
  return std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(std::clamp(seconds, 0.0, 1e9)));
}

// Owns one file descriptor.
class Fd {
 public:
  Fd() = default;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { Close(); }

  int get() const { return fd_; }
  bool open() const { return fd_ >= 0; }
  void Reset(int fd) {
    Close();
    fd_ = fd;
  }
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

// A close-on-exec pipe whose ends are both above 2, so that the child's dup2()
// onto 0-2 can never clobber another of its pipes (a daemon may have closed
// its stdio, and pipe2 then hands out 0-2). Returns 0 or errno.
int MakePipe(Fd* read_end, Fd* write_end) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return errno;
  read_end->Reset(fds[0]);
  write_end->Reset(fds[1]);
  for (Fd* end : {read_end, write_end}) {
    if (end->get() > 2) continue;
    const int moved = ::fcntl(end->get(), F_DUPFD_CLOEXEC, 3);
    if (moved < 0) return errno;
    end->Reset(moved);
  }
  return 0;
}

void SetNonBlocking(const Fd& fd) {
  if (fd.open()) ::fcntl(fd.get(), F_SETFL, ::fcntl(fd.get(), F_GETFL) | O_NONBLOCK);
}

// Everything the child runs between fork and exec is prepared beforehand:
// another thread may hold the allocator's lock at fork time, so the child
// calls only async-signal-safe functions. Not copyable: the pointer arrays
// point into its own strings.
class ExecPlan {
 public:
  ExecPlan(const std::vector<std::string>& argv, const ChildOptions& options) {
    const auto& overrides = options.environment;
    auto overridden_from = [&](std::string_view name, size_t first) {
      return std::any_of(overrides.begin() + static_cast<std::ptrdiff_t>(first), overrides.end(),
                         [&](const auto& entry) { return entry.first == name; });
    };
    for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
      const std::string_view text(*entry);
      if (!overridden_from(text.substr(0, text.find('=')), 0)) env_.emplace_back(text);
    }
    for (size_t i = 0; i < overrides.size(); ++i) {
      if (!overridden_from(overrides[i].first, i + 1)) {
        env_.push_back(overrides[i].first + "=" + overrides[i].second);
      }
    }

    const std::string& program = argv[0];
    if (program.find('/') != std::string::npos) {
      candidates_.push_back(program);
    } else if (!program.empty()) {
      std::string path = "/bin:/usr/bin";  // glibc's default when PATH is unset
      for (const std::string& entry : env_) {
        if (entry.starts_with("PATH=")) path = entry.substr(5);
      }
      // An empty entry is the current directory, as for execvp.
      for (size_t begin = 0;;) {
        const size_t colon = path.find(':', begin);
        const std::string dir = path.substr(begin, colon - begin);
        candidates_.push_back((dir.empty() ? "." : dir) + "/" + program);
        if (colon == std::string::npos) break;
        begin = colon + 1;
      }
    }

    for (const std::string& arg : argv) argv_ptrs_.push_back(const_cast<char*>(arg.c_str()));
    argv_ptrs_.push_back(nullptr);
    for (std::string& entry : env_) env_ptrs_.push_back(entry.data());
    env_ptrs_.push_back(nullptr);
    for (const std::string& candidate : candidates_) candidate_ptrs_.push_back(candidate.c_str());
  }
  ExecPlan(const ExecPlan&) = delete;
  ExecPlan& operator=(const ExecPlan&) = delete;

  // argv[0] resolved against PATH: the paths to try, in order.
  const std::vector<const char*>& candidates() const { return candidate_ptrs_; }
  char* const* argv() const { return argv_ptrs_.data(); }
  char* const* envp() const { return env_ptrs_.data(); }

 private:
  std::vector<std::string> candidates_;
  std::vector<std::string> env_;  // NAME=value
  std::vector<char*> argv_ptrs_;
  std::vector<char*> env_ptrs_;
  std::vector<const char*> candidate_ptrs_;
};

// The child between fork and exec. On failure it writes errno to `report`
// (close-on-exec, so the parent reads end of file once exec succeeds).
[[noreturn]] void ExecChild(const ExecPlan& plan, pid_t parent, int stdin_fd, int stdout_fd,
                            int stderr_fd, int report) {
  int error = 0;
  ::setpgid(0, 0);
  // A job must not outlive its agent: if the agent is killed (SIGKILL, a
  // crash), the kernel kills the child too. The check after it covers a
  // parent that died before the prctl.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(127);
  // Handlers the parent installed (Asio's signal_set writes to the parent's
  // pipe) must not run here, and ignored signals would stay ignored after
  // exec: every signal goes back to its default before any is unblocked.
  struct sigaction default_action = {};
  default_action.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) ::sigaction(sig, &default_action, nullptr);
  sigset_t none;
  ::sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);

  if (::dup2(stdin_fd, 0) < 0 || ::dup2(stdout_fd, 1) < 0 || ::dup2(stderr_fd, 2) < 0) {
    error = errno;
  } else {
    // Descriptors other libraries opened without O_CLOEXEC (the coordinator's
    // socket) stay with the agent; a kernel without close_range keeps them.
    ::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
    // As execvp: a candidate that is missing moves on to the next; EACCES is
    // reported only if none is found.
    error = ENOENT;
    for (const char* candidate : plan.candidates()) {
      ::execve(candidate, plan.argv(), plan.envp());
      if (errno == EACCES) {
        error = EACCES;
      } else if (errno != ENOENT && errno != ENOTDIR) {
        error = errno;
        break;
      }
    }
  }
  while (::write(report, &error, sizeof(error)) < 0 && errno == EINTR) {
  }
  ::_exit(127);
}

// The child process: on every path out of RunChild (an exception included)
// its process group is killed and it is reaped, unless Reap() already did.
class Child {
 public:
  explicit Child(pid_t pid) : pid_(pid) {}
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child() {
    if (!reaped_) {
      Signal(SIGKILL);
      Reap();
    }
  }

  // Its process group has the child's pid; the group is signalled only before
  // the child is reaped, while that pid cannot be reused.
  void Signal(int sig) const { ::kill(-pid_, sig); }

  // Whether it has exited, leaving it to be reaped (WNOWAIT).
  bool HasExited() const {
    siginfo_t info = {};
    int rc;
    do {
      rc = ::waitid(P_PID, pid_, &info, WEXITED | WNOHANG | WNOWAIT);
    } while (rc < 0 && errno == EINTR);
    // An error means it cannot be waited for (SIGCHLD ignored): it is gone.
    return rc < 0 || info.si_pid != 0;
  }

  // Waits for it; its wait status. As Python's subprocess: 0 when it cannot be
  // waited for (SIGCHLD ignored reaps it by itself).
  int Reap() {
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    reaped_ = true;
    return status;
  }

 private:
  pid_t pid_;
  bool reaped_ = false;
};

// write() that cannot kill the process with SIGPIPE when the child has closed
// its stdin: SIGPIPE is blocked in this thread for the call, and the one our
// EPIPE raised (directed at this thread) is taken back before unblocking,
// unless one was pending already. No signal disposition is touched.
ssize_t WriteWithoutSigpipe(int fd, const char* data, size_t size) {
  sigset_t pipe_only, old_mask, pending;
  ::sigemptyset(&pipe_only);
  ::sigaddset(&pipe_only, SIGPIPE);
  ::pthread_sigmask(SIG_BLOCK, &pipe_only, &old_mask);
  ::sigpending(&pending);
  const bool was_pending = ::sigismember(&pending, SIGPIPE) == 1;
  ssize_t written;
  do {
    written = ::write(fd, data, size);
  } while (written < 0 && errno == EINTR);
  const int error = errno;
  if (written < 0 && error == EPIPE && !was_pending) {
    const timespec no_wait = {};
    while (::sigtimedwait(&pipe_only, nullptr, &no_wait) < 0 && errno == EINTR) {
    }
  }
  ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  errno = error;
  return written;
}

// One read of what the pipe holds now into `consume`; closes it at end of
// file or on an error. Whether anything was read.
template <typename Consume>
bool ReadSome(Fd* fd, char* buffer, Consume&& consume) {
  ssize_t n;
  do {
    n = ::read(fd->get(), buffer, kReadChunk);
  } while (n < 0 && errno == EINTR);
  if (n > 0) {
    consume(std::string_view(buffer, static_cast<size_t>(n)));
    return true;
  }
  if (n == 0 || errno != EAGAIN) fd->Close();
  return false;
}

// The last non-empty line of `text`, trimmed and shortened to one log line.
std::string LastLine(std::string_view text) {
  const size_t end = text.find_last_not_of(" \t\r\n");
  if (end == std::string_view::npos) return "";
  text = text.substr(0, end + 1);
  const size_t newline = text.find_last_of('\n');
  if (newline != std::string_view::npos) text = text.substr(newline + 1);
  text = text.substr(text.find_first_not_of(" \t\r"));  // it ends with one that is not
  if (text.size() <= kMaxDescribedLine) return std::string(text);
  return std::string(text.substr(0, kMaxDescribedLine)) + "...";
}

}  // namespace

std::string ChildResult::Describe() const {
  std::string text;
  switch (outcome) {
    case Outcome::kExited:
      text = "exit status " + std::to_string(exit_code);
      break;
    case Outcome::kSignaled:
      text = "killed by signal " + std::to_string(signal);
      if (const char* name = ::sigabbrev_np(signal)) text += " (SIG" + std::string(name) + ")";
      break;
    case Outcome::kTimedOut: {
      std::ostringstream limit;
      limit << "timed out after " << timeout_s << " s";
      text = limit.str();
      break;
    }
    case Outcome::kCancelled:
      return "cancelled";
    case Outcome::kStartFailed:
      return start_error;
  }
  const std::string line = LastLine(err_tail);
  if (!line.empty()) text += "; stderr: " + line;
  return text;
}

ChildResult RunChild(const std::vector<std::string>& argv, const ChildOptions& options) {
  const Clock::time_point start = Clock::now();
  ChildResult result;
  auto start_failed = [&](int error) {
    result.outcome = Outcome::kStartFailed;
    result.start_error = "could not start " + argv[0] + ": " + ErrnoText(error);
    result.wall_s = std::chrono::duration<double>(Clock::now() - start).count();
    return result;
  };
  if (argv.empty()) {
    result.start_error = "could not start: empty command";
    return result;
  }

  const ExecPlan plan(argv, options);
  Fd stdin_read, stdin_write, stdout_read, stdout_write, stderr_read, stderr_write;
  Fd report_read, report_write;
  const std::pair<Fd*, Fd*> pipes[] = {{&stdin_read, &stdin_write},
                                       {&stdout_read, &stdout_write},
                                       {&stderr_read, &stderr_write},
                                       {&report_read, &report_write}};
  for (auto [read_end, write_end] : pipes) {
    if (const int error = MakePipe(read_end, write_end)) return start_failed(error);
  }

  // All signals stay blocked until the child has reset their handlers.
  sigset_t all, old_mask;
  ::sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &old_mask);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ExecChild(plan, parent, stdin_read.get(), stdout_write.get(), stderr_write.get(),
              report_write.get());
  }
  const int fork_error = errno;
  ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  if (pid < 0) return start_failed(fork_error);
  Child child(pid);
  // The child does it too: whichever runs first, the group exists before we
  // signal it.
  ::setpgid(pid, pid);
  stdin_read.Close();
  stdout_write.Close();
  stderr_write.Close();
  report_write.Close();

  int exec_error = 0;
  ssize_t n;
  do {
    n = ::read(report_read.get(), &exec_error, sizeof(exec_error));
  } while (n < 0 && errno == EINTR);
  if (n == sizeof(exec_error)) {
    child.Reap();
    return start_failed(exec_error);
  }
  report_read.Close();

  SetNonBlocking(stdin_write);
  SetNonBlocking(stdout_read);
  SetNonBlocking(stderr_read);
  size_t stdin_written = 0;
  if (options.stdin_data.empty()) stdin_write.Close();

  auto keep_stdout = [&](std::string_view data) {
    const size_t room =
        options.max_stdout_bytes - std::min(options.max_stdout_bytes, result.out.size());
    if (data.size() > room) result.stdout_truncated = true;
    result.out.append(data.substr(0, room));
  };
  auto keep_stderr = [&](std::string_view data) {
    const size_t cap = options.stderr_tail_bytes;
    if (cap == 0) return;
    result.err_tail.append(data.substr(data.size() - std::min(cap, data.size())));
    // Trimmed in bulk: copying the tail on every read would be quadratic.
    if (result.err_tail.size() > 2 * cap) result.err_tail.erase(0, result.err_tail.size() - cap);
  };

  constexpr Clock::time_point kNever = Clock::time_point::max();
  const Clock::time_point deadline =
      options.timeout_s > 0 ? start + Seconds(options.timeout_s) : kNever;
  std::optional<Outcome> stopped;      // kTimedOut or kCancelled once we terminate it
  Clock::time_point kill_at = kNever;  // SIGKILL once SIGTERM's grace is over
  std::chrono::milliseconds idle_wait{1};
  std::vector<char> buffer(kReadChunk);
  int status = 0;
  for (;;) {
    if (child.HasExited()) {
      // What it left running would hold the pipes open and compete with the
      // next job.
      child.Signal(SIGKILL);
      status = child.Reap();
      while (stdout_read.open() && ReadSome(&stdout_read, buffer.data(), keep_stdout)) {
      }
      while (stderr_read.open() && ReadSome(&stderr_read, buffer.data(), keep_stderr)) {
      }
      break;
    }

    const Clock::time_point now = Clock::now();
    if (!stopped) {
      if (options.cancel != nullptr && options.cancel->load()) {
        stopped = Outcome::kCancelled;
      } else if (now >= deadline) {
        stopped = Outcome::kTimedOut;
      }
      if (stopped) {
        child.Signal(SIGTERM);
        kill_at = now + Seconds(options.kill_grace_s);
      }
    } else if (now >= kill_at) {
      child.Signal(SIGKILL);
      kill_at = kNever;
    }

    const Clock::time_point wake = std::min(now + kMaxPollWait, stopped ? kill_at : deadline);
    auto wait_for = std::chrono::ceil<std::chrono::milliseconds>(wake - now);
    pollfd fds[3];
    Fd* owners[3];
    nfds_t count = 0;
    for (auto [fd, events] : {std::pair{&stdin_write, POLLOUT}, std::pair{&stdout_read, POLLIN},
                              std::pair{&stderr_read, POLLIN}}) {
      if (!fd->open()) continue;
      owners[count] = fd;
      fds[count++] = {fd->get(), static_cast<short>(events), 0};
    }
    if (count == 0) {
      // Its output is closed and it is about to exit, most likely: look
      // again soon, then less and less often.
      wait_for = std::min(wait_for, idle_wait);
      idle_wait = std::min(idle_wait * 2, kMaxPollWait);
    }
    if (::poll(fds, count, static_cast<int>(std::max<int64_t>(wait_for.count(), 0))) <= 0) {
      continue;
    }

    for (nfds_t i = 0; i < count; ++i) {
      if (fds[i].revents == 0) continue;
      if (owners[i] == &stdin_write) {
        const ssize_t written =
            WriteWithoutSigpipe(stdin_write.get(), options.stdin_data.data() + stdin_written,
                                options.stdin_data.size() - stdin_written);
        if (written > 0) stdin_written += static_cast<size_t>(written);
        // EPIPE: it closed its stdin; what it does without the rest is its
        // business.
        if (stdin_written == options.stdin_data.size() || (written < 0 && errno != EAGAIN)) {
          stdin_write.Close();
        }
      } else if (owners[i] == &stdout_read) {
        ReadSome(&stdout_read, buffer.data(), keep_stdout);
      } else {
        ReadSome(&stderr_read, buffer.data(), keep_stderr);
      }
    }
  }

  result.wall_s = std::chrono::duration<double>(Clock::now() - start).count();
  if (result.err_tail.size() > options.stderr_tail_bytes) {
    result.err_tail.erase(0, result.err_tail.size() - options.stderr_tail_bytes);
  }
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  if (stopped) {
    result.outcome = *stopped;
    if (*stopped == Outcome::kTimedOut) result.timeout_s = options.timeout_s;
  } else {
    result.outcome = WIFSIGNALED(status) ? Outcome::kSignaled : Outcome::kExited;
  }
  return result;
}

}  // namespace nimble::agent
