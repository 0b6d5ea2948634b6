#include "harness/fleet/ssh_launch.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <mutex>
#include <sstream>
#include <thread>

#include "harness/agent/child_process.h"
#include "harness/fleet/slurm.h"
#include "nimble/vm/error.h"
#include "nimble/vm/string_join.h"

namespace nimble::fleet {

namespace {

// Limits for one ssh or scp command. Keep-alives end a session whose host
// vanished within a minute; these only bound a host that answers but hangs.
constexpr double kCommandTimeoutS = 300;
constexpr double kCopyTimeoutS = 3600;
// How long the agents' output the host still shows is quoted in an error.
constexpr size_t kQuotedBytes = 1500;

std::string Trim(const std::string& text) {
  const size_t begin = text.find_first_not_of(" \t\r\n");
  if (begin == std::string::npos) return "";
  return text.substr(begin, text.find_last_not_of(" \t\r\n") - begin + 1);
}

// The last `kQuotedBytes` of `text`, on one line.
std::string Quote(const std::string& text) {
  std::string line = Trim(text);
  if (line.size() > kQuotedBytes) line = "..." + line.substr(line.size() - kQuotedBytes);
  std::replace(line.begin(), line.end(), '\n', ' ');
  return line;
}

// The prepare step: makes the remote directory (the default one depends on
// who we are there), writes the secret from stdin, and says where it is,
// who we are and what systemd says.
constexpr const char* kPrepareScript = R"sh(set -eu
dir=$1
if [ -z "$dir" ]; then
  if [ "$(id -u)" = 0 ]; then dir=/opt/nimble-agent; else dir=$HOME/nimble-agent; fi
fi
case $dir in
  "~") dir=$HOME ;;
  "~/"*) dir=$HOME/${dir#"~/"} ;;
esac
mkdir -p -- "$dir"
cd -- "$dir"
dir=$(pwd -P)
# Nobody else may read the secret, from its first byte on; it is renamed
# into place whole.
partial=secret.partial.$$
rm -f -- "$partial"
(umask 077 && cat > "$partial")
mv -f -- "$partial" secret
state=$(systemctl is-system-running 2>/dev/null) || :
printf 'dir %s\nuid %s\nsystemd %s\n' "$dir" "$(id -u)" "$state"
)sh";

// Whether pid $1 is still the agent named $2: a pid file outlives its
// process, and the host may since have given the pid to another (a zombie
// has an empty cmdline, so it is not ours either).
constexpr const char* kOursFunction = R"sh(
ours() {
  case $1 in ''|*[!0-9]*) return 1 ;; esac
  [ -r "/proc/$1/cmdline" ] || return 1
  cmdline=$(tr '\0' ' ' < "/proc/$1/cmdline" 2>/dev/null) || return 1
  case $cmdline in *"nimble-bench agent "*"--name $2 "*) return 0 ;; esac
  return 1
}
)sh";

// The start step: unpacks the bundle, checks that its nimble-bench runs
// here, and starts `count` agents under names not already running from
// here; a second later, says which of them still run.
constexpr const char* kStartScript = R"sh(
dir=$1 count=$2 base=$3 supervisor=$4 coordinator=$5 give_up=$6 tls=$7 bundle=$8
cd -- "$dir"
if ! unpacked=$(tar -xzf "$bundle" --strip-components=1 --no-same-owner 2>&1); then
  rm -f -- "$bundle"
  printf 'cannot unpack the bundle in %s: %s\n' "$dir" "$unpacked" >&2
  exit 1
fi
rm -f -- "$bundle"
bin=$dir/bin/nimble-bench
if ! check=$("$bin" agent --help 2>&1 >/dev/null); then
  printf 'the bundle'"'"'s nimble-bench does not run here: %s\n' "$check" >&2
  exit 1
