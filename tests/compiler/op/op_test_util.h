// Helpers shared by the operator tests (tests/compiler/op/*_test.cc): look an
// op up, build attributes, types and tensors, and run an op the way every
// executor does (op::InvokeOp, op::ResolveCallType), so that each test reads
// as the values and messages it checks.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "nimble/compiler/op/invoke.h"
#include "nimble/compiler/op/op.h"
#include "nimble/vm/error.h"
#include "nimble/vm/tensor.h"
#include "tests/error_of.h"

namespace nimble::op::testing {

inline constexpr ir::Dim kAny = ir::Dim::Any();
inline constexpr DataType kF32 = DataType::Float32();

// Every float dtype, with the relative tolerance of results computed in it.
inline const std::vector<std::pair<DataType, double>> kFloatDTypes = {
    {DataType::Float32(), 1e-6}, {DataType::Float64(), 1e-14}, {DataType::Float16(), 2e-3}};

// The registered definition of `name`; an unknown name throws, failing the test.
inline const OpDef& Def(const std::string& name) {
  const OpDef* def = OpRegistry::Global().Find(name);
  if (!def) throw Error("test: no operator " + name);
  return *def;
}

inline ir::Attrs MakeAttrs(std::vector<std::pair<std::string, ir::AttrValue>> entries) {
  ir::Attrs attrs;
  for (auto& [name, value] : entries) attrs.Set(name, std::move(value));
  return attrs;
}

// Runs `name` on any values (tensors or tuples) with `attrs` normalised
// against its schema; returns a tensor or, for multi-output ops, a tuple.
inline Ref<Object> InvokeValues(const std::string& name, const std::vector<Ref<Object>>& args,
                                const ir::Attrs& attrs = {}) {
  const OpDef& def = Def(name);
  return InvokeOp(def, args, NormalizeAttrs(def, attrs));
}

// Runs a single-output op on tensors.
inline Tensor Invoke(const std::string& name, const std::vector<Tensor>& args,
                     const ir::Attrs& attrs = {}) {
  return InvokeValues(name, std::vector<Ref<Object>>(args.begin(), args.end()), attrs)
      .as<TensorNode>();
}

// The printed type of a call of `name` on arguments of these types.
inline std::string TypeOf(const std::string& name, const std::vector<ir::Type>& arg_types,
                          const ir::Attrs& attrs = {}) {
  const OpDef& def = Def(name);
  return ir::TypeToString(ResolveCallType(def, arg_types, NormalizeAttrs(def, attrs)));
}

// The shapes the op's shape function gives for these concrete input shapes:
// the run-time half of a check the type relation deferred on `?`.
inline std::vector<Shape> ShapesOf(const std::string& name, const std::vector<Shape>& shapes,
                                   const ir::Attrs& attrs = {},
                                   const std::vector<Tensor>& data = {}) {
  const OpDef& def = Def(name);
  const vm::TensorArgViews data_views(data);
  return def.shape_func(shapes, data_views.args(), NormalizeAttrs(def, attrs));
}

inline std::string InvokeError(const std::string& name, const std::vector<Tensor>& args,
                               const ir::Attrs& attrs = {}) {
  return ErrorOf([&] { Invoke(name, args, attrs); });
}

inline ir::Type TensorOf(std::vector<ir::Dim> shape, DataType dtype = kF32) {
  return ir::MakeTensorType(std::move(shape), dtype);
}

// A tensor of `dtype` holding `values`, converted straight to the element
// type (int64 values above 2^53 stay exact).
template <typename T = double>
Tensor TensorFrom(const Shape& shape, DataType dtype, const std::vector<T>& values) {
  return TensorNode::FromVector(shape, dtype, values);
}

// start, start + 1, ... in `shape`.
inline Tensor Iota(const Shape& shape, DataType dtype = kF32, double start = 0) {
  std::vector<double> values(static_cast<size_t>(ShapeNumel(shape)));
  for (size_t i = 0; i < values.size(); ++i) values[i] = start + static_cast<double>(i);
  return TensorNode::FromVector(shape, dtype, values);
}

// The elements of any dtype, as doubles.
inline std::vector<double> Values(const Tensor& tensor) {
  std::vector<double> values;
  for (int64_t i = 0; i < tensor->numel(); ++i) values.push_back(tensor->GetAsDouble(i));
  return values;
}

// The elements exactly as stored; T must be the element type.
template <typename T>
std::vector<T> Elements(const Tensor& tensor) {
  return std::vector<T>(tensor->data<T>(), tensor->data<T>() + tensor->numel());
}

inline void ExpectValues(const Tensor& tensor, const std::vector<double>& expected,
                         double tolerance = 1e-5) {
  ASSERT_EQ(tensor->numel(), static_cast<int64_t>(expected.size()));
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_NEAR(tensor->GetAsDouble(static_cast<int64_t>(i)), expected[i], tolerance)
        << "element " << i;
  }
}

}  // namespace nimble::op::testing
