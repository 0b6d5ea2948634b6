// Eta-expansion of constructors used as values: `Cons` anywhere but in callee
// position (passed to a function, bound by `let`, put in a tuple, returned)
// becomes `fn (%a: T0, %b: T1) -> List[T] { Cons(%a, %b) }`, its field types
// instantiated as type inference instantiated them at that use, so that
// later passes and the VM only ever see constructors in callee position (the
// VM builds ADTs with AllocADT, it has no constructor values). A nullary
// constructor is a value already and is kept.
#pragma once

#include "nimble/compiler/ir/module.h"

namespace nimble::transform {

// Expects a type-checked module; returns a new one (or, when it changes
// nothing, the same one), type-checked again.
// Runs before ToANormalForm, so the new function literals are lifted like any
// other.
ir::IRModule EtaExpandConstructors(const ir::IRModule& module);

}  // namespace nimble::transform