fi
running() {
  if systemctl is-active --quiet "nimble-agent-$1.service" 2>/dev/null; then return 0; fi
  [ -r "agent-$1.pid" ] && ours "$(cat "agent-$1.pid")" "$1"
}
set -- agent --coordinator "$coordinator" --secret-file "$dir/secret" --give-up "$give_up"
if [ "$tls" = 1 ]; then set -- "$@" --tls-ca "$dir/tls-ca.pem"; fi
started=
i=0
n=0
while [ "$n" -lt "$count" ]; do
  i=$((i + 1))
  name=$base-ssh$i
  if running "$name"; then continue; fi
  n=$((n + 1))
  if [ "$supervisor" = systemd ]; then
    unit=nimble-agent-$name.service
    # A unit of that name that failed earlier would block the new one.
    systemctl reset-failed "$unit" >/dev/null 2>&1 || :
    if ! out=$(systemd-run --quiet --collect --unit="$unit" \
        --description="nimble-bench agent $name" -p WorkingDirectory="$dir" \
        -p TimeoutStopSec=30 -- "$bin" "$@" --name "$name" 2>&1); then
      printf 'died %s: systemd-run: %s\n' "$name" "$(printf '%s' "$out" | tr '\n' ' ')"
      continue
    fi
  else
    # A non-interactive sh starts it in its own process group, so setsid
    # needs no fork and $! is the agent's pid.
    nohup setsid "$bin" "$@" --name "$name" < /dev/null >> "agent-$name.log" 2>&1 &
    echo "$!" > "agent-$name.pid"
  fi
  started="$started $name"
done
# An agent that cannot start at all (a library missing, the secret
# unreadable) is gone by now.
sleep 1
for name in $started; do
  if [ "$supervisor" = systemd ]; then
    unit=nimble-agent-$name.service
    if systemctl is-active --quiet "$unit"; then
      printf 'agent %s unit %s\n' "$name" "$unit"
    else
      printf 'died %s: %s\n' "$name" \
        "$(journalctl -u "$unit" -n 5 --no-pager -o cat 2>/dev/null | tr '\n' ' ')"
    fi
  else
    pid=$(cat "agent-$name.pid")
    if ours "$pid" "$name"; then
      printf 'agent %s pid %s\n' "$name" "$pid"
    else
      printf 'died %s: %s\n' "$name" "$(tail -n 5 "agent-$name.log" 2>/dev/null | tr '\n' ' ')"
    fi
  fi
done
)sh";

// The stop step: arguments are the grace period in fifths of a second, then
// NAME UNIT PID DIR for each agent (UNIT "" under nohup, PID 0 under
// systemd).
constexpr const char* kStopScript = R"sh(
ticks=$1
shift
while [ "$#" -ge 4 ]; do
  name=$1 unit=$2 pid=$3 dir=$4
  shift 4
  if [ -n "$unit" ]; then
    # A transient unit is unloaded (collected) once it ends.
    load=$(systemctl show -p LoadState --value "$unit" 2>/dev/null) || load=
    if [ "$load" != loaded ]; then
      printf 'gone %s\n' "$name"
    elif out=$(systemctl stop "$unit" 2>&1); then
      printf 'stopped %s\n' "$name"
    else
      printf 'failed %s: systemctl stop %s: %s\n' "$name" "$unit" \
        "$(printf '%s' "$out" | tr '\n' ' ')"
    fi
    continue
  fi
  if ! ours "$pid" "$name"; then
    printf 'gone %s\n' "$name"
    rm -f -- "$dir/agent-$name.pid"
    continue
  fi
  kill -TERM "$pid" 2>/dev/null || :
  left=$ticks
  while [ "$left" -gt 0 ] && ours "$pid" "$name"; do sleep 0.2; left=$((left - 1)); done
  if ! ours "$pid" "$name"; then
    printf 'stopped %s\n' "$name"
  else
    kill -KILL "$pid" 2>/dev/null || :
    left=25
    while [ "$left" -gt 0 ] && ours "$pid" "$name"; do sleep 0.2; left=$((left - 1)); done
    if ours "$pid" "$name"; then
      printf 'failed %s: pid %s outlived SIGKILL\n' "$name" "$pid"
      continue
    fi
    printf 'killed %s\n' "$name"
  fi
  rm -f -- "$dir/agent-$name.pid"
