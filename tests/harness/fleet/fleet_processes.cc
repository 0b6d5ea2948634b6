#include "tests/harness/fleet/fleet_processes.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <spawn.h>
#include <sqlite3.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>

#include "harness/agent/child_process.h"

extern char** environ;

namespace nimble::fleet_test {

namespace {

// Our environment with `overrides` replacing or adding entries.
std::vector<std::string> Environment(const std::map<std::string, std::string>& overrides) {
  std::vector<std::string> entries;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string text = *entry;
    const std::string name = text.substr(0, text.find('='));
    if (overrides.count(name) == 0) entries.push_back(text);
  }
  for (const auto& [name, value] : overrides) entries.push_back(name + "=" + value);
  return entries;
}

std::vector<char*> Pointers(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  for (std::string& text : strings) pointers.push_back(text.data());
  pointers.push_back(nullptr);
  return pointers;
}

// Starts argv in a new process group with the given file actions.
pid_t Spawn(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
            posix_spawn_file_actions_t* actions) {
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attributes, 0);
  std::vector<std::string> args = argv;
  std::vector<std::string> environment = Environment(env);
  std::vector<char*> arg_pointers = Pointers(args);
  std::vector<char*> env_pointers = Pointers(environment);
  pid_t pid = -1;
  const int error = posix_spawnp(&pid, args.at(0).c_str(), actions, &attributes,
                                 arg_pointers.data(), env_pointers.data());
  posix_spawnattr_destroy(&attributes);
  if (error != 0) {
    throw std::runtime_error("cannot start " + args[0] + ": " + std::strerror(error));
  }
  return pid;
}

// SIGKILL to `pid`'s group, `pid` and each of `others`.
void KillAll(pid_t pid, const std::vector<pid_t>& others, int signal) {
  kill(-pid, signal);
  kill(pid, signal);
  for (const pid_t other : others) kill(other, signal);
}

}  // namespace

std::string Join(const std::vector<int64_t>& ids) {
  std::string text;
  for (const int64_t id : ids) text += (text.empty() ? "" : ",") + std::to_string(id);
  return text;
}

std::string Tail(const std::string& text, size_t size) {
  return text.size() > size ? "..." + text.substr(text.size() - size) : text;
}

TempDir::TempDir(const std::string& prefix) {
  std::string pattern = "/tmp/" + prefix + "-XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) {
    throw std::runtime_error("mkdtemp: " + std::string(std::strerror(errno)));
  }
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

void WriteFile(const std::string& path, const std::string& text, int mode) {
  {
    std::ofstream file(path, std::ios::trunc);
    file << text;
    if (!file.flush()) throw std::runtime_error("cannot write " + path);
  }
  chmod(path.c_str(), static_cast<mode_t>(mode));
}

std::string ReadFile(const std::string& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

std::vector<pid_t> Descendants(pid_t root) {
  std::multimap<pid_t, pid_t> children;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", error)) {
    const std::string name = entry.path().filename();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string stat = ReadFile("/proc/" + name + "/stat");
    // The name in parentheses may hold spaces: the fields after the last ')'.
    const size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream fields(stat.substr(close + 1));
    char state = 0;
    pid_t parent = 0;
    if (!(fields >> state >> parent) || state == 'Z') continue;
    children.emplace(parent, static_cast<pid_t>(std::stol(name)));
  }
  std::vector<pid_t> found;
  std::vector<pid_t> pending = {root};
  while (!pending.empty()) {
    const pid_t parent = pending.back();
    pending.pop_back();
    const auto [begin, end] = children.equal_range(parent);
    for (auto it = begin; it != end; ++it) {
      found.push_back(it->second);
      pending.push_back(it->second);
    }
  }
  return found;
}

Process::Process(const std::vector<std::string>& argv, const std::string& log_path,
                 const std::map<std::string, std::string>& environment)
    : log_path_(log_path) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log_path.c_str(),
                                   O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  try {
    pid_ = Spawn(argv, environment, &actions);
  } catch (...) {
    posix_spawn_file_actions_destroy(&actions);
    throw;
  }
  posix_spawn_file_actions_destroy(&actions);
}

Process::~Process() {
  Kill(SIGKILL);
}

bool Process::Running() {
  if (status_ || pid_ <= 0) return false;
  int status = 0;
  const pid_t done = waitpid(pid_, &status, WNOHANG);
  if (done == pid_) status_ = status;
  return !status_;
}

void Process::Kill(int signal) {
  if (pid_ <= 0) return;
  // The descendants first, while they are still ours to find: once the
  // process dies they are re-parented and out of reach.
  const std::vector<pid_t> descendants = Descendants(pid_);
  if (Running()) {
    KillAll(pid_, descendants, signal);
  } else {
    for (const pid_t other : descendants) kill(other, signal);
  }
  if (signal == SIGKILL) Wait(10s);
}

std::optional<int> Process::Wait(Clock::duration limit) {
  WaitFor([&] { return !Running(); }, limit, 20ms);
  return status_;
}

CliResult RunCommand(const std::vector<std::string>& argv, Clock::duration limit,
                     const std::map<std::string, std::string>& environment) {
  agent::ChildOptions options;
  options.timeout_s = std::chrono::duration<double>(limit).count();
  options.stderr_tail_bytes = 1 << 20;
  options.environment.assign(environment.begin(), environment.end());
  const agent::ChildResult child = agent::RunChild(argv, options);
  if (child.outcome == agent::ChildResult::Outcome::kStartFailed) {
    throw std::runtime_error(child.start_error);
  }
  CliResult result;
  result.timed_out = child.outcome == agent::ChildResult::Outcome::kTimedOut;
  result.exit_code = child.outcome == agent::ChildResult::Outcome::kExited ? child.exit_code : -1;
  result.out = child.out;
  result.err = child.err_tail;
  result.seconds = child.wall_s;
  return result;
}

