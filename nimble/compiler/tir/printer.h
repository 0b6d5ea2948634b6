// The loop IR as text, for `nimble dump --tir KERNEL` and for tests that
// assert what lowering and simplification produce. Variables print by name;
// a C-like syntax, one statement per line.
#pragma once

#include <string>

#include "nimble/compiler/tir/stmt.h"

namespace nimble::tir {

std::string ToString(const Expr& expr);
std::string ToString(const Stmt& stmt, int indent = 0);
std::string ToString(const PrimFunc& func);

}  // namespace nimble::tir