done
)sh";

// A command's result; `what` names it in errors.
struct Ran {
  agent::ChildResult child;
  std::string Failure(const std::string& what) const {
    std::string why = what + " failed: ";
    if (child.outcome == agent::ChildResult::Outcome::kStartFailed) return why + child.start_error;
    if (child.outcome == agent::ChildResult::Outcome::kTimedOut) {
      why += "timed out after " + std::to_string(static_cast<int>(child.timeout_s)) + " s";
    } else if (child.outcome == agent::ChildResult::Outcome::kSignaled) {
      why += "killed by signal " + std::to_string(child.signal);
    } else {
      // 255 is ssh's own failure (no connection, no authentication); its
      // stderr says which.
      why += "exit status " + std::to_string(child.exit_code);
    }
    const std::string said = Quote(child.err_tail.empty() ? child.out : child.err_tail);
    return said.empty() ? why : why + ": " + said;
  }
};

Ran Run(const std::vector<std::string>& argv, const std::string& input, double timeout_s) {
  agent::ChildOptions options;
  options.stdin_data = input;
  options.timeout_s = timeout_s;
  options.stderr_tail_bytes = 16 << 10;
  return {agent::RunChild(argv, options)};
}

// The lines of `text` that begin with `word` + ' ', without it.
std::vector<std::string> LinesOf(const std::string& text, const std::string& word) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(word + " ", 0) == 0) lines.push_back(line.substr(word.size() + 1));
  }
  return lines;
}

void AddTransport(const SshTransport& ssh, std::vector<std::string>& argv) {
  if (!ssh.config_file.empty()) argv.insert(argv.end(), {"-F", ssh.config_file});
  argv.insert(argv.end(), {"-o", "BatchMode=yes"});
  for (const std::string& option : ssh.options) argv.insert(argv.end(), {"-o", option});
  argv.insert(argv.end(), {"-o", "ConnectTimeout=" + std::to_string(ssh.connect_timeout_s), "-o",
                           "ServerAliveInterval=15", "-o", "ServerAliveCountMax=4"});
}

