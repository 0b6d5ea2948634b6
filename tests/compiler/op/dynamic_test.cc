#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "tests/compiler/op/op_test_util.h"

namespace nimble::op::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsNan;

ir::Attrs DTypeAttrs(DataType dtype) {
  return MakeAttrs({{"dtype", dtype}});
}

TEST(ShapeOf, TypeHasTheRankEvenForAnyDims) {
  EXPECT_EQ(TypeOf("shape_of", {TensorOf({2, 3}, kF32)}), "Tensor[(2,), int32]");
  EXPECT_EQ(TypeOf("shape_of", {TensorOf({kAny, 3}, kF32)}), "Tensor[(2,), int32]");
  EXPECT_EQ(TypeOf("shape_of", {TensorOf({}, kF32)}, DTypeAttrs(DataType::Int64())),
            "Tensor[(0,), int64]");
}

TEST(ShapeOf, ValuesAreTheRunTimeShape) {
  Tensor shape = Invoke("shape_of", {TensorNode::Empty({5, 3}, kF32)});
  EXPECT_EQ(shape->TypeString(), "Tensor[(2,), int32]");
  EXPECT_THAT(Values(shape), ElementsAre(5, 3));

  Tensor wide = Invoke("shape_of", {TensorNode::Empty({4, 0, 7}, DataType::Bool())},
                       DTypeAttrs(DataType::Int64()));
  EXPECT_EQ(wide->TypeString(), "Tensor[(3,), int64]");
  EXPECT_THAT(Values(wide), ElementsAre(4, 0, 7));

  EXPECT_EQ(Invoke("shape_of", {TensorNode::Scalar(kF32, 1.0)})->shape(), (Shape{0}));
}

TEST(NdarraySize, CountsElements) {
  EXPECT_EQ(TypeOf("ndarray_size", {TensorOf({kAny, 3}, kF32)}), "Tensor[(), int32]");
  EXPECT_EQ(TypeOf("ndarray_size", {TensorOf({2}, kF32)}, DTypeAttrs(DataType::Int64())),
            "Tensor[(), int64]");
  Tensor size = Invoke("ndarray_size", {TensorNode::Empty({5, 3}, DataType::Int8())});
  EXPECT_EQ(size->TypeString(), "Tensor[(), int32]");
  EXPECT_THAT(Values(size), ElementsAre(15));
  EXPECT_THAT(Values(Invoke("ndarray_size", {TensorNode::Scalar(kF32, 2.0)})), ElementsAre(1));
  EXPECT_THAT(Values(Invoke("ndarray_size", {TensorNode::Empty({3, 0}, kF32)})), ElementsAre(0));
}

TEST(Unique, TypeIsAnyLength) {
  EXPECT_EQ(TypeOf("unique", {TensorOf({6}, kF32)}), "Tensor[(?,), float32]");
  EXPECT_EQ(TypeOf("unique", {TensorOf({kAny}, DataType::Int64())}), "Tensor[(?,), int64]");
}

TEST(Unique, SortedDistinctValues) {
  Tensor floats = Invoke("unique", {TensorFrom<float>({7}, kF32, {3, 1, 3, 2, 1, -4, 2})});
  EXPECT_EQ(floats->TypeString(), "Tensor[(4,), float32]");
  EXPECT_THAT(Values(floats), ElementsAre(-4, 1, 2, 3));

  Tensor same = Invoke("unique", {TensorFrom<int64_t>({4}, DataType::Int64(), {9, 9, 9, 9})});
  EXPECT_EQ(same->TypeString(), "Tensor[(1,), int64]");
  EXPECT_THAT(Values(same), ElementsAre(9));

  Tensor halves =
      Invoke("unique", {TensorFrom<float>({4}, DataType::Float16(), {0.5, -2, 0.5, 1})});
  EXPECT_THAT(Values(halves), ElementsAre(-2, 0.5, 1));

  Tensor bools = Invoke("unique", {TensorFrom<int>({3}, DataType::Bool(), {1, 0, 1})});
  EXPECT_THAT(Values(bools), ElementsAre(0, 1));

  EXPECT_EQ(Invoke("unique", {TensorNode::Empty({0}, kF32)})->shape(), (Shape{0}));
}

TEST(Unique, NansSortLastAndCollapse) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor result = Invoke("unique", {TensorFrom<float>({4}, kF32, {nan, 1, nan, 0})});
  ASSERT_EQ(result->shape(), (Shape{3}));
  EXPECT_THAT(Values(result), ElementsAre(0, 1, IsNan()));
}

TEST(Unique, RequiresOneDimensionalData) {
  EXPECT_THAT(ErrorOf([] {
                Invoke("unique", {TensorNode::Empty({2, 3}, kF32)});
              }),
              HasSubstr("unique: data must be 1-D, got Tensor[(2, 3), float32]"));
  EXPECT_THAT(ErrorOf([] { TypeOf("unique", {TensorOf({}, kF32)}); }),
              HasSubstr("unique: data must be 1-D, got Tensor[(), float32]"));
}

