// What a VM run spends its time on [paper Table 4]: time inside kernels
// (InvokePacked) against everything else the VM does ("others": dispatch,
// allocation, shape bookkeeping, copies), instructions executed by opcode,
// and the device allocators' counters. Only a VM created with profiling on
// has one; the interpreter then runs a separately instantiated loop, so an
// unprofiled run pays nothing for it.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "nimble/vm/allocator.h"
#include "nimble/vm/bytecode.h"
#include "nimble/vm/device.h"

namespace nimble::vm {

struct KernelProfile {
  std::string name;
  uint64_t calls = 0;
  std::chrono::nanoseconds time{0};
};

struct DeviceAllocationProfile {
  Device device;
  // Counters (requests, pool_hits, device_allocs, releases) since the last
  // Reset; byte counts as they are now in the device's process-wide pool.
  AllocatorStats stats;
};

struct ProfileStats {
  std::array<uint64_t, kNumOpcodes> instruction_counts{};
  std::chrono::nanoseconds total_time{0};   // inside the interpreter
  std::chrono::nanoseconds kernel_time{0};  // inside kernels
  std::vector<KernelProfile> kernels;       // by primitive index
  std::vector<DeviceAllocationProfile> allocations;

  uint64_t instructions() const;
  uint64_t count(Opcode op) const { return instruction_counts[static_cast<size_t>(op)]; }
  std::chrono::nanoseconds other_time() const { return total_time - kernel_time; }
};

class Profiler {
 public:
  // `kernel_names` by primitive index; `devices` whose allocators to report.
  Profiler(std::vector<std::string> kernel_names, std::vector<Device> devices);

  void CountInstruction(Opcode op) { ++instruction_counts_[static_cast<size_t>(op)]; }
  void AddKernelTime(size_t kernel, std::chrono::nanoseconds time) {
    kernels_[kernel].calls += 1;
    kernels_[kernel].time += time;
    kernel_time_ += time;
  }
  void AddRunTime(std::chrono::nanoseconds time) { total_time_ += time; }

  // Zeroes the counts and times and starts the allocator counters afresh.
  void Reset();
  ProfileStats Stats() const;
  // The statistics as a text table.
  std::string Report() const;

 private:
  std::array<uint64_t, kNumOpcodes> instruction_counts_{};
  std::chrono::nanoseconds total_time_{0};
  std::chrono::nanoseconds kernel_time_{0};
  std::vector<KernelProfile> kernels_;
  std::vector<Device> devices_;
  std::vector<AllocatorStats> allocator_baselines_;  // by device, at the last Reset
};

}  // namespace nimble::vm
