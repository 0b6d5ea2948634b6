// Placing agents on hosts without Slurm, through the system's ssh and scp:
// the agent bundle (scripts/bundle-agent.sh) is copied to each host and
// unpacked there, the fleet's secret is written beside it over ssh's stdin
// (never on a command line, where `ps` would show it), and the agents run
// under a transient systemd unit where the host has a running systemd and
// we are root there, else under `nohup setsid` with a pid file. As with
// Slurm, none of this decides an outcome: a started agent is a process, and
// only the coordinator's protocol says what it did.
//
// The remote side is POSIX sh plus tar, systemctl/systemd-run when used,
// and /proc; the remote login shell must be a POSIX shell (the commands are
// single-quoted sh words).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace nimble::fleet {

// How ssh and scp reach the hosts.
struct SshTransport {
  std::string config_file;           // -F FILE, "" for ~/.ssh/config
  std::vector<std::string> options;  // each passed as -o OPTION (KEY=VALUE)
  // Passed after `options`, so an OPTION ConnectTimeout=N given there wins.
  int connect_timeout_s = 10;
};

// The argv of ssh running `remote_command` on `host`. BatchMode=yes comes
// before the caller's options (ssh takes the first value it is given), so a
// host that asks for a password or a passphrase fails at once instead of
// waiting on a terminal; ConnectTimeout and keep-alives come after them.
std::vector<std::string> SshArgv(const SshTransport& ssh, const std::string& host,
                                 const std::string& remote_command);

// The argv of scp copying `local_file` to `remote_path` on `host`.
std::vector<std::string> ScpArgv(const SshTransport& ssh, const std::string& host,
                                 const std::string& local_file, const std::string& remote_path);

// `sh -c SCRIPT nimble-agent ARGS...` as one remote command line, every word
// single-quoted (ssh hands the remote shell one string).
std::string RemoteShell(const std::string& script, const std::vector<std::string>& args);

// Throws nimble::Error unless `host` is an ssh destination this code passes
// on safely: [user@]host, no leading '-' (ssh would read an option), no
// whitespace or quotes.
void CheckDestination(const std::string& host);

// The host part of `host` ([user@]host), as it goes into agent names:
// characters other than letters, digits, '.', '_' and '-' become '-'.
std::string HostPart(const std::string& host);

// `pattern` with %h replaced by the host part (unsanitized) and %% by '%';
// any other '%' sequence is an error.
std::string ExpandRemoteDir(const std::string& pattern, const std::string& host);

// What the bundle's BUNDLE file says its commit is; throws nimble::Error
// unless the tarball holds nimble-agent/bin/nimble-bench and
// nimble-agent/BUNDLE (checked here, before any host is touched).
std::string BundleCommit(const std::string& bundle);

struct SshAgentLaunch {
  std::vector<std::string> hosts;  // ssh destinations, [user@]host
  std::string bundle;              // the local tarball
  // Where the bundle goes on each host, with %h for the host; "" for
  // /opt/nimble-agent where the remote user is root, else ~/nimble-agent.
  std::string remote_dir;
  int count = 1;                    // agents per host
  std::string supervisor = "auto";  // auto, systemd or nohup
  std::string coordinator;          // HOST:PORT, as the agents dial it
  std::string secret;               // the secret file's bytes
  std::string tls_ca;               // a local CA file copied beside the agents; "" for none
  double give_up_s = 120;
  SshTransport ssh;
  int parallel = 8;  // hosts set up at once
};

// One agent that runs on a host.
struct SshAgent {
  std::string host;        // the destination it was started through
  std::string name;        // its agent name
  std::string remote_dir;  // absolute, on the host
  std::string unit;        // its systemd unit, or "" under nohup
  int64_t pid = 0;         // its pid on the host under nohup, else 0
  // Where its output goes: a file on the host, or the unit's journal.
  std::string Log() const;
};

struct SshHostOutcome {
  std::string host;
  std::vector<SshAgent> started;  // running when the host was left
  std::string error;              // "" when every agent asked for started
};

// Sets up every host of `launch` (up to `parallel` at once) and starts its
// agents; `done` is called for each host as it finishes, one call at a time.
// What a host does never throws: it is that host's error.
std::vector<SshHostOutcome> StartAgents(const SshAgentLaunch& launch,
                                        const std::function<void(const SshHostOutcome&)>& done);

// How stopping one agent went.
struct SshStopOutcome {
  SshAgent agent;
  // "stopped" (its unit stopped, or it exited on SIGTERM), "killed" (it
  // outlived the grace period), "gone" (not running: it had exited, or the
  // pid is no longer that agent's); "" with `error` set when it could not
  // be stopped.
  std::string how;
  std::string error;
};

// Stops `agents` on `host` in one ssh session: `systemctl stop` of a unit;
// SIGTERM to a pid, then SIGKILL after `grace_s`, each only while
// /proc/PID/cmdline is still that agent's (`nimble-bench agent ... --name
// NAME`), so a pid the host has since given to another process is never
// signalled.
std::vector<SshStopOutcome> StopAgentsOnHost(const SshTransport& ssh, const std::string& host,
                                             const std::vector<SshAgent>& agents, double grace_s);

// The agents on one host, and how to reach it.
struct SshStopGroup {
  std::string host;
  SshTransport ssh;
  std::vector<SshAgent> agents;
};

// StopAgentsOnHost for each group, up to `parallel` hosts at once; `done`
// is called for each group as it finishes, one call at a time.
std::vector<SshStopOutcome> StopAgents(
    const std::vector<SshStopGroup>& groups, double grace_s, int parallel,
    const std::function<void(const std::vector<SshStopOutcome>&)>& done);

}  // namespace nimble::fleet
