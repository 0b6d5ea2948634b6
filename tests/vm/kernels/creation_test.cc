// The built-in kernels and shape functions of the creation operators (zeros,
// ones, full, their _like and dyn. forms, arange) against the compiler's
// reference kernels, for every dtype, and their errors through the kernel ABI.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

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

const std::vector<DataType> kAllDTypes = {
    DataType::Bool(),    DataType::Int8(),   DataType(DataType::Code::kUInt, 8),
    DataType::Int32(),   DataType::Int64(),  DataType::Float16(),
    DataType::Float32(), DataType::Float64()};

// Odd sizes, rank 0, size-0 dimensions, and one shape above 200K elements
// (the parallel path).
const std::vector<Shape> kShapes = {{},        {1},           {3},   {7, 13},   {0, 5},
                                    {2, 0, 3}, {3, 1, 7, 13}, {257}, {513, 512}};

Attrs MakeAttrs(std::vector<std::pair<std::string, AttrValue>> entries) {
  Attrs attrs;
  for (auto& [name, value] : entries) attrs.Set(name, std::move(value));
  return attrs;
}

Tensor Int64Vector(const std::vector<int64_t>& values) {
  return TensorNode::FromVector<int64_t>({static_cast<int64_t>(values.size())}, DataType::Int64(),
                                         values);
}

template <typename T>
Tensor Scalar(DataType dtype, T value) {
  return TensorNode::Scalar(dtype, value);
}

// The reference result, for checks of the values themselves.
Tensor Reference(const std::string& op, const std::vector<Ref<Object>>& args, const Attrs& attrs) {
  const nimble::op::OpDef* def = nimble::op::OpRegistry::Global().Find(op);
  return nimble::op::InvokeOp(*def, args, nimble::op::NormalizeAttrs(*def, attrs)).as<TensorNode>();
}

Tensor Builtin(const std::string& op, const std::vector<Tensor>& inputs, const Attrs& attrs) {
  const Tensor expected = Reference(op, {inputs.begin(), inputs.end()}, attrs);
  const nimble::op::OpDef* def = nimble::op::OpRegistry::Global().Find(op);
  return RunBuiltin(op, nimble::op::NormalizeAttrs(*def, attrs), inputs, {expected})[0];
}

TEST(CreationKernels, EveryOpHasARuntimeKernel) {
  const std::vector<std::pair<std::string, ShapeFuncMode>> ops = {
      {"zeros", ShapeFuncMode::kDataIndependent},
      {"ones", ShapeFuncMode::kDataIndependent},
      {"full", ShapeFuncMode::kDataIndependent},
      {"zeros_like", ShapeFuncMode::kDataIndependent},
      {"ones_like", ShapeFuncMode::kDataIndependent},
      {"full_like", ShapeFuncMode::kDataIndependent},
      {"dyn.zeros", ShapeFuncMode::kDataDependent},
      {"dyn.ones", ShapeFuncMode::kDataDependent},
      {"dyn.full", ShapeFuncMode::kDataDependent},
      {"arange", ShapeFuncMode::kDataDependent}};
  ExpectRuntimeHalves(ops);
}

TEST(CreationKernels, ZerosAndOnesInEveryFormAndDType) {
  std::mt19937 rng(1);
  for (const std::string name : {"zeros", "ones"}) {
    for (DataType dtype : kAllDTypes) {
      for (const Shape& shape : kShapes) {
        SCOPED_TRACE(dtype.name() + " " + ShapeToString(shape));
        ExpectBuiltinMatchesReference(name, {}, MakeAttrs({{"shape", shape}, {"dtype", dtype}}));
        ExpectBuiltinMatchesReference(name + "_like", {RandomTensor(shape, dtype, rng)});
        ExpectBuiltinMatchesReference("dyn." + name, {Int64Vector(shape)},
                                      MakeAttrs({{"dtype", dtype}}));
      }
    }
  }
  // The shape tensor may have any integer dtype.
  ExpectBuiltinMatchesReference("dyn.ones",
                                {TensorNode::FromVector<int32_t>({2}, DataType::Int32(), {3, 5})},
                                MakeAttrs({{"dtype", DataType::Int8()}}));
}

