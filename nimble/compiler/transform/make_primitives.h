// Primitive functions: every operator call becomes the call of a function
// literal marked `Primitive=1` whose body is that one call on its parameters,
// one parameter per argument in order (docs/memory-dialect.md §1). The
// exceptions are the memory dialect's ops and `shape_of` with dtype int64,
// which the VM runs as instructions. A primitive is the unit memory
// manifestation allocates for and the VM calls as one kernel; operator
// fusion will later put several ops in one primitive body here, and nothing
// after this pass changes.
#pragma once

#include "nimble/compiler/ir/module.h"

namespace nimble::transform {

// Expects a type-checked module in A-normal form; returns a new one,
// type-checked again. Idempotent: primitive functions are left as they are.
ir::IRModule MakePrimitives(const ir::IRModule& module);

}  // namespace nimble::transform
