// The compile pipeline: the passes of nimble/compiler/transform in their
// order (docs/memory-dialect.md), then the VM compiler. Each pass returns a
// type-checked module, so the next one can read the types. Passes are named so that tools can stop
// after one and show the IR it produced (`nimble dump --ir-after NAME`).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "nimble/compiler/backend/vm_compiler.h"
#include "nimble/compiler/ir/module.h"
#include "nimble/vm/executable.h"

namespace nimble::backend {

struct PassInfo {
  std::string name;
  std::function<ir::IRModule(const ir::IRModule&, const CompileOptions&)> run;
};

// The passes, in pipeline order.
const std::vector<PassInfo>& Passes();

// The passes named in the environment variable NIMBLE_DISABLE_PASSES
// (comma-separated), which RunPasses skips: a developer's way to reproduce
// a build without a pass (a bisection, a gate's test of a worse compiler)
// without rebuilding. Whatever records figures must say that they came
// from such a build. Throws nimble::Error naming an unknown pass.
std::vector<std::string> DisabledPasses();

// Runs the passes on a type-checked module up to and including `stop_after`
// (all of them when empty), skipping DisabledPasses(). Throws nimble::Error
// naming the valid passes for an unknown name, and naming the pass when one
// fails or leaves ill-typed IR.
ir::IRModule RunPasses(const ir::IRModule& module, const CompileOptions& options = {},
                       const std::string& stop_after = "");

// RunPasses, then the VM compiler.
vm::Executable Compile(const ir::IRModule& module, const CompileOptions& options = {});

}  // namespace nimble::backend
