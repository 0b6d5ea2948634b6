// Where each primitive's kernel runs once devices are placed
// (transform/plan_devices.h): on the device of the storage its outputs live
// in. Code generation lowers a primitive for that device (a GPU kernel, or a
// CPU one for the counters and bounds that stay on the host).
#pragma once

#include <string>
#include <unordered_map>

#include "nimble/compiler/ir/module.h"

namespace nimble::backend {

// The device ("cpu", "cuda") of the first output of each primitive that
// memory.invoke_mut calls, read from the memory.alloc_storage its
// memory.alloc_tensor (or a memory.reshape_tensor of one) views. Primitives
// whose output storage cannot be traced are absent.
using KernelDeviceMap = std::unordered_map<const ir::FunctionNode*, std::string>;
KernelDeviceMap KernelDevices(const ir::IRModule& module);

}  // namespace nimble::backend