// Fill values of `dtype` for full: random ones, and for floats values that
// convert specially (NaN, beyond every integer range, a fraction, -0).
std::vector<Tensor> FillValues(DataType dtype, std::mt19937& rng) {
  const bool non_negative = dtype.is_bool() || dtype == DataType(DataType::Code::kUInt, 8);
  std::vector<Tensor> values;
  for (int i = 0; i < 3; ++i)
    values.push_back(RandomTensor({}, dtype, rng, non_negative ? 0 : -100, 100));
  if (dtype.is_float()) {
    for (double special : {std::numeric_limits<double>::quiet_NaN(), 1e10, -1e10, -0.75, -0.0}) {
      values.push_back(Scalar(dtype, special));
    }
  }
  return values;
}

TEST(CreationKernels, FullConvertsEveryFillDTypeToEveryDType) {
  std::mt19937 rng(2);
  const std::vector<Shape> shapes = {{}, {7}, {3, 0}, {13, 1, 3}};
  for (DataType fill_dtype : kAllDTypes) {
    for (const Tensor& fill : FillValues(fill_dtype, rng)) {
      for (DataType dtype : kAllDTypes) {
        SCOPED_TRACE("fill " + fill_dtype.name() + " " + std::to_string(fill->GetAsDouble(0)) +
                     " into " + dtype.name());
        for (const Shape& shape : shapes) {
          ExpectBuiltinMatchesReference("full", {fill},
                                        MakeAttrs({{"shape", shape}, {"dtype", dtype}}));
          ExpectBuiltinMatchesReference("full_like", {RandomTensor(shape, dtype, rng), fill});
          ExpectBuiltinMatchesReference("dyn.full", {fill, Int64Vector(shape)},
                                        MakeAttrs({{"dtype", dtype}}));
        }
      }
      // dtype None: the fill value's dtype.
      ExpectBuiltinMatchesReference("full", {fill}, MakeAttrs({{"shape", Shape{2, 3}}}));
      ExpectBuiltinMatchesReference("dyn.full", {fill, Int64Vector({5})});
    }
  }
}

TEST(CreationKernels, FullOnLargeOutputs) {
  std::mt19937 rng(3);
  for (DataType dtype : {DataType::Float32(), DataType::Int8(), DataType::Float16()}) {
    const Tensor fill = RandomTensor({}, DataType::Float32(), rng);
    const Shape shape = {600, 401};
    ExpectBuiltinMatchesReference("full", {fill}, MakeAttrs({{"shape", shape}, {"dtype", dtype}}));
    ExpectBuiltinMatchesReference("full_like", {TensorNode::Empty(shape, dtype), fill});
    ExpectBuiltinMatchesReference("dyn.full", {fill, Int64Vector(shape)},
                                  MakeAttrs({{"dtype", dtype}}));
  }
  // int64 -> int64 keeps every bit, also on the parallel path.
  const int64_t big = (int64_t{1} << 53) + 1;
  const Tensor full = Builtin("full", {Scalar<int64_t>(DataType::Int64(), big)},
                              MakeAttrs({{"shape", Shape{300000}}}));
  EXPECT_EQ(full->data<int64_t>()[0], big);
  EXPECT_EQ(full->data<int64_t>()[299999], big);
}

struct Range {
  double start, stop, step;
  int64_t length;  // numpy's
};

std::vector<Ref<Object>> RangeArgs(DataType dtype, const Range& range) {
  return {Scalar(dtype, range.start), Scalar(dtype, range.stop), Scalar(dtype, range.step)};
}

