// Index simplification with bounds and modular facts. Flattening, broadcasting
// and reshaping compose index expressions like floordiv(i, n) * n +
// floormod(i, n) or floordiv(i * d + j, d); inside loops that bound i and j
// these are just i. Left in place they cost an integer division per element
// of the innermost loop, which also keeps that loop from vectorising.
//
// The facts: a loop variable lies in [0, extent), a let variable in its
// value's range, and any other integer variable is a dimension (>= 0). With
// them the simplifier removes divisions and remainders it can prove exact or
// trivial, cancels floordiv(x, e) * e + floormod(x, e), folds comparisons and
// assertions it proves, and drops branches and loops that cannot run. Every
// value the kernel computes stays the same.
#pragma once

#include "nimble/compiler/tir/stmt.h"

namespace nimble::tir {

// `func` with its loop extents, indices, conditions and buffer shapes
// simplified (buffers whose shapes change are replaced everywhere).
PrimFunc Simplify(const PrimFunc& func);

// `expr` simplified knowing only that its free variables are dimensions.
Expr Simplify(const Expr& expr);

// Whether `a` and `b` compute the same value by their structure: the same
// nodes up to the order of commutative operands.
bool StructurallyEqual(const Expr& a, const Expr& b);

}  // namespace nimble::tir
