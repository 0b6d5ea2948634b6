// The job kinds an agent runs, each as a child process (so a crash, abort
// or hang of a model run fails one attempt, never the agent): the command
// line for a job, and how its output becomes the result sent back. A new
// kind is a new entry here and in the coordinator's KnownKind.
//   run        `nimble-bench run ARGS --target T --record-json`: a run record
//   baseline   `nimble-bench baseline ARGS --framework F --variant V --target T
//              --record-json`: the run record of one peer variant (never emulated)
//   microbench a Google Benchmark binary (suite kernels or vm) with
//              --benchmark_format=json, each benchmark a figure; suite dispatch:
//              `nimble-bench microbench dispatch ARGS --target T --record-json`
//              (never emulated)
//   probe      `nimble-bench probe`: the host as this agent's child sees it
#pragma once

#include <string>
#include <vector>

#include "harness/protocol/messages.h"

namespace nimble::agent {

struct JobContext {
  std::string nimble_bench;           // the binary run and probe jobs execute
  std::string bench_dir;              // where nimble_bench_kernels / _vm are
  std::vector<std::string> emulator;  // prefix of every child command (qemu-aarch64), or empty
  protocol::AgentInfo agent;
};

struct JobCommand {
  std::vector<std::string> argv;
  double timeout_s = 0;
};

// Throws nimble::Error for an unknown kind or bad options.
JobCommand CommandFor(const protocol::JobSpec& spec, const JobContext& context);

// The result message's "result" from the child's standard output; throws
// nimble::Error when the output is not what the kind prints.
protocol::Json ResultOf(const protocol::JobSpec& spec, const std::string& output,
                        const JobContext& context);

}  // namespace nimble::agent
