// The nn family's built-in kernels and shape functions (nimble/vm/kernels/nn.cc,
// and dense.cc's matrix products) against the compiler's reference kernels,
// over odd sizes, every axis, attribute variants, dtypes and inputs large
// enough for the thread pool; and their errors through the kernel ABI.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "tests/error_of.h"
#include "tests/vm/kernels/kernel_test_util.h"

namespace nimble::vm::testing {
namespace {

using ::testing::HasSubstr;

const DataType kF32 = DataType::Float32();

Attrs MakeAttrs(std::vector<std::pair<std::string, AttrValue>> entries) {
  Attrs attrs;
  for (auto& [name, value] : entries) attrs.Set(name, std::move(value));
  return attrs;
}

std::string Describe(const Shape& shape, const Attrs& attrs) {
  std::string text = ShapeToString(shape);
  for (const auto& [name, value] : attrs.entries()) {
    text += " " + name + "=" + AttrValueToString(value);
  }
  return text;
}

// Every axis of a tensor of rank `rank`, negative ones included.
std::vector<int64_t> AllAxes(int64_t rank) {
  std::vector<int64_t> axes;
  for (int64_t axis = -rank; axis < rank; ++axis) axes.push_back(axis);
  return axes;
}

const std::vector<DataType>& FloatDTypes() {
  static const std::vector<DataType> dtypes = {kF32, DataType::Float64(), DataType::Float16()};
  return dtypes;
}

// The built-in kernels compute in float32 in their own order (softmax with
// vector_math's exponential) where the reference kernels compute in double;
// float16 results may also differ by one rounding.
Tolerance ToleranceFor(DataType dtype) {
  return {.relative = dtype == DataType::Float16() ? 2e-3 : 1e-5};
}

// The ops of compiler/op/nn.cc (nn.relu is an elementwise op, unary.cc).
TEST(NnKernelsTest, EveryNnOpHasARuntimeDefinitionAndKernel) {
  for (const char* name :
       {"nn.batch_matmul", "nn.bias_add", "nn.dense", "nn.layer_norm", "nn.softmax"}) {
    SCOPED_TRACE(name);
    ASSERT_NE(nimble::op::OpRegistry::Global().Find(name), nullptr);
    const OpKernelDef* def = OpKernelRegistry::Global().Find(name);
    ASSERT_NE(def, nullptr);
    EXPECT_TRUE(def->shape_func);
    EXPECT_EQ(def->shape_mode, ShapeFuncMode::kDataIndependent);
    // The matrix products' kernels are dense.cc's, registered by name.
    EXPECT_EQ(static_cast<bool>(def->kernel),
              std::string(name) != "nn.dense" && std::string(name) != "nn.batch_matmul");
    EXPECT_TRUE(KernelRegistry::Global().Contains(name));
    EXPECT_TRUE(KernelRegistry::Global().Contains(ShapeFuncKernelName(name)));
  }
}

// ---------------------------------------------------------------------------
// nn.dense and nn.batch_matmul (dense.cc's kernels, float32)

struct DenseCase {
  Shape data;
  int64_t units;
};

TEST(NnKernelsTest, DenseMatchesReference) {
  const std::vector<DenseCase> cases =
      {
          {{1, 13}, 7},   {{3, 257}, 65},   {{2, 3, 7}, 5}, {{7}, 3},
          {{13, 1}, 257}, {{0, 5}, 4},      {{3, 0}, 4},    {{3, 5}, 0},
          {{1, 1, 1}, 1}, {{512, 96}, 480},  // 245,760 outputs: the parallel path
      };
  std::mt19937 rng(1);
  for (const DenseCase& c : cases) {
    Shape weight_shape = {c.units, c.data.back()};
    const Tensor data = RandomTensor(c.data, kF32, rng);
    const Tensor weight = RandomTensor(weight_shape, kF32, rng);
    for (const Attrs& attrs : {Attrs(), MakeAttrs({{"units", c.units}})}) {
      SCOPED_TRACE(Describe(c.data, attrs) + " units " + std::to_string(c.units));
      ExpectBuiltinMatchesReference("nn.dense", {data, weight}, attrs, {.relative = 1e-4});
    }
  }
}

struct BatchMatMulCase {
  int64_t batch_x, batch_y, m, n, k;
};

TEST(NnKernelsTest, BatchMatMulMatchesReferenceForEveryTransposeAndBroadcast) {
  const std::vector<BatchMatMulCase> cases = {
      {1, 1, 13, 5, 7},     {3, 3, 257, 13, 65}, {3, 1, 7, 13, 65}, {1, 4, 3, 5, 7},
      {2, 2, 1, 1, 1},      {2, 2, 0, 3, 4},     {2, 2, 3, 4, 0},   {1, 1, 1, 257, 3},
      {4, 4, 256, 256, 32},  // 262,144 outputs: the parallel path
  };
  std::mt19937 rng(2);
  for (const BatchMatMulCase& c : cases) {
    for (bool transpose_a : {false, true}) {
      for (bool transpose_b : {false, true}) {
        const Shape x_shape = transpose_a ? Shape{c.batch_x, c.k, c.m} : Shape{c.batch_x, c.m, c.k};
        const Shape y_shape = transpose_b ? Shape{c.batch_y, c.n, c.k} : Shape{c.batch_y, c.k, c.n};
        const Attrs attrs = MakeAttrs({{"transpose_a", transpose_a}, {"transpose_b", transpose_b}});
        SCOPED_TRACE(Describe(x_shape, attrs) + " y " + ShapeToString(y_shape));
        ExpectBuiltinMatchesReference(
            "nn.batch_matmul", {RandomTensor(x_shape, kF32, rng), RandomTensor(y_shape, kF32, rng)},
            attrs, {.relative = 1e-4});
      }
    }
  }
}

// ---------------------------------------------------------------------------
// nn.bias_add

struct AxisCase {
  Shape shape;
  std::vector<int64_t> axes;  // empty: every axis
};

// The bias_add, softmax and layer_norm shapes: odd sizes, size-1 and size-0
// dimensions, and three inputs of over 200K elements for the parallel paths
// (contiguous rows, and lines of stride > 1 with few and with many of them).
const std::vector<AxisCase>& AxisCases() {
  static const std::vector<AxisCase> cases = {
      {{7}, {}},          {{1, 13}, {}},       {{3, 257}, {}},      {{2, 3, 5}, {}},
      {{4, 1, 6}, {}},    {{1, 13, 7, 3}, {}}, {{3, 0, 2}, {}},     {{13, 600}, {0}},
      {{700, 301}, {-1}}, {{300, 700}, {0}},   {{64, 65, 64}, {1}},
  };
  return cases;
}

std::vector<int64_t> AxesOf(const AxisCase& c) {
  return c.axes.empty() ? AllAxes(static_cast<int64_t>(c.shape.size())) : c.axes;
}

TEST(NnKernelsTest, BiasAddMatchesReferenceOnEveryAxis) {
  std::mt19937 rng(3);
  for (const AxisCase& c : AxisCases()) {
    const Tensor data = RandomTensor(c.shape, kF32, rng);
    for (int64_t axis : AxesOf(c)) {
      const int64_t normalized = axis < 0 ? axis + static_cast<int64_t>(c.shape.size()) : axis;
      const Attrs attrs = MakeAttrs({{"axis", axis}});
      SCOPED_TRACE(Describe(c.shape, attrs));
      ExpectBuiltinMatchesReference("nn.bias_add",
                                    {data, RandomTensor({c.shape[normalized]}, kF32, rng)}, attrs);
    }
  }
}

TEST(NnKernelsTest, BiasAddMatchesReferenceForEveryDType) {
  std::mt19937 rng(4);
  for (const char* name :
       {"float32", "float64", "float16", "int8", "int32", "int64", "uint8", "bool"}) {
    const DataType dtype = DataType::Parse(name);
    for (int64_t axis : {0, 1, -1}) {
      const Shape shape = {3, 5, 7};
      const Attrs attrs = MakeAttrs({{"axis", axis}});
      SCOPED_TRACE(std::string(name) + " " + Describe(shape, attrs));
      // Integers span their type's range, so that sums wrap around.
      const double low = dtype == DataType::Parse("uint8") ? 0 : -128;
      ExpectBuiltinMatchesReference(
          "nn.bias_add",
          {RandomTensor(shape, dtype, rng, low, low + 256),
           RandomTensor({shape[axis < 0 ? axis + 3 : axis]}, dtype, rng, low, low + 256)},
          attrs);
    }
  }
}

// ---------------------------------------------------------------------------
// nn.softmax

TEST(NnKernelsTest, SoftmaxMatchesReferenceOnEveryAxisAndDType) {
  std::mt19937 rng(5);
  for (const DataType dtype : FloatDTypes()) {
    for (const AxisCase& c : AxisCases()) {
      const Tensor data = RandomTensor(c.shape, dtype, rng, -8, 8);
      for (int64_t axis : AxesOf(c)) {
        const Attrs attrs = MakeAttrs({{"axis", axis}});
        SCOPED_TRACE(dtype.name() + " " + Describe(c.shape, attrs));
        ExpectBuiltinMatchesReference("nn.softmax", {data}, attrs, ToleranceFor(dtype));
      }
    }
  }
}

// Inputs whose exp overflows unless the line's maximum is subtracted first,
// and lines whose smaller elements underflow to 0.
TEST(NnKernelsTest, SoftmaxOfLargeValuesIsFiniteAndSumsToOne) {
  std::mt19937 rng(6);
  const std::vector<std::pair<double, double>> ranges = {{500, 1500}, {-1500, -500}, {-1e4, 1e4}};
  for (const auto& [low, high] : ranges) {
    for (int64_t axis : {-1, 0}) {
      const Shape shape = {9, 257};
      const Attrs attrs = MakeAttrs({{"axis", axis}});
      SCOPED_TRACE(Describe(shape, attrs) + " values in [" + std::to_string(low) + ", " +
                   std::to_string(high) + ")");
      const Tensor data = RandomTensor(shape, kF32, rng, low, high);
      ExpectBuiltinMatchesReference("nn.softmax", {data}, attrs, ToleranceFor(kF32));
      const Tensor out = RunBuiltin("nn.softmax", attrs, {data}, {data})[0];
      const int64_t lines = axis == 0 ? shape[1] : shape[0];
      const int64_t extent = shape[axis == 0 ? 0 : 1];
      for (int64_t line = 0; line < lines; ++line) {
        double sum = 0;
        for (int64_t j = 0; j < extent; ++j) {
          const double value =
              out->GetAsDouble(axis == 0 ? j * shape[1] + line : line * shape[1] + j);
          ASSERT_TRUE(std::isfinite(value)) << "line " << line << " element " << j;
          sum += value;
        }
        EXPECT_NEAR(sum, 1.0, 1e-5) << "line " << line;
      }
    }
  }
}

// ---------------------------------------------------------------------------
// nn.layer_norm

TEST(NnKernelsTest, LayerNormMatchesReferenceOnEveryAxisAndDType) {
  std::mt19937 rng(7);
  for (const DataType dtype : FloatDTypes()) {
    for (const AxisCase& c : AxisCases()) {
      const Tensor data = RandomTensor(c.shape, dtype, rng);
      for (int64_t axis : AxesOf(c)) {
        const int64_t channels =
            c.shape[axis < 0 ? axis + static_cast<int64_t>(c.shape.size()) : axis];
        const Attrs attrs = MakeAttrs({{"axis", axis}});
        SCOPED_TRACE(dtype.name() + " " + Describe(c.shape, attrs));
        ExpectBuiltinMatchesReference(
            "nn.layer_norm",
            {data, RandomTensor({channels}, dtype, rng), RandomTensor({channels}, dtype, rng)},
            attrs, ToleranceFor(dtype));
      }
    }
  }
}

TEST(NnKernelsTest, LayerNormMatchesReferenceForEveryFlagAndEpsilon) {
  std::mt19937 rng(8);
  // The second range has a mean large against its spread.
  const std::vector<std::pair<double, double>> ranges = {{-2, 2}, {1000, 1004}};
  for (const auto& [low, high] : ranges) {
    for (const Shape& shape : {Shape{5, 257}, Shape{257, 5}}) {
      const Tensor data = RandomTensor(shape, kF32, rng, low, high);
      for (int64_t axis : {-1, 0}) {
        const int64_t channels = shape[axis == 0 ? 0 : 1];
        const Tensor gamma = RandomTensor({channels}, kF32, rng);
        const Tensor beta = RandomTensor({channels}, kF32, rng);
        for (bool center : {false, true}) {
          for (bool scale : {false, true}) {
            for (double epsilon : {1e-5, 0.0, 0.5}) {
              const Attrs attrs = MakeAttrs(
                  {{"axis", axis}, {"center", center}, {"scale", scale}, {"epsilon", epsilon}});
              SCOPED_TRACE(Describe(shape, attrs) + " values from " + std::to_string(low));
              ExpectBuiltinMatchesReference("nn.layer_norm", {data, gamma, beta}, attrs,
                                            ToleranceFor(kF32));
            }
          }
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------
// Errors through the kernel ABI

// Calls the registry's kernel `name` on these arguments; the error's message.
std::string KernelError(const std::string& name, const Attrs& attrs,
                        const std::vector<Tensor>& arguments) {
  return ErrorOf([&] { CallKernel(name, attrs, arguments); });
}

Tensor Zeros(const Shape& shape, DataType dtype = kF32) {
  return TensorNode::Empty(shape, dtype);
}

TEST(NnKernelsTest, KernelErrorsThroughTheAbi) {
  const Attrs last = MakeAttrs({{"axis", int64_t{-1}}});
  EXPECT_THAT(KernelError("nn.softmax", last,
                          {Zeros({2, 3}, DataType::Int32()), Zeros({2, 3}, DataType::Int32())}),
              HasSubstr("does not support dtype int32"));
  EXPECT_THAT(
      KernelError("nn.softmax", MakeAttrs({{"axis", int64_t{2}}}), {Zeros({2, 3}), Zeros({2, 3})}),
      HasSubstr("nn.softmax: axis 2 is out of range for rank 2"));
  EXPECT_THAT(KernelError("nn.softmax", last, {Zeros({2, 3})}), HasSubstr("expected 1 inputs"));
  EXPECT_THAT(KernelError("nn.softmax", last, {Zeros({2, 3}), Zeros({3, 2})}),
              HasSubstr("output shape (3, 2) differs from data shape (2, 3)"));
  EXPECT_THAT(KernelError("nn.softmax", last, {Zeros({2, 3}), Zeros({2, 3}, DataType::Float64())}),
              HasSubstr("argument 1 is float64 but data is float32"));
  EXPECT_THAT(KernelError("nn.bias_add", MakeAttrs({{"axis", int64_t{1}}}),
                          {Zeros({2, 3}), Zeros({4}), Zeros({2, 3})}),
              HasSubstr("nn.bias_add: bias shape (4,) does not match axis 1"));
  EXPECT_THAT(
      KernelError(
          "nn.layer_norm",
          MakeAttrs({{"axis", int64_t{0}}, {"epsilon", 1e-5}, {"center", true}, {"scale", true}}),
          {Zeros({2, 3}), Zeros({2}), Zeros({3}), Zeros({2, 3})}),
      HasSubstr("nn.layer_norm: beta shape (3,) does not match axis 0"));
  // dense.cc's built-in matrix products are float32 only.
  EXPECT_THAT(KernelError("nn.dense", {},
                          {Zeros({2, 3}, DataType::Float64()), Zeros({4, 3}, DataType::Float64()),
                           Zeros({2, 4}, DataType::Float64())}),
              HasSubstr("must be float32"));
}

TEST(NnKernelsTest, ShapeFunctionErrorsThroughTheAbi) {
  const auto shape_error = [](const std::string& op, const Attrs& attrs,
                              const std::vector<Shape>& shapes) {
    std::vector<Tensor> arguments;
    for (const Shape& shape : shapes) {
      arguments.push_back(TensorNode::FromVector<int64_t>({static_cast<int64_t>(shape.size())},
                                                          DataType::Int64(), shape));
    }
    arguments.push_back(Zeros({2}, DataType::Int64()));
    return KernelError(ShapeFuncKernelName(op), attrs, arguments);
  };
  const Attrs no_transpose = MakeAttrs({{"transpose_a", false}, {"transpose_b", true}});
  EXPECT_THAT(shape_error("nn.dense", {}, {{2, 6}, {5, 7}}),
              HasSubstr("nn.dense: reduction dimensions differ at run time: 6 vs 7"));
  EXPECT_THAT(shape_error("nn.dense", {}, {{}, {5, 7}}), HasSubstr("data must have rank >= 1"));
  EXPECT_THAT(shape_error("nn.dense", {}, {{2, 7}, {7}}), HasSubstr("weight must have rank 2"));
  EXPECT_THAT(shape_error("nn.batch_matmul", no_transpose, {{2, 3, 4}, {3, 5, 4}}),
              HasSubstr("batch dimensions differ at run time"));
  EXPECT_THAT(shape_error("nn.batch_matmul", no_transpose, {{3, 4}, {2, 5, 4}}),
              HasSubstr("x must have rank 3"));
  EXPECT_THAT(shape_error("nn.bias_add", MakeAttrs({{"axis", int64_t{1}}}), {{2, 3}, {}}),
              HasSubstr("bias shape () does not match axis 1"));
  EXPECT_THAT(shape_error("nn.softmax", MakeAttrs({{"axis", int64_t{-3}}}), {{2, 3}}),
              HasSubstr("axis -3 is out of range for rank 2"));
}

}  // namespace
}  // namespace nimble::vm::testing
