#include "nimble/vm/profiler.h"

#include <cstdio>
#include <numeric>

namespace nimble::vm {
namespace {

double Milliseconds(std::chrono::nanoseconds time) {
  return std::chrono::duration<double, std::milli>(time).count();
}

double Percent(std::chrono::nanoseconds part, std::chrono::nanoseconds whole) {
  return whole.count() > 0 ? 100.0 * static_cast<double>(part.count()) / whole.count() : 0.0;
}

template <typename... Args>
std::string Format(const char* format, Args... args) {
  std::string line(static_cast<size_t>(std::snprintf(nullptr, 0, format, args...)), '\0');
  std::snprintf(line.data(), line.size() + 1, format, args...);
  return line;
}

unsigned long long Count(uint64_t value) {
  return static_cast<unsigned long long>(value);
}

}  // namespace

uint64_t ProfileStats::instructions() const {
  return std::accumulate(instruction_counts.begin(), instruction_counts.end(), uint64_t{0});
}

Profiler::Profiler(std::vector<std::string> kernel_names, std::vector<Device> devices)
    : devices_(std::move(devices)) {
  kernels_.reserve(kernel_names.size());
  for (std::string& name : kernel_names) kernels_.push_back(KernelProfile{std::move(name)});
  Reset();
}

void Profiler::Reset() {
  instruction_counts_.fill(0);
  total_time_ = kernel_time_ = std::chrono::nanoseconds(0);
  for (KernelProfile& kernel : kernels_) {
    kernel.calls = 0;
    kernel.time = std::chrono::nanoseconds(0);
  }
  allocator_baselines_.clear();
  for (const Device& device : devices_) {
    allocator_baselines_.push_back(GetAllocator(device)->Stats());
  }
}

ProfileStats Profiler::Stats() const {
  ProfileStats stats;
  stats.instruction_counts = instruction_counts_;
  stats.total_time = total_time_;
  stats.kernel_time = kernel_time_;
  stats.kernels = kernels_;
  for (size_t i = 0; i < devices_.size(); ++i) {
    AllocatorStats now = GetAllocator(devices_[i])->Stats();
    const AllocatorStats& base = allocator_baselines_[i];
    now.requests -= base.requests;
    now.pool_hits -= base.pool_hits;
    now.device_allocs -= base.device_allocs;
    now.releases -= base.releases;
    stats.allocations.push_back({devices_[i], now});
  }
  return stats;
}

std::string Profiler::Report() const {
  const ProfileStats stats = Stats();
  uint64_t kernel_calls = 0;
  for (const KernelProfile& kernel : stats.kernels) kernel_calls += kernel.calls;

  std::string text = Format("%-24s %12s %8s %10s\n", "time", "ms", "%", "calls");
  text += Format("%-24s %12.3f %8.1f %10llu\n", "kernels", Milliseconds(stats.kernel_time),
                 Percent(stats.kernel_time, stats.total_time), Count(kernel_calls));
  text += Format("%-24s %12.3f %8.1f\n", "others", Milliseconds(stats.other_time()),
                 Percent(stats.other_time(), stats.total_time));
  text += Format("%-24s %12.3f %8.1f\n", "total", Milliseconds(stats.total_time), 100.0);

  text += Format("\n%-24s %12s\n", "instruction", "count");
  for (int op = 0; op < kNumOpcodes; ++op) {
    if (stats.instruction_counts[op] == 0) continue;
    text += Format("%-24s %12llu\n", OpcodeName(static_cast<Opcode>(op)),
                   Count(stats.instruction_counts[op]));
  }
  text += Format("%-24s %12llu\n", "total", Count(stats.instructions()));

  text += Format("\n%-24s %12s %8s %10s\n", "kernel", "ms", "%", "calls");
  for (const KernelProfile& kernel : stats.kernels) {
    if (kernel.calls == 0) continue;
    text += Format("%-24s %12.3f %8.1f %10llu\n", kernel.name.c_str(), Milliseconds(kernel.time),
                   Percent(kernel.time, stats.total_time), Count(kernel.calls));
  }

  text += Format("\n%-10s %10s %10s %10s %10s %14s %14s %14s\n", "allocator", "requests",
                 "pool hits", "device", "releases", "live bytes", "pooled bytes", "peak bytes");
  for (const DeviceAllocationProfile& allocation : stats.allocations) {
    const AllocatorStats& counts = allocation.stats;
    text +=
        Format("%-10s %10llu %10llu %10llu %10llu %14llu %14llu %14llu\n",
               allocation.device.ToString().c_str(), Count(counts.requests),
               Count(counts.pool_hits), Count(counts.device_allocs), Count(counts.releases),
               Count(counts.bytes_live), Count(counts.bytes_pooled), Count(counts.peak_bytes_live));
  }
  return text;
}

}  // namespace nimble::vm
