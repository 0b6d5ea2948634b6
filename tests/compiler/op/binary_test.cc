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
using ::testing::StartsWith;

// The element of `input` that broadcasting reads for flat output index `flat`.
double BroadcastElement(const Tensor& input, const Shape& out_shape, int64_t flat) {
  int64_t in_flat = 0;
  int64_t in_stride = 1;
  const size_t offset = out_shape.size() - input->shape().size();
  for (size_t d = out_shape.size(); d-- > 0;) {
    const int64_t index = flat % out_shape[d];
    flat /= out_shape[d];
    if (d < offset) continue;
    const int64_t size = input->shape()[d - offset];
    in_flat += (size == 1 ? 0 : index) * in_stride;
    in_stride *= size;
  }
  return input->GetAsDouble(in_flat);
}

// The output of a binary op, element by element, from the naive definition.
std::vector<double> Reference(const Tensor& a, const Tensor& b, const Shape& out_shape,
                              double (*fn)(double, double)) {
  std::vector<double> values;
  for (int64_t i = 0; i < ShapeNumel(out_shape); ++i) {
    values.push_back(fn(BroadcastElement(a, out_shape, i), BroadcastElement(b, out_shape, i)));
  }
  return values;
}

struct ArithCase {
  std::string op;
  double (*reference)(double, double);
};

const std::vector<ArithCase> kFloatArith = {
    {"add", [](double a, double b) { return a + b; }},
    {"subtract", [](double a, double b) { return a - b; }},
    {"multiply", [](double a, double b) { return a * b; }},
    {"divide", [](double a, double b) { return a / b; }},
    {"power", [](double a, double b) { return std::pow(a, b); }},
    {"maximum", [](double a, double b) { return std::max(a, b); }},
    {"minimum", [](double a, double b) { return std::min(a, b); }},
};

TEST(BinaryOps, FloatArithmeticInEveryFloatDType) {
  for (const ArithCase& test : kFloatArith) {
    for (const auto& [dtype, tolerance] : kFloatDTypes) {
      SCOPED_TRACE(test.op + " " + dtype.name());
      const Tensor a = TensorFrom({7}, dtype, {0.5, 1.25, 2.0, 3.0, 0.75, 1.5, 2.5});
      const Tensor b = TensorFrom({7}, dtype, {2.0, 0.5, 1.5, 1.0, 3.0, 2.0, 0.25});
      const Tensor out = Invoke(test.op, {a, b});
      EXPECT_EQ(out->dtype(), dtype);
      const std::vector<double> expected = Reference(a, b, {7}, test.reference);
      for (int64_t i = 0; i < 7; ++i) {
        EXPECT_NEAR(out->GetAsDouble(i), expected[i], tolerance * std::max(1.0, expected[i]));
      }
    }
  }
}

