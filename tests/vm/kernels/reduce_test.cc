// The reductions' built-in kernels (sum, mean, max, min, prod, all, any,
// argmax, argmin) against the compiler's reference kernels: every axis form
// (None, single, negative, several, non-adjacent, exclude) with and without
// keepdims, odd and size-0 shapes, every accepted dtype, ties and NaNs for
// argmax/argmin, inputs large enough for the parallel paths, and the errors a
// direct kernel call must report instead of crashing.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "tests/error_of.h"
#include "tests/vm/kernels/kernel_test_util.h"

namespace nimble::vm::testing {
namespace {

using ::testing::HasSubstr;

const std::vector<std::string> kNumericOps = {"sum", "mean", "max", "min", "prod"};
const std::vector<std::string> kLogicalOps = {"all", "any"};
const std::vector<std::string> kIndexOps = {"argmax", "argmin"};
// Ops whose reduction has an identity, so an empty one is defined.
const std::vector<std::string> kIdentityOps = {"sum", "prod", "all", "any"};

const std::vector<DataType> kOtherNumericDTypes = {
    DataType::Float64(), DataType::Float16(), DataType::Int8(),
    DataType::Int32(),   DataType::Int64(),   DataType(DataType::Code::kUInt, 8)};

// One call's reduced axes; no axis means None (every axis).
struct AxisCase {
  Shape shape;
  std::optional<std::vector<int64_t>> axis;
  bool exclude = false;
};

std::string ToString(const AxisCase& c) {
  return ShapeToString(c.shape) + " axis=" + (c.axis ? AttrValueToString(*c.axis) : "None") +
         (c.exclude ? " exclude" : "");
}

Attrs MakeReduceAttrs(const AxisCase& c, bool keepdims, bool select_last_index = false,
                      bool is_index_op = false) {
  Attrs attrs;
  if (c.axis) attrs.Set("axis", *c.axis);
  attrs.Set("keepdims", keepdims);
  attrs.Set("exclude", c.exclude);
  if (is_index_op) attrs.Set("select_last_index", select_last_index);
  return attrs;
}

bool IsIndexOp(const std::string& op) {
  return op == "argmax" || op == "argmin";
}

// Non-empty reductions over odd sizes: single axes and runs of them, merged
// and not (size-1 axes in between), and non-adjacent ones.
const std::vector<AxisCase> kCases = {
    {{1}, std::nullopt},
    {{7}, std::vector<int64_t>{0}},
    {{257}, std::vector<int64_t>{-1}},
    {{3, 13}, std::nullopt},
    {{3, 13}, std::vector<int64_t>{}},
    {{3, 13}, std::vector<int64_t>{0}},
    {{3, 13}, std::vector<int64_t>{-1}},
    {{3, 13}, std::vector<int64_t>{1, 0}},
    {{3, 13}, std::vector<int64_t>{1}, true},
    {{3, 13}, std::vector<int64_t>{0, 1}, true},
    {{13, 1, 7}, std::vector<int64_t>{1}},
    {{13, 1, 7}, std::vector<int64_t>{0, 2}},
    {{13, 1, 7}, std::vector<int64_t>{-3, 1}},
    {{2, 3, 5, 7}, std::vector<int64_t>{0, 2}},
    {{2, 3, 5, 7}, std::vector<int64_t>{1, 3}},
    {{2, 3, 5, 7}, std::vector<int64_t>{0, 3}},
    {{2, 3, 5, 7}, std::vector<int64_t>{1, 2}},
    {{2, 3, 5, 7}, std::vector<int64_t>{-1, -2}},
    {{2, 3, 5, 7}, std::vector<int64_t>{0, 2, 3}},
    {{2, 3, 5, 7}, std::vector<int64_t>{1, 2}, true},
    {{4, 1, 3, 1, 5}, std::vector<int64_t>{0, 2}},
    {{4, 1, 3, 1, 5}, std::vector<int64_t>{1, 3}},
    {{4, 1, 3, 1, 5}, std::vector<int64_t>{0, 4}},
    {{37, 1025}, std::vector<int64_t>{0}},  // more columns than one block
};

// Rank 0: every op but argmax/argmin (which need rank >= 1).
const std::vector<AxisCase> kScalarCases = {
    {{}, std::nullopt},
    {{}, std::vector<int64_t>{}},
};

// Large enough for the parallel paths: many outputs, few outputs over long
// rows (sliced), few long columns (sliced), and a gathered input.
const std::vector<AxisCase> kLargeCases = {
    {{1 << 18}, std::nullopt},
    {{512, 515}, std::vector<int64_t>{1}},
    {{512, 515}, std::vector<int64_t>{0}},
    {{3, 70001}, std::vector<int64_t>{-1}},
    {{2, 300, 701}, std::vector<int64_t>{1}},
    {{64, 65, 66}, std::vector<int64_t>{0, 2}},
};

// Size-0 dims: empty reductions (defined for ops with an identity) and
// reductions with no output (defined for every op).
const std::vector<AxisCase> kEmptyReductions = {
    {{0}, std::nullopt},
    {{0, 3}, std::vector<int64_t>{0}},
    {{3, 0, 2}, std::vector<int64_t>{1}},
    {{3, 0, 2}, std::vector<int64_t>{0, 2}, true},
};
const std::vector<AxisCase> kNoOutputs = {
    {{0, 3}, std::vector<int64_t>{1}},
    {{3, 0, 2}, std::vector<int64_t>{0, 2}},
};

DataType InputDType(const std::string& op) {
  return op == "all" || op == "any" ? DataType::Bool() : DataType::Float32();
}

// Every attribute variant of `op` on `c`: keepdims, and select_last_index
// for argmax/argmin.
void ExpectMatchesOnCase(const std::string& op, const AxisCase& c, DataType dtype,
                         std::mt19937& rng, double rtol, double low = -2.0, double high = 2.0) {
  SCOPED_TRACE(ToString(c) + " " + dtype.name());
  const Tensor input = RandomTensor(c.shape, dtype, rng, low, high);
  for (bool keepdims : {false, true}) {
    for (bool last : {false, true}) {
      if (last && !IsIndexOp(op)) continue;
      ExpectBuiltinMatchesReference(op, {input}, MakeReduceAttrs(c, keepdims, last, IsIndexOp(op)),
                                    {.relative = rtol});
    }
  }
}

std::vector<std::string> AllOps() {
  std::vector<std::string> ops = kNumericOps;
  ops.insert(ops.end(), kLogicalOps.begin(), kLogicalOps.end());
  ops.insert(ops.end(), kIndexOps.begin(), kIndexOps.end());
  return ops;
}

TEST(ReduceKernelsTest, EveryOpHasARuntimeKernel) {
  for (const std::string& op : AllOps()) {
    const OpKernelDef* def = OpKernelRegistry::Global().Find(op);
    ASSERT_NE(def, nullptr) << op;
    EXPECT_TRUE(def->kernel) << op;
    EXPECT_TRUE(def->shape_func) << op;
    EXPECT_EQ(def->shape_mode, ShapeFuncMode::kDataIndependent) << op;
    EXPECT_TRUE(KernelRegistry::Global().Contains(op)) << op;
  }
}

TEST(ReduceKernelsTest, Float32AndBoolOverEveryAxisForm) {
  std::mt19937 rng(1);
  for (const std::string& op : AllOps()) {
    for (const AxisCase& c : kCases) ExpectMatchesOnCase(op, c, InputDType(op), rng, 1e-5);
    if (IsIndexOp(op)) continue;
    for (const AxisCase& c : kScalarCases) ExpectMatchesOnCase(op, c, InputDType(op), rng, 1e-5);
  }
}

TEST(ReduceKernelsTest, OtherNumericDTypes) {
  std::mt19937 rng(2);
  const std::vector<AxisCase> cases = {kCases[2], kCases[5], kCases[9], kCases[13], kCases[20]};
  std::vector<std::string> ops = kNumericOps;
  ops.insert(ops.end(), kIndexOps.begin(), kIndexOps.end());
  for (const std::string& op : ops) {
    for (DataType dtype : kOtherNumericDTypes) {
      const double rtol = dtype == DataType::Float16() ? 2e-3 : 1e-5;
      // Integers over a wide range, so that sums and products wrap.
      const double range = dtype.is_float() ? 2.0 : 100.0;
      for (const AxisCase& c : cases) ExpectMatchesOnCase(op, c, dtype, rng, rtol, -range, range);
    }
  }
}

TEST(ReduceKernelsTest, LargeInputsTakeTheParallelPaths) {
  std::mt19937 rng(3);
  for (const std::string& op : AllOps()) {
    for (const AxisCase& c : kLargeCases) ExpectMatchesOnCase(op, c, InputDType(op), rng, 1e-5);
  }
  for (const AxisCase& c : kLargeCases) {
    ExpectMatchesOnCase("sum", c, DataType::Int32(), rng, 0, -1e6, 1e6);
  }
}

TEST(ReduceKernelsTest, EmptyReductionsAndOutputs) {
  std::mt19937 rng(4);
  for (const std::string& op : kIdentityOps) {
    for (const AxisCase& c : kEmptyReductions) {
      ExpectMatchesOnCase(op, c, InputDType(op), rng, 1e-5);
    }
  }
  for (const std::string& op : AllOps()) {
    for (const AxisCase& c : kNoOutputs) ExpectMatchesOnCase(op, c, InputDType(op), rng, 1e-5);
  }
}

// argmax/argmin over few distinct values (many ties) in float and integer
// types, with the tie on either side of a merged, gathered or sliced split.
TEST(ReduceKernelsTest, ArgReductionTies) {
  std::mt19937 rng(5);
  std::vector<AxisCase> cases = kCases;
  cases.push_back({{3, 70001}, std::vector<int64_t>{-1}});
  cases.push_back({{512, 515}, std::vector<int64_t>{0}});
  for (const std::string& op : kIndexOps) {
    for (const AxisCase& c : cases) {
      for (DataType dtype : {DataType::Float32(), DataType::Int8()}) {
        SCOPED_TRACE(ToString(c) + " " + dtype.name());
        Tensor input = RandomTensor(c.shape, DataType::Int8(), rng, -2.0, 2.0);
        if (dtype.is_float()) {
          const Tensor ints = input;
          input = TensorNode::Empty(c.shape, dtype);
          for (int64_t i = 0; i < ints->numel(); ++i) input->SetFromDouble(i, ints->GetAsDouble(i));
        }
        for (bool keepdims : {false, true}) {
          for (bool last : {false, true}) {
            ExpectBuiltinMatchesReference(op, {input}, MakeReduceAttrs(c, keepdims, last, true));
          }
        }
      }
    }
  }
}

// A NaN never wins max/min/argmax/argmin, as in the reference; a row of NaNs
// gives -inf/inf and index 0. Infinities are ordinary values.
TEST(ReduceKernelsTest, NaNsAndInfinities) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  std::mt19937 rng(6);
  for (const AxisCase& c : std::vector<AxisCase>{{{4, 37}, std::vector<int64_t>{1}},
                                                 {{4, 37}, std::vector<int64_t>{0}},
                                                 {{4, 37}, std::nullopt}}) {
    SCOPED_TRACE(ToString(c));
    const Tensor input = RandomTensor(c.shape, DataType::Float32(), rng);
    for (int64_t i = 0; i < input->numel(); i += 5) input->SetFromDouble(i, nan);
    for (int64_t i = 37; i < 2 * 37; ++i) input->SetFromDouble(i, nan);  // row 1
    for (int64_t i = 2 * 37; i < 3 * 37; ++i) input->SetFromDouble(i, i % 2 ? inf : -inf);
    for (const char* op : {"max", "min", "argmax", "argmin", "sum"}) {
      for (bool last : {false, true}) {
        ExpectBuiltinMatchesReference(op, {input}, MakeReduceAttrs(c, false, last, IsIndexOp(op)));
      }
    }
  }
}

// Errors through the kernel ABI, with the output allocated by hand.
std::string KernelError(const std::string& op, const Attrs& attrs, const Tensor& input,
                        const Tensor& output) {
  return ErrorOf([&] { CallKernel(op, attrs, {input, output}); });
}

TEST(ReduceKernelsTest, ErrorsThroughTheABI) {
  std::mt19937 rng(7);
  const Tensor empty = RandomTensor({0, 3}, DataType::Float32(), rng);
  const Tensor x = RandomTensor({2, 3}, DataType::Float32(), rng);
  const Tensor f32_3 = TensorNode::Empty({3}, DataType::Float32());
  const Tensor i32_3 = TensorNode::Empty({3}, DataType::Int32());
  const AxisCase over_0{{0, 3}, std::vector<int64_t>{0}};
  for (const std::string op : {"max", "min", "mean"}) {
    EXPECT_THAT(KernelError(op, MakeReduceAttrs(over_0, false), empty, f32_3),
                HasSubstr(op + ": cannot reduce an empty axis of shape (0, 3)"));
  }
  for (const std::string& op : kIndexOps) {
    EXPECT_THAT(KernelError(op, MakeReduceAttrs(over_0, false, false, true), empty, i32_3),
                HasSubstr("empty axis"));
  }
  EXPECT_THAT(
      KernelError("sum", MakeReduceAttrs({{2, 3}, std::vector<int64_t>{2}}, false), x, f32_3),
      HasSubstr("sum: axis 2 is out of range for rank 2"));
  EXPECT_THAT(
      KernelError("sum", MakeReduceAttrs({{2, 3}, std::vector<int64_t>{0, -2}}, false), x, f32_3),
      HasSubstr("listed twice"));
  // Outputs the shape function would not have given.
  EXPECT_THAT(
      KernelError("sum", MakeReduceAttrs({{2, 3}, std::vector<int64_t>{1}}, false), x, f32_3),
      HasSubstr("the output must be float32 with 2 elements"));
  EXPECT_THAT(
      KernelError("argmax", MakeReduceAttrs({{2, 3}, std::vector<int64_t>{0}}, false, false, true),
                  x, f32_3),
      HasSubstr("the output must be int32"));
  // Dtypes the type relation rejects.
  EXPECT_THAT(KernelError("sum", {}, RandomTensor({2}, DataType::Bool(), rng),
                          TensorNode::Empty({}, DataType::Bool())),
              HasSubstr("does not support dtype bool"));
  EXPECT_THAT(KernelError("all", {}, x, TensorNode::Empty({}, DataType::Float32())),
              HasSubstr("does not support dtype float32"));
}

}  // namespace
}  // namespace nimble::vm::testing
