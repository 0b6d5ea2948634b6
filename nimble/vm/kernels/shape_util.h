// Shape arithmetic shared by the shape functions of several op families.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "nimble/vm/kernels/op_kernel.h"

namespace nimble::vm {

// numpy broadcasting of two concrete shapes; the error names the op, both
// shapes and the dimension (the run-time half of the `?` broadcast rules).
Shape BroadcastShapes(const Shape& lhs, const Shape& rhs, const std::string& op);

// Shape functions: output shape = input 0's shape, and the broadcast of all inputs.
std::vector<Shape> IdentityShapeFunc(std::span<const Shape> input_shapes, TensorArgs input_data,
                                     const Attrs& attrs);
ShapeFunction BroadcastShapeFunc(const std::string& op);

// Normalises a possibly negative axis against `ndim`; the error names the op.
int64_t NormalizeAxis(int64_t axis, int64_t ndim, const std::string& op);

}  // namespace nimble::vm