TEST(BinaryOps, IntegerArithmetic) {
  const Tensor a = TensorFrom<int32_t>({5}, DataType::Int32(), {7, -7, 9, -9, 2});
  const Tensor b = TensorFrom<int32_t>({5}, DataType::Int32(), {2, 2, -4, -4, 5});
  EXPECT_EQ(Elements<int32_t>(Invoke("add", {a, b})), std::vector<int32_t>({9, -5, 5, -13, 7}));
  EXPECT_EQ(Elements<int32_t>(Invoke("subtract", {a, b})),
            std::vector<int32_t>({5, -9, 13, -5, -3}));
  EXPECT_EQ(Elements<int32_t>(Invoke("multiply", {a, b})),
            std::vector<int32_t>({14, -14, -36, 36, 10}));
  // C semantics: truncation toward zero, not numpy's floor_divide.
  EXPECT_EQ(Elements<int32_t>(Invoke("divide", {a, b})), std::vector<int32_t>({3, -3, -2, 2, 0}));
  EXPECT_EQ(Elements<int32_t>(Invoke("maximum", {a, b})), std::vector<int32_t>({7, 2, 9, -4, 5}));
  EXPECT_EQ(Elements<int32_t>(Invoke("minimum", {a, b})), std::vector<int32_t>({2, -7, -4, -9, 2}));

  const Tensor base = TensorFrom<int64_t>({4}, DataType::Int64(), {3, -2, 10, 7});
  const Tensor exponent = TensorFrom<int64_t>({4}, DataType::Int64(), {4, 3, 0, 1});
  EXPECT_EQ(Elements<int64_t>(Invoke("power", {base, exponent})),
            std::vector<int64_t>({81, -8, 1, 7}));
  const int64_t big = int64_t{1} << 40;
  const Tensor large = TensorFrom<int64_t>({2}, DataType::Int64(), {big, -big});
  EXPECT_EQ(Elements<int64_t>(Invoke("add", {large, large})),
            std::vector<int64_t>({2 * big, -2 * big}));
  EXPECT_EQ(Elements<int64_t>(
                Invoke("divide", {large, TensorFrom<int64_t>({}, DataType::Int64(), {-3})})),
            std::vector<int64_t>({-big / 3, big / 3}));
}

TEST(BinaryOps, IntegerOverflowWraps) {
  const int32_t max32 = std::numeric_limits<int32_t>::max();
  const int32_t min32 = std::numeric_limits<int32_t>::min();
  const Tensor a = TensorFrom<int32_t>({2}, DataType::Int32(), {max32, min32});
  const Tensor one = TensorFrom<int32_t>({}, DataType::Int32(), {1});
  const Tensor minus_one = TensorFrom<int32_t>({}, DataType::Int32(), {-1});
  EXPECT_EQ(Elements<int32_t>(Invoke("add", {a, one})), std::vector<int32_t>({min32, min32 + 1}));
  EXPECT_EQ(Elements<int32_t>(Invoke("divide", {a, minus_one})),
            std::vector<int32_t>({-max32, min32}));
  const Tensor two = TensorFrom<int32_t>({}, DataType::Int32(), {2});
  const Tensor thirty_two = TensorFrom<int32_t>({}, DataType::Int32(), {32});
  EXPECT_EQ(Elements<int32_t>(Invoke("power", {two, thirty_two})), std::vector<int32_t>({0}));
}

TEST(BinaryOps, IntegerDivisionByZeroIsAnError) {
  const Tensor a = TensorFrom<int32_t>({3}, DataType::Int32(), {1, 2, 3});
  const Tensor b = TensorFrom<int32_t>({3}, DataType::Int32(), {1, 0, 1});
  EXPECT_THAT(InvokeError("divide", {a, b}), StartsWith("divide: division by zero"));
  const Tensor zero64 = TensorFrom<int64_t>({}, DataType::Int64(), {0});
  EXPECT_THAT(InvokeError("divide", {TensorFrom<int64_t>({2}, DataType::Int64(), {5, 6}), zero64}),
              StartsWith("divide: division by zero"));
  // Floats follow IEEE instead.
  const Tensor q =
      Invoke("divide", {TensorFrom({2}, kF32, {1.0, -1.0}), TensorFrom({}, kF32, {0.0})});
  EXPECT_EQ(Values(q), std::vector<double>({INFINITY, -INFINITY}));
}

TEST(BinaryOps, NegativeIntegerExponentIsAnError) {
  const Tensor a = TensorFrom<int32_t>({2}, DataType::Int32(), {2, 2});
  const Tensor b = TensorFrom<int32_t>({2}, DataType::Int32(), {1, -1});
  EXPECT_THAT(InvokeError("power", {a, b}),
              HasSubstr("power: integers to negative integer powers are not allowed"));
}

