// What a benchmark figure depends on besides the code: the host's name, CPU
// model, the vector extensions that matter to our kernels, and its logical
// CPUs (from /proc/cpuinfo on Linux, x86-64 and AArch64).
#pragma once

#include <cstdint>
#include <string>

namespace nimble::bench {

struct HostInfo {
  std::string host;
  std::string cpu_model;
  std::string cpu_flags;  // e.g. "avx2 fma avx512f" or "neon asimd"
  int64_t cores = 0;
};

HostInfo DescribeHost();

}  // namespace nimble::bench
