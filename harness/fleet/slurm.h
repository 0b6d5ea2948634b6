// Placing agents with Slurm. Slurm only decides where and when an agent
// process runs; whether a job succeeded is the coordinator's protocol's
// business, never an sbatch or srun exit code (../shared/slurm.md §1.7). Only
// long-stable client flags are used, so old (22.05) and current Slurm agree.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace nimble::fleet {

struct SlurmAgentLaunch {
  int count = 1;           // agents (one sbatch job each)
  std::string constraint;  // --constraint, "" for none
  std::string gres;        // --gres, e.g. "gpu:1"
  std::string partition;   // --partition
  std::string time_limit;  // --time, e.g. "2:00:00"
  bool exclusive = false;  // --exclusive
  std::string job_name = "nimble-agent";
  std::string output_dir;               // where %x-%j.out files go (must exist)
  std::vector<std::string> agent_argv;  // the agent command, run by `srun` in the batch script
  // Exported to the agent (e.g. NIMBLE_LAUNCH_TOKEN). The values travel in
  // sbatch's environment with --export=ALL, never on its command line: `ps`
  // would show a token there, and --export=K=V cannot carry a comma.
  std::map<std::string, std::string> environment;
};

// `word` as one POSIX shell word: single-quoted, embedded quotes as '\''.
std::string ShellQuote(const std::string& word);

// The batch script of one agent job: `exec srun` of the quoted agent_argv.
// The sbatch options go on sbatch's command line, not in #SBATCH lines, so
// they need no second round of quoting.
std::string BatchScript(const SlurmAgentLaunch& launch);

// Submits `count` batch jobs with `sbatch --parsable` and returns their job
// ids. Throws nimble::Error with sbatch's stderr when a submission fails
// (sbatch missing, bad partition, ...) or prints something that is not a job
// id, after cancelling the jobs this call already submitted.
std::vector<std::string> SubmitAgents(const SlurmAgentLaunch& launch);

// scancel of `job_ids`. Ids of jobs already finished or forgotten are not an
// error; a job scancel could not stop, or scancel missing, is.
void CancelJobs(const std::vector<std::string>& job_ids);

// The Slurm state of each id (PENDING, RUNNING, COMPLETING, COMPLETED,
// CANCELLED, FAILED, TIMEOUT, ...) from one `squeue --states=all`, which
// lists the jobs that ended within MinJobAge (300 s by default) as well as
// the live ones; "UNKNOWN" once Slurm has forgotten the job (without an
// accounting database, nothing else remembers it).
std::map<std::string, std::string> JobStates(const std::vector<std::string>& job_ids);

// What a child command did.
struct CommandResult {
  int exit_code = -1;  // 128 + the signal when a signal ended it
  std::string out;
  std::string err;
};

// Runs argv[0] (searched on PATH) with `input` on its stdin and this
// process's environment plus `environment`, without a shell, through the
// agent's child runner (harness/agent/child_process.h). Throws nimble::Error
// naming the program when it cannot be started.
CommandResult RunCommand(const std::vector<std::string>& argv, const std::string& input = "",
                         const std::map<std::string, std::string>& environment = {});

}  // namespace nimble::fleet
