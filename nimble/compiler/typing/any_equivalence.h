// Identical-Any analysis [paper 4.1, dissertation ch. 3]: which Any dimensions
// of a program always have the same size. Without it every `?` is an
// independent symbol, and symbolic code generation specialises (residue
// dispatch) per symbol; with it, `nn.dense(%x: (?, 8), ...)`'s output dim 0 is
// known to be %x's dim 0, one symbol for both.
//
// Method (the dissertation's): replace one Any dimension of @main's parameters
// by a symbol at a time, infer types again, and see which Any dimensions of the
// original typing became that symbol. The symbol is a large prime static size
// that appears nowhere in the program, so relations treat it as an ordinary
// size other than 1. Classes sharing an expression merge (in `add(%x: (?, 4),
// %y: (?, 4))` both inputs' dim 0 meet in the output's), and a dimension the
// substitution cannot type (one a relation pins to 1 or 3 at run time) keeps a
// class of its own.
#pragma once

#include <cstddef>
#include <unordered_map>
#include <vector>

#include "nimble/compiler/ir/module.h"

namespace nimble::typing {

// Dimension `dim` of the tensor-typed expression `expr`.
struct AnyDimRef {
  const ir::ExprNode* expr;
  size_t dim;
};

// The result: an equivalence class per group of Any dimensions known to be
// equal, each tied to at least one Any dimension of @main's parameters. Refers
// to the module's nodes by address: valid while the module is unchanged.
class AnyEquivalence {
 public:
  // The class of dimension `dim` of `expr`, a tensor-typed expression; -1
  // when that dimension is static or not tied to a parameter's Any dimension.
  int ClassOf(const ir::ExprNode* expr, size_t dim) const;
  int ClassOf(const ir::Expr& expr, size_t dim) const { return ClassOf(expr.get(), dim); }

  int num_classes() const { return static_cast<int>(members_.size()); }
  // The dimensions of class `id`, in inference order: the first is the
  // parameter dimension that defines the class (its symbol's name for codegen).
  const std::vector<AnyDimRef>& Members(int id) const { return members_.at(id); }

 private:
  friend AnyEquivalence AnalyzeAnyEquivalence(const ir::IRModule& module);

  std::unordered_map<const ir::ExprNode*, std::vector<int>> classes_;  // per dimension, or -1
  std::vector<std::vector<AnyDimRef>> members_;
};

// Analyses `module` (whose @main gives the parameters; no @main gives no
// classes). Leaves the module typed as InferTypes would; the substituted
// typings are never written. Throws nimble::Error when the module does not type.
AnyEquivalence AnalyzeAnyEquivalence(const ir::IRModule& module);

}  // namespace nimble::typing
