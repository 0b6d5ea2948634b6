#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "nimble/compiler/op/invoke.h"
#include "nimble/compiler/op/op.h"
#include "nimble/vm/error.h"

namespace nimble::op {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

const OpDef& Def(const std::string& name) {
  const OpDef* def = OpRegistry::Global().Find(name);
  if (!def) throw Error("no operator " + name);
  return *def;
}

Tensor Invoke(const std::string& name, const std::vector<Tensor>& inputs) {
  return InvokeOp(Def(name), std::vector<Ref<Object>>(inputs.begin(), inputs.end()), {})
      .as<TensorNode>();
}

std::string InvokeError(const std::string& name, const std::vector<Tensor>& inputs) {
  try {
    Invoke(name, inputs);
  } catch (const Error& error) {
    return error.what();
  }
  return "no error";
}

// Elements stored exactly as given (no round trip through double).
template <typename T>
Tensor Exact(const Shape& shape, DataType dtype, const std::vector<T>& values) {
  Tensor tensor = TensorNode::Empty(shape, dtype);
  std::copy(values.begin(), values.end(), tensor->data<T>());
  return tensor;
}

Tensor Floats(const Shape& shape, const std::vector<double>& values,
              DataType dtype = DataType::Float32()) {
  return TensorNode::FromVector(shape, dtype, values);
}

// 0, 1, 2, ... as `dtype`, offset so that some are negative.
Tensor Iota(const Shape& shape, DataType dtype, double start) {
  std::vector<double> values(static_cast<size_t>(ShapeNumel(shape)));
  for (size_t i = 0; i < values.size(); ++i) values[i] = start + static_cast<double>(i);
  return TensorNode::FromVector(shape, dtype, values);
}

std::vector<double> Values(const Tensor& tensor) {
  std::vector<double> values;
  for (int64_t i = 0; i < tensor->numel(); ++i) values.push_back(tensor->GetAsDouble(i));
  return values;
}

template <typename T>
std::vector<T> Elements(const Tensor& tensor) {
  return std::vector<T>(tensor->data<T>(), tensor->data<T>() + tensor->numel());
}

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

ir::Type TensorTy(std::vector<ir::Dim> shape, DataType dtype = DataType::Float32()) {
  return ir::MakeTensorType(std::move(shape), dtype);
}

std::string ResolvedType(const std::string& op, const std::vector<ir::Type>& args) {
  return ir::TypeToString(ResolveCallType(Def(op), args, {}));
}

const ir::Dim kAny = ir::Dim::Any();

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
  const std::vector<std::pair<DataType, double>> dtypes = {
      {DataType::Float32(), 1e-6}, {DataType::Float64(), 1e-14}, {DataType::Float16(), 2e-3}};
  for (const ArithCase& test : kFloatArith) {
    for (const auto& [dtype, tolerance] : dtypes) {
      SCOPED_TRACE(test.op + " " + dtype.name());
      const Tensor a = Floats({7}, {0.5, 1.25, 2.0, 3.0, 0.75, 1.5, 2.5}, dtype);
      const Tensor b = Floats({7}, {2.0, 0.5, 1.5, 1.0, 3.0, 2.0, 0.25}, dtype);
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
  const Tensor a = Exact<int32_t>({5}, DataType::Int32(), {7, -7, 9, -9, 2});
  const Tensor b = Exact<int32_t>({5}, DataType::Int32(), {2, 2, -4, -4, 5});
  EXPECT_EQ(Elements<int32_t>(Invoke("add", {a, b})), std::vector<int32_t>({9, -5, 5, -13, 7}));
  EXPECT_EQ(Elements<int32_t>(Invoke("subtract", {a, b})),
            std::vector<int32_t>({5, -9, 13, -5, -3}));
  EXPECT_EQ(Elements<int32_t>(Invoke("multiply", {a, b})),
            std::vector<int32_t>({14, -14, -36, 36, 10}));
  // C semantics: truncation toward zero, not numpy's floor_divide.
  EXPECT_EQ(Elements<int32_t>(Invoke("divide", {a, b})), std::vector<int32_t>({3, -3, -2, 2, 0}));
  EXPECT_EQ(Elements<int32_t>(Invoke("maximum", {a, b})), std::vector<int32_t>({7, 2, 9, -4, 5}));
  EXPECT_EQ(Elements<int32_t>(Invoke("minimum", {a, b})), std::vector<int32_t>({2, -7, -4, -9, 2}));

  const Tensor base = Exact<int64_t>({4}, DataType::Int64(), {3, -2, 10, 7});
  const Tensor exponent = Exact<int64_t>({4}, DataType::Int64(), {4, 3, 0, 1});
  EXPECT_EQ(Elements<int64_t>(Invoke("power", {base, exponent})),
            std::vector<int64_t>({81, -8, 1, 7}));
  const int64_t big = int64_t{1} << 40;
  const Tensor large = Exact<int64_t>({2}, DataType::Int64(), {big, -big});
  EXPECT_EQ(Elements<int64_t>(Invoke("add", {large, large})),
            std::vector<int64_t>({2 * big, -2 * big}));
  EXPECT_EQ(
      Elements<int64_t>(Invoke("divide", {large, Exact<int64_t>({}, DataType::Int64(), {-3})})),
      std::vector<int64_t>({-big / 3, big / 3}));
}

TEST(BinaryOps, IntegerOverflowWraps) {
  const int32_t max32 = std::numeric_limits<int32_t>::max();
  const int32_t min32 = std::numeric_limits<int32_t>::min();
  const Tensor a = Exact<int32_t>({2}, DataType::Int32(), {max32, min32});
  const Tensor one = Exact<int32_t>({}, DataType::Int32(), {1});
  const Tensor minus_one = Exact<int32_t>({}, DataType::Int32(), {-1});
  EXPECT_EQ(Elements<int32_t>(Invoke("add", {a, one})), std::vector<int32_t>({min32, min32 + 1}));
  EXPECT_EQ(Elements<int32_t>(Invoke("divide", {a, minus_one})),
            std::vector<int32_t>({-max32, min32}));
  const Tensor two = Exact<int32_t>({}, DataType::Int32(), {2});
  const Tensor thirty_two = Exact<int32_t>({}, DataType::Int32(), {32});
  EXPECT_EQ(Elements<int32_t>(Invoke("power", {two, thirty_two})), std::vector<int32_t>({0}));
}

TEST(BinaryOps, IntegerDivisionByZeroIsAnError) {
  const Tensor a = Exact<int32_t>({3}, DataType::Int32(), {1, 2, 3});
  const Tensor b = Exact<int32_t>({3}, DataType::Int32(), {1, 0, 1});
  EXPECT_THAT(InvokeError("divide", {a, b}), StartsWith("divide: division by zero"));
  const Tensor zero64 = Exact<int64_t>({}, DataType::Int64(), {0});
  EXPECT_THAT(InvokeError("divide", {Exact<int64_t>({2}, DataType::Int64(), {5, 6}), zero64}),
              StartsWith("divide: division by zero"));
  // Floats follow IEEE instead.
  const Tensor q = Invoke("divide", {Floats({2}, {1.0, -1.0}), Floats({}, {0.0})});
  EXPECT_EQ(Values(q), std::vector<double>({INFINITY, -INFINITY}));
}

TEST(BinaryOps, NegativeIntegerExponentIsAnError) {
  const Tensor a = Exact<int32_t>({2}, DataType::Int32(), {2, 2});
  const Tensor b = Exact<int32_t>({2}, DataType::Int32(), {1, -1});
  EXPECT_THAT(InvokeError("power", {a, b}),
              HasSubstr("power: integers to negative integer powers are not allowed"));
}

TEST(BinaryOps, MaximumAndMinimumPropagateNan) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor a = Floats({2}, {nan, 1.0}, DataType::Float64());
  const Tensor b = Floats({2}, {1.0, nan}, DataType::Float64());
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
  const Tensor t = Exact<bool>({2}, DataType::Bool(), {true, false});
  EXPECT_EQ(Elements<bool>(Invoke("equal", {t, Exact<bool>({}, DataType::Bool(), {true})})),
            std::vector<bool>({true, false}));
}

TEST(BinaryOps, LogicalAndOr) {
  const Tensor a = Exact<bool>({2, 1}, DataType::Bool(), {true, false});
  const Tensor b = Exact<bool>({2}, DataType::Bool(), {true, false});
  const Tensor conj = Invoke("logical_and", {a, b});
  EXPECT_EQ(conj->shape(), Shape({2, 2}));
  EXPECT_EQ(Elements<bool>(conj), std::vector<bool>({true, false, false, false}));
  EXPECT_EQ(Elements<bool>(Invoke("logical_or", {a, b})),
            std::vector<bool>({true, true, true, false}));
  EXPECT_THAT(InvokeError("logical_or", {Floats({2}, {1, 0}), Floats({2}, {1, 0})}),
              HasSubstr("logical_or: argument 0 must be a bool tensor, got Tensor[(2,), float32]"));
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
  const Tensor a = Floats({2, 1}, {0.5, -1.5}, DataType::Float16());
  const Tensor b = Floats({3}, {1.0, 2.0, 0.25}, DataType::Float16());
  const Tensor out = Invoke("multiply", {a, b});
  EXPECT_EQ(out->dtype(), DataType::Float16());
  EXPECT_EQ(Values(out), std::vector<double>({0.5, 1.0, 0.125, -1.5, -3.0, -0.375}));
}

TEST(BinaryOps, TypesWithAny) {
  EXPECT_EQ(ResolvedType("add", {TensorTy({kAny, 3}), TensorTy({1, 3})}),
            "Tensor[(?, 3), float32]");
  EXPECT_EQ(ResolvedType("add", {TensorTy({kAny}), TensorTy({1})}), "Tensor[(?,), float32]");
  EXPECT_EQ(ResolvedType("add", {TensorTy({kAny}), TensorTy({4})}), "Tensor[(4,), float32]");
  EXPECT_EQ(ResolvedType("multiply", {TensorTy({4}), TensorTy({kAny})}), "Tensor[(4,), float32]");
  EXPECT_EQ(ResolvedType("multiply", {TensorTy({kAny, 1}), TensorTy({kAny})}),
            "Tensor[(?, ?), float32]");
  EXPECT_EQ(ResolvedType("less", {TensorTy({2, kAny, 1}), TensorTy({5})}),
            "Tensor[(2, ?, 5), bool]");
  EXPECT_EQ(
      ResolvedType("where", {TensorTy({kAny, 1}, DataType::Bool()),
                             TensorTy({3}, DataType::Int32()), TensorTy({}, DataType::Int32())}),
      "Tensor[(?, 3), int32]");
}

TEST(BinaryOps, StaticMismatchIsATypeError) {
  EXPECT_THAT(
      [] {
        ResolvedType("add", {TensorTy({2, 3}), TensorTy({4, 3})});
      },
      ::testing::ThrowsMessage<Error>(HasSubstr("dimension 0 conflicts: 2 does not match 4")));
  EXPECT_THAT(InvokeError("equal", {Floats({3}, {1, 2, 3}), Floats({2}, {1, 2})}),
              HasSubstr("dimension 0 conflicts: 3 does not match 2"));
  EXPECT_THAT(
      [] {
        ResolvedType("where", {TensorTy({2}, DataType::Bool()), TensorTy({3}), TensorTy({3})});
      },
      ::testing::ThrowsMessage<Error>(HasSubstr("where: dimension 0 conflicts")));
}

TEST(BinaryOps, RuntimeBroadcastMismatchFailsInTheShapeFunction) {
  // Tensor[(?, 3)] + Tensor[(3, 3)] type-checks; the `?` then turns out to be 4.
  EXPECT_EQ(ResolvedType("add", {TensorTy({kAny, 3}), TensorTy({3, 3})}),
            "Tensor[(3, 3), float32]");
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
  EXPECT_THAT(
      InvokeError("add", {Floats({2}, {1, 2}), Exact<int32_t>({2}, DataType::Int32(), {1, 2})}),
      HasSubstr("add: argument dtypes differ: float32 and int32"));
  const Tensor t = Exact<bool>({2}, DataType::Bool(), {true, false});
  for (const std::string op :
       {"add", "subtract", "multiply", "divide", "power", "maximum", "minimum"}) {
    EXPECT_THAT(InvokeError(op, {t, t}),
                HasSubstr(op + ": argument 0 must be an integer or floating-point tensor, got "
                               "Tensor[(2,), bool]"));
  }
  EXPECT_THAT(InvokeError("where", {Floats({2}, {1, 0}), Floats({2}, {1, 2}), Floats({2}, {3, 4})}),
              HasSubstr("where: condition must be a bool tensor, got Tensor[(2,), float32]"));
  EXPECT_THAT(
      InvokeError("where", {t, Floats({2}, {1, 2}), Floats({2}, {3, 4}, DataType::Float64())}),
      HasSubstr("where: x and y dtypes differ: float32 and float64"));
}

TEST(BinaryOps, WhereBroadcastsThreeWays) {
  const Tensor condition = Exact<bool>({2, 1}, DataType::Bool(), {true, false});
  const Tensor x = Exact<int64_t>({1, 3}, DataType::Int64(), {1, 2, 3});
  const Tensor y = Exact<int64_t>({}, DataType::Int64(), {-1});
  const Tensor out = Invoke("where", {condition, x, y});
  EXPECT_EQ(out->dtype(), DataType::Int64());
  EXPECT_EQ(out->shape(), Shape({2, 3}));
  EXPECT_EQ(Elements<int64_t>(out), std::vector<int64_t>({1, 2, 3, -1, -1, -1}));

  const Tensor mask = Exact<bool>({5}, DataType::Bool(), {true, false, false, true, true});
  const Tensor a = Floats({5}, {1, 2, 3, 4, 5}, DataType::Float16());
  const Tensor b = Floats({2, 5}, {0, 0, 0, 0, 0, 9, 9, 9, 9, 9}, DataType::Float16());
  EXPECT_EQ(Values(Invoke("where", {mask, a, b})),
            std::vector<double>({1, 0, 0, 4, 5, 1, 9, 9, 4, 5}));
}

TEST(BinaryOps, RegistryDescribesEveryOp) {
  for (const std::string op : {"add", "subtract", "multiply", "divide", "power", "maximum",
                               "minimum", "equal", "not_equal", "less", "less_equal", "greater",
                               "greater_equal", "logical_and", "logical_or", "where"}) {
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
}  // namespace nimble::op
