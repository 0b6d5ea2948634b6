#include "harness/fleet/slurm.h"

#include <unistd.h>

#include <cctype>
#include <filesystem>
#include <set>

#include "harness/agent/child_process.h"
#include "nimble/vm/error.h"
#include "nimble/vm/string_join.h"

namespace nimble::fleet {

namespace {

std::string Trim(const std::string& text) {
  const size_t begin = text.find_first_not_of(" \t\r\n");
  if (begin == std::string::npos) return "";
  return text.substr(begin, text.find_last_not_of(" \t\r\n") - begin + 1);
}

bool IsJobId(const std::string& id) {
  return !id.empty() && id.find_first_not_of("0123456789") == std::string::npos;
}

// Job ids go on scancel's and squeue's command lines, where anything else
// (say "-u") would be read as an option.
void CheckJobIds(const std::vector<std::string>& job_ids) {
  for (const std::string& id : job_ids) {
    if (!IsJobId(id)) throw Error("not a Slurm job id: '" + id + "'");
  }
}

bool IsEnvironmentName(const std::string& name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

// What a failed command said, for an error message.
std::string Failure(const std::vector<std::string>& argv, const CommandResult& result) {
  const std::string why = "`" + JoinStrings(argv, " ") + "` failed with exit status " +
                          std::to_string(result.exit_code);
  const std::string said = Trim(result.err.empty() ? result.out : result.err);
  return said.empty() ? why : why + ": " + said;
}

// The --output pattern: `dir`/%x-%j.out, with `dir` made absolute (the job
// may start elsewhere) and its own '%' escaped from Slurm's expansion.
std::string OutputPattern(const std::string& output_dir) {
  if (output_dir.empty()) throw Error("SlurmAgentLaunch: output_dir is empty");
  std::error_code error;
  if (!std::filesystem::is_directory(output_dir, error)) {
    throw Error("SlurmAgentLaunch: output_dir '" + output_dir + "' is not a directory");
  }
  const std::string dir = std::filesystem::absolute(output_dir).lexically_normal().string();
  // A backslash anywhere in the pattern switches all expansion off.
  if (dir.find('\\') != std::string::npos) {
    throw Error("SlurmAgentLaunch: output_dir '" + dir +
                "' contains a backslash, which stops Slurm from expanding %x-%j");
  }
  std::string escaped;
  for (char c : dir) escaped += c == '%' ? std::string("%%") : std::string(1, c);
  return escaped + "/%x-%j.out";
}

// The states of a job that scancel has not stopped. COMPLETING is not one:
// that job is already being torn down.
bool IsLive(const std::string& state) {
  static const std::set<std::string> kLive = {"PENDING",  "RUNNING",      "SUSPENDED",
                                              "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED",
                                              "RESIZING", "CONFIGURING",  "STOPPED"};
  return kLive.contains(state);
}

}  // namespace

CommandResult RunCommand(const std::vector<std::string>& argv, const std::string& input,
                         const std::map<std::string, std::string>& environment) {
  if (argv.empty()) throw Error("RunCommand: empty command");
  agent::ChildOptions options;
  options.stdin_data = input;
  options.stderr_tail_bytes = 64 << 10;
  options.environment.assign(environment.begin(), environment.end());
  const agent::ChildResult child = agent::RunChild(argv, options);
  if (child.outcome == agent::ChildResult::Outcome::kStartFailed) throw Error(child.start_error);
  return {child.outcome == agent::ChildResult::Outcome::kSignaled ? 128 + child.signal
                                                                  : child.exit_code,
          child.out, child.err_tail};
}

std::string ShellQuote(const std::string& word) {
  std::string quoted = "'";
  for (char c : word) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

std::string BatchScript(const SlurmAgentLaunch& launch) {
  if (launch.agent_argv.empty()) throw Error("SlurmAgentLaunch: agent_argv is empty");
  const std::string& program = launch.agent_argv[0];
  // srun would take a leading '-' for one of its own options.
  if (program.empty() || program[0] == '-') {
    throw Error("SlurmAgentLaunch: '" + program + "' is not a program to run");
  }
  // The step gets all the CPUs of the allocation (all of the node's with
  // --exclusive): srun's default of one CPU per task would confine the
  // agent's benchmarks to one core wherever Slurm enforces bindings.
  std::string script =
      "#!/bin/sh\n"
      "# A nimble-bench agent: Slurm places it; its jobs' outcomes come from the coordinator.\n"
      "exec srun --ntasks=1 --cpus-per-task=\"$SLURM_CPUS_ON_NODE\"";
  for (const std::string& arg : launch.agent_argv) {
    // sbatch refuses a script with a NUL byte; say which argument has one.
    if (arg.find('\0') != std::string::npos) {
      throw Error("SlurmAgentLaunch: agent argument '" + arg.substr(0, arg.find('\0')) +
                  "...' contains a NUL byte");
    }
    script += " " + ShellQuote(arg);
  }
  return script + "\n";
}

std::vector<std::string> SubmitAgents(const SlurmAgentLaunch& launch) {
  if (launch.count < 1) {
    throw Error("SlurmAgentLaunch: count must be at least 1, not " + std::to_string(launch.count));
  }
  for (const auto& [name, value] : launch.environment) {
    if (!IsEnvironmentName(name)) {
      throw Error("SlurmAgentLaunch: '" + name + "' is not an environment variable name");
    }
  }
  const std::string script = BatchScript(launch);
  std::vector<std::string> argv = {"sbatch", "--parsable", "--job-name=" + launch.job_name,
                                   "--output=" + OutputPattern(launch.output_dir), "--export=ALL"};
  if (!launch.partition.empty()) argv.push_back("--partition=" + launch.partition);
  if (!launch.constraint.empty()) argv.push_back("--constraint=" + launch.constraint);
  if (!launch.gres.empty()) argv.push_back("--gres=" + launch.gres);
  if (!launch.time_limit.empty()) argv.push_back("--time=" + launch.time_limit);
  if (launch.exclusive) argv.push_back("--exclusive");

  std::vector<std::string> job_ids;
  // A failure part-way cancels the jobs already submitted: their ids would
  // otherwise be lost to the caller while they hold nodes.
  auto failure = [&](std::string why) {
    if (!job_ids.empty()) {
      try {
        CancelJobs(job_ids);
        why += "; cancelled the jobs already submitted (" + JoinStrings(job_ids, ", ") + ")";
      } catch (const Error& error) {
        why += "; the jobs already submitted (" + JoinStrings(job_ids, ", ") +
               ") could not be cancelled: " + error.what();
      }
    }
    return Error(why);
  };
  for (int i = 0; i < launch.count; ++i) {
    CommandResult result;
    try {
      result = RunCommand(argv, script, launch.environment);
    } catch (const Error& error) {
      throw failure(error.what());
    }
    // --parsable prints "id" or "id;cluster". A zero exit alone proves
    // nothing (../shared/slurm.md §1.7 item 4), so the id must be one.
    const std::string printed = Trim(result.out);
    const std::string id = printed.substr(0, printed.find(';'));
    if (result.exit_code != 0) throw failure(Failure(argv, result));
    if (!IsJobId(id)) {
      throw failure("`" + JoinStrings(argv, " ") + "` printed no job id: '" + printed + "'");
    }
    job_ids.push_back(id);
  }
  return job_ids;
}

void CancelJobs(const std::vector<std::string>& job_ids) {
  if (job_ids.empty()) return;
  CheckJobIds(job_ids);
  std::vector<std::string> argv = {"scancel"};
  argv.insert(argv.end(), job_ids.begin(), job_ids.end());
  const CommandResult result = RunCommand(argv);
  if (result.exit_code == 0) return;
  // scancel also fails for jobs that ended already; only a job it left
  // queued or running is an error.
  std::vector<std::string> alive;
  for (const auto& [id, state] : JobStates(job_ids)) {
    if (IsLive(state)) alive.push_back(id + " " + state);
  }
  if (!alive.empty()) {
    throw Error(Failure(argv, result) + " (still live: " + JoinStrings(alive, ", ") + ")");
  }
}

std::map<std::string, std::string> JobStates(const std::vector<std::string>& job_ids) {
  std::map<std::string, std::string> states;
  if (job_ids.empty()) return states;
  CheckJobIds(job_ids);
  // --states=all lists the jobs that ended within MinJobAge too. Listing the
  // user's jobs rather than --jobs=... keeps a forgotten id from failing the
  // whole query.
  const std::vector<std::string> argv = {"squeue",         "--noheader",
                                         "--all",          "--states=all",
                                         "--format=%i %T", "--user=" + std::to_string(geteuid())};
  const CommandResult result = RunCommand(argv);
  if (result.exit_code != 0) throw Error(Failure(argv, result));
  std::map<std::string, std::string> listed;
  size_t begin = 0;
  while (begin < result.out.size()) {
    size_t end = result.out.find('\n', begin);
    if (end == std::string::npos) end = result.out.size();
    const std::string line = Trim(result.out.substr(begin, end - begin));
    begin = end + 1;
    if (line.empty()) continue;
    const size_t space = line.find(' ');
    if (space == std::string::npos) {
      throw Error("`" + JoinStrings(argv, " ") + "` printed an unexpected line: '" + line + "'");
    }
    listed[line.substr(0, space)] = Trim(line.substr(space + 1));
  }
  for (const std::string& id : job_ids) {
    const auto found = listed.find(id);
    states[id] = found == listed.end() ? "UNKNOWN" : found->second;
  }
  return states;
}

}  // namespace nimble::fleet