// Sets up one host and starts its agents.
SshHostOutcome StartOnHost(const SshAgentLaunch& launch, const std::string& host) {
  SshHostOutcome outcome{host, {}, ""};
  const auto fail = [&](const std::string& why) {
    outcome.error = why;
    return outcome;
  };
  std::string pattern;
  try {
    CheckDestination(host);
    pattern = launch.remote_dir.empty() ? "" : ExpandRemoteDir(launch.remote_dir, host);
  } catch (const Error& error) {
    return fail(error.what());
  }

  const Ran prepare = Run(SshArgv(launch.ssh, host, RemoteShell(kPrepareScript, {pattern})),
                          launch.secret, kCommandTimeoutS);
  if (!prepare.child.ok()) return fail(prepare.Failure("ssh (making the remote directory)"));
  const std::vector<std::string> dirs = LinesOf(prepare.child.out, "dir");
  const std::vector<std::string> uids = LinesOf(prepare.child.out, "uid");
  const std::vector<std::string> systemd = LinesOf(prepare.child.out, "systemd");
  if (dirs.size() != 1 || uids.size() != 1) {
    return fail("the remote shell printed no directory and user: '" + Quote(prepare.child.out) +
                "' (is the login shell a POSIX sh?)");
  }
  const std::string dir = dirs[0];
  const bool root = uids[0] == "0";
  const std::string state = systemd.empty() ? "" : systemd[0];
  const bool systemd_runs = state == "running" || state == "degraded";
  std::string supervisor = launch.supervisor;
  if (supervisor == "auto") supervisor = root && systemd_runs ? "systemd" : "nohup";
  if (supervisor == "systemd" && !(root && systemd_runs)) {
    return fail(
        !root
            ? "--supervisor systemd needs root on the host (system units), not uid " + uids[0]
            : "--supervisor systemd: systemd there says '" + state + "', not running or degraded");
  }

  // Named per host, so hosts sharing a directory (a shared home) do not
  // overwrite each other's copy.
  const std::string base = HostPart(host);
  const std::string bundle_name = ".bundle-" + base + ".tar.gz";
  const Ran copy =
      Run(ScpArgv(launch.ssh, host, launch.bundle, dir + "/" + bundle_name), "", kCopyTimeoutS);
  if (!copy.child.ok()) return fail(copy.Failure("scp of the bundle to " + dir));
  if (!launch.tls_ca.empty()) {
    const Ran ca =
        Run(ScpArgv(launch.ssh, host, launch.tls_ca, dir + "/tls-ca.pem"), "", kCommandTimeoutS);
    if (!ca.child.ok()) return fail(ca.Failure("scp of the TLS CA to " + dir));
  }

  std::ostringstream give_up;
  give_up << launch.give_up_s;
  const Ran start = Run(
      SshArgv(launch.ssh, host,
              RemoteShell(std::string("set -eu\n") + kOursFunction + kStartScript,
                          {dir, std::to_string(launch.count), base, supervisor, launch.coordinator,
                           give_up.str(), launch.tls_ca.empty() ? "0" : "1", bundle_name})),
      "", kCommandTimeoutS);
  // Agents it started count even when the step failed later on.
  for (const std::string& line : LinesOf(start.child.out, "agent")) {
    std::istringstream words(line);
    SshAgent agent;
    agent.host = host;
    agent.remote_dir = dir;
    std::string kind, id;
    if (!(words >> agent.name >> kind >> id)) continue;
    if (kind == "unit") {
      agent.unit = id;
    } else {
      try {
        agent.pid = std::stoll(id);
      } catch (const std::exception&) {
        continue;
      }
    }
    outcome.started.push_back(agent);
  }
  std::vector<std::string> problems;
  if (!start.child.ok()) problems.push_back(start.Failure("ssh (starting the agents)"));
  for (const std::string& line : LinesOf(start.child.out, "died")) {
    problems.push_back("agent " + Quote(line));
  }
  if (problems.empty() && static_cast<int>(outcome.started.size()) != launch.count) {
    problems.push_back("started " + std::to_string(outcome.started.size()) + " of " +
                       std::to_string(launch.count) + " agents: '" + Quote(start.child.out) + "'");
  }
  outcome.error = JoinStrings(problems, "; ");
  return outcome;
}

// Runs `work(i)` for i in [0, n), up to `parallel` at once.
void InParallel(size_t n, int parallel, const std::function<void(size_t)>& work) {
  std::atomic<size_t> next{0};
  std::vector<std::thread> threads;
  const size_t workers = std::min(n, static_cast<size_t>(std::max(1, parallel)));
  for (size_t t = 0; t < workers; ++t) {
    threads.emplace_back([&] {
      for (size_t i = next++; i < n; i = next++) work(i);
    });
  }
  for (std::thread& thread : threads) thread.join();
}

}  // namespace

std::vector<std::string> SshArgv(const SshTransport& ssh, const std::string& host,
                                 const std::string& remote_command) {
  std::vector<std::string> argv = {"ssh"};
  AddTransport(ssh, argv);
  argv.insert(argv.end(), {"--", host, remote_command});
  return argv;
}

std::vector<std::string> ScpArgv(const SshTransport& ssh, const std::string& host,
                                 const std::string& local_file, const std::string& remote_path) {
  std::vector<std::string> argv = {"scp", "-q"};
  AddTransport(ssh, argv);
  // scp reads HOST:PATH up to the first ':' outside brackets: an IPv6
  // address goes in brackets.
  const size_t at = host.rfind('@');
  const std::string user = at == std::string::npos ? "" : host.substr(0, at + 1);
  const std::string name = at == std::string::npos ? host : host.substr(at + 1);
  const std::string target = name.find(':') == std::string::npos ? host : user + "[" + name + "]";
  // A local name with ':' would be read as a host; "./" keeps it a file.
  const std::string source = local_file.find(':') != std::string::npos && local_file[0] != '/'
                                 ? "./" + local_file
                                 : local_file;
  argv.insert(argv.end(), {"--", source, target + ":" + remote_path});
  return argv;
}

