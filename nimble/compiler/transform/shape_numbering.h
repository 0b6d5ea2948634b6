// Which shape registers of a function in the memory dialect hold equal
// values at run time: value numbering of shapes, so that memory planning can
// reuse a dead buffer for a later one of the same run-time size without any
// size arithmetic in the program. Shapes are numbered by how they are
// computed:
// * a static shape by its dimensions;
// * shape_of(%t) by the shape %t was allocated with (the shape register of
//   its alloc_tensor, the true shape of its reshape_tensor view, the field of
//   a tuple it was projected from), else by %t itself;
// * a shape function's output by the primitive (up to structural equality)
//   and the numbers of its input shapes, or, where the op's shape rule says
//   so (vm::ShapeRule), by its first input's number or its inputs' common one.
// A data-dependent shape function's inputs are values: they are numbered
// only when they are shape registers themselves.
#pragma once

#include <cstdint>
#include <map>
#include <unordered_map>
#include <vector>

#include "nimble/compiler/ir/expr.h"

namespace nimble::transform {

class ShapeNumbering {
 public:
  // Numbers the shapes of `function`'s body, branches and clauses included.
  explicit ShapeNumbering(const ir::FunctionNode& function);

  // The number of the shape held by the int64 shape register `var`: equal
  // numbers mean equal shapes whenever both are computed. -1 when unknown.
  int OfRegister(const ir::VarNode* var) const;

 private:
  void Scope(const ir::Expr& expr);
  void Bind(const ir::VarNode* var, const ir::Expr& value);
  void NumberShapeFunction(const ir::CallNode& call);
  int ShapeOfTensor(const ir::VarNode* tensor);
  int Number(const std::vector<int64_t>& key);
  int PrimitiveId(const ir::Expr& primitive);

  std::unordered_map<const ir::VarNode*, int> registers_;      // register -> shape number
  std::unordered_map<const ir::VarNode*, int> tensor_shapes_;  // tensor -> its shape's number
  std::unordered_map<const ir::VarNode*, std::vector<const ir::VarNode*>> tuples_;
  std::map<std::vector<int64_t>, int> numbers_;
  std::vector<ir::Expr> primitives_;
};

}  // namespace nimble::transform
