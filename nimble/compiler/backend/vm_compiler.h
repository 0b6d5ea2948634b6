// The VM compiler [paper 5]: turns a module in the memory dialect
// (docs/memory-dialect.md §2-4: after memory manifestation; memory planning
// and device placement optional) into an Executable. Each global becomes a
// VM function whose parameters are registers 0..n-1 (a `Closure=1` global:
// its captured variables, then the inner function's parameters); each `let`
// gets a register (a variable's register, without a Move, when the value
// already has one); constants go to the constant pool (each tensor once;
// int64 scalars are LoadConsti immediates, constant sizes and offsets
// instruction immediates); primitive calls become InvokePacked of a kernel
// bound by op name and attributes (shape functions: `shape_func.OP`), tuple
// arguments passed field by field, identical primitives sharing one entry;
// devices are "cpu" (index 0) and "cuda" (added on first mention, target
// nvidia only); `if` jumps with a merge register; `match` becomes a decision
// tree whose non-exhaustive leaf is Fatal; a call in tail position is
// emitted as Invoke directly followed by Ret, which the VM runs as a tail
// call (in tail position each branch of `if` and `match` returns by itself).
// A memory.kill directly after the instruction that reads the register last
// (a call, closure or constructor) becomes that instruction's move of the
// argument instead of a KillRegister (not where a jump lands), and the
// instruction whose result `ret` returns moves everything it reads
// (vm/bytecode.h, "Moved args"). Each function gets a signature from its parameters' types, and
// each instruction the source position of the call, `if` or `match` it comes from
// (memory.invoke_mut and the allocations around it carry the span of the operator call they
// implement).
#pragma once

#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "nimble/compiler/backend/primitive_kernels.h"
#include "nimble/compiler/ir/module.h"
#include "nimble/compiler/te/matmul_schedule.h"
#include "nimble/vm/executable.h"

namespace nimble::backend {

struct CompileOptions {
  std::string target = "intel";  // intel, arm or nvidia
  // The functions callers may run; dead-code elimination keeps what they
  // reach. Empty: @main, or every global of a module without one.
  std::vector<std::string> entry_functions = {};
  // The program's file name, recorded in the executable so that run-time
  // errors read "prog.relay:12:5: ..."; may be empty.
  std::string source_name = {};
  // Off: the memory-planning passes leave the program as manifestation
  // wrote it (for measuring what planning saves).
  bool plan_memory = true;
  // On: operator fusion puts neighbouring ops that code generation supports
  // in one primitive (transform/fuse_ops.h) and one generated kernel. Off:
  // each op is a primitive of its own (`--no-fusion`).
  bool fuse_ops = true;
  // Which kernels run the primitives: "generated" (code generation wherever
  // it supports the ops), "builtin" (the runtime's kernels, one per op; no
  // fusion), "auto": generated, except that each nn.dense and
  // nn.batch_matmul runs whichever of the generated, built-in, oneDNN and
  // OpenBLAS kernels measures fastest (backend/kernel_tuning.h), or
  // "library": as auto, choosing between oneDNN and OpenBLAS only.
  std::string kernels = "auto";
  // The SQLite file that keeps those measurements for later compiles;
  // empty: measure afresh and keep nothing.
  std::string tuning_database = {};
  // The matrix-product template's tile sizes and the dispatch degree of a
  // symbolic row dimension (`--dispatch`; te/matmul_schedule.h).
  te::MatMulKnobs matmul = {};
  // On: a site `nimble-bench tune` tuned on this host takes the tuned tile
  // instead of matmul's (kernel_tuning.h); off when a tile is asked for.
  bool tuned_matmul = true;
  // "fp32" (the paper's), or "bf16": constant dense weights in bfloat16,
  // their products in bf16 with float32 sums (transform/bf16_weights.h),
  // only for the intel target on a host with AVX512-BF16.
  std::string precision = "fp32";
  // On: recursive functions over trees run their independent calls in
  // batches, a group of nodes of one height at a time
  // (transform/tree_batching.h). Off by default: at batch 1 on the hosts
  // measured (docs/codegen.md) the groups are too small to pay for their
  // bookkeeping.
  bool batch_trees = false;
};

// Throws nimble::Error for a precision other than fp32 and bf16, and for
// bf16 on another target than intel or on a host without the bf16
// instructions (naming the missing CPU feature): such a program never runs
// in float32 instead.
void CheckPrecision(const CompileOptions& options);

// The accelerator of `target` ("cuda" for nvidia), or "cpu".
std::string TargetDevice(const std::string& target);

// Whether calls of `op` may run a generated kernel (and so fuse) under
// `options.kernels`; throws nimble::Error for an unknown choice.
bool GeneratesOp(const std::string& op, const CompileOptions& options);

// The kernel chosen for a primitive by measurement (backend/kernel_tuning.h):
// kGeneratedKernel (code generation) with the template knobs `matmul`, or a
// runtime kernel name ("nn.dense", "nn.dense.dnnl", "nn.dense.openblas").
// At a site with a `?` dimension, a runtime kernel may take over once that
// dimension (`axis` of parameter `arg`) reaches `from_extent`
// (vm/extent_switch.h).
inline constexpr const char* kGeneratedKernel = "generated";
struct LargeExtentKernel {
  std::string kernel;
  int64_t arg = 0;
  int64_t axis = 0;
  int64_t from_extent = 0;
};
struct KernelChoice {
  std::string kernel;
  te::MatMulKnobs matmul;
  std::optional<LargeExtentKernel> large = std::nullopt;
};
using KernelChoices = std::unordered_map<const ir::FunctionNode*, KernelChoice>;

// The kernels CompileToExecutable generates for `module` (already through
// the pipeline) under `options` and the measured `choices`
// (backend/kernel_tuning.h; empty: none measured), as loop IR: for the GPU
// those of primitives placed on it (backend/kernel_devices.h).
PrimitiveKernels GeneratedKernels(const ir::IRModule& module, const CompileOptions& options,
                                  const KernelChoices& choices = {});

// Throws nimble::Error naming the construct (and its line:col when it has
// one) for IR outside the accepted form.
vm::Executable CompileToExecutable(const ir::IRModule& module, const CompileOptions& options = {});

}  // namespace nimble::backend
