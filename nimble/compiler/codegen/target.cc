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
  if (target == "intel") {
    const bool x86_host =
        llvm::Triple(llvm::sys::getProcessTriple()).getArch() == llvm::Triple::x86_64;
    if (x86_host) {
      return {target, "x86_64-unknown-linux-gnu", llvm::sys::getHostCPUName().str(),
              HostFeatures()};
    }
    return {target, "x86_64-unknown-linux-gnu", "x86-64", ""};
  }
  if (target == "arm") return {target, "aarch64-unknown-linux-gnu", "generic", "+neon"};
  throw Error("code generation does not support target '" + target + "' (expected intel or arm)");
}

}  // namespace nimble::codegen
