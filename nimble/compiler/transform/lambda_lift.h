// Lambda lifting and closure conversion: every function literal nested in a
// function (other than a primitive one) becomes a global. One without free
// variables is a plain global, referred to by its GlobalVar; one that
// captures variables becomes a global marked `Closure=1` whose parameters are
// the captured variables and whose body is the literal, and the literal is
// replaced by a call of that global on the captured values
// (docs/memory-dialect.md §1). A recursive local function (`let %f = fn ...`
// calling %f) captures itself through its global. The VM then needs no
// nested functions: AllocClosure captures, InvokeClosure passes the captured
// values first.
#pragma once

#include "nimble/compiler/ir/module.h"

namespace nimble::transform {

// Expects a type-checked module in A-normal form; returns a new one (or,
// when it changes nothing, the same one),
// type-checked again. Lifted globals are named `<enclosing>_lambda_<n>` and
// have fully annotated parameters.
ir::IRModule LambdaLift(const ir::IRModule& module);

}  // namespace nimble::transform