void Fd::Close() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

int ConnectTcp(const std::string& host, uint16_t port, const std::string& source) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  sockaddr_in from{};
  from.sin_family = AF_INET;
  const bool bound =
      source.empty() || (inet_pton(AF_INET, source.c_str(), &from.sin_addr) == 1 &&
                         bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof(from)) == 0);
  if (fd < 0 || !bound || inet_pton(AF_INET, host.c_str(), &address.sin_addr) != 1 ||
      connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    const std::string why = std::strerror(errno);
    if (fd >= 0) close(fd);
    throw std::runtime_error("cannot connect to " + host + ":" + std::to_string(port) + ": " + why);
  }
  return fd;
}

uint16_t LocalPort(int fd) {
  sockaddr_in address{};
  socklen_t length = sizeof(address);
  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  return ntohs(address.sin_port);
}

bool ClosedWithin(int fd, Clock::duration limit) {
  const Clock::time_point deadline = Clock::now() + limit;
  while (true) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return false;
    pollfd ready = {fd, POLLIN, 0};
    if (poll(&ready, 1, static_cast<int>(left.count())) <= 0) continue;
    char buffer[4096];
    const ssize_t got = read(fd, buffer, sizeof(buffer));
    // EOF, or a reset when the coordinator closed with our bytes unread.
    if (got == 0 || (got < 0 && errno != EINTR && errno != EAGAIN)) return true;
  }
}

std::vector<std::vector<std::string>> ResultsReader::Rows(const std::string& sql) const {
  std::vector<std::vector<std::string>> rows;
  sqlite3* db = nullptr;
  // Never create the file: the coordinator must be the one that does.
  if (sqlite3_open_v2(path_.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) {
    error_ = "cannot open " + path_ + ": " + (db ? sqlite3_errmsg(db) : "out of memory");
    sqlite3_close(db);
    return rows;
  }
  sqlite3_busy_timeout(db, 2000);
  sqlite3_stmt* statement = nullptr;
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &statement, nullptr) != SQLITE_OK) {
    error_ = sql + ": " + sqlite3_errmsg(db);
    sqlite3_close(db);
    return rows;
  }
  int step = SQLITE_ROW;
  while ((step = sqlite3_step(statement)) == SQLITE_ROW) {
    std::vector<std::string> row;
    for (int i = 0; i < sqlite3_column_count(statement); ++i) {
      const unsigned char* text = sqlite3_column_text(statement, i);
      row.emplace_back(text != nullptr ? reinterpret_cast<const char*>(text) : "NULL");
    }
    rows.push_back(std::move(row));
  }
  error_ = step == SQLITE_DONE ? "" : sql + ": " + sqlite3_errmsg(db);
  sqlite3_finalize(statement);
  sqlite3_close(db);
  return rows;
}

std::string ResultsReader::Scalar(const std::string& sql) const {
  const auto rows = Rows(sql);
  return rows.empty() || rows[0].empty() ? "" : rows[0][0];
}

int64_t ResultsReader::Count(const std::string& sql) const {
  const std::string value = Scalar(sql);
  return value.empty() || value == "NULL" ? 0 : std::stoll(value);
}

std::string SqlQuote(const std::string& text) {
  std::string quoted = "'";
  for (const char c : text) quoted += c == '\'' ? std::string("''") : std::string(1, c);
  return quoted + "'";
}

namespace {

CliResult Ip(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"ip"};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCommand(argv, std::chrono::seconds(10));
}

}  // namespace

NetNamespace::NetNamespace(int slot) {
  const std::string id = std::to_string(getpid()) + (slot ? "s" + std::to_string(slot) : "");
  const int index = static_cast<int>((getpid() * 8 + slot) % 16384);
  const std::string subnet = "10.201." + std::to_string(index / 64) + ".";
  const int base = (index % 64) * 4;
  host_address_ = subnet + std::to_string(base + 1);
  inner_address_ = subnet + std::to_string(base + 2);
  name_ = "nbfleet" + id;
  host_link_ = "nbfh" + id;
  inner_link_ = "nbfn" + id;
}

NetNamespace::~NetNamespace() {
  if (!created_) return;
  // Deleting the namespace deletes its end of the pair, and with it ours.
  Ip({"netns", "del", name_});
  Ip({"link", "del", host_link_});
}

std::string NetNamespace::Create() {
  created_ = true;
  const std::vector<std::vector<std::string>> steps = {
      {"netns", "add", name_},
      {"link", "add", host_link_, "type", "veth", "peer", "name", inner_link_},
      {"link", "set", inner_link_, "netns", name_},
      {"addr", "add", host_address_ + "/30", "dev", host_link_},
      {"link", "set", host_link_, "up"},
      {"-n", name_, "addr", "add", inner_address_ + "/30", "dev", inner_link_},
      {"-n", name_, "link", "set", inner_link_, "up"},
      {"-n", name_, "link", "set", "lo", "up"},
  };
  for (const auto& step : steps) {
    const CliResult result = Ip(step);
    if (result.exit_code != 0) {
      std::string command = "ip";
      for (const std::string& word : step) command += " " + word;
      return command + ": " + result.err;
    }
  }
  return "";
}

std::vector<std::string> NetNamespace::Inside(const std::vector<std::string>& argv) const {
  std::vector<std::string> wrapped = {"ip", "netns", "exec", name_};
  wrapped.insert(wrapped.end(), argv.begin(), argv.end());
  return wrapped;
}

}  // namespace nimble::fleet_test
