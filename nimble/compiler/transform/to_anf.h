// A-normal form: every call, tuple, projection, `if`, `match` and non-primitive
// function literal is bound by a `let` to a fresh variable annotated with its
// type, so each intermediate value has a name (a VM register) and an explicit
// point where it is computed; arguments become variables, constants, globals
// or constructors. Scoping is kept: a value computed in one branch of an `if`
// is bound inside that branch. Primitive function literals stay in callee
// position (docs/memory-dialect.md §1).
#pragma once

#include "nimble/compiler/ir/module.h"

namespace nimble::transform {

// Expects a type-checked module; returns a new one, type-checked again (the
// input is unchanged). Throws nimble::Error when an expression has no type.
ir::IRModule ToANormalForm(const ir::IRModule& module);

}  // namespace nimble::transform