TEST(ArgWhere, TypeHasAnyRowsAndTheRank) {
  EXPECT_EQ(TypeOf("argwhere", {TensorOf({kAny, 3}, DataType::Bool())}), "Tensor[(?, 2), int32]");
  EXPECT_EQ(TypeOf("argwhere", {TensorOf({4}, kF32)}), "Tensor[(?, 1), int32]");
}

TEST(ArgWhere, CoordinatesOfTrueElementsInRowMajorOrder) {
  Tensor result =
      Invoke("argwhere", {TensorFrom<int>({2, 3}, DataType::Bool(), {1, 0, 1, 0, 0, 1})});
  EXPECT_EQ(result->TypeString(), "Tensor[(3, 2), int32]");
  EXPECT_THAT(Values(result), ElementsAre(0, 0, 0, 2, 1, 2));
}

TEST(ArgWhere, FloatInputsTreatNegativeZeroAsZeroAndNanAsTrue) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor floats =
      Invoke("argwhere", {TensorFrom<float>({5}, kF32, {0.0f, -0.0f, 2.5f, nan, -1.0f})});
  EXPECT_EQ(floats->TypeString(), "Tensor[(3, 1), int32]");
  EXPECT_THAT(Values(floats), ElementsAre(2, 3, 4));

  Tensor halves = Invoke(
      "argwhere", {TensorFrom<float>({2, 2}, DataType::Float16(), {-0.0f, 0.5f, 0.0f, 0.0f})});
  EXPECT_THAT(Values(halves), ElementsAre(0, 1));
}

TEST(ArgWhere, AllFalseGivesNoRows) {
  Tensor result = Invoke("argwhere", {TensorNode::Empty({2, 2, 2}, DataType::Bool())});
  EXPECT_EQ(result->shape(), (Shape{0, 3}));
  EXPECT_EQ(Invoke("argwhere", {TensorNode::Empty({0, 4}, kF32)})->shape(), (Shape{0, 2}));
}

TEST(ArgWhere, ScalarCondition) {
  EXPECT_EQ(Invoke("argwhere", {TensorNode::Scalar(kF32, 3.0)})->shape(), (Shape{1, 0}));
  EXPECT_EQ(Invoke("argwhere", {TensorNode::Scalar(kF32, 0.0)})->shape(), (Shape{0, 0}));
}

TEST(ArgWhere, ResultIsAViewOfTheUpperBoundAllocation) {
  const Tensor condition =
      TensorFrom<int>({3, 4}, DataType::Int32(), {0, 0, 5, 0, 0, 0, 0, 0, 1, 0, 0, 0});
  const std::vector<Shape> bound =
      Def("argwhere").shape_func(std::vector<Shape>{condition->shape()}, {}, {});
  ASSERT_EQ(bound, (std::vector<Shape>{{12, 2}}));

  Tensor result = Invoke("argwhere", {condition});
  EXPECT_EQ(result->shape(), (Shape{2, 2}));
  EXPECT_THAT(Values(result), ElementsAre(0, 2, 2, 0));
  EXPECT_GE(result->storage()->size(), static_cast<size_t>(12 * 2 * sizeof(int32_t)));
  EXPECT_GT(result->storage()->size(), result->nbytes());
}

TEST(ArgWhere, KernelRejectsATooSmallOutput) {
  std::vector<Tensor> outputs = {TensorNode::Empty({1, 1}, DataType::Int32())};
  const std::vector<Tensor> inputs = {TensorFrom<float>({3}, kF32, {1, 1, 1})};
  EXPECT_THAT(ErrorOf([&] { Def("argwhere").kernel(inputs, outputs, {}); }),
              HasSubstr("argwhere: output of shape (1, 1) is smaller than the bound (3, 1)"));
}

TEST(DynamicOps, RegisteredShapeModesAndPatterns) {
  EXPECT_EQ(Def("shape_of").shape_mode, ShapeFuncMode::kDataIndependent);
  EXPECT_EQ(Def("ndarray_size").shape_mode, ShapeFuncMode::kDataIndependent);
  EXPECT_EQ(Def("unique").shape_mode, ShapeFuncMode::kDataDependent);
  EXPECT_EQ(Def("argwhere").shape_mode, ShapeFuncMode::kUpperBound);
  for (const std::string name : {"shape_of", "ndarray_size", "unique", "argwhere"}) {
    EXPECT_EQ(Def(name).pattern, OpPattern::kOpaque) << name;
    EXPECT_EQ(Def(name).min_inputs, 1) << name;
    EXPECT_EQ(Def(name).max_inputs, 1) << name;
    EXPECT_FALSE(Def(name).description.empty()) << name;
  }
}

}  // namespace
}  // namespace nimble::op::testing
