// Inlining of the calls a recursion makes: in a function that reaches itself
// (a loop over a sentence, a tree), a call @f(a, b) of a small global that
// does not becomes `let %x = a; let %y = b; <f's body>`, the body copied with
// fresh variables for its binders. Such a call runs once an iteration, and
// costs the VM an invoke, a frame, a return and, for a tuple result, an ADT
// and a read of each field each time; it also hides the callee's operators
// from fusion with the caller's. An LSTM's @step, called once a token, cost 18
// of the token's 35 instructions, and its gate arithmetic could not fuse with
// the caller's take of the token's projected row. A call that runs once an
// inference gains nothing and is left, as is a callee with a `match?`, whose
// failure names its function.
#pragma once

#include "nimble/compiler/ir/module.h"

namespace nimble::transform {

// The largest callee inlined, in expression nodes: a cell of a recurrent
// network or a small helper, not a whole model called from a wrapper.
inline constexpr int kMaxInlinedNodes = 256;

// Expects a type-checked module; returns a new one (or, when it changes
// nothing, the same one), type-checked again, in
// which, within every function that reaches itself through the module's
// references to globals, every direct call of a global that does not, has
// no type parameters, no `match?` and at most kMaxInlinedNodes expression
// nodes is its body as above (its own such calls inlined first). Arguments
// are bound in order before the body runs, as a call evaluates them; a
// variable argument is used in place of its parameter. Every function stays
// in the module (an entry may be one); dead-code elimination drops those
// nothing calls.
ir::IRModule InlineFunctions(const ir::IRModule& module);

}  // namespace nimble::transform
