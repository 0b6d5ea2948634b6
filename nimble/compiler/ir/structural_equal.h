// Structural equality of IR up to alpha-renaming: what tests, the text-format
// round trip and passes that deduplicate functions mean by "the same program".
//
//   - Bound variables (function parameters, let binders, pattern variables) and
//     bound type variables (of polymorphic functions, function types and ADTs)
//     are equal when bound at corresponding positions; free ones only equal
//     themselves.
//   - Constants compare by name (the params key), dtype, shape and bytes; ops
//     by identity; globals and ADT names by name; constructors by name and tag;
//     attributes by value. All incomplete types are equal to each other.
//   - Sharing does not matter: a DAG equals the tree it unfolds to.
//   - Spans and checked_type are ignored.
//
// Equal values have equal StructuralHash (structural_hash.h). Safe on
// 10,000-deep programs.
#pragma once

#include "nimble/compiler/ir/expr.h"
#include "nimble/compiler/ir/module.h"
#include "nimble/compiler/ir/type.h"

namespace nimble::ir {

bool StructuralEqual(const Expr& lhs, const Expr& rhs);
bool StructuralEqual(const Type& lhs, const Type& rhs);
// Same global functions and ADTs by name (definition order does not matter),
// each pair structurally equal.
bool StructuralEqual(const IRModule& lhs, const IRModule& rhs);

// key_equal for unordered containers keyed by expressions.
struct StructuralEqualTo {
  bool operator()(const Expr& lhs, const Expr& rhs) const { return StructuralEqual(lhs, rhs); }
};

}  // namespace nimble::ir