TEST(CreationKernels, ArangeLengthsAndValuesForEveryDType) {
  // Integral ranges, for every integer and float dtype.
  const std::vector<Range> integral = {
      {0, 10, 1, 10}, {0, 10, 3, 4}, {5, 0, -2, 3},   {-7, 6, 2, 7},       {5, 0, 1, 0},
      {0, 5, -1, 0},  {3, 3, 1, 0},  {0, 100, 7, 15}, {-100, 100, 13, 16}, {0, 1, 1, 1}};
  // Fractional ones, for float dtypes: lengths are ceil((stop - start) / step).
  const std::vector<Range> fractional = {
      {0, 1, 0.3, 4},   {1, -1, -0.5, 4}, {0.5, 100.25, 0.75, 133}, {-3.5, 4, 0.5, 15},
      {2.5, 2.5, 1, 0}, {0, 1, -0.25, 0}, {0.25, 1, 0.25, 3}};
  for (DataType dtype : kAllDTypes) {
    if (dtype.is_bool()) continue;
    std::vector<Range> ranges;
    for (const Range& range : integral) {
      const bool is_unsigned = dtype.code() == DataType::Code::kUInt;
      if (!is_unsigned || (range.start >= 0 && range.stop >= 0 && range.step > 0)) {
        ranges.push_back(range);
      }
    }
    if (dtype.is_float()) ranges.insert(ranges.end(), fractional.begin(), fractional.end());
    for (const Range& range : ranges) {
      SCOPED_TRACE(dtype.name() + " arange(" + std::to_string(range.start) + ", " +
                   std::to_string(range.stop) + ", " + std::to_string(range.step) + ")");
      const Attrs attrs = MakeAttrs({{"dtype", dtype}});
      ExpectBuiltinMatchesReference("arange", RangeArgs(dtype, range), attrs);
      EXPECT_EQ(Reference("arange", RangeArgs(dtype, range), attrs)->shape(),
                (Shape{range.length}));
    }
  }
}

TEST(CreationKernels, ArangeOnLargeRanges) {
  for (DataType dtype :
       {DataType::Float32(), DataType::Int32(), DataType::Int64(), DataType::Float64()}) {
    SCOPED_TRACE(dtype.name());
    const Attrs attrs = MakeAttrs({{"dtype", dtype}});
    ExpectBuiltinMatchesReference("arange", RangeArgs(dtype, {-5, 299995, 1, 0}), attrs);
    ExpectBuiltinMatchesReference("arange", RangeArgs(dtype, {700000, 0, -3, 0}), attrs);
  }
  const Attrs float32 = MakeAttrs({{"dtype", DataType::Float32()}});
  ExpectBuiltinMatchesReference("arange", RangeArgs(DataType::Float32(), {0, 30000, 0.1, 0}),
                                float32);
}

TEST(CreationKernels, ArangeInt64IsExactAcrossTheWholeRange) {
  const Attrs attrs = MakeAttrs({{"dtype", DataType::Int64()}});
  const auto int64_args = [](int64_t start, int64_t stop, int64_t step) {
    return std::vector<Tensor>{Scalar(DataType::Int64(), start), Scalar(DataType::Int64(), stop),
                               Scalar(DataType::Int64(), step)};
  };
  const int64_t high = int64_t{1} << 60;
  const Tensor exact = Builtin("arange", int64_args(high, high + 5, 2), attrs);
  EXPECT_THAT(std::vector<int64_t>(exact->data<int64_t>(), exact->data<int64_t>() + 3),
              ElementsAre(high, high + 2, high + 4));
  EXPECT_EQ(exact->shape(), (Shape{3}));
  // i * step overflows int64 here, start + i * step does not.
  const int64_t min = std::numeric_limits<int64_t>::min();
  const int64_t max = std::numeric_limits<int64_t>::max();
  const int64_t quarter = int64_t{1} << 62;
  const Tensor whole = Builtin("arange", int64_args(min, max, quarter), attrs);
  ASSERT_EQ(whole->shape(), (Shape{4}));
  EXPECT_THAT(std::vector<int64_t>(whole->data<int64_t>(), whole->data<int64_t>() + 4),
              ElementsAre(min, min + quarter, 0, quarter));
  for (const std::vector<Tensor>& args :
       {int64_args(min, max, quarter), int64_args(max, min, -quarter)}) {
    ExpectBuiltinMatchesReference("arange", {args.begin(), args.end()}, attrs);
  }
}

