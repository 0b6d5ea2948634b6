// Type inference [paper 4.1, dissertation 3.3]: Hindley-Milner style
// constraint generation over the IR, solved by union-find unification and a
// worklist of operator type relations, with Any dimensions and sub-shaping.
//
// Every unknown (an un-annotated parameter or binder, an operator's output, an
// instantiated type variable) is a placeholder. A call of an operator
// instantiates its type relation on the argument types and a placeholder for
// the result; relations may say "not yet", and a relation moves to the front
// of the worklist when one of its placeholders is solved. Calls of functions
// require each argument to be a sub-shape of the parameter (a (3, 2) tensor may
// be passed where (?, 2) is declared); `if` and `match` give the join of their
// branches ((3, 2) and (4, 2) join to (?, 2)). When no constraint can progress,
// the solver gives an unknown parameter or type argument the join of the types
// flowing into it, widening that guess (and starting over) if a later use
// contradicts it; a loop that grows a tensor thus gets a (?, 2) state. If only
// relations remain, inference fails as under-constrained.
//
// Inference recomputes everything from the annotations (old checked types are
// never read), so it can run again after any pass.
#pragma once

#include <unordered_map>
#include <utility>
#include <vector>

#include "nimble/compiler/ir/module.h"

namespace nimble::typing {

// Fills `checked_type` of every expression of every function of `module`
// (operator nodes excepted: they are shared by all modules and only have a
// type per call). Throws nimble::Error "line:col: message" naming the
// expression and the types that disagree.
void InferTypes(const ir::IRModule& module);

// The type of a standalone expression, whose free variables must carry type
// annotations; globals and constructors it uses are looked up in `module`.
// Fills `checked_type` of the expression's nodes and of the globals it reaches.
ir::Type InferExprType(const ir::Expr& expr, const ir::IRModule& module = nullptr);

// The types every expression of `module` would have if the parameters in
// `param_types` had those types instead of their annotations, in the order
// inference met the expressions; writes nothing. Analyses ask such "what if"
// questions (any_equivalence.h).
using TypedExprs = std::vector<std::pair<const ir::ExprNode*, ir::Type>>;
TypedExprs InferTypesAssuming(const ir::IRModule& module,
                              const std::unordered_map<const ir::VarNode*, ir::Type>& param_types);

// Sub-shaping: whether a value of type `sub` may be used where `super` is
// expected. A static dimension is a sub-shape of Any, and of a bounded Any
// when within its bound (as is a bounded Any of no larger bound, and an
// unbounded one, whose size the run time checks); tuples, type calls and
// function results compare element by element, function parameters the other
// way round (contravariant).
bool IsSubtype(const ir::Type& sub, const ir::Type& super);

// The least common super-type of `a` and `b` (equal dimensions stay, differing
// static ones become Any), or null when they differ in kind, rank or dtype.
ir::Type JoinTypes(const ir::Type& a, const ir::Type& b);

}  // namespace nimble::typing
