// `nimble-bench run`: its options (shared with `submit`, which sends them
// to an agent) and the three ways it runs: in this process, under
// qemu-aarch64 (--emulate on a non-ARM host), or as a job of a coordinator
// (--coordinator), printing the same summary each way.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "harness/bench/host_info.h"
#include "harness/bench/model_runner.h"

namespace nimble::bench {

struct RunCommand {
  BenchOptions bench;
  int layers = 0;  // 0: the model's default
  int64_t hidden_size = 0;
  int heads = 0;
  int64_t ffn_size = 0;
  int sentences = 0;
  int threads = 0;
  std::string weights;
  std::vector<std::string> dim_bounds;  // --dim-bound NAME=N, for --onnx
  std::string db = "results.db";
  bool json = false;
  bool emulate = false;             // correctness run under an emulator, recorded as such
  bool record_json = false;         // print the run record, write no database (an agent's child)
  bool count_instructions = false;  // a callgrind count of one pass instead of timings
  bool counted_pass = false;        // callgrind's child of --count-instructions
  std::string coordinator;          // HOST:PORT: run as a job of this coordinator
  std::string secret_file;
  std::string tls_ca;
};

// The model sizes and sentence count given on `command` into its BenchOptions.
void ApplySizes(RunCommand& command);

// The run options (model, sizes, data, protocol) on `command`, into `run`.
void AddRunOptions(CLI::App* command, RunCommand& run);

// The options given on `command` that an agent's `nimble-bench run` should
// see again: everything but where the run happens and where it is recorded.
std::vector<std::string> ForwardedRunArgs(const CLI::App* command);

// `nimble-bench baseline`: a peer framework on the run's model and data.
struct BaselineCommand {
  std::string framework;              // one of baselines::PeerFrameworks()
  std::string python;                 // the framework's interpreter ("" finds it)
  std::vector<std::string> variants;  // empty: all the framework's variants
  double time_limit_s = 0;            // 0: PeerOptions' default
};

// Measures the peer on this host and records one run per variant (the
// variant and the framework's version in its configuration); with
// --record-json (an agent's child), prints each run's record on a line
// instead.
int RunBaseline(RunCommand command, const BaselineCommand& baseline);

// The build that produces the figures: the commit, marked when passes are
// disabled (NIMBLE_DISABLE_PASSES), since such a build is not the commit's.
std::string BuildIdentity();

// A run started now by this build on `host` (threads: the runtime's pool),
// framework nimble; the caller fills in what ran.
RunInfo HostRunInfo(const HostInfo& host);

// The path of this nimble-bench (an agent's jobs and a counted run start it again).
std::string SelfExecutable();

// Runs it as `run` asks; the CLI's exit status.
int Run(RunCommand run, const CLI::App* command);

// The figures as the summary table or JSON, as a local run prints them.
std::string RunSummary(const RunCommand& command, const RunInfo& info, int64_t run_id,
                       const std::vector<Measurement>& figures);
std::string RunJson(const RunInfo& info, int64_t run_id, const std::vector<Measurement>& figures);

}  // namespace nimble::bench
