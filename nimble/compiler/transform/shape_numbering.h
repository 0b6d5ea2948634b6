// Which shape registers of a function in the memory dialect hold equal
// values at run time: value numbering of shapes, so that memory planning can
// reuse a dead buffer for a later one of the same run-time size without any
// size arithmetic in the program. Shapes are numbered by how they are
// computed:
// * a static shape by its dimensions;
// * shape_of(%t) (dtype int64) by the shape %t was allocated with (the shape
//   register of its alloc_tensor, the true shape of its reshape_tensor view,
//   the field of a tuple it was projected from), else by its static type, else
//   by %t itself; shape_of(a constant) by the constant's dimensions;
// * a shape function's output by the primitive (up to structural equality)
//   and the numbers of its input shapes, or, where the op's shape rule says
//   so (vm::ShapeRule), by its first input's number or its inputs' common one.
// A data-dependent shape function's inputs are values: they are numbered
// only when they are shape registers themselves. Calls of shape functions are
// numbered too (ShapeCall), so that a pass can tell a repeated one.
#pragma once

#include <cstdint>
#include <map>
#include <unordered_map>
#include <vector>

#include "nimble/compiler/ir/expr.h"

namespace nimble::transform {

// A memory.shape_func call as ShapeNumbering sees it.
struct ShapeCall {
  // Equal for calls of structurally equal primitives on inputs of equal
  // numbers, which compute the same shapes and check the same things; -1
  // when an input is not numbered.
  int number = -1;
  // Whether the op's shape rule makes the output its one input's shape, or
  // its equal inputs' common shape: the call then checks nothing.
  bool copies_input = false;
};

class ShapeNumbering {
 public:
  // Numbers the shapes of `function`'s body, branches and clauses included.
  explicit ShapeNumbering(const ir::FunctionNode& function);

  // The number of the shape held by the int64 shape register `var`: equal
  // numbers mean equal shapes whenever both are computed. -1 when unknown.
  int OfRegister(const ir::VarNode* var) const;
  // What is known of a memory.shape_func call of the function.
  ShapeCall OfCall(const ir::CallNode* call) const;

 private:
  void Scope(const ir::Expr& expr);
  void Bind(const ir::VarNode* var, const ir::Expr& value);
  void NumberShapeFunction(const ir::CallNode& call);
  int ShapeOfTensor(const ir::VarNode* tensor);
  int StaticShape(const ir::Type& type);
  int Number(const std::vector<int64_t>& key);
  int PrimitiveId(const ir::Expr& primitive);

  std::unordered_map<const ir::VarNode*, int> registers_;      // register -> shape number
  std::unordered_map<const ir::VarNode*, int> tensor_shapes_;  // tensor -> its shape's number
  std::unordered_map<const ir::VarNode*, std::vector<const ir::VarNode*>> tuples_;
  std::unordered_map<const ir::CallNode*, ShapeCall> calls_;
  std::map<std::vector<int64_t>, int> numbers_;
  std::vector<ir::Expr> primitives_;
};

}  // namespace nimble::transform
