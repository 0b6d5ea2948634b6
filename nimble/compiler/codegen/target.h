// What code generation compiles for: an LLVM target triple, CPU and feature
// string, named after the compiler's targets ("intel", "arm").
#pragma once

#include <string>

namespace nimble::codegen {

struct CodegenTarget {
  std::string name;      // the compiler's target name
  std::string triple;    // LLVM target triple
  std::string cpu;       // LLVM CPU name
  std::string features;  // LLVM feature string, "+avx2,-avx512f,..."
  // The GPU of target nvidia (PTX for NVPTX), empty for CPU targets.
  std::string device_triple;
  std::string device_cpu;
  std::string device_features;
};

// The target for `target`: "intel" is x86-64, tuned for and using every
// feature of the host CPU when the host is x86-64 (kernels run where they are
// compiled), generic x86-64 otherwise; "arm" is generic aarch64 Linux with
// NEON, cross-compiled from any host; "nvidia" is the host's "intel" (host
// code of the GPU kernels) with PTX for sm_80 (PTX ISA 8.0, which the driver
// compiles for sm_80 and every later GPU). Throws nimble::Error naming any
// other target.
CodegenTarget CodegenTargetFor(const std::string& target);

}  // namespace nimble::codegen
