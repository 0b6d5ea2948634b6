// The differential check of the built-in kernel library: each built-in
// kernel, called the way the VM calls it (through the KernelRegistry's C ABI,
// with outputs allocated from the runtime's shape function, itself run
// through its C ABI), must compute what the compiler's reference kernel
// computes (op::InvokeOp, the evaluator's path) on the same inputs: exactly,
// or within a Tolerance that the test states and justifies.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iomanip>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "nimble/compiler/op/invoke.h"
#include "nimble/compiler/op/op.h"
#include "nimble/vm/adt.h"
#include "nimble/vm/dlpack.h"
#include "nimble/vm/error.h"
#include "nimble/vm/kernel.h"
#include "nimble/vm/kernels/op_kernel.h"
#include "nimble/vm/tensor.h"

namespace nimble::vm::testing {

// Values drawn uniformly from [low, high): floats as they are, integers
// rounded down, bools true with probability one half whatever the range.
inline Tensor RandomTensor(const Shape& shape, DataType dtype, std::mt19937& rng, double low = -2.0,
                           double high = 2.0) {
  Tensor tensor = TensorNode::Empty(shape, dtype);
  std::uniform_real_distribution<double> uniform(low, high);
  std::bernoulli_distribution coin(0.5);
  for (int64_t i = 0; i < tensor->numel(); ++i) {
    const double value =
        dtype.is_bool() ? coin(rng) : (dtype.is_float() ? uniform(rng) : std::floor(uniform(rng)));
    tensor->SetFromDouble(i, value);
  }
  return tensor;
}

inline void FlattenInto(const Ref<Object>& value, std::vector<Tensor>* tensors) {
  if (Tensor tensor = value.as<TensorNode>()) {
    tensors->push_back(tensor);
    return;
  }
  for (const Ref<Object>& field : value.as<ADTNode>()->fields()) FlattenInto(field, tensors);
}

inline std::vector<Tensor> Flatten(const std::vector<Ref<Object>>& values) {
  std::vector<Tensor> tensors;
  for (const Ref<Object>& value : values) FlattenInto(value, &tensors);
  return tensors;
}

// Calls the registry's kernel `name`, bound to `attrs`, on inputs then outputs.
inline void CallKernel(const std::string& name, const Attrs& attrs,
                       const std::vector<Tensor>& arguments) {
  const Kernel kernel = KernelRegistry::Global().Bind(name, attrs);
  std::vector<DLTensor> views;
  views.reserve(arguments.size());
  for (const Tensor& argument : arguments) views.push_back(AsDLTensor(argument));
  std::vector<DLTensor*> pointers;
  for (DLTensor& view : views) pointers.push_back(&view);
  kernel(pointers.data(), static_cast<int32_t>(pointers.size()));
}

// The output shapes given by "shape_func.OP" through the kernel ABI, for
// outputs of these ranks.
inline std::vector<Shape> RunShapeFunc(const OpKernelDef& def, const Attrs& attrs,
                                       const std::vector<Tensor>& inputs,
                                       const std::vector<size_t>& out_ranks) {
  std::vector<Tensor> arguments;
  for (const Tensor& input : inputs) {
    if (def.shape_mode == ShapeFuncMode::kDataDependent) {
      arguments.push_back(input);
    } else {
      arguments.push_back(
          TensorNode::FromVector<int64_t>({input->ndim()}, DataType::Int64(), input->shape()));
    }
  }
  std::vector<Tensor> shape_outputs;
  for (size_t rank : out_ranks) {
    shape_outputs.push_back(TensorNode::Empty({static_cast<int64_t>(rank)}, DataType::Int64()));
  }
  arguments.insert(arguments.end(), shape_outputs.begin(), shape_outputs.end());
  CallKernel(ShapeFuncKernelName(def.name), attrs, arguments);
  std::vector<Shape> shapes;
  for (const Tensor& out : shape_outputs) {
    shapes.emplace_back(out->data<int64_t>(), out->data<int64_t>() + out->numel());
  }
  return shapes;
}

// Runs the built-in kernel of `op` as the VM does; `like` gives the outputs'
// dtypes and ranks. Upper-bound outputs come back as views of their valid part.
inline std::vector<Tensor> RunBuiltin(const std::string& op, const Attrs& attrs,
                                      const std::vector<Tensor>& inputs,
                                      const std::vector<Tensor>& like) {
  const OpKernelDef* def = OpKernelRegistry::Global().Find(op);
  if (!def) throw Error("no runtime definition of " + op);
  std::vector<size_t> ranks;
  for (const Tensor& tensor : like) ranks.push_back(tensor->shape().size());
  const std::vector<Shape> shapes = RunShapeFunc(*def, attrs, inputs, ranks);
  std::vector<Tensor> outputs;
  for (size_t i = 0; i < like.size(); ++i) {
    outputs.push_back(TensorNode::Empty(shapes[i], like[i]->dtype()));
  }
  const bool upper_bound = def->shape_mode == ShapeFuncMode::kUpperBound;
  std::vector<Tensor> true_shapes;
  for (size_t i = 0; upper_bound && i < like.size(); ++i) {
    true_shapes.push_back(TensorNode::Empty({static_cast<int64_t>(ranks[i])}, DataType::Int64()));
  }
  std::vector<Tensor> arguments = inputs;
  arguments.insert(arguments.end(), outputs.begin(), outputs.end());
  arguments.insert(arguments.end(), true_shapes.begin(), true_shapes.end());
  CallKernel(op, attrs, arguments);
  for (size_t i = 0; i < true_shapes.size(); ++i) {
    const Tensor& shape = true_shapes[i];
    outputs[i] =
        Make<TensorNode>(outputs[i]->storage(), outputs[i]->byte_offset(),
                         Shape(shape->data<int64_t>(), shape->data<int64_t>() + shape->numel()),
                         outputs[i]->dtype());
  }
  return outputs;
}

// The spacing of `dtype`'s values (a float dtype) at `value`: one unit in
// the last place (ulp) of value's binade, or the subnormal spacing below the
// smallest normal value.
inline double UlpOf(double value, DataType dtype) {
  int digits = std::numeric_limits<double>::digits;
  double smallest_normal = std::numeric_limits<double>::min();
  if (dtype == DataType::Float32()) {
    digits = std::numeric_limits<float>::digits;
    smallest_normal = std::numeric_limits<float>::min();
  } else if (dtype == DataType::Float16()) {
    digits = 11;
    smallest_normal = std::ldexp(1.0, -14);
  }
  int exponent = 0;
  std::frexp(std::max(std::abs(value), smallest_normal), &exponent);
  return std::ldexp(1.0, exponent - digits);
}

// How far `actual` is from `expected`, in ulps of `dtype` at `expected`; 0
// when they are equal or both NaN, infinite when only one is NaN or infinite.
inline double UlpDistance(double actual, double expected, DataType dtype) {
  if (actual == expected || (std::isnan(actual) && std::isnan(expected))) return 0;
  if (!std::isfinite(actual) || !std::isfinite(expected)) {
    return std::numeric_limits<double>::infinity();
  }
  return std::abs(actual - expected) / UlpOf(expected, dtype);
}

// How far a built-in kernel's float outputs may be from the reference's.
// Integer and bool outputs, and float ones under the default, compare
// exactly (NaN equal to NaN).
struct Tolerance {
  // For a kernel that approximates a function which the reference rounds
  // once: UlpDistance at most this. The bound comes from the documented
  // accuracy of the approximation (elemwise_test.cc, UlpBound).
  double ulps = 0;
  // For a kernel that sums in another order or precision than the
  // reference: |actual - expected| <= relative * (1 + |expected|).
  double relative = 0;
};

// Empty when `actual` equals `expected` (same shape and dtype, values within
// `tolerance`); otherwise what differs, with the first differing element.
inline std::string Difference(const Tensor& actual, const Tensor& expected, Tolerance tolerance) {
  if (actual->dtype() != expected->dtype() || actual->shape() != expected->shape()) {
    return "got " + actual->TypeString() + ", expected " + expected->TypeString();
  }
  const DataType dtype = expected->dtype();
  int64_t mismatches = 0;
  std::ostringstream first;
  for (int64_t i = 0; i < expected->numel(); ++i) {
    const double a = actual->GetAsDouble(i);
    const double e = expected->GetAsDouble(i);
    const double ulps = dtype.is_float() ? UlpDistance(a, e, dtype) : 0;
    const bool equal =
        dtype.is_float()
            ? ulps <= tolerance.ulps || std::abs(a - e) <= tolerance.relative * (1 + std::abs(e))
            : actual->GetAsInt64(i) == expected->GetAsInt64(i);
    if (equal) continue;
    if (mismatches++ == 0) {
      first << std::setprecision(17) << "element " << i << " is " << a << ", expected " << e;
      if (dtype.is_float()) first << " (" << ulps << " ulps apart)";
    }
  }
  if (mismatches == 0) return "";
  return std::to_string(mismatches) + " of " + std::to_string(expected->numel()) +
         " elements differ; " + first.str();
}

// Runs `op` on `args` (tensors, or tuples of tensors for ops that take
// tuples) with the reference kernel and with the built-in one, and expects
// the same outputs, within `tolerance` for floats.
inline void ExpectBuiltinMatchesReference(const std::string& op,
                                          const std::vector<Ref<Object>>& args,
                                          const Attrs& attrs = {}, Tolerance tolerance = {}) {
  SCOPED_TRACE(op);
  const nimble::op::OpDef* def = nimble::op::OpRegistry::Global().Find(op);
  ASSERT_NE(def, nullptr) << "no operator " << op;
  const Attrs normalized = nimble::op::NormalizeAttrs(*def, attrs);
  const std::vector<Tensor> expected = Flatten({nimble::op::InvokeOp(*def, args, normalized)});
  std::vector<Tensor> actual;
  try {
    actual = RunBuiltin(op, normalized, Flatten(args), expected);
  } catch (const Error& error) {
    FAIL() << "the built-in kernel failed: " << error.what();
  }
  ASSERT_EQ(actual.size(), expected.size());
  std::string inputs;
  for (const Tensor& input : Flatten(args)) inputs += " " + input->TypeString();
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(Difference(actual[i], expected[i], tolerance), "")
        << "output " << i << " for inputs" << inputs;
  }
}

// Expects each op to have a runtime half with a kernel and a shape function
// of the given mode, and the compiler's definition to carry the same mode.
inline void ExpectRuntimeHalves(const std::vector<std::pair<std::string, ShapeFuncMode>>& ops) {
  for (const auto& [name, mode] : ops) {
    const OpKernelDef* def = OpKernelRegistry::Global().Find(name);
    ASSERT_NE(def, nullptr) << name;
    EXPECT_TRUE(def->kernel) << name;
    EXPECT_TRUE(def->shape_func) << name;
    EXPECT_EQ(def->shape_mode, mode) << name;
    EXPECT_EQ(nimble::op::OpRegistry::Global().Find(name)->shape_mode, mode) << name;
  }
}

}  // namespace nimble::vm::testing
