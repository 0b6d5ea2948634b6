// Linking a kernel object (llvm_codegen.h) into the shared object that an
// executable embeds and the runtime loads from bytes (kernel_library.h).
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "nimble/compiler/codegen/target.h"

namespace nimble::codegen {

// The shared library of `object`, linked for `target` by LLVM's linker
// (ld.lld-19, run as a child process in a private temporary directory that is
// removed afterwards). Nothing else is linked in: the libc and libm functions
// that kernels call stay undefined and resolve from the loading process.
// Throws nimble::Error with the linker's messages when linking fails.
std::vector<std::byte> LinkSharedLibrary(std::span<const std::byte> object,
                                         const CodegenTarget& target);

}  // namespace nimble::codegen
