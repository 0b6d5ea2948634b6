// Memory manifestation [paper 4.3]: every call of a primitive function
// becomes explicit allocations and a destination-passing call
// (memory.invoke_mut) writing into them. Outputs of static type get storage
// of constant size; dynamic ones run the primitive's shape function first
// (memory.shape_func on shape_of of each input, or on the inputs themselves
// for a data-dependent op), whose own outputs are static allocations, and
// are allocated from the shapes it computes, in storage of the shape's size,
// or, when every `?` of the output type has a bound (`?<=N`), of constant
// size for the bounds, which memory planning places in a region like a
// static allocation (the VM checks that the run-time shape fits, so an input
// past the bound is an error). An upper-bound op's output is
// allocated at the bound and viewed at its true shape afterwards
// (memory.reshape_tensor). The exact forms are docs/memory-dialect.md §2.
#pragma once

#include "nimble/compiler/ir/module.h"

namespace nimble::transform {

// Expects a type-checked module after FuseOps; returns a new one,
// type-checked again, in which no primitive function is called directly. The let binder of a call
// names the call's value afterwards (its output tensor, the view of an
// upper-bound output, or the tuple of a multi-output call); the same primitive
// node is the argument of both memory.shape_func and memory.invoke_mut. The
// shape-function mode is the most demanding of the ops in the primitive's
// body (OpDef::shape_mode). Calls already in the memory dialect and those
// the VM runs as instructions (op::RunsAsVMInstruction) are kept, so a
// second run changes nothing; any
// other operator called outside a primitive, a primitive used as a value, or
// a module without types is an Error.
ir::IRModule ManifestAlloc(const ir::IRModule& module);

}  // namespace nimble::transform
