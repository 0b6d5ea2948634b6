// The VM's interpretation overhead: hand-built executables whose functions are
// long blocks of one kind of instruction, so the time per run divided by the
// instruction count is the dispatch cost of that instruction (the cost of
// VirtualMachine::Invoke itself is spread over thousands of instructions).
// Kernels are empty or touch one scalar, so no kernel time hides the VM's.
// Counters: per_instr (wall time per executed instruction) and, where an
// operation takes several instructions, per_op; both print as times ("12.3ns").
//
//   NIMBLE_NUM_THREADS=2 build/bench/nimble_bench_vm --benchmark_min_time=0.5
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "nimble/vm/allocator.h"
#include "nimble/vm/executable.h"
#include "nimble/vm/kernel.h"
#include "nimble/vm/tensor.h"
#include "nimble/vm/vm.h"

namespace nimble::vm {
namespace {

// Instructions per benchmarked function: enough to make the per-run cost of
// VirtualMachine::Invoke negligible, few enough to stay in the L1/L2 cache.
constexpr int kBlockSize = 4096;
constexpr int64_t kStorageBytes = 1024;

int EmptyKernel(void*, DLTensor* const*, int32_t) {
  return 0;
}

// Adds one to its single int64 scalar argument, in place.
int IncrementKernel(void*, DLTensor* const* args, int32_t) {
  ++*reinterpret_cast<int64_t*>(static_cast<char*>(args[0]->data) + args[0]->byte_offset);
  return 0;
}

KernelFactory FactoryOf(const std::string& name, NimbleKernelFunc func) {
  return [name, func](const Attrs&) { return Kernel{name, func, nullptr}; };
}

VMOptions BenchOptions() {
  VMOptions options;
  options.extra_kernels["bench.empty"] = FactoryOf("bench.empty", EmptyKernel);
  options.extra_kernels["bench.increment"] = FactoryOf("bench.increment", IncrementKernel);
  return options;
}

// An executable whose function @main (listed first) takes `num_params`
// arguments and runs `code`; `extra` functions follow it.
Executable MakeExecutable(int32_t num_params, int32_t register_file_size,
                          std::vector<Instruction> code, std::vector<VMFunction> extra = {}) {
  Executable executable;
  executable.target = "intel";
  executable.functions.push_back(
      VMFunction{"main", num_params, register_file_size, std::move(code)});
  for (VMFunction& function : extra) executable.functions.push_back(std::move(function));
  executable.primitives = {Primitive{"bench.empty", Attrs()},
                           Primitive{"bench.increment", Attrs()}};
  return executable;
}
// Indices of MakeExecutable's primitives.
constexpr int64_t kEmptyKernel = 0;
constexpr int64_t kIncrementKernel = 1;

Tensor IntScalar(int64_t value) {
  return TensorNode::Scalar<int64_t>(DataType::Int64(), value);
}

// Runs @main of `executable` on `args` per iteration; `instructions` and
// `ops` are the counts one run executes, reported as wall time each
// (per_instr, per_op) and as items_per_second (ops).
void RunMain(benchmark::State& state, Executable executable, const std::vector<Ref<Object>>& args,
             int64_t instructions, int64_t ops) {
  VirtualMachine machine(std::move(executable), BenchOptions());
  machine.Invoke("main", args);  // grows the register stack, warms the pools
  for (auto _ : state) benchmark::DoNotOptimize(machine.Invoke("main", args));
  const auto per_run = [&](int64_t count) {
    return benchmark::Counter(
        static_cast<double>(count),
        benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
  };
  state.counters["per_instr"] = per_run(instructions);
  if (ops != instructions) state.counters["per_op"] = per_run(ops);
  state.SetItemsProcessed(state.iterations() * ops);
}

// Move: a straight-line block copying a register back and forth.
void BM_Move(benchmark::State& state) {
  std::vector<Instruction> code;
  for (int i = 0; i < kBlockSize; ++i) code.push_back(Instruction::Move(i % 2, 1 - i % 2));
  code.push_back(Instruction::Ret(0));
  RunMain(state, MakeExecutable(1, 2, std::move(code)), {IntScalar(1)}, kBlockSize + 1,
          kBlockSize + 1);
}
BENCHMARK(BM_Move)->UseRealTime();

// If on an immediate that never matches: falls through a straight-line block.
void BM_IfImmediate(benchmark::State& state) {
  std::vector<Instruction> code;
  for (int i = 0; i < kBlockSize; ++i) code.push_back(Instruction::If(0, kNoRegister, -1, 1, 1));
  code.push_back(Instruction::Ret(0));
  RunMain(state, MakeExecutable(1, 1, std::move(code)), {IntScalar(0)}, kBlockSize + 1,
          kBlockSize + 1);
}
BENCHMARK(BM_IfImmediate)->UseRealTime();

// Goto: a chain of jumps to the next instruction.
void BM_Goto(benchmark::State& state) {
  std::vector<Instruction> code;
  for (int i = 0; i < kBlockSize; ++i) code.push_back(Instruction::Goto(1));
  code.push_back(Instruction::Ret(0));
  RunMain(state, MakeExecutable(1, 1, std::move(code)), {IntScalar(0)}, kBlockSize + 1,
          kBlockSize + 1);
}
BENCHMARK(BM_Goto)->UseRealTime();

// A counting loop, as a compiled `while`: the counter lives in one scalar
// tensor that an in-place "add one" kernel bumps, so the loop allocates
// nothing. Each iteration is invoke_packed + if + goto: per_op is one
// iteration and per_instr averages the three.
//   0: $0 = load_consti 0
//   1: invoke_packed increment(out: $0)
//   2: if $0 == N then +2 else +1
//   3: goto -2
//   4: ret $0
void BM_CountingLoop(benchmark::State& state) {
  const int64_t iterations = kBlockSize;
  std::vector<Instruction> code = {
      Instruction::LoadConsti(0, 0),
      Instruction::InvokePacked(kIncrementKernel, {}, {0}),
      Instruction::If(0, kNoRegister, iterations, 2, 1),
      Instruction::Goto(-2),
      Instruction::Ret(0),
  };
  RunMain(state, MakeExecutable(0, 1, std::move(code)), {}, 3 * iterations + 2, iterations);
}
BENCHMARK(BM_CountingLoop)->UseRealTime();

// Invoke of a function that only returns its argument: one op is the
// invoke and the callee's ret. The result is not returned at once, so the
// call is not a tail call and pushes a frame.
void BM_InvokeEmptyFunction(benchmark::State& state) {
  std::vector<Instruction> code;
  for (int i = 0; i < kBlockSize; ++i) code.push_back(Instruction::Invoke(1, {0}, 1));
  code.push_back(Instruction::Ret(1));
  VMFunction identity{"identity", 1, 1, {Instruction::Ret(0)}};
  RunMain(state, MakeExecutable(1, 2, std::move(code), {std::move(identity)}), {IntScalar(0)},
          2 * kBlockSize + 1, kBlockSize);
}
BENCHMARK(BM_InvokeEmptyFunction)->UseRealTime();

// InvokePacked of a kernel that does nothing, with range(0) tensor arguments
// (inputs, then one output); the VM still builds a DLTensor for each.
void BM_InvokePackedEmptyKernel(benchmark::State& state) {
  const int32_t num_args = static_cast<int32_t>(state.range(0));
  std::vector<RegName> inputs;
  for (RegName reg = 0; reg + 1 < num_args; ++reg) inputs.push_back(reg);
  std::vector<Instruction> code;
  for (int i = 0; i < kBlockSize; ++i) {
    code.push_back(Instruction::InvokePacked(kEmptyKernel, inputs, {num_args - 1}));
  }
  code.push_back(Instruction::Ret(0));
  std::vector<Ref<Object>> args;
  for (int32_t i = 0; i < num_args; ++i) args.push_back(IntScalar(i));
  RunMain(state, MakeExecutable(num_args, num_args, std::move(code)), args, kBlockSize + 1,
          kBlockSize + 1);
}
BENCHMARK(BM_InvokePackedEmptyKernel)->ArgName("args")->Arg(1)->Arg(2)->Arg(4)->UseRealTime();

// AllocStorage + AllocTensor of kStorageBytes, as the memory planner emits
// them; rewriting the registers frees the previous pair, so every storage
// after the first comes from the pool. One op is the pair.
void BM_AllocStorageAndTensor(benchmark::State& state) {
  std::vector<Instruction> code;
  for (int i = 0; i < kBlockSize; ++i) {
    code.push_back(
        Instruction::AllocStorage(kNoRegister, kStorageBytes, 64, DataType::Float32(), 0, 0));
    code.push_back(
        Instruction::AllocTensor(0, kNoRegister, 0, {kStorageBytes / 4}, DataType::Float32(), 1));
  }
  code.push_back(Instruction::Ret(1));
  RunMain(state, MakeExecutable(0, 2, std::move(code)), {}, 2 * kBlockSize + 1, kBlockSize);
}
BENCHMARK(BM_AllocStorageAndTensor)->UseRealTime();

// The baseline for the pool: malloc and free of the same size.
void BM_MallocFree(benchmark::State& state) {
  for (auto _ : state) {
    void* data = std::malloc(kStorageBytes);
    benchmark::DoNotOptimize(data);
    std::free(data);
  }
}
BENCHMARK(BM_MallocFree)->UseRealTime();

// The pooled allocator alone: Alloc then Free of one size, a pool hit each time.
void BM_PoolAllocFree(benchmark::State& state) {
  Allocator* allocator = GetAllocator(Device{DeviceType::kCPU, 0});
  allocator->Free(allocator->Alloc(kStorageBytes, 64));
  for (auto _ : state) {
    const Buffer buffer = allocator->Alloc(kStorageBytes, 64);
    benchmark::DoNotOptimize(buffer.data);
    allocator->Free(buffer);
  }
}
BENCHMARK(BM_PoolAllocFree)->UseRealTime();

}  // namespace
}  // namespace nimble::vm

BENCHMARK_MAIN();
