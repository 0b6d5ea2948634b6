// Type-relation and shape-function helpers shared by operator families: the
// Any rules of broadcasting [paper 4.1] and the matching run-time checks.
#pragma once

#include <string>
#include <vector>

#include "nimble/compiler/op/op.h"
#include "nimble/vm/kernels/shape_util.h"

namespace nimble::op {

using vm::BroadcastShapeFunc;
using vm::BroadcastShapes;
using vm::IdentityShapeFunc;
using vm::NormalizeAxis;

// The tensor type behind `type`; null while it is still incomplete. Throws
// nimble::Error naming `op` (unless empty) and `what` ("argument 0") when it
// is another kind of type (a tuple where a tensor is expected).
ir::TensorType AsTensorType(const ir::Type& type, const std::string& op, const std::string& what);

// The broadcast of two shapes under numpy rules extended to Any:
//   (d, d) = d, (1, d) = (d, 1) = d, (Any, 1) = Any, (Any, d != 1) = d,
//   (Any, Any) = Any; any other pair of static sizes is an error "op: dimension
//   k conflicts: 2 does not match 3" (no "op: " when `op` is empty). Cases with Any are re-checked
//   at run time by BroadcastShapes (vm/kernels/shape_util.h) in the shape
//   function (gradual typing).
std::vector<ir::Dim> BroadcastDims(const std::vector<ir::Dim>& lhs, const std::vector<ir::Dim>& rhs,
                                   const std::string& op);

// Output = input type (unary elementwise ops).
bool IdentityRelation(const std::vector<ir::Type>& types, const ir::Attrs& attrs,
                      TypeReporter& reporter);
// Output = broadcast of the inputs, with the inputs' dtype (which must agree).
bool BroadcastRelation(const std::vector<ir::Type>& types, const ir::Attrs& attrs,
                       TypeReporter& reporter);
// As BroadcastRelation, with a bool output (comparisons).
bool BroadcastCompareRelation(const std::vector<ir::Type>& types, const ir::Attrs& attrs,
                              TypeReporter& reporter);

}  // namespace nimble::op
