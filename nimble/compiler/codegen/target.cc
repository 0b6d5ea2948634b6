#include "nimble/compiler/codegen/target.h"

#include <llvm/ADT/StringMap.h>
#include <llvm/TargetParser/Host.h>
#include <llvm/TargetParser/Triple.h>

#include <map>

#include "nimble/vm/error.h"

namespace nimble::codegen {
namespace {

// The host's features as "+name"/"-name", sorted so that the string (and
// what is compiled from it) does not depend on hash order.
std::string HostFeatures() {
  std::map<std::string, bool> sorted;
  for (const auto& entry : llvm::sys::getHostCPUFeatures()) {
    sorted[entry.getKey().str()] = entry.getValue();
  }
  std::string features;
  for (const auto& [name, enabled] : sorted) {
    if (!features.empty()) features += ',';
    features += (enabled ? '+' : '-') + name;
  }
  return features;
}

}  // namespace

CodegenTarget CodegenTargetFor(const std::string& target) {
  CodegenTarget result;
  result.name = target;
  if (target == "intel" || target == "nvidia") {
    result.triple = "x86_64-unknown-linux-gnu";
    const bool x86_host =
        llvm::Triple(llvm::sys::getProcessTriple()).getArch() == llvm::Triple::x86_64;
    result.cpu = x86_host ? llvm::sys::getHostCPUName().str() : "x86-64";
    if (x86_host) result.features = HostFeatures();
    if (target == "nvidia") {
      result.device_triple = "nvptx64-nvidia-cuda";
      result.device_cpu = "sm_80";
      result.device_features = "+ptx80";
    }
    return result;
  }
  if (target == "arm") {
    result.triple = "aarch64-unknown-linux-gnu";
    result.cpu = "generic";
    result.features = "+neon";
    return result;
  }
  throw Error("code generation does not support target '" + target +
              "' (expected intel, arm or nvidia)");
}

}  // namespace nimble::codegen
