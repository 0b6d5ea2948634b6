// The built-in kernels and shape functions of shape_of, ndarray_size, unique
// and argwhere against the compiler's reference kernels, for every dtype, and
// their errors through the kernel ABI.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "tests/error_of.h"
#include "tests/vm/kernels/kernel_test_util.h"

namespace nimble::vm::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsNan;

const DataType kUInt8(DataType::Code::kUInt, 8);
const std::vector<DataType> kAllDTypes = {
    DataType::Bool(),    DataType::Int8(),   kUInt8,
    DataType::Int32(),   DataType::Int64(),  DataType::Float16(),
    DataType::Float32(), DataType::Float64()};

Attrs DTypeAttrs(DataType dtype) {
  Attrs attrs;
  attrs.Set("dtype", dtype);
  return attrs;
}

Tensor Builtin(const std::string& op, const Tensor& input, const Tensor& like) {
  return RunBuiltin(op, {}, {input}, {like})[0];
}

TEST(DynamicKernels, EveryOpHasARuntimeKernel) {
  const std::vector<std::pair<std::string, ShapeFuncMode>> ops = {
      {"shape_of", ShapeFuncMode::kDataIndependent},
      {"ndarray_size", ShapeFuncMode::kDataIndependent},
      {"unique", ShapeFuncMode::kDataDependent},
      {"argwhere", ShapeFuncMode::kUpperBound}};
  ExpectRuntimeHalves(ops);
}

TEST(DynamicKernels, ShapeOfAndNdarraySizeInEveryDType) {
  std::mt19937 rng(1);
  const std::vector<Shape> shapes = {{},     {1},       {3},           {7, 13},
                                     {0, 5}, {2, 0, 3}, {3, 1, 7, 13}, {257}};
  for (DataType dtype : kAllDTypes) {
    for (const Shape& shape : shapes) {
      const Tensor data = RandomTensor(shape, dtype, rng);
      ExpectBuiltinMatchesReference("shape_of", {data});
      ExpectBuiltinMatchesReference("ndarray_size", {data});
      // The dtype attribute: every dtype, the input's included.
      ExpectBuiltinMatchesReference("shape_of", {data}, DTypeAttrs(dtype));
      ExpectBuiltinMatchesReference("ndarray_size", {data}, DTypeAttrs(dtype));
    }
  }
  // Sizes past int32 and int8 convert as ConvertElement does (the shape, not the data, is read).
  const Tensor wide = TensorNode::Empty({300, 1000}, DataType::Bool());
  ExpectBuiltinMatchesReference("shape_of", {wide}, DTypeAttrs(DataType::Int8()));
  ExpectBuiltinMatchesReference("ndarray_size", {wide}, DTypeAttrs(DataType::Int8()));
  const Tensor sizes = Builtin("shape_of", wide, TensorNode::Empty({2}, DataType::Int64()));
  EXPECT_EQ(sizes->data<int64_t>()[0], 300);
  EXPECT_EQ(sizes->data<int64_t>()[1], 1000);
}

// A 1-D tensor with many repeated values: small integers (halves for floats),
// and for floats NaNs and both zeros.
Tensor WithDuplicates(int64_t size, DataType dtype, std::mt19937& rng, int distinct) {
  Tensor tensor = RandomTensor({size}, dtype, rng, dtype == kUInt8 ? 0 : -distinct, distinct);
  std::uniform_int_distribution<int> special(0, 15);
  for (int64_t i = 0; dtype.is_float() && i < size; ++i) {
    const double value = std::floor(tensor->GetAsDouble(i) * 2) / 2;
    switch (special(rng)) {
      case 0:
        tensor->SetFromDouble(i, std::numeric_limits<double>::quiet_NaN());
        break;
      case 1:
        tensor->SetFromDouble(i, -0.0);
        break;
      default:
        tensor->SetFromDouble(i, value);
    }
  }
  return tensor;
}