std::string RemoteShell(const std::string& script, const std::vector<std::string>& args) {
  std::string command = "sh -c " + ShellQuote(script) + " nimble-agent";
  for (const std::string& arg : args) command += " " + ShellQuote(arg);
  return command;
}

void CheckDestination(const std::string& host) {
  if (host.empty() || host[0] == '-') {
    throw Error("'" + host + "' is not an ssh destination ([user@]host)");
  }
  for (const char c : host) {
    if (std::isspace(static_cast<unsigned char>(c)) || c == '\'' || c == '"' || c == '\\' ||
        std::iscntrl(static_cast<unsigned char>(c))) {
      throw Error("'" + host + "' is not an ssh destination ([user@]host)");
    }
  }
  // scp and ssh read URIs differently, and the port belongs in the config.
  if (host.find("://") != std::string::npos) {
    throw Error("'" + host +
                "': give the destination as [user@]host (a port as --ssh-option Port=N)");
  }
  if (HostPart(host).empty()) throw Error("'" + host + "' names no host");
}

std::string HostPart(const std::string& host) {
  const size_t at = host.rfind('@');
  std::string name = at == std::string::npos ? host : host.substr(at + 1);
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') c = '-';
  }
  return name;
}

std::string ExpandRemoteDir(const std::string& pattern, const std::string& host) {
  const size_t at = host.rfind('@');
  const std::string name = at == std::string::npos ? host : host.substr(at + 1);
  std::string dir;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '%') {
      dir += pattern[i];
      continue;
    }
    const char next = i + 1 < pattern.size() ? pattern[i + 1] : '\0';
    if (next == 'h') {
      dir += name;
    } else if (next == '%') {
      dir += '%';
    } else {
      throw Error("--remote-dir '" + pattern + "': only %h (the host) and %% may follow a '%'");
    }
    ++i;
  }
  return dir;
}

std::string BundleCommit(const std::string& bundle) {
  std::error_code error;
  if (!std::filesystem::is_regular_file(bundle, error)) {
    throw Error("--bundle '" + bundle + "' is not a file (scripts/bundle-agent.sh makes one)");
  }
  const Ran listing = Run({"tar", "-tzf", bundle}, "", kCommandTimeoutS);
  if (!listing.child.ok()) throw Error(listing.Failure("tar -tzf " + bundle));
  std::istringstream names(listing.child.out);
  bool has_binary = false, has_bundle = false;
  for (std::string name; std::getline(names, name);) {
    if (name.rfind("./", 0) == 0) name = name.substr(2);
    has_binary |= name == "nimble-agent/bin/nimble-bench";
    has_bundle |= name == "nimble-agent/BUNDLE";
  }
  if (!has_binary || !has_bundle) {
    throw Error(bundle + " is not an agent bundle: it has no " +
                (has_binary ? "nimble-agent/BUNDLE" : "nimble-agent/bin/nimble-bench") +
                " (scripts/bundle-agent.sh makes one)");
  }
  const Ran text = Run({"tar", "-xzOf", bundle, "nimble-agent/BUNDLE"}, "", kCommandTimeoutS);
  if (!text.child.ok()) throw Error(text.Failure("tar -xzOf " + bundle + " nimble-agent/BUNDLE"));
  // "commit HASH", or "commit: HASH" as scripts/bundle-agent.sh writes it.
  std::istringstream lines(text.child.out);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("commit", 0) != 0 || line.size() < 7) continue;
    if (line[6] != ':' && line[6] != ' ') continue;
    const std::string commit = Trim(line.substr(7));
    if (!commit.empty()) return commit;
  }
  throw Error(bundle + ": its BUNDLE has no 'commit' line");
}

