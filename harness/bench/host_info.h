// What a benchmark figure depends on besides the code: the host's name, the
// architecture that really executes this process (and whether an emulator
// does), CPU model, the vector extensions that matter to our kernels,
// logical CPUs, memory and GPUs (from uname, /proc/cpuinfo, /proc/meminfo
// and the NVIDIA driver's /proc entries on Linux, x86-64 and AArch64).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace nimble::bench {

struct HostInfo {
  std::string host;
  std::string arch;  // x86_64 or aarch64: what this process executes as
  // Under a user-mode emulator (qemu-aarch64 on an x86-64 host): `arch` is
  // the emulated one, and timings are not the hardware's.
  bool emulated = false;
  std::string emulator;
  std::string cpu_model;
  std::string cpu_flags;  // e.g. "avx2 fma avx512f" or "neon asimd"
  int64_t cores = 0;
  int64_t memory_bytes = 0;
  // GPU models the driver lists (else the CUDA device's description); empty
  // without one.
  std::vector<std::string> gpus;
};

HostInfo DescribeHost();

// The nimble-bench target a host can produce real figures for: intel on
// x86_64, arm on aarch64 (emulated or not; callers decide whether an
// emulated figure is acceptable).
std::string NativeTarget(const HostInfo& host);

// Throws nimble::Error when a run of `target` on this host would record a
// figure of other hardware: --target arm on an x86-64 host (unless
// `emulate`: a correctness run, recorded as emulated), intel on aarch64,
// nvidia without a GPU. The message says how to get a real figure.
void CheckTargetRunsHere(const std::string& target, const HostInfo& host, bool emulate);

}  // namespace nimble::bench