TEST(DynamicKernels, UniqueInEveryDType) {
  std::mt19937 rng(2);
  for (DataType dtype : kAllDTypes) {
    for (int64_t size : {0, 1, 3, 7, 13, 257, 4099}) {
      SCOPED_TRACE(dtype.name() + " of " + std::to_string(size));
      ExpectBuiltinMatchesReference("unique", {WithDuplicates(size, dtype, rng, 5)});
      ExpectBuiltinMatchesReference("unique", {RandomTensor({size}, dtype, rng, 0, 100)});
    }
  }
  // Large: mostly distinct values, and many duplicates.
  ExpectBuiltinMatchesReference("unique",
                                {RandomTensor({300001}, DataType::Float32(), rng, -1, 1)});
  ExpectBuiltinMatchesReference("unique", {WithDuplicates(300001, DataType::Float32(), rng, 500)});
  ExpectBuiltinMatchesReference("unique", {WithDuplicates(300001, DataType::Int64(), rng, 5000)});
}

TEST(DynamicKernels, UniqueValues) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Tensor floats =
      TensorNode::FromVector<float>({6}, DataType::Float32(), {nan, 1, nan, -0.0f, 0.0f, -3});
  const Tensor sorted = Builtin("unique", floats, floats);
  ASSERT_EQ(sorted->shape(), (Shape{4}));
  EXPECT_THAT(std::vector<float>(sorted->data<float>(), sorted->data<float>() + 4),
              ElementsAre(-3, 0, 1, IsNan()));

  // 1-byte dtypes take a table of values: both ends of int8 and uint8.
  const Tensor int8 = TensorNode::FromVector<int>({5}, DataType::Int8(), {127, -128, 0, 127, -1});
  const Tensor int8_sorted = Builtin("unique", int8, int8);
  EXPECT_THAT(std::vector<int8_t>(int8_sorted->data<int8_t>(), int8_sorted->data<int8_t>() + 4),
              ElementsAre(-128, -1, 0, 127));
  const Tensor uint8 = TensorNode::FromVector<int>({4}, kUInt8, {255, 0, 128, 255});
  ExpectBuiltinMatchesReference("unique", {uint8});
  EXPECT_EQ(Builtin("unique", uint8, uint8)->shape(), (Shape{3}));
}

// A condition of `shape` whose elements are non-zero with probability
// `density`; float non-zeros include NaN and float zeros include -0.
Tensor Condition(const Shape& shape, DataType dtype, double density, std::mt19937& rng) {
  Tensor tensor = TensorNode::Empty(shape, dtype);
  std::bernoulli_distribution nonzero(density);
  std::uniform_int_distribution<int> kind(0, 3);
  for (int64_t i = 0; i < tensor->numel(); ++i) {
    const int k = kind(rng);
    if (!nonzero(rng)) {
      tensor->SetFromDouble(i, dtype.is_float() && k == 0 ? -0.0 : 0.0);
    } else if (dtype.is_float() && k == 0) {
      tensor->SetFromDouble(i, std::numeric_limits<double>::quiet_NaN());
    } else {
      tensor->SetFromDouble(i, k + 1);
    }
  }
  return tensor;
}

TEST(DynamicKernels, ArgWhereOnRanksZeroToFour) {
  std::mt19937 rng(3);
  const std::vector<Shape> shapes = {
      {},        {1},       {7},       {0},          {3, 5},         {13, 1},
      {2, 0, 3}, {3, 4, 5}, {1, 7, 1}, {2, 3, 1, 7}, {1, 257, 3, 2}, {3, 0, 2, 2}};
  for (DataType dtype : kAllDTypes) {
    for (const Shape& shape : shapes) {
      for (double density : {0.0, 1.0, 0.5, 0.05}) {
        SCOPED_TRACE(dtype.name() + " " + ShapeToString(shape) + " density " +
                     std::to_string(density));
        const Tensor condition = Condition(shape, dtype, density, rng);
        ExpectBuiltinMatchesReference("argwhere", {condition});
        const int64_t numel = condition->numel();
        const Tensor like = TensorNode::Empty({0, condition->ndim()}, DataType::Int32());
        const Shape rows = Builtin("argwhere", condition, like)->shape();
        const int64_t expected_rows = density == 1.0 ? numel : 0;
        if (density == 0.0 || density == 1.0) {
          EXPECT_EQ(rows, (Shape{expected_rows, condition->ndim()}));
        }
      }
    }
  }
}

