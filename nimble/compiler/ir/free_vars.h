// The variables an expression uses but does not bind, and those it binds:
// closure conversion captures the free ones, in this order, as the closure's
// environment. A variable is free when it is used in `expr` and bound nowhere
// in it (function parameter, let binder, pattern variable). Safe on
// 10,000-deep programs.
#pragma once

#include <unordered_map>
#include <utility>
#include <vector>

#include "nimble/compiler/ir/expr.h"
#include "nimble/compiler/ir/type.h"

namespace nimble::ir {

// Free variables in order of first occurrence (a pre-order walk: callee before
// arguments, let value before body).
std::vector<Var> FreeVars(const Expr& expr);
// FreeVars for many expressions of one program, such as each statement of
// each let chain: every scope nested in them (a function, an if, a match) is
// walked once and its free variables kept, where FreeVars would walk a scope
// again for each enclosing chain (quadratic in the nesting depth). The same
// result as FreeVars on IR whose variables are used only in their binders'
// scopes. Keeps the scopes it saw alive, so that their addresses stay theirs.
class FreeVarCache {
 public:
  std::vector<Var> operator()(const Expr& expr);

  // The free variables of `scope`, a function, if or match; walked once.
  const std::vector<Var>& OfScope(const Expr& scope);

 private:
  // Walks `expr`, taking its nested scopes from the cache.
  std::vector<Var> Collect(const Expr& expr);

  std::unordered_map<const ExprNode*, std::pair<Expr, std::vector<Var>>> scopes_;
};

// Bound variables in binding order.
std::vector<Var> BoundVars(const Expr& expr);
// Type variables of `type` not bound by a polymorphic function type inside it,
// in order of first occurrence.
std::vector<TypeVar> FreeTypeVars(const Type& type);

}  // namespace nimble::ir