TEST(BinaryOps, MaximumAndMinimumPropagateNan) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor a = TensorFrom({2}, DataType::Float64(), {nan, 1.0});
  const Tensor b = TensorFrom({2}, DataType::Float64(), {1.0, nan});
  for (const std::string op : {"maximum", "minimum"}) {
    const Tensor out = Invoke(op, {a, b});
    EXPECT_TRUE(std::isnan(out->GetAsDouble(0)) && std::isnan(out->GetAsDouble(1))) << op;
  }
}

TEST(BinaryOps, Comparisons) {
  const std::vector<std::pair<std::string, std::vector<bool>>> cases = {
      {"equal", {false, true, false}},   {"not_equal", {true, false, true}},
      {"less", {true, false, false}},    {"less_equal", {true, true, false}},
      {"greater", {false, false, true}}, {"greater_equal", {false, true, true}},
  };
  const std::vector<DataType> dtypes = {DataType::Float32(), DataType::Float64(),
                                        DataType::Float16(), DataType::Int32(), DataType::Int64()};
  for (const auto& [op, expected] : cases) {
    for (const DataType dtype : dtypes) {
      SCOPED_TRACE(op + " " + dtype.name());
      const Tensor out = Invoke(op, {TensorNode::FromVector<double>({3}, dtype, {1, 2, 3}),
                                     TensorNode::FromVector<double>({3}, dtype, {2, 2, 2})});
      EXPECT_EQ(out->dtype(), DataType::Bool());
      EXPECT_EQ(Elements<bool>(out), expected);
    }
  }
  const Tensor t = TensorFrom<bool>({2}, DataType::Bool(), {true, false});
  EXPECT_EQ(Elements<bool>(Invoke("equal", {t, TensorFrom<bool>({}, DataType::Bool(), {true})})),
            std::vector<bool>({true, false}));
}

TEST(BinaryOps, LogicalAndOr) {
  const Tensor a = TensorFrom<bool>({2, 1}, DataType::Bool(), {true, false});
  const Tensor b = TensorFrom<bool>({2}, DataType::Bool(), {true, false});
  const Tensor conj = Invoke("logical_and", {a, b});
  EXPECT_EQ(conj->shape(), Shape({2, 2}));
  EXPECT_EQ(Elements<bool>(conj), std::vector<bool>({true, false, false, false}));
  EXPECT_EQ(Elements<bool>(Invoke("logical_or", {a, b})),
            std::vector<bool>({true, true, true, false}));
  EXPECT_THAT(
      InvokeError("logical_or", {TensorFrom({2}, kF32, {1, 0}), TensorFrom({2}, kF32, {1, 0})}),
      HasSubstr("logical_or: argument 0 must be a bool tensor, got Tensor[(2,), float32]"));
}

// mod keeps the dividend's sign (C's % and fmod); floor_mod the divisor's
// (Python's %), so both agree where the signs do.
TEST(BinaryOps, ModAndFloorModSigns) {
  const Tensor a = TensorFrom<int32_t>({6}, DataType::Int32(), {7, -7, 7, -7, 6, INT32_MIN});
  const Tensor b = TensorFrom<int32_t>({6}, DataType::Int32(), {3, 3, -3, -3, -3, -1});
  EXPECT_EQ(Elements<int32_t>(Invoke("mod", {a, b})), std::vector<int32_t>({1, -1, 1, -1, 0, 0}));
  EXPECT_EQ(Elements<int32_t>(Invoke("floor_mod", {a, b})),
            std::vector<int32_t>({1, 2, -2, -1, 0, 0}));
  const Tensor i64 = TensorFrom<int64_t>({2}, DataType::Int64(), {-1, int64_t{1} << 62});
  EXPECT_EQ(Elements<int64_t>(
                Invoke("floor_mod", {i64, TensorFrom<int64_t>({}, DataType::Int64(), {5})})),
            std::vector<int64_t>({4, 4}));
  for (const std::string op : {"mod", "floor_mod"}) {
    EXPECT_THAT(InvokeError(op, {a, TensorFrom<int32_t>({}, DataType::Int32(), {0})}),
                StartsWith(op + ": division by zero"));
  }
  const Tensor x = TensorFrom({5}, DataType::Float64(), {5.5, -5.5, 5.5, -6.0, 1.0});
  const Tensor y = TensorFrom({5}, DataType::Float64(), {2.0, 2.0, -2.0, 3.0, 0.0});
  EXPECT_EQ(Values(Invoke("mod", {x, y})).at(1), -1.5);
  EXPECT_EQ(Values(Invoke("floor_mod", {x, y})).at(1), 0.5);
  EXPECT_EQ(Values(Invoke("floor_mod", {x, y})).at(2), -0.5);
  EXPECT_TRUE(
      std::signbit(Values(Invoke("floor_mod", {TensorFrom({}, DataType::Float64(), {6.0}),
                                               TensorFrom({}, DataType::Float64(), {-3.0})}))[0]));
  EXPECT_TRUE(std::isnan(Values(Invoke("mod", {x, y}))[4]));  // floats: IEEE, no error
}

