// A real single-node Slurm cluster for tests (../shared/slurm.md §1.2, §1.3,
// §1.7): its own munged, slurmctld and slurmd, on free ports, with all their
// state in a fresh directory, so that suites running at the same time each
// get a cluster of their own. Needs root; installs Debian's Slurm packages
// when they are missing.
//
// The node `node_name()` has every CPU of this machine, the features
// `ci` and this machine's architecture (uname -m), and one fake GPU
// (gres gpu:1 on /dev/null) so that --gres placement can be tested. Its one
// partition, `partition()`, is the default. Finished jobs stay visible to
// squeue for Slurm's default MinJobAge (300 s).
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace nimble::fleet {

class SlurmCluster {
 public:
  SlurmCluster() = default;
  SlurmCluster(const SlurmCluster&) = delete;
  SlurmCluster& operator=(const SlurmCluster&) = delete;
  ~SlurmCluster() { Stop(); }

  // Brings the cluster up and points SLURM_CONF at it, so that sbatch, srun,
  // squeue ... run by this process (and its children) use it. Returns false
  // with the reason in *why_not when this machine cannot run it: not root,
  // packages that cannot be installed, or a daemon that does not come up
  // (with the tail of its log). Tests then GTEST_SKIP() with that reason.
  bool Start(std::string* why_not);
  // Cancels the cluster's jobs, shuts the daemons down, waits until their
  // processes are gone (killing them past a deadline), restores SLURM_CONF and
  // removes the work directory. Does nothing when nothing runs.
  void Stop();

  const std::string& conf_path() const { return conf_path_; }
  const std::string& work_dir() const { return work_dir_; }
  const std::string& node_name() const { return node_name_; }
  std::string partition() const { return "ci"; }

 private:
  bool StartOrExplain(std::string* why_not);
  // Starts one daemon (which detaches itself) with its output in the log
  // directory; false with its output when it exits with an error.
  bool Launch(const std::string& name, const std::vector<std::string>& argv, std::string* why_not);
  // The PID in `pid_file`, waiting a bounded time for the daemon to write it.
  pid_t WaitForPid(const std::string& pid_file);
  std::string LogTail(const std::string& file) const;

  std::string work_dir_;
  std::string conf_path_;
  std::string node_name_;
  pid_t munged_pid_ = 0;
  pid_t slurmctld_pid_ = 0;
  pid_t slurmd_pid_ = 0;
  bool conf_exported_ = false;
  std::optional<std::string> previous_slurm_conf_;
};

}  // namespace nimble::fleet
