// Code generation: the loop IR (tir) through LLVM 19 to machine code for the
// CPU, and PTX for the GPU. A kernel library is one object holding every kernel of an executable;
// link.h turns it into the shared object the runtime loads (kernel_library.h).
//
// Each kernel becomes an exported function with the runtime's calling
// convention (nimble/vm/kernel.h), named PrimFunc::name, that checks its
// arguments against the kernel's buffers and then runs the body. Generated
// code calls the runtime only through the hooks of NimbleRuntimeHooks (the
// object defines `nimble_runtime`, filled in by the loader), and libc/libm.
// docs/codegen.md describes the code generated.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "nimble/compiler/codegen/target.h"
#include "nimble/compiler/tir/stmt.h"

namespace nimble::codegen {

// The kernels compiled at O3 into an ELF relocatable object (position
// independent) for `target`'s host. Throws nimble::Error for IR that code
// generation does not support (float16, te expressions, an Assert inside an
// Allocate or a parallel loop, an unbound variable, duplicate kernel names),
// naming the kernel.
//
// A GPU kernel (PrimFunc::device kGpu, target nvidia) is compiled in two
// parts: on the host, its argument checks (device pointers on the GPU) and
// the launches of its kGpuThreads and kGpuBlocks loops through the runtime's
// hooks, with device memory for its temporaries; each loop body becomes the
// PTX kernel NAME_gpuK (sm_80; a thread per iteration, or a block of 256
// threads per iteration whose block intrinsics combine in shared memory)
// written to `ptx`, which such kernels require. libm calls and Asserts inside
// GPU loops are rejected, and so are block intrinsics where not every thread
// of a block reaches them.
std::vector<std::byte> EmitObject(std::span<const tir::PrimFunc> kernels,
                                  const CodegenTarget& target, std::string* ptx = nullptr);

// The modules EmitObject compiles (the host's, then the GPU's), after
// optimisation, as LLVM's textual IR: what tests inspect and `nimble dump`
// shows.
std::string EmitLLVMText(std::span<const tir::PrimFunc> kernels, const CodegenTarget& target);

}  // namespace nimble::codegen
