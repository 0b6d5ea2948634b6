// ForwardTupleFields: reads a tuple built in place from its fields. Memory
// manifestation returns a primitive's outputs as a tuple literal that the
// program then takes apart (an LSTM cell's h' and c'), and a kernel's tuple
// argument (concatenate's) is built just to be flattened again: on the VM each
// costs an alloc_adt and a get_field per field, per call.
#pragma once

#include "nimble/compiler/ir/module.h"

namespace nimble::transform {

// Expects a type-checked module in A-normal form (the memory dialect's too).
// For `let %t = (a, b, ...)` whose fields are variables or constants:
// `let %v = %t.k` goes and %v reads as the field (so does `let %u = %t`, an
// alias that normal form leaves of a tuple a block returns, as an inlined
// call's; any `let %u = %w` goes, %u reading as %w); %t inside the tuple
// arguments of memory.invoke_mut and memory.shape_func reads as the literal,
// which the VM flattens without building it; `let %t` goes when nothing else
// reads it. Returns a new module, type-checked again.
ir::IRModule ForwardTupleFields(const ir::IRModule& module);

}  // namespace nimble::transform