TEST(BinaryOps, LogicalXor) {
  const Tensor a = TensorFrom<bool>({2, 1}, DataType::Bool(), {true, false});
  const Tensor b = TensorFrom<bool>({2}, DataType::Bool(), {true, false});
  EXPECT_EQ(Elements<bool>(Invoke("logical_xor", {a, b})),
            std::vector<bool>({false, true, true, false}));
  EXPECT_THAT(
      InvokeError("logical_xor", {TensorFrom({2}, kF32, {1, 0}), TensorFrom({2}, kF32, {1, 0})}),
      HasSubstr("logical_xor: argument 0 must be a bool tensor"));
}

TEST(BinaryOps, BroadcastsScalarsRowsColumnsAndRanks) {
  struct Case {
    Shape a, b, out;
  };
  const std::vector<Case> cases = {
      {{}, {}, {}},                    // scalars
      {{5}, {5}, {5}},                 // same shape
      {{}, {7}, {7}},                  // scalar operand, either side
      {{3, 5}, {}, {3, 5}},            //
      {{3, 5}, {5}, {3, 5}},           // row
      {{1, 5}, {3, 5}, {3, 5}},        //
      {{3, 1}, {3, 5}, {3, 5}},        // column
      {{3, 1}, {1, 5}, {3, 5}},        // outer product
      {{2, 1, 3}, {4, 1}, {2, 4, 3}},  // rank mismatch
      {{2, 3, 1, 5}, {3, 4, 1}, {2, 3, 4, 5}},
      {{1, 1, 7}, {1, 1}, {1, 1, 7}},  // all size-1 outer dims
      {{3, 0}, {1}, {3, 0}},           // empty
  };
  for (const Case& test : cases) {
    for (const DataType dtype : {DataType::Float32(), DataType::Int64()}) {
      SCOPED_TRACE(ShapeToString(test.a) + " + " + ShapeToString(test.b) + " " + dtype.name());
      const Tensor a = Iota(test.a, dtype, -3);
      const Tensor b = Iota(test.b, dtype, 10);
      const auto minus = [](double x, double y) { return x - y; };
      const Tensor forward = Invoke("subtract", {a, b});
      EXPECT_EQ(forward->shape(), test.out);
      EXPECT_EQ(Values(forward), Reference(a, b, test.out, minus));
      const Tensor backward = Invoke("subtract", {b, a});
      EXPECT_EQ(backward->shape(), test.out);
      EXPECT_EQ(Values(backward), Reference(b, a, test.out, minus));
    }
  }
}

TEST(BinaryOps, Float16Broadcast) {
  const Tensor a = TensorFrom({2, 1}, DataType::Float16(), {0.5, -1.5});
  const Tensor b = TensorFrom({3}, DataType::Float16(), {1.0, 2.0, 0.25});
  const Tensor out = Invoke("multiply", {a, b});
  EXPECT_EQ(out->dtype(), DataType::Float16());
  EXPECT_EQ(Values(out), std::vector<double>({0.5, 1.0, 0.125, -1.5, -3.0, -0.375}));
}

