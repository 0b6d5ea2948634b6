#include "harness/cli/callgrind.h"

#include <fstream>

#include "harness/agent/child_process.h"
#include "harness/bench/scratch_dir.h"
#include "nimble/vm/error.h"

namespace nimble::bench {

namespace {

// callgrind runs a program some 50x slower than natively.
constexpr double kTimeoutS = 3600;

// The "totals:" line of a callgrind output file: the events collected.
uint64_t Totals(const std::string& path) {
  std::ifstream file(path);
  if (!file) throw Error("callgrind wrote no " + path);
  for (std::string line; std::getline(file, line);) {
    if (!line.starts_with("totals:")) continue;
    try {
      return std::stoull(line.substr(line.find(':') + 1));
    } catch (const std::exception&) {
      throw Error(path + ": a malformed totals line '" + line + "'");
    }
  }
  throw Error(path + ": no totals line (did the program start instrumentation?)");
}

}  // namespace

InstructionCount CountInstructions(
    const std::vector<std::string>& argv,
    const std::vector<std::pair<std::string, std::string>>& environment) {
  const ScratchDir dir("nimble_callgrind_");
  const std::string out_file = dir.File("callgrind.out");
  std::vector<std::string> command = {"valgrind", "--tool=callgrind", "--quiet",
                                      "--instr-atstart=no", "--callgrind-out-file=" + out_file};
  command.insert(command.end(), argv.begin(), argv.end());
  agent::ChildOptions options;
  options.timeout_s = kTimeoutS;
  options.environment = environment;
  // glibc's malloc debugging (meson's test runner sets MALLOC_PERTURB_) fills
  // every allocation and free with a byte: instructions that are the
  // environment's, not the program's. Perturbation 0 turns it off.
  options.environment.emplace_back("MALLOC_PERTURB_", "0");
  const agent::ChildResult result = agent::RunChild(command, options);
  if (result.outcome == agent::ChildResult::Outcome::kStartFailed) {
    throw Error("counting instructions needs Valgrind (apt install valgrind): " +
                result.start_error);
  }
  if (!result.ok()) throw Error("under callgrind, " + argv.front() + ": " + result.Describe());
  return {Totals(out_file), result.out};
}

}  // namespace nimble::bench
