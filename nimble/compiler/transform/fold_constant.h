// Constant folding: a call of an operator whose arguments are all constants
// (shape arithmetic: shape_of of a static tensor, arithmetic on scalars,
// reshape of a constant) is replaced by its value, computed with the op's
// reference kernel (op::InvokeOp). Large results (weights) are folded only
// when no bigger than their inputs, so folding never grows the constant pool;
// a call that fails at compile time is left for run time to report.
#pragma once

#include "nimble/compiler/ir/module.h"

namespace nimble::transform {

// Expects a type-checked module; returns a new one, type-checked again (or,
// when nothing folds, the same one). A let
// whose value folds is dropped and its variable replaced by the constant.
ir::IRModule FoldConstants(const ir::IRModule& module);

}  // namespace nimble::transform