TEST(BinaryOps, TypesWithAny) {
  EXPECT_EQ(TypeOf("add", {TensorOf({kAny, 3}), TensorOf({1, 3})}), "Tensor[(?, 3), float32]");
  EXPECT_EQ(TypeOf("add", {TensorOf({kAny}), TensorOf({1})}), "Tensor[(?,), float32]");
  EXPECT_EQ(TypeOf("add", {TensorOf({kAny}), TensorOf({4})}), "Tensor[(4,), float32]");
  EXPECT_EQ(TypeOf("multiply", {TensorOf({4}), TensorOf({kAny})}), "Tensor[(4,), float32]");
  EXPECT_EQ(TypeOf("multiply", {TensorOf({kAny, 1}), TensorOf({kAny})}), "Tensor[(?, ?), float32]");
  // A bounded `?` against 1 keeps its bound; two `?` are the larger bound,
  // or none when one has none.
  const ir::Dim at_most_8 = ir::Dim::Any(8);
  EXPECT_EQ(TypeOf("add", {TensorOf({at_most_8, 3}), TensorOf({1, 3})}),
            "Tensor[(?<=8, 3), float32]");
  EXPECT_EQ(TypeOf("add", {TensorOf({at_most_8}), TensorOf({ir::Dim::Any(5)})}),
            "Tensor[(?<=8,), float32]");
  EXPECT_EQ(TypeOf("add", {TensorOf({at_most_8}), TensorOf({kAny})}), "Tensor[(?,), float32]");
  EXPECT_EQ(TypeOf("add", {TensorOf({at_most_8}), TensorOf({4})}), "Tensor[(4,), float32]");
  EXPECT_EQ(TypeOf("less", {TensorOf({2, kAny, 1}), TensorOf({5})}), "Tensor[(2, ?, 5), bool]");
  EXPECT_EQ(TypeOf("where", {TensorOf({kAny, 1}, DataType::Bool()),
                             TensorOf({3}, DataType::Int32()), TensorOf({}, DataType::Int32())}),
            "Tensor[(?, 3), int32]");
}

TEST(BinaryOps, StaticMismatchIsATypeError) {
  EXPECT_THAT(
      [] {
        TypeOf("add", {TensorOf({2, 3}), TensorOf({4, 3})});
      },
      ::testing::ThrowsMessage<Error>(HasSubstr("dimension 0 conflicts: 2 does not match 4")));
  EXPECT_THAT(
      InvokeError("equal", {TensorFrom({3}, kF32, {1, 2, 3}), TensorFrom({2}, kF32, {1, 2})}),
      HasSubstr("dimension 0 conflicts: 3 does not match 2"));
  EXPECT_THAT(
      [] {
        TypeOf("where", {TensorOf({2}, DataType::Bool()), TensorOf({3}), TensorOf({3})});
      },
      ::testing::ThrowsMessage<Error>(HasSubstr("where: dimension 0 conflicts")));
}

TEST(BinaryOps, RuntimeBroadcastMismatchFailsInTheShapeFunction) {
  // Tensor[(?, 3)] + Tensor[(3, 3)] type-checks; the `?` then turns out to be 4.
  EXPECT_EQ(TypeOf("add", {TensorOf({kAny, 3}), TensorOf({3, 3})}), "Tensor[(3, 3), float32]");
  const std::vector<Shape> shapes = {{4, 3}, {3, 3}};
  EXPECT_THAT(
      [&] { Def("add").shape_func(shapes, {}, {}); },
      ::testing::ThrowsMessage<Error>(HasSubstr("add: cannot broadcast shapes (4, 3) and (3, 3)")));
  const std::vector<Shape> three = {{2, 1}, {1, 3}, {5}};
  EXPECT_THAT([&] { Def("where").shape_func(three, {}, {}); },
              ::testing::ThrowsMessage<Error>(HasSubstr("where: cannot broadcast shapes")));
  const std::vector<Shape> fine = {{4, 1}, {3}};
  EXPECT_EQ(Def("greater").shape_func(fine, {}, {}), std::vector<Shape>({{4, 3}}));
}

