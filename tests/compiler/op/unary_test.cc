#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "tests/compiler/op/op_test_util.h"

namespace nimble::op::testing {
namespace {

using ::testing::HasSubstr;

ir::Attrs CastTo(const std::string& dtype) {
  return MakeAttrs({{"dtype", DataType::Parse(dtype)}});
}

// Seven inputs (an odd count, so no loop covers them in whole vectors) in the
// domain of every float op.
const std::vector<double> kPositive = {0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 7.5};
const std::vector<double> kMixed = {-3.0, -1.25, -0.5, 0.0, 0.5, 1.25, 3.0};

struct FloatCase {
  std::string op;
  double (*reference)(double);
  const std::vector<double>* inputs;
};

double Sigmoid(double x) {
  return 1 / (1 + std::exp(-x));
}
double Rsqrt(double x) {
  return 1 / std::sqrt(x);
}
double Gelu(double x) {
  return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
}

const std::vector<FloatCase> kFloatCases = {
    {"exp", [](double x) { return std::exp(x); }, &kMixed},
    {"log", [](double x) { return std::log(x); }, &kPositive},
    {"sqrt", [](double x) { return std::sqrt(x); }, &kPositive},
    {"rsqrt", Rsqrt, &kPositive},
    {"tanh", [](double x) { return std::tanh(x); }, &kMixed},
    {"sigmoid", Sigmoid, &kMixed},
    {"erf", [](double x) { return std::erf(x); }, &kMixed},
    {"gelu", Gelu, &kMixed},
    {"negative", [](double x) { return -x; }, &kMixed},
    {"abs", [](double x) { return std::abs(x); }, &kMixed},
    {"nn.relu", [](double x) { return x > 0 ? x : 0.0; }, &kMixed},
    {"copy", [](double x) { return x; }, &kMixed},
};

TEST(UnaryOps, FloatValuesInEveryFloatDType) {
  for (const FloatCase& test : kFloatCases) {
    for (const auto& [dtype, tolerance] : kFloatDTypes) {
      SCOPED_TRACE(test.op + " " + dtype.name());
      const Tensor input = TensorNode::FromVector({7}, dtype, *test.inputs);
      const Tensor output = Invoke(test.op, {input});
      EXPECT_EQ(output->dtype(), dtype);
      EXPECT_EQ(output->shape(), Shape({7}));
      for (size_t i = 0; i < test.inputs->size(); ++i) {
        // float16 inputs are themselves rounded; compare with the rounded input.
        const double x = input->GetAsDouble(static_cast<int64_t>(i));
        const double expected = test.reference(x);
        EXPECT_NEAR(output->GetAsDouble(static_cast<int64_t>(i)), expected,
                    tolerance * std::max(1.0, std::abs(expected)));
      }
    }
  }
}

TEST(UnaryOps, KeepShapeOfHigherRankAndScalarAndEmptyTensors) {
  const Tensor matrix =
      TensorNode::FromVector<double>({3, 5}, DataType::Float32(), std::vector<double>(15, -2.0));
  const Tensor relu = Invoke("nn.relu", {matrix});
  EXPECT_EQ(relu->shape(), Shape({3, 5}));
  EXPECT_EQ(Values(relu), std::vector<double>(15, 0.0));

  const Tensor scalar = Invoke("exp", {TensorNode::Scalar(DataType::Float64(), 0.0)});
  EXPECT_EQ(scalar->shape(), Shape({}));
  EXPECT_EQ(Values(scalar), std::vector<double>({1.0}));

  const Tensor empty = Invoke("tanh", {TensorNode::Empty({0, 4}, DataType::Float32())});
  EXPECT_EQ(empty->shape(), Shape({0, 4}));
}

TEST(UnaryOps, IntegerValues) {
  const Tensor i32 = TensorFrom<int32_t>({5}, DataType::Int32(), {-7, -1, 0, 2, 9});
  EXPECT_EQ(Elements<int32_t>(Invoke("negative", {i32})), std::vector<int32_t>({7, 1, 0, -2, -9}));
  EXPECT_EQ(Elements<int32_t>(Invoke("abs", {i32})), std::vector<int32_t>({7, 1, 0, 2, 9}));
  EXPECT_EQ(Elements<int32_t>(Invoke("nn.relu", {i32})), std::vector<int32_t>({0, 0, 0, 2, 9}));
  EXPECT_EQ(Elements<int32_t>(Invoke("round", {i32})), std::vector<int32_t>({-7, -1, 0, 2, 9}));
  EXPECT_EQ(Elements<int32_t>(Invoke("copy", {i32})), std::vector<int32_t>({-7, -1, 0, 2, 9}));

  const int64_t big = int64_t{1} << 62;
  const Tensor i64 = TensorFrom<int64_t>({3}, DataType::Int64(), {-big, 3, big + 1});
  EXPECT_EQ(Elements<int64_t>(Invoke("negative", {i64})),
            std::vector<int64_t>({big, -3, -big - 1}));
  EXPECT_EQ(Elements<int64_t>(Invoke("abs", {i64})), std::vector<int64_t>({big, 3, big + 1}));
}

TEST(UnaryOps, IntegerMinimumWrapsInsteadOfOverflowing) {
  const int32_t min32 = std::numeric_limits<int32_t>::min();
  const Tensor i32 = TensorFrom<int32_t>({1}, DataType::Int32(), {min32});
  EXPECT_EQ(Elements<int32_t>(Invoke("negative", {i32})), std::vector<int32_t>({min32}));
  EXPECT_EQ(Elements<int32_t>(Invoke("abs", {i32})), std::vector<int32_t>({min32}));
  const Tensor i8 = TensorFrom<int8_t>({2}, DataType::Int8(), {-128, -5});
  EXPECT_EQ(Elements<int8_t>(Invoke("abs", {i8})), std::vector<int8_t>({-128, 5}));
}

TEST(UnaryOps, RoundHalvesToEvenLikeNumpyRint) {
  const Tensor input = TensorNode::FromVector<double>(
      {9}, DataType::Float32(), {0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.4, 2.6, -2.6});
  EXPECT_EQ(Values(Invoke("round", {input})),
            std::vector<double>({0, 2, 2, -0.0, -2, -2, 2, 3, -3}));
  EXPECT_TRUE(std::signbit(Invoke("round", {input})->GetAsDouble(3)));
}

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

TEST(UnaryOps, SignFloorCeilOfFloats) {
  const Tensor input = TensorNode::FromVector<double>(
      {8}, DataType::Float32(), {-2.5, -0.5, -0.0, 0.0, 0.5, 2.5, 3.0, -kInf});
  EXPECT_EQ(Values(Invoke("sign", {input})), std::vector<double>({-1, -1, 0, 0, 1, 1, 1, -1}));
  EXPECT_TRUE(std::signbit(Invoke("sign", {input})->GetAsDouble(2)));  // -0 stays -0
  EXPECT_EQ(Values(Invoke("floor", {input})), std::vector<double>({-3, -1, 0, 0, 0, 2, 3, -kInf}));
  EXPECT_EQ(Values(Invoke("ceil", {input})), std::vector<double>({-2, 0, 0, 0, 1, 3, 3, -kInf}));
  EXPECT_TRUE(std::signbit(Invoke("ceil", {input})->GetAsDouble(1)));  // ceil(-0.5) is -0
  const Tensor nan = TensorNode::FromVector<double>({1}, DataType::Float64(), {kNaN});
  for (const std::string op : {"sign", "floor", "ceil"}) {
    EXPECT_TRUE(std::isnan(Invoke(op, {nan})->GetAsDouble(0))) << op;
  }
}

TEST(UnaryOps, SignFloorCeilOfIntegers) {
  const Tensor i32 = TensorFrom<int32_t>({5}, DataType::Int32(), {-7, -1, 0, 2, 9});
  EXPECT_EQ(Elements<int32_t>(Invoke("sign", {i32})), std::vector<int32_t>({-1, -1, 0, 1, 1}));
  EXPECT_EQ(Elements<int32_t>(Invoke("floor", {i32})), std::vector<int32_t>({-7, -1, 0, 2, 9}));
  EXPECT_EQ(Elements<int32_t>(Invoke("ceil", {i32})), std::vector<int32_t>({-7, -1, 0, 2, 9}));
  const Tensor u8 = TensorFrom<uint8_t>({3}, DataType(DataType::Code::kUInt, 8), {0, 1, 200});
  EXPECT_EQ(Elements<uint8_t>(Invoke("sign", {u8})), std::vector<uint8_t>({0, 1, 1}));
}

TEST(UnaryOps, ActivationsWithParameters) {
  const Tensor input =
      TensorNode::FromVector<double>({5}, DataType::Float64(), {-4.0, -1.0, -1e-9, 0.0, 2.0});
  EXPECT_THAT(Values(Invoke("nn.leaky_relu", {input}, MakeAttrs({{"alpha", 0.1}}))),
              ::testing::Pointwise(::testing::DoubleEq(), {-0.4, -0.1, -1e-10, 0.0, 2.0}));
  EXPECT_THAT(Values(Invoke("nn.leaky_relu", {input})),  // alpha defaults to 0.01
              ::testing::Pointwise(::testing::DoubleEq(), {-0.04, -0.01, -1e-11, 0.0, 2.0}));
  const std::vector<double> elu = Values(Invoke("nn.elu", {input}, MakeAttrs({{"alpha", 2.0}})));
  EXPECT_DOUBLE_EQ(elu[0], 2 * std::expm1(-4.0));
  EXPECT_DOUBLE_EQ(elu[1], 2 * std::expm1(-1.0));
  EXPECT_DOUBLE_EQ(elu[2], 2 * std::expm1(-1e-9));  // expm1, not exp - 1, near 0
  EXPECT_EQ(elu[3], 0.0);
  EXPECT_EQ(elu[4], 2.0);
  EXPECT_EQ(Values(Invoke("nn.hard_sigmoid", {input}, MakeAttrs({{"alpha", 0.25}, {"beta", 0.5}}))),
            std::vector<double>({0.0, 0.25, 0.5 - 0.25e-9, 0.5, 1.0}));
  const Tensor nan = TensorNode::FromVector<double>({1}, DataType::Float32(), {kNaN});
  for (const std::string op : {"nn.leaky_relu", "nn.elu", "nn.hard_sigmoid", "nn.softplus"}) {
    EXPECT_TRUE(std::isnan(Invoke(op, {nan})->GetAsDouble(0))) << op;
  }
}

TEST(UnaryOps, SoftplusNeitherOverflowsNorLosesSmallResults) {
  const Tensor input = TensorNode::FromVector<double>({6}, DataType::Float32(),
                                                      {-80.0, -20.0, -1.0, 0.0, 1.0, 100.0});
  const std::vector<double> output = Values(Invoke("nn.softplus", {input}));
  const std::vector<double> expected = {
      std::exp(-80.0), std::log1p(std::exp(-20.0)),    std::log1p(std::exp(-1.0)),
      std::log(2.0),   1 + std::log1p(std::exp(-1.0)), 100.0};
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_NEAR(output[i], expected[i], 1e-7 * expected[i]) << i;
  }
}

TEST(UnaryOps, ClipClampsAndKeepsNaN) {
  const Tensor input =
      TensorNode::FromVector<double>({6}, DataType::Float32(), {-3.0, -1.0, 0.5, 2.0, kInf, kNaN});
  const std::vector<double> clipped =
      Values(Invoke("clip", {input}, MakeAttrs({{"a_min", -1.5}, {"a_max", 1.0}})));
  EXPECT_EQ(std::vector<double>(clipped.begin(), clipped.end() - 1),
            std::vector<double>({-1.5, -1.0, 0.5, 1.0, 1.0}));
  EXPECT_TRUE(std::isnan(clipped.back()));
  // No bounds by default; a_max wins over a larger a_min (numpy's clip).
  EXPECT_EQ(Values(Invoke("clip", {input}))[4], kInf);
  EXPECT_EQ(Values(Invoke("clip", {input}, MakeAttrs({{"a_min", 2.0}, {"a_max", 1.0}})))[0], 1.0);
  const Tensor i8 = TensorFrom<int8_t>({4}, DataType::Int8(), {-128, -3, 5, 127});
  EXPECT_EQ(Elements<int8_t>(Invoke("clip", {i8}, MakeAttrs({{"a_min", -2.0}, {"a_max", 4.0}}))),
            std::vector<int8_t>({-2, -2, 4, 4}));
  EXPECT_EQ(Elements<int8_t>(Invoke("clip", {i8}, MakeAttrs({{"a_min", -1000.0}}))),
            std::vector<int8_t>({-128, -3, 5, 127}));
}

TEST(UnaryOps, IsNaNIsBool) {
  const Tensor input =
      TensorNode::FromVector<double>({4}, DataType::Float64(), {kNaN, -kInf, 0.0, -kNaN});
  const Tensor output = Invoke("isnan", {input});
  EXPECT_EQ(output->dtype(), DataType::Bool());
  EXPECT_EQ(Elements<bool>(output), std::vector<bool>({true, false, false, true}));
  EXPECT_EQ(TypeOf("isnan", {TensorOf({kAny, 3})}), "Tensor[(?, 3), bool]");
  EXPECT_THAT(InvokeError("isnan", {TensorNode::Empty({2}, DataType::Int32())}),
              HasSubstr("isnan: argument 0 must be a floating-point tensor"));
}

TEST(UnaryOps, NanPropagatesThroughRelu) {
  const Tensor input = TensorNode::FromVector<double>(
      {2}, DataType::Float64(), {std::numeric_limits<double>::quiet_NaN(), -1.0});
  const Tensor output = Invoke("nn.relu", {input});
  EXPECT_TRUE(std::isnan(output->GetAsDouble(0)));
  EXPECT_EQ(output->GetAsDouble(1), 0.0);
}

TEST(UnaryOps, CopyOwnsItsStorage) {
  const Tensor input = TensorFrom<bool>({3}, DataType::Bool(), {true, false, true});
  const Tensor output = Invoke("copy", {input});
  EXPECT_NE(output->raw_data(), input->raw_data());
  EXPECT_EQ(output->dtype(), DataType::Bool());
  EXPECT_EQ(Elements<bool>(output), std::vector<bool>({true, false, true}));
}

TEST(UnaryOps, LogicalNot) {
  const Tensor input = TensorFrom<bool>({3}, DataType::Bool(), {true, false, true});
  const Tensor output = Invoke("logical_not", {input});
  EXPECT_EQ(output->dtype(), DataType::Bool());
  EXPECT_EQ(Elements<bool>(output), std::vector<bool>({false, true, false}));
  EXPECT_THAT(InvokeError("logical_not", {TensorNode::Empty({2}, DataType::Float32())}),
              HasSubstr("logical_not: argument 0 must be a bool tensor, got Tensor[(2,), "
                        "float32]"));
}

TEST(UnaryOps, FloatOnlyOpsRejectIntegerAndBoolTensors) {
  for (const std::string op : {"exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "erf", "gelu",
                               "nn.leaky_relu", "nn.elu", "nn.hard_sigmoid", "nn.softplus"}) {
    SCOPED_TRACE(op);
    EXPECT_THAT(InvokeError(op, {TensorNode::Empty({2}, DataType::Int32())}),
                HasSubstr(op + ": argument 0 must be a floating-point tensor, got Tensor[(2,), "
                               "int32]"));
    EXPECT_THAT(InvokeError(op, {TensorNode::Empty({2}, DataType::Bool())}),
                HasSubstr("must be a floating-point tensor"));
  }
}

TEST(UnaryOps, NumericOpsRejectBool) {
  for (const std::string op :
       {"negative", "abs", "nn.relu", "round", "floor", "ceil", "sign", "clip"}) {
    SCOPED_TRACE(op);
    EXPECT_THAT(InvokeError(op, {TensorNode::Empty({2}, DataType::Bool())}),
                HasSubstr(op + ": argument 0 must be an integer or floating-point tensor"));
  }
}

TEST(UnaryOps, TypesKeepAnyDimensions) {
  const ir::Type input = TensorOf({kAny, 3});
  for (const std::string op : {"exp", "nn.relu", "copy", "round"}) {
    SCOPED_TRACE(op);
    EXPECT_EQ(TypeOf(op, {input}), "Tensor[(?, 3), float32]");
  }
  EXPECT_EQ(TypeOf("cast", {input}, CastTo("int64")), "Tensor[(?, 3), int64]");
}

TEST(UnaryOps, RejectTupleArguments) {
  const ir::Type tuple = ir::MakeTupleType({TensorOf({2}, DataType::Float32())});
  EXPECT_THAT([&] { ResolveCallType(Def("exp"), {tuple}, {}); },
              ::testing::ThrowsMessage<Error>(HasSubstr("exp: argument 0 must be a tensor")));
}

TEST(UnaryOps, CastConvertsBetweenDTypes) {
  const Tensor floats =
      TensorNode::FromVector<double>({5}, DataType::Float32(), {-2.7, -0.5, 0.0, 1.9, 3e10});
  const Tensor ints = Invoke("cast", {floats}, CastTo("int32"));
  EXPECT_EQ(ints->dtype(), DataType::Int32());
  // Truncation toward zero; saturation at the int32 range.
  EXPECT_EQ(Elements<int32_t>(ints),
            std::vector<int32_t>({-2, 0, 0, 1, std::numeric_limits<int32_t>::max()}));

  const Tensor nan = TensorNode::FromVector<double>(
      {2}, DataType::Float64(), {std::numeric_limits<double>::quiet_NaN(), -1e300});
  EXPECT_EQ(Elements<int64_t>(Invoke("cast", {nan}, CastTo("int64"))),
            std::vector<int64_t>({0, std::numeric_limits<int64_t>::min()}));

  EXPECT_EQ(Elements<bool>(Invoke("cast", {floats}, CastTo("bool"))),
            std::vector<bool>({true, true, false, true, true}));

  const Tensor bools = TensorFrom<bool>({3}, DataType::Bool(), {true, false, true});
  EXPECT_EQ(Values(Invoke("cast", {bools}, CastTo("float64"))), std::vector<double>({1, 0, 1}));

  const Tensor wide = TensorFrom<int64_t>({2}, DataType::Int64(), {300, -1});
  EXPECT_EQ(Elements<int8_t>(Invoke("cast", {wide}, CastTo("int8"))),
            std::vector<int8_t>({44, -1}));

  const Tensor halves = Invoke("cast", {floats}, CastTo("float16"));
  EXPECT_EQ(halves->dtype(), DataType::Float16());
  EXPECT_NEAR(Invoke("cast", {halves}, CastTo("float32"))->GetAsDouble(0), -2.7, 2e-3);
}

TEST(UnaryOps, CastRequiresDType) {
  EXPECT_THAT([] { NormalizeAttrs(Def("cast"), {}); },
              ::testing::ThrowsMessage<Error>(HasSubstr("requires attribute 'dtype'")));
  ir::Attrs bad;
  bad.Set("dtype", std::string("complex7"));
  EXPECT_THAT([&] { NormalizeAttrs(Def("cast"), bad); },
              ::testing::ThrowsMessage<Error>(HasSubstr("attribute 'dtype' expects a")));
}

TEST(UnaryOps, NonTensorArgumentErrorNamesTheOp) {
  const Ref<Object> storage = Make<StorageNode>(16);
  EXPECT_EQ(ErrorOf([&] { InvokeValues("negative", {storage}); }),
            "negative: value has no tensor or tuple type");
}

TEST(UnaryOps, RegistryDescribesEveryOp) {
  for (const std::string op :
       {"negative",    "abs",     "exp",  "log",  "sqrt",          "rsqrt",  "tanh",
        "sigmoid",     "nn.relu", "erf",  "gelu", "round",         "copy",   "logical_not",
        "cast",        "floor",   "ceil", "sign", "nn.leaky_relu", "nn.elu", "nn.hard_sigmoid",
        "nn.softplus", "clip",    "isnan"}) {
    SCOPED_TRACE(op);
    const OpDef& def = Def(op);
    EXPECT_FALSE(def.description.empty());
    EXPECT_EQ(def.min_inputs, 1);
    EXPECT_EQ(def.max_inputs, 1);
    EXPECT_EQ(def.pattern, OpPattern::kElemWise);
    EXPECT_EQ(def.shape_mode, ShapeFuncMode::kDataIndependent);
    EXPECT_TRUE(def.relation && def.shape_func && def.kernel);
    const size_t attrs = op == "cast" || op == "nn.leaky_relu" || op == "nn.elu" ? 1u
                         : op == "nn.hard_sigmoid" || op == "clip"               ? 2u
                                                                                 : 0u;
    EXPECT_EQ(def.attrs.size(), attrs);
  }
}

}  // namespace
}  // namespace nimble::op::testing
