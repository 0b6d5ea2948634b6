// Instruction counts from Valgrind's callgrind: a cost figure that does not
// drift with the host's load, for CI's gate. Hardware counters would be
// cheaper, but these VMs expose none to perf ("instructions: not
// supported").
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace nimble::bench {

struct InstructionCount {
  uint64_t instructions = 0;  // executed inside the counted functions
  std::string out;            // the child's standard output
};

// Runs argv under callgrind with `environment` added to ours, counting only
// the instructions it executes between its own CALLGRIND_START_ and
// CALLGRIND_STOP_INSTRUMENTATION requests: uninstrumented, the rest (the
// compiler, LLVM) runs some 5x faster than it would instrumented. Throws
// nimble::Error naming the cause: no valgrind on PATH, a child that failed
// (its last stderr line), or an output without the count.
InstructionCount CountInstructions(
    const std::vector<std::string>& argv,
    const std::vector<std::pair<std::string, std::string>>& environment = {});

}  // namespace nimble::bench
