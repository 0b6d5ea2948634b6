// Which shape registers of a function in the memory dialect hold equal
// values at run time: value numbering of shapes, so that memory planning can
// reuse a dead buffer for a later one of the same run-time size without any
// size arithmetic in the program, and that share-shapes can compute each
// shape once. Shapes are numbered by how they are computed, most by their
// dimensions' numbers:
// * a static dimension by its value;
// * shape_of(%t) (dtype int64) by the shape %t was allocated with (the shape
//   register of its alloc_tensor, the true shape of its reshape_tensor view,
//   the field of a tuple it was projected from), else by its type, a `?`
//   dimension of it numbered by %t and its axis; shape_of(a constant) by the
//   constant's dimensions;
// * a shape function's output, where the op's shape rule says so
//   (vm::ShapeRule), by its first input's number or its inputs' common one,
//   or by its first input's dimensions with a static last one (dense's);
//   else, where OutputDimForms tells where the primitive's shape function
//   takes each output dimension from, a dimension whose candidates all have
//   one number by that number, any other by the call; else by the primitive (up to
//   structural equality) and the numbers of its input shapes. So BERT's
//   (1, L, 768) that a layer takes through reshapes, transposes and matrix
//   products comes out of it numbered as it went in.
// A data-dependent shape function's inputs are values: they are numbered
// only when they are shape registers themselves. Calls of shape functions are
// numbered too (ShapeCall), so that a pass can tell a repeated one.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <unordered_map>
#include <vector>

#include "nimble/compiler/ir/expr.h"

namespace nimble::transform {

// Where one output dimension of a primitive's shape function comes from, as
// far as the compiler can tell from its composition: it is always one of the
// candidates, each a constant or an input dimension (a broadcast takes one of
// its operands' dimensions, whichever is not 1). No candidates: unknown.
struct DimSource {
  bool constant = false;
  int64_t value = 0;  // a constant's
  size_t input = 0;   // else which input shape (one per tensor of the
  size_t axis = 0;    // flattened parameters) and which of its dimensions
};
using DimForm = std::vector<DimSource>;
// Each output's dimension forms, for a primitive (memory.shape_func's first
// argument); nullopt where unknown. backend::OutputDimFormsOf is the one the
// compiler uses: it sits with the shape functions' composition.
using OutputDimForms =
    std::function<std::optional<std::vector<std::vector<DimForm>>>(const ir::FunctionNode&)>;

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
  // Numbers the shapes of `function`'s body, branches and clauses included;
  // without `forms`, a shape function's outputs are numbered by the call.
  explicit ShapeNumbering(const ir::FunctionNode& function, OutputDimForms forms = {});

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
  // The shape numbered by its dimensions' numbers; -1 for a type that is
  // not a tensor's, or that has `?` dimensions and no `tensor` to name them.
  int ShapeOfType(const ir::Type& type, const ir::VarNode* tensor);
  int ShapeOfDims(const std::vector<int>& dims);
  // The number of a shape function's output dimension taken from `source`,
  // given the call's input shapes; -1 when unknown.
  int DimNumber(const DimSource& source, const std::vector<int64_t>& inputs);
  const std::vector<std::vector<DimForm>>* FormsOf(int64_t primitive_id);
  int Number(const std::vector<int64_t>& key);
  int PrimitiveId(const ir::Expr& primitive);

  std::unordered_map<const ir::VarNode*, int> registers_;      // register -> shape number
  std::unordered_map<const ir::VarNode*, int> tensor_shapes_;  // tensor -> its shape's number
  std::unordered_map<const ir::VarNode*, std::vector<const ir::VarNode*>> tuples_;
  std::unordered_map<const ir::CallNode*, ShapeCall> calls_;
  std::unordered_map<int, std::vector<int>> dims_;  // shape number -> its dimensions' numbers
  OutputDimForms forms_;
  std::vector<std::optional<std::vector<std::vector<DimForm>>>> forms_by_primitive_;
  std::map<std::vector<int64_t>, int> numbers_;
  std::vector<ir::Expr> primitives_;
};

}  // namespace nimble::transform