TEST(DynamicKernels, ArgWhereOnLargeConditions) {
  std::mt19937 rng(4);
  // Several blocks, block boundaries inside rows, and a row longer than a block.
  const std::vector<Shape> shapes = {
      {600, 500}, {100, 50, 61}, {3, 100003}, {300001}, {7, 2, 3, 5, 1001}};
  for (const Shape& shape : shapes) {
    for (double density : {0.0, 1.0, 0.5, 0.001}) {
      SCOPED_TRACE(ShapeToString(shape) + " density " + std::to_string(density));
      ExpectBuiltinMatchesReference("argwhere", {Condition(shape, DataType::Bool(), density, rng)});
    }
  }
  ExpectBuiltinMatchesReference("argwhere", {Condition({400, 700}, DataType::Float32(), 0.3, rng)});
  ExpectBuiltinMatchesReference("argwhere", {Condition({400, 700}, DataType::Float16(), 0.3, rng)});
}

TEST(DynamicKernels, ErrorsThroughTheAbi) {
  const Tensor condition = TensorNode::FromVector<float>({3}, DataType::Float32(), {1, 1, 1});
  const Tensor true_shape = TensorNode::Empty({2}, DataType::Int64());
  EXPECT_THAT(ErrorOf([&] {
                CallKernel("argwhere", {},
                           {condition, TensorNode::Empty({1, 1}, DataType::Int32()), true_shape});
              }),
              HasSubstr("argwhere: output of shape (1, 1) is smaller than the bound (3, 1)"));
  EXPECT_THAT(ErrorOf([&] {
                CallKernel("argwhere", {},
                           {condition, TensorNode::Empty({3, 1}, DataType::Int64()), true_shape});
              }),
              HasSubstr("argwhere: expected int32 coordinates"));
  // The true-shape output is missing: the kernel takes the output for it.
  EXPECT_THAT(ErrorOf([&] {
                CallKernel("argwhere", {}, {TensorNode::Empty({3, 1}, DataType::Int32())});
              }),
              HasSubstr("got 1 arguments for 2 outputs"));
  // A dimension past int32 coordinates, through the shape function's ABI.
  const Tensor huge_shape =
      TensorNode::FromVector<int64_t>({2}, DataType::Int64(), {int64_t{1} << 32, 0});
  EXPECT_THAT(ErrorOf([&] {
                CallKernel("shape_func.argwhere", {},
                           {huge_shape, TensorNode::Empty({2}, DataType::Int64())});
              }),
              HasSubstr("has a dimension too large for int32 coordinates"));

  EXPECT_THAT(ErrorOf([] {
                CallKernel("shape_of", {},
                           {TensorNode::Empty({2, 3}, DataType::Float32()),
                            TensorNode::Empty({1}, DataType::Int32())});
              }),
              HasSubstr("output of shape (1,) for 2 values"));

  const Tensor data = TensorNode::FromVector<float>({4}, DataType::Float32(), {2, 1, 2, 3});
  EXPECT_THAT(ErrorOf([&] {
                CallKernel("unique", {}, {data, TensorNode::Empty({2}, DataType::Float32())});
              }),
              HasSubstr("unique: output of shape (2,) for 3 distinct values of input shape (4,)"));
  EXPECT_THAT(ErrorOf([&] {
                CallKernel("unique", {}, {data, TensorNode::Empty({3}, DataType::Int32())});
              }),
              HasSubstr("unique: output of dtype int32 for data of dtype float32"));
}

}  // namespace
}  // namespace nimble::vm::testing
