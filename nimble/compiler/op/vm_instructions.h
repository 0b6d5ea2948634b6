// The operator calls the VM runs as instructions instead of kernels: shape_of
// (ShapeOf) and scalar control arithmetic on rank-0 integers and bools (the
// Scalar instruction: loop counters, comparisons, one element of a shape).
// Fusion leaves these calls outside primitives, memory manifestation keeps
// them as they are (they allocate nothing), device placement puts them on the
// host, and the VM compiler emits the instruction.
#pragma once

#include <optional>

#include "nimble/compiler/ir/expr.h"
#include "nimble/vm/bytecode.h"

namespace nimble::op {

// The Scalar instruction that computes `call`, with the dtype it takes
// (bytecode.h); nullopt unless `call` is a type-checked call of one of its
// operators on rank-0 signed integers or bools (take: element of a 1-D one),
// with such a result.
struct ScalarInstruction {
  vm::ScalarOperator op;
  DataType dtype;
};
std::optional<ScalarInstruction> ScalarInstructionOf(const ir::CallNode& call);

// Whether the VM runs `call` as an instruction: shape_of with dtype int32 or
// int64, or a call ScalarInstructionOf maps.
bool RunsAsVMInstruction(const ir::CallNode& call);

}  // namespace nimble::op
