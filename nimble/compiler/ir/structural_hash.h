// A hash consistent with StructuralEqual (structural_equal.h): structurally
// equal expressions or types hash equal. Bound variables hash by their binding
// position (De Bruijn index), free ones by identity, so the hash of a program
// with free variables is stable within a process run only. Safe on
// 10,000-deep programs.
#pragma once

#include <cstddef>

#include "nimble/compiler/ir/expr.h"
#include "nimble/compiler/ir/type.h"

namespace nimble::ir {

size_t StructuralHash(const Expr& expr);
size_t StructuralHash(const Type& type);

// hash for unordered containers keyed by expressions (with StructuralEqualTo),
// e.g. to share one copy of identical primitive functions.
struct StructuralHasher {
  size_t operator()(const Expr& expr) const { return StructuralHash(expr); }
};

}  // namespace nimble::ir
