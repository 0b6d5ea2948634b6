#include "harness/bench/host_info.h"

#include <unistd.h>

#include <fstream>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

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

}  // namespace

HostInfo DescribeHost() {
  HostInfo info;
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) == 0) info.host = name;
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
  return info;
}

}  // namespace nimble::bench
