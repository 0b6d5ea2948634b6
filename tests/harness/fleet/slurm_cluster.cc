#include "tests/harness/fleet/slurm_cluster.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "harness/fleet/slurm.h"
#include "nimble/vm/error.h"

extern char** environ;

namespace nimble::fleet {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

// The packages of ../shared/slurm.md §1.1: enough for one node, without the
// 35 that the slurm-wlm metapackage's recommends pull in.
const std::vector<std::string> kPackages = {"slurmctld", "slurmd", "slurm-client", "munge"};

std::string Trim(const std::string& text) {
  const size_t begin = text.find_first_not_of(" \t\r\n");
  if (begin == std::string::npos) return "";
  return text.substr(begin, text.find_last_not_of(" \t\r\n") - begin + 1);
}

// Polls `done` every 50 ms until it holds or `limit` has passed.
template <typename Predicate>
bool WaitUntil(Predicate done, Clock::duration limit) {
  const Clock::time_point deadline = Clock::now() + limit;
  while (!done()) {
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(milliseconds(50));
  }
  return true;
}

// Whether `pid` is a live process named `name`. Daemons that exit become
// zombies of PID 1, which this VM reaps lazily (../shared/slurm.md §1.7
// item 9), so this reads the state that `ps -o stat=` shows and takes 'Z' for
// gone; the name guards against a PID reused after the daemon died.
bool Alive(pid_t pid, const std::string& name) {
  if (pid <= 0) return false;
  std::ifstream file("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!std::getline(file, stat)) return false;
  const size_t open = stat.find('(');
  const size_t close = stat.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close + 2 >= stat.size()) {
    return false;
  }
  const char state = stat[close + 2];
  return stat.substr(open + 1, close - open - 1) == name && state != 'Z' && state != 'X';
}

// Waits `grace` for the process to exit by itself, then asks with SIGTERM
// and finally insists with SIGKILL.
void Terminate(pid_t pid, const std::string& name, Clock::duration grace) {
  auto gone = [&] { return !Alive(pid, name); };
  if (WaitUntil(gone, grace)) return;
  kill(pid, SIGTERM);
  if (WaitUntil(gone, seconds(5))) return;
  kill(pid, SIGKILL);
  WaitUntil(gone, seconds(5));
}

// A TCP port that nothing listens on now; the caller keeps `socket_fd` open
// until it has picked all its ports, so that two picks differ.
int FreePort(int* socket_fd) {
  *socket_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t length = sizeof(address);
  if (*socket_fd < 0 || bind(*socket_fd, reinterpret_cast<sockaddr*>(&address), length) != 0 ||
      getsockname(*socket_fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    throw Error(std::string("cannot find a free TCP port: ") + std::strerror(errno));
  }
  return ntohs(address.sin_port);
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream file(path);
  file << text;
  if (!file.flush()) throw Error("cannot write " + path);
}

// Installs the packages that dpkg does not list as installed.
bool EnsurePackages(std::string* why_not) {
  std::vector<std::string> query = {"dpkg-query", "-W", "-f=${db:Status-Status}\\n"};
  query.insert(query.end(), kPackages.begin(), kPackages.end());
  std::string all_installed;
  std::string names;
  for (const std::string& package : kPackages) {
    all_installed += "installed\n";
    names += (names.empty() ? "" : " ") + package;
  }
  CommandResult installed;
  try {
    installed = RunCommand(query);
  } catch (const Error& error) {
    *why_not = "cannot check for the packages " + names + ": " + error.what();
    return false;
  }
  if (installed.exit_code == 0 && installed.out == all_installed) return true;
  // The lock timeout lets suites that start at the same time install in turn.
  std::vector<std::string> install = {
      "apt-get", "install", "-y", "-q", "--no-install-recommends", "-o", "DPkg::Lock::Timeout=300"};
  install.insert(install.end(), kPackages.begin(), kPackages.end());
  const std::map<std::string, std::string> environment = {{"DEBIAN_FRONTEND", "noninteractive"}};
  try {
    CommandResult result = RunCommand(install, "", environment);
    if (result.exit_code != 0) {
      // Package lists that are missing or stale name versions the mirror no
      // longer has.
      RunCommand({"apt-get", "update", "-q", "-o", "DPkg::Lock::Timeout=300"}, "", environment);
      result = RunCommand(install, "", environment);
    }
    if (result.exit_code != 0) {
      *why_not =
          "cannot install " + names + ": " + Trim(result.err.empty() ? result.out : result.err);
      return false;
    }
  } catch (const Error& error) {
    *why_not = "cannot install " + names + ": " + error.what();
    return false;
  }
  return true;
}

}  // namespace

bool SlurmCluster::Start(std::string* why_not) {
  if (!work_dir_.empty()) return true;
  try {
    if (StartOrExplain(why_not)) return true;
  } catch (const std::exception& error) {
    *why_not = error.what();
  }
  Stop();
  return false;
}

bool SlurmCluster::StartOrExplain(std::string* why_not) {
  if (geteuid() != 0) {
    *why_not =
        "a test Slurm cluster needs root (its slurmd starts jobs as their users and munged "
        "runs as munge); this is uid " +
        std::to_string(geteuid());
    return false;
  }
  if (!EnsurePackages(why_not)) return false;
  const passwd* munge_user = getpwnam("munge");
  if (munge_user == nullptr) {
    *why_not = "the munge package is installed but there is no munge user";
    return false;
  }

  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  node_name_ = host;
  node_name_ = node_name_.substr(0, node_name_.find('.'));
  utsname machine{};
  uname(&machine);

  // Under /tmp, not $TMPDIR: munged checks every directory above its socket
  // for write access by others, and a socket path has at most 107 bytes.
  char pattern[] = "/tmp/nimble-slurm-XXXXXX";
  if (mkdtemp(pattern) == nullptr) {
    throw Error(std::string("cannot create a directory in /tmp: ") + std::strerror(errno));
  }
  work_dir_ = pattern;
  // munged runs as munge and must reach its directory inside.
  chmod(work_dir_.c_str(), 0755);
  const std::string munge_dir = work_dir_ + "/munge";
  for (const char* dir : {"/state", "/spool", "/log", "/munge"}) {
    std::filesystem::create_directory(work_dir_ + dir);
  }
  if (chown(munge_dir.c_str(), munge_user->pw_uid, munge_user->pw_gid) != 0) {
    throw Error("cannot give " + munge_dir + " to munge: " + std::strerror(errno));
  }

  int controller_socket = -1;
  int node_socket = -1;
  const int controller_port = FreePort(&controller_socket);
  const int node_port = FreePort(&node_socket);
  close(controller_socket);
  close(node_socket);

  // ../shared/slurm.md §1.2, with the fixes of §1.7: the plugins that work
  // without cgroups, free ports, a private munge socket, no scheduling delay
  // and a short KillWait.
  const std::string& w = work_dir_;
  std::ostringstream conf;
  conf << "ClusterName=ci\n"
       << "SlurmctldHost=" << node_name_ << "(127.0.0.1)\n"
       << "SlurmUser=root\n"
       << "AuthType=auth/munge\n"
       << "CredType=cred/munge\n"
       << "AuthInfo=socket=" << munge_dir << "/munge.socket\n"
       << "StateSaveLocation=" << w << "/state\n"
       << "SlurmdSpoolDir=" << w << "/spool\n"
       << "SlurmctldPidFile=" << w << "/slurmctld.pid\n"
       << "SlurmdPidFile=" << w << "/slurmd.pid\n"
       << "SlurmctldLogFile=" << w << "/log/slurmctld.log\n"
       << "SlurmdLogFile=" << w << "/log/slurmd.log\n"
       << "SlurmctldPort=" << controller_port << "\n"
       << "SlurmdPort=" << node_port << "\n"
       << "ProctrackType=proctrack/linuxproc\n"
       << "TaskPlugin=task/none\n"
       << "JobAcctGatherType=jobacct_gather/none\n"
       << "AccountingStorageType=accounting_storage/none\n"
       << "JobCompType=jobcomp/none\n"
       << "MpiDefault=none\n"
       << "MailProg=/bin/true\n"
       << "SchedulerType=sched/backfill\n"
       << "SchedulerParameters=batch_sched_delay=0,sched_min_interval=0\n"
       << "SelectType=select/cons_tres\n"
       << "SelectTypeParameters=CR_Core\n"
       << "ReturnToService=2\n"
       << "KillWait=2\n"
       << "GresTypes=gpu\n"
       << "NodeName=" << node_name_ << " NodeAddr=127.0.0.1 CPUs=" << sysconf(_SC_NPROCESSORS_ONLN)
       << " RealMemory=1000 Features=ci," << machine.machine << " Gres=gpu:1 State=UNKNOWN\n"
       << "PartitionName=" << partition() << " Nodes=" << node_name_
       << " Default=YES MaxTime=UNLIMITED State=UP\n";
  conf_path_ = w + "/slurm.conf";
  WriteFile(conf_path_, conf.str());
  // A GPU needs a device file to register (§1.7 item 7); /dev/null stands in.
  WriteFile(w + "/gres.conf", "NodeName=" + node_name_ + " Name=gpu File=/dev/null\n");

  // munged refuses the packaged key as root (§1.7 item 3), and a private
  // socket keeps it apart from any other munged on this machine.
  if (!Launch(
          "munged",
          {"runuser", "-u", "munge", "--", "/usr/sbin/munged",
           "--socket=" + munge_dir + "/munge.socket", "--pid-file=" + munge_dir + "/munged.pid",
           "--log-file=" + munge_dir + "/munged.log", "--seed-file=" + munge_dir + "/munge.seed"},
          why_not)) {
    *why_not += LogTail(munge_dir + "/munged.log");
    return false;
  }
  munged_pid_ = WaitForPid(munge_dir + "/munged.pid");

  const char* previous = std::getenv("SLURM_CONF");
  if (previous != nullptr) previous_slurm_conf_ = previous;
  setenv("SLURM_CONF", conf_path_.c_str(), 1);
  conf_exported_ = true;

  // -c: start with no job state, whatever the directory held.
  if (!Launch("slurmctld", {"/usr/sbin/slurmctld", "-c", "-f", conf_path_}, why_not)) {
    *why_not += LogTail(w + "/log/slurmctld.log");
    return false;
  }
  slurmctld_pid_ = WaitForPid(w + "/slurmctld.pid");
  if (!Launch("slurmd", {"/usr/sbin/slurmd", "-f", conf_path_}, why_not)) {
    *why_not += LogTail(w + "/log/slurmd.log");
    return false;
  }
  slurmd_pid_ = WaitForPid(w + "/slurmd.pid");

  std::string state;
  const bool idle = WaitUntil(
      [&] {
        state = Trim(RunCommand({"sinfo", "--noheader", "--format=%T"}).out);
        return state == "idle";
      },
      seconds(30));
  if (!idle) {
    *why_not = "the Slurm node did not become idle within 30 s (sinfo says '" + state + "')" +
               LogTail(w + "/log/slurmctld.log") + LogTail(w + "/log/slurmd.log");
    return false;
  }
  return true;
}

bool SlurmCluster::Launch(const std::string& name, const std::vector<std::string>& argv,
                          std::string* why_not) {
  // The daemon's early messages go to a file rather than a pipe: a daemon
  // that kept the pipe open would never let a reader see its end.
  const std::string output = work_dir_ + "/log/" + name + ".out";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, output.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  std::vector<std::string> args = argv;
  std::vector<char*> arg_pointers;
  for (std::string& arg : args) arg_pointers.push_back(arg.data());
  arg_pointers.push_back(nullptr);
  pid_t pid = 0;
  const int error =
      posix_spawnp(&pid, args[0].c_str(), &actions, nullptr, arg_pointers.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (error != 0) {
    *why_not = "cannot run " + args[0] + " to start " + name + ": " + std::strerror(error);
    return false;
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return true;
  *why_not = name + " did not start (" +
             (WIFEXITED(status) ? "exit status " + std::to_string(WEXITSTATUS(status))
                                : "signal " + std::to_string(WTERMSIG(status))) +
             ")" + LogTail(output);
  return false;
}

pid_t SlurmCluster::WaitForPid(const std::string& pid_file) {
  pid_t pid = 0;
  WaitUntil(
      [&] {
        std::ifstream file(pid_file);
        return static_cast<bool>(file >> pid) && pid > 0;
      },
      seconds(10));
  if (pid <= 0) throw Error("no PID in " + pid_file + " after 10 s");
  return pid;
}

std::string SlurmCluster::LogTail(const std::string& file) const {
  std::ifstream in(file);
  std::deque<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    lines.push_back(line);
    if (lines.size() > 15) lines.pop_front();
  }
  std::string tail = "\n--- last lines of " + file + ":";
  for (const std::string& line : lines) tail += "\n" + line;
  return tail;
}

void SlurmCluster::Stop() {
  if (Alive(slurmctld_pid_, "slurmctld")) {
    try {
      // slurmd's shutdown would leave running job steps behind: cancel the
      // jobs and wait for them to leave the queue first.
      RunCommand({"scancel", "--partition=" + partition()});
      WaitUntil([] { return Trim(RunCommand({"squeue", "--noheader"}).out).empty(); }, seconds(15));
      RunCommand({"scontrol", "shutdown"});
    } catch (const Error&) {
      // The daemons are stopped by signal below.
    }
  }
  Terminate(slurmctld_pid_, "slurmctld", seconds(10));
  Terminate(slurmd_pid_, "slurmd", seconds(10));
  Terminate(munged_pid_, "munged", seconds(0));
  slurmctld_pid_ = slurmd_pid_ = munged_pid_ = 0;
  if (conf_exported_) {
    if (previous_slurm_conf_) {
      setenv("SLURM_CONF", previous_slurm_conf_->c_str(), 1);
    } else {
      unsetenv("SLURM_CONF");
    }
    conf_exported_ = false;
    previous_slurm_conf_.reset();
  }
  if (!work_dir_.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(work_dir_, ignored);
    work_dir_.clear();
  }
}

}  // namespace nimble::fleet
