// Device placement [paper 4.4]: decides, for a target with an accelerator,
// which device every value of a program in the memory dialect lives on, and
// makes that explicit: each memory.alloc_storage names its device, and
// device_copy appears exactly where a value must cross devices.
//
// Host values are those the VM reads on the CPU or that are cheap scalar
// work: shape_of results, the results of scalar instructions (`add(%i, 1)`,
// `less(%i, %len)` on rank-0 integers; their operands are read on the CPU),
// shape-function inputs and outputs, allocation sizes, shapes and offsets,
// `if` conditions, and the outputs of kernels that
// only read metadata (shape_of as a kernel) or whose every non-constant input
// is a host value (size arithmetic the VM does not run itself). A function parameter is a host
// value when every call site passes one (a fixed point over the module; @main's parameters and
// those of closures are not). Every other kernel runs on the target's device,
// with all of its arguments there (invoke_mut arguments share one domain);
// storage and the tensors allocated from it share a domain, as do a let
// binder and the variable it renames, call arguments and parameters, and the
// results of the branches of an `if` or `match`. These rules are solved as a
// monotone fixed point (every value starts as a host value and is demoted to
// the device when a rule says so) rather than by merging domains with
// union-find: merging would pull a value used both on the host and on the
// device (a loop counter that is compared and also indexes a device tensor)
// and everything unified with it onto one device, where the fixed point
// keeps it on the host and copies it once. Where a value is used on another
// device (a host scalar indexing a device tensor, a device tensor read by a
// data-dependent shape function or tested by `if`) one device_copy is
// inserted after its definition and every use there reads the copy. @main takes its
// arguments and returns its result on the CPU, copying at entry and exit.
// Constants used on the device become device_copy of the constant, which the
// VM compiler loads onto the device once.
//
// Scalar constants count as host values, tensor constants (weights) as device
// values; a kernel reading only constants runs on the device. Tuples are
// placed field by field. ADTs are host objects whose tensor fields keep their
// own device: a constructor field is a host value when every construction
// stores one, and pattern variables bound from it follow; a value whose type
// is a type variable is a device value. See docs/memory-dialect.md §3.
#pragma once

#include <string>

#include "nimble/compiler/ir/module.h"

namespace nimble::transform {

// Expects a type-checked module after ManifestAlloc; returns a new one,
// type-checked again. `device` is the target's accelerator ("cuda"), or
// "cpu" for a CPU-only target, in which case every allocation is on the CPU
// and no copy is inserted. Existing device_copy calls are kept and split
// domains (their source and destination devices are fixed).
ir::IRModule PlanDevices(const ir::IRModule& module, const std::string& device);

}  // namespace nimble::transform