TEST(BinaryOps, DTypeErrors) {
  EXPECT_THAT(InvokeError("add", {TensorFrom({2}, kF32, {1, 2}),
                                  TensorFrom<int32_t>({2}, DataType::Int32(), {1, 2})}),
              HasSubstr("add: argument dtypes differ: float32 and int32"));
  const Tensor t = TensorFrom<bool>({2}, DataType::Bool(), {true, false});
  for (const std::string op :
       {"add", "subtract", "multiply", "divide", "power", "maximum", "minimum"}) {
    EXPECT_THAT(InvokeError(op, {t, t}),
                HasSubstr(op + ": argument 0 must be an integer or floating-point tensor, got "
                               "Tensor[(2,), bool]"));
  }
  EXPECT_THAT(InvokeError("where", {TensorFrom({2}, kF32, {1, 0}), TensorFrom({2}, kF32, {1, 2}),
                                    TensorFrom({2}, kF32, {3, 4})}),
              HasSubstr("where: condition must be a bool tensor, got Tensor[(2,), float32]"));
  EXPECT_THAT(InvokeError("where", {t, TensorFrom({2}, kF32, {1, 2}),
                                    TensorFrom({2}, DataType::Float64(), {3, 4})}),
              HasSubstr("where: x and y dtypes differ: float32 and float64"));
}

TEST(BinaryOps, WhereBroadcastsThreeWays) {
  const Tensor condition = TensorFrom<bool>({2, 1}, DataType::Bool(), {true, false});
  const Tensor x = TensorFrom<int64_t>({1, 3}, DataType::Int64(), {1, 2, 3});
  const Tensor y = TensorFrom<int64_t>({}, DataType::Int64(), {-1});
  const Tensor out = Invoke("where", {condition, x, y});
  EXPECT_EQ(out->dtype(), DataType::Int64());
  EXPECT_EQ(out->shape(), Shape({2, 3}));
  EXPECT_EQ(Elements<int64_t>(out), std::vector<int64_t>({1, 2, 3, -1, -1, -1}));

  const Tensor mask = TensorFrom<bool>({5}, DataType::Bool(), {true, false, false, true, true});
  const Tensor a = TensorFrom({5}, DataType::Float16(), {1, 2, 3, 4, 5});
  const Tensor b = TensorFrom({2, 5}, DataType::Float16(), {0, 0, 0, 0, 0, 9, 9, 9, 9, 9});
  EXPECT_EQ(Values(Invoke("where", {mask, a, b})),
            std::vector<double>({1, 0, 0, 4, 5, 1, 9, 9, 4, 5}));
}

TEST(BinaryOps, RegistryDescribesEveryOp) {
  for (const std::string op :
       {"add", "subtract", "multiply", "divide", "power", "maximum", "minimum", "equal",
        "not_equal", "less", "less_equal", "greater", "greater_equal", "logical_and", "logical_or",
        "where", "mod", "floor_mod", "logical_xor"}) {
    SCOPED_TRACE(op);
    const OpDef& def = Def(op);
    EXPECT_FALSE(def.description.empty());
    EXPECT_EQ(def.min_inputs, op == "where" ? 3 : 2);
    EXPECT_EQ(def.max_inputs, def.min_inputs);
    EXPECT_TRUE(def.attrs.empty());
    EXPECT_EQ(def.pattern, OpPattern::kBroadcast);
    EXPECT_EQ(def.shape_mode, ShapeFuncMode::kDataIndependent);
    EXPECT_TRUE(def.relation && def.shape_func && def.kernel);
  }
}

}  // namespace
}  // namespace nimble::op::testing
