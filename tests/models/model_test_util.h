// What the model suites share: running a model on the VM and on the
// reference evaluator, comparing float tensors, a scratch directory, and the
// PyTorch reference (tests/models/torch_reference.py) run as a child process.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "nimble/compiler/backend/pipeline.h"
#include "nimble/compiler/eval/evaluator.h"
#include "nimble/vm/error.h"
#include "nimble/vm/tensor.h"
#include "nimble/vm/vm.h"
#include "tests/cuda_device.h"

extern char** environ;

namespace nimble::models {

// The Python that has torch: Debian's, not the first python3 on PATH.
inline constexpr const char* kTorchPython = "/usr/bin/python3";

// A temporary directory, removed with everything in it at the end of scope.
class ScratchDir {
 public:
  ScratchDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "nimble_model_XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) ADD_FAILURE() << "cannot create " << pattern;
    path_ = pattern;
  }
  ~ScratchDir() { std::filesystem::remove_all(path_); }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  std::string File(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

// Runs `argv` (argv[0] a path) with stdout and stderr to /dev/null; its exit
// status, or -1 when it could not run or was killed.
inline int RunQuietly(std::vector<std::string> argv) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  std::vector<char*> pointers;
  for (std::string& arg : argv) pointers.push_back(arg.data());
  pointers.push_back(nullptr);
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, pointers[0], &actions, nullptr, pointers.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) return -1;
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

inline bool TorchAvailable() {
  static const bool available = RunQuietly({kTorchPython, "-c", "import torch, numpy"}) == 0;
  return available;
}

// One run of the PyTorch reference: the model with `weights` (.npz) on
// `input`, its result written to `output` (.npy).
struct TorchCase {
  std::string weights;
  std::string input;
  std::string output;
};

// Runs torch_reference.py for `model` on every case in one process (torch
// takes seconds to import); fails the test when the script fails (its error
// goes to the test's stderr).
inline void RunTorchReference(const std::string& model, const std::vector<TorchCase>& cases) {
  std::vector<std::string> argv{kTorchPython,
                                std::string(NIMBLE_SOURCE_DIR) + "/tests/models/torch_reference.py",
                                "--model", model};
  for (const TorchCase& run : cases) {
    argv.insert(argv.end(), {"--case", run.weights, run.input, run.output});
  }
  EXPECT_EQ(RunQuietly(argv), 0) << "torch_reference.py --model " << model << " failed";
}

// A model's result, which is one tensor.
inline Tensor TensorResult(const Ref<Object>& value) {
  Tensor tensor = value.as<TensorNode>();
  if (!tensor) throw Error("the model returned something other than a tensor");
  return tensor;
}

// `module`'s function `entry` compiled once and run on the VM.
class CompiledModel {
 public:
  explicit CompiledModel(const ir::IRModule& module, const std::string& entry = "main")
      : CompiledModel(backend::Compile(module, {.entry_functions = {entry}}), entry) {}
  CompiledModel(vm::Executable executable, const std::string& entry)
      : entry_(entry), machine_(std::move(executable)) {}

  Tensor Run(const std::vector<Ref<Object>>& args) {
    return TensorResult(machine_.Invoke(entry_, args));
  }

 private:
  std::string entry_;
  vm::VirtualMachine machine_;
};

// `module` compiled for --target nvidia with `kernels` (auto: products on
// cuBLAS; generated: products too from the GPU's templates). Its PTX must
// assemble for sm_80 and sm_90 (checked where the CUDA toolkit is installed);
// where no GPU runs it, the VM must refuse it with "no CUDA device", and the
// result is nullopt with the reason in `missing`.
inline std::optional<vm::Executable> CompileForGpu(const ir::IRModule& module,
                                                   const std::string& entry, std::string* missing,
                                                   const std::string& kernels = "auto") {
  vm::Executable executable = backend::Compile(
      module, {.target = "nvidia", .entry_functions = {entry}, .kernels = kernels});
  EXPECT_FALSE(executable.device_code.empty());
  if (!testing::Ptxas().empty()) {
    for (const char* arch : {"sm_80", "sm_90"}) {
      EXPECT_EQ(testing::PtxasRejects(executable.device_code, arch), "");
    }
  }
  *missing = testing::CudaMissing();
  if (missing->empty()) return executable;
  try {
    vm::VirtualMachine refused(executable);
    ADD_FAILURE() << "a VM ran an nvidia executable without a GPU";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("no CUDA device"), std::string::npos) << error.what();
  }
  return std::nullopt;
}

inline Tensor Evaluate(const ir::IRModule& module, const std::vector<Ref<Object>>& args,
                       const std::string& entry = "main") {
  return TensorResult(eval::Evaluate(module, entry, args));
}

// How close, relatively, the VM's result must be to the reference
// evaluator's (ExpectAllClose). Not an ulp bound, as the two differ by more
// than one rounding: the VM's matrix products sum in float32 in their own
// order where the evaluator sums in double, and its exp, tanh, sigmoid and erf
// are a few ulps from the exact values the evaluator rounds (vector_math.h);
// every later layer carries both on, so no per-element bound follows. These
// models differ by at most 4e-6 on x86-64 (AVX2); 1e-5, about 100 float32
// ulps, leaves room for other CPUs' summation orders and is still far below
// what a wrong formula or a misrouted value gives.
inline constexpr double kVmVsEvaluatorTolerance = 1e-5;

// `actual` equals `expected` in shape, and elementwise within `relative`
// of the expected value (plus a tiny absolute slack for values near zero).
inline void ExpectAllClose(const Tensor& actual, const Tensor& expected, double relative,
                           const std::string& label) {
  ASSERT_EQ(actual->shape(), expected->shape()) << label;
  ASSERT_EQ(actual->dtype(), expected->dtype()) << label;
  for (int64_t i = 0; i < expected->numel(); ++i) {
    const double want = expected->GetAsDouble(i);
    const double got = actual->GetAsDouble(i);
    ASSERT_LE(std::abs(got - want), relative * std::abs(want) + 1e-6)
        << label << ": element " << i << " is " << got << ", expected " << want;
  }
}

}  // namespace nimble::models
