#include "nimble/vm/kernels/shape_util.h"

#include <algorithm>

#include "nimble/vm/error.h"
#include "nimble/vm/kernels/transform_rules.h"

namespace nimble::vm {

Shape BroadcastShapes(const Shape& lhs, const Shape& rhs, const std::string& op) {
  const size_t ndim = std::max(lhs.size(), rhs.size());
  Shape out(ndim);
  for (size_t i = 0; i < ndim; ++i) {
    const int64_t a = i < ndim - lhs.size() ? 1 : lhs[i - (ndim - lhs.size())];
    const int64_t b = i < ndim - rhs.size() ? 1 : rhs[i - (ndim - rhs.size())];
    if (a != b && a != 1 && b != 1) {
      throw Error(op + ": cannot broadcast shapes " + ShapeToString(lhs) + " and " +
                  ShapeToString(rhs) + " (dimension " + std::to_string(i) + ": " +
                  std::to_string(a) + " vs " + std::to_string(b) + ")");
    }
    out[i] = a == 1 ? b : a;
  }
  return out;
}

std::vector<Shape> IdentityShapeFunc(std::span<const Shape> input_shapes, TensorArgs,
                                     const Attrs&) {
  return {input_shapes[0]};
}

ShapeFunction BroadcastShapeFunc(const std::string& op) {
  return [op](std::span<const Shape> input_shapes, TensorArgs, const Attrs&) {
    Shape shape = input_shapes[0];
    for (size_t i = 1; i < input_shapes.size(); ++i) {
      shape = BroadcastShapes(shape, input_shapes[i], op);
    }
    return std::vector<Shape>{shape};
  };
}

int64_t NormalizeAxis(int64_t axis, int64_t ndim, const std::string& op) {
  const int64_t normalized = axis < 0 ? axis + ndim : axis;
  if (normalized < 0 || normalized >= ndim) {
    throw Error(op + ": axis " + std::to_string(axis) + " is out of range for rank " +
                std::to_string(ndim));
  }
  return normalized;
}

ShapeFunction transform::RuleShapeFunc(Rule<StaticDim> rule) {
  return [rule](std::span<const Shape> input_shapes, TensorArgs, const Attrs& attrs) {
    using StaticDims = DimsOf<StaticDim>;
    std::vector<StaticDims> inputs;
    for (const Shape& shape : input_shapes) inputs.emplace_back(shape.begin(), shape.end());
    std::vector<Shape> outputs;
    for (const StaticDims& dims : rule(inputs, attrs)) outputs.push_back(ToShape(dims));
    return outputs;
  };
}

OpKernelDef& transform::RegisterStatic(OpKernelRegistry& registry, const std::string& name,
                                       Rule<StaticDim> rule, OpKernelFunc kernel) {
  OpKernelDef& def = registry.Register(name);
  def.shape_func = RuleShapeFunc(rule);
  def.shape_mode = ShapeFuncMode::kDataIndependent;
  def.kernel = std::move(kernel);
  return def;
}

}  // namespace nimble::vm
