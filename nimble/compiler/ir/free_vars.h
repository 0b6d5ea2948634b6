// The variables an expression uses but does not bind, and those it binds:
// closure conversion captures the free ones, in this order, as the closure's
// environment. A variable is free when it is used in `expr` and bound nowhere
// in it (function parameter, let binder, pattern variable). Safe on
// 10,000-deep programs.
#pragma once

#include <vector>

#include "nimble/compiler/ir/expr.h"
#include "nimble/compiler/ir/type.h"

namespace nimble::ir {

// Free variables in order of first occurrence (a pre-order walk: callee before
// arguments, let value before body).
std::vector<Var> FreeVars(const Expr& expr);
// Bound variables in binding order.
std::vector<Var> BoundVars(const Expr& expr);
// Type variables of `type` not bound by a polymorphic function type inside it,
// in order of first occurrence.
std::vector<TypeVar> FreeTypeVars(const Type& type);

}  // namespace nimble::ir