std::string SshAgent::Log() const {
  return unit.empty() ? remote_dir + "/agent-" + name + ".log" : "journalctl -u " + unit;
}

std::vector<SshHostOutcome> StartAgents(const SshAgentLaunch& launch,
                                        const std::function<void(const SshHostOutcome&)>& done) {
  if (launch.count < 1) {
    throw Error("SshAgentLaunch: count must be at least 1, not " + std::to_string(launch.count));
  }
  if (launch.supervisor != "auto" && launch.supervisor != "systemd" &&
      launch.supervisor != "nohup") {
    throw Error("SshAgentLaunch: no supervisor '" + launch.supervisor + "'");
  }
  std::vector<SshHostOutcome> outcomes(launch.hosts.size());
  std::mutex report;
  InParallel(launch.hosts.size(), launch.parallel, [&](size_t i) {
    SshHostOutcome outcome = StartOnHost(launch, launch.hosts[i]);
    const std::lock_guard<std::mutex> lock(report);
    outcomes[i] = std::move(outcome);
    if (done) done(outcomes[i]);
  });
  return outcomes;
}

std::vector<SshStopOutcome> StopAgentsOnHost(const SshTransport& ssh, const std::string& host,
                                             const std::vector<SshAgent>& agents, double grace_s) {
  std::vector<SshStopOutcome> outcomes;
  for (const SshAgent& agent : agents) outcomes.push_back({agent, "", ""});
  if (agents.empty()) return outcomes;
  const auto fail_all = [&](const std::string& why) {
    for (SshStopOutcome& outcome : outcomes) outcome.error = why;
    return outcomes;
  };
  try {
    CheckDestination(host);
  } catch (const Error& error) {
    return fail_all(error.what());
  }
  std::vector<std::string> args = {
      std::to_string(static_cast<long>(std::ceil(std::max(0.0, grace_s) * 5)))};
  for (const SshAgent& agent : agents) {
    args.insert(args.end(), {agent.name, agent.unit, std::to_string(agent.pid), agent.remote_dir});
  }
  // Each agent may take its grace period and SIGKILL's five seconds.
  const double limit = kCommandTimeoutS + static_cast<double>(agents.size()) * (grace_s + 5);
  const Ran stop = Run(
      SshArgv(ssh, host, RemoteShell(std::string("set -u\n") + kOursFunction + kStopScript, args)),
      "", limit);
  for (SshStopOutcome& outcome : outcomes) {
    for (const char* word : {"stopped", "killed", "gone"}) {
      for (const std::string& name : LinesOf(stop.child.out, word)) {
        if (name == outcome.agent.name) outcome.how = word;
      }
    }
    for (const std::string& line : LinesOf(stop.child.out, "failed")) {
      if (line.rfind(outcome.agent.name + ": ", 0) == 0) {
        outcome.error = Quote(line.substr(outcome.agent.name.size() + 2));
      }
    }
    if (outcome.how.empty() && outcome.error.empty()) {
      outcome.error = stop.child.ok()
                          ? "the host said nothing about it: '" + Quote(stop.child.out) + "'"
                          : stop.Failure("ssh (stopping the agents)");
    }
  }
  return outcomes;
}

std::vector<SshStopOutcome> StopAgents(
    const std::vector<SshStopGroup>& groups, double grace_s, int parallel,
    const std::function<void(const std::vector<SshStopOutcome>&)>& done) {
  std::vector<std::vector<SshStopOutcome>> outcomes(groups.size());
  std::mutex report;
  InParallel(groups.size(), parallel, [&](size_t i) {
    std::vector<SshStopOutcome> outcome =
        StopAgentsOnHost(groups[i].ssh, groups[i].host, groups[i].agents, grace_s);
    const std::lock_guard<std::mutex> lock(report);
    outcomes[i] = std::move(outcome);
    if (done) done(outcomes[i]);
  });
  std::vector<SshStopOutcome> all;
  for (const auto& group : outcomes) all.insert(all.end(), group.begin(), group.end());
  return all;
}

}  // namespace nimble::fleet