// The message of the error a shape function gives through the kernel ABI.
std::string ShapeFuncError(const std::string& op, const std::vector<Tensor>& inputs,
                           const Attrs& attrs, size_t rank) {
  const OpKernelDef* def = OpKernelRegistry::Global().Find(op);
  const nimble::op::OpDef* op_def = nimble::op::OpRegistry::Global().Find(op);
  return ErrorOf(
      [&] { RunShapeFunc(*def, nimble::op::NormalizeAttrs(*op_def, attrs), inputs, {rank}); });
}

TEST(CreationKernels, ErrorsThroughTheAbi) {
  const Attrs int32 = MakeAttrs({{"dtype", DataType::Int32()}});
  EXPECT_THAT(ShapeFuncError("arange",
                             {Scalar(DataType::Int32(), 0), Scalar(DataType::Int32(), 10),
                              Scalar(DataType::Int32(), 0)},
                             int32, 1),
              HasSubstr("arange: step must not be zero (start=0, stop=10, step=0)"));
  EXPECT_THAT(ShapeFuncError("arange",
                             {Scalar(DataType::Float32(), 0), Scalar(DataType::Float32(), 1),
                              Scalar(DataType::Float32(), 0)},
                             {}, 1),
              HasSubstr("arange: step must not be zero (start=0.0, stop=1.0, step=0.0)"));
  EXPECT_THAT(ShapeFuncError("arange",
                             {Scalar(DataType::Float64(), 0),
                              Scalar(DataType::Float64(), std::numeric_limits<double>::infinity()),
                              Scalar(DataType::Float64(), 1)},
                             MakeAttrs({{"dtype", DataType::Float64()}}), 1),
              HasSubstr("arange: the range (start=0.0, stop=inf, step=1.0) has no finite length"));
  EXPECT_THAT(
      ShapeFuncError("dyn.full", {Scalar(DataType::Float32(), 1.0), Int64Vector({-3})}, {}, 1),
      HasSubstr("dyn.full: the shape tensor holds a negative size: (-3,)"));
  EXPECT_THAT(ShapeFuncError("dyn.zeros", {Int64Vector({2, -1})}, {}, 2),
              HasSubstr("dyn.zeros: the shape tensor holds a negative size: (2, -1)"));
  // An element count that overflows int64 fails before anything allocates.
  EXPECT_THAT(
      ShapeFuncError("dyn.ones", {Int64Vector({int64_t{1} << 40, int64_t{1} << 40})}, {}, 2),
      HasSubstr("kernel shape_func.dyn.ones: shape (1099511627776, 1099511627776) has "
                "too many elements"));
  EXPECT_THAT(ShapeFuncError("zeros", {}, MakeAttrs({{"shape", Shape{2, -1}}}), 2),
              HasSubstr("shape (2, -1) has a negative dimension"));
  // The output's rank must be the shape tensor's length.
  EXPECT_THAT(ShapeFuncError("dyn.zeros", {Int64Vector({2, 3})}, {}, 3),
              HasSubstr("but its type has rank 3"));
  EXPECT_THAT(ErrorOf([] {
                CallKernel("zeros", MakeAttrs({{"shape", Shape{2}}}), {});
              }),
              HasSubstr("got 0 arguments for 1 outputs"));
  // A kernel called directly with a fill value that is not a scalar.
  EXPECT_THAT(ErrorOf([] {
                CallKernel("full", MakeAttrs({{"shape", Shape{2}}}),
                           {TensorNode::Empty({0}, DataType::Float32()),
                            TensorNode::Empty({2}, DataType::Float32())});
              }),
              HasSubstr("input 0 must be a scalar, got shape (0,)"));
}

}  // namespace
}  // namespace nimble::vm::testing
