#include "harness/bench/host_info.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include "nimble/vm/device.h"
#include "nimble/vm/error.h"

namespace nimble::bench {

namespace {

// The value of the first "key : value" line of /proc/cpuinfo whose key is
// one of `keys`, or "".
std::string CpuInfoField(const std::vector<std::string>& keys) {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, colon);
    key.erase(key.find_last_not_of(" \t") + 1);
    for (const std::string& wanted : keys) {
      if (key == wanted) {
        const size_t start = line.find_first_not_of(" \t", colon + 1);
        return start == std::string::npos ? "" : line.substr(start);
      }
    }
  }
  return "";
}

// The architecture this binary was compiled for.
constexpr const char* kCompiledArch =
#if defined(__x86_64__)
    "x86_64";
#elif defined(__aarch64__)
    "aarch64";
#else
    "other";
#endif

// The architecture /proc/cpuinfo describes. A user-mode emulator (qemu-user
// up to 8.x) passes the host's file through, so a mismatch with the
// compiled architecture shows emulation even when no launcher said so.
std::string CpuInfoArch() {
  if (!CpuInfoField({"vendor_id"}).empty()) return "x86_64";
  if (!CpuInfoField({"CPU implementer"}).empty()) return "aarch64";
  return "";
}

int64_t MemoryBytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  int64_t kib = 0;
  while (meminfo >> key >> kib) {
    if (key == "MemTotal:") return kib * 1024;
    meminfo.ignore(256, '\n');
  }
  return 0;
}

// GPU models from the NVIDIA driver's /proc entries (no CUDA needed).
std::vector<std::string> NvidiaGpus() {
  std::vector<std::string> gpus;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/driver/nvidia/gpus", error)) {
    std::ifstream information(entry.path() / "information");
    std::string line;
    while (std::getline(information, line)) {
      if (line.starts_with("Model:")) {
        const size_t start = line.find_first_not_of(" \t", 6);
        gpus.push_back(start == std::string::npos ? "NVIDIA GPU" : line.substr(start));
      }
    }
  }
  std::sort(gpus.begin(), gpus.end());
  if (gpus.empty()) {
    // Sandboxed GPU hosts may hide the driver's /proc entries: ask the CUDA
    // device itself (its "no CUDA device" answer means none).
    try {
      gpus.push_back(DeviceAPI::Get(Device{DeviceType::kCUDA, 0})->Describe());
    } catch (const Error&) {
    }
  }
  return gpus;
}

}  // namespace

HostInfo DescribeHost() {
  HostInfo info;
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) == 0) info.host = name;
  utsname system{};
  info.arch = uname(&system) == 0 ? system.machine : kCompiledArch;
  if (const char* emulator = std::getenv("NIMBLE_EMULATOR"); emulator && *emulator) {
    info.emulated = true;
    info.emulator = emulator;
  } else if (const std::string described = CpuInfoArch();
             !described.empty() && described != kCompiledArch) {
    info.emulated = true;
    info.emulator = "user-mode emulator on " + described;
  }
  info.cpu_model = CpuInfoField({"model name", "Model", "CPU part"});
  if (info.cpu_model.empty()) info.cpu_model = "unknown";
  // Only the extensions our kernels or their libraries choose between.
  static const std::set<std::string> kRelevant = {
      "sse4_2",   "avx",  "avx2",  "fma", "avx512f", "avx512bw", "avx512vl", "avx512_vnni",
      "amx_tile", "neon", "asimd", "sve", "sve2",    "asimddp",  "bf16",     "i8mm"};
  std::istringstream flags(CpuInfoField({"flags", "Features"}));
  std::string flag;
  while (flags >> flag) {
    if (kRelevant.contains(flag)) info.cpu_flags += (info.cpu_flags.empty() ? "" : " ") + flag;
  }
  info.cores = static_cast<int64_t>(std::thread::hardware_concurrency());
  info.memory_bytes = MemoryBytes();
  info.gpus = NvidiaGpus();
  return info;
}

std::string NativeTarget(const HostInfo& host) {
  if (host.arch == "x86_64") return "intel";
  if (host.arch == "aarch64") return "arm";
  return host.arch;
}

void CheckTargetRunsHere(const std::string& target, const HostInfo& host, bool emulate) {
  if (target == "nvidia") return;  // the CUDA device says "no CUDA device" when there is none
  if (target == "arm" && host.arch != "aarch64") {
    if (emulate) return;
    throw Error("--target arm on this " + host.arch +
                " host would record x86 figures as ARM ones: run it on an ARM agent "
                "(nimble-bench run --coordinator HOST:PORT --target arm ...), or add --emulate "
                "for a correctness run under qemu-aarch64 (after scripts/build-arm.sh), "
                "recorded as emulated");
  }
  if (target == "intel" && host.arch != "x86_64") {
    throw Error("--target intel on this " + host.arch +
                " host would record its figures as Intel ones: run it on an x86-64 host or agent");
  }
  if (host.emulated && !emulate) {
    throw Error("this process runs under an emulator (" + host.emulator +
                "): its timings are not " + host.arch +
                " figures; pass --emulate to record "
                "a correctness run marked as emulated");
  }
}

}  // namespace nimble::bench
