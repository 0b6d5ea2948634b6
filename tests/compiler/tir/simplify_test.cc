// tir::Simplify: the rewrites it must make (printed loop IR), the ones it
// must not make without proof, and, on random index expressions, that the
// simplified kernel computes what the original does (both run by the
// loop-IR interpreter).
#include "nimble/compiler/tir/simplify.h"

#include <gtest/gtest.h>

#include <functional>
#include <random>
#include <string>
#include <vector>

#include "nimble/compiler/tir/printer.h"
#include "nimble/vm/tensor.h"
#include "tests/compiler/tir/interpreter.h"

namespace nimble::tir {
namespace {

constexpr DataType kI64 = DataType::Int64();
constexpr DataType kI32 = DataType::Int32();
constexpr DataType kF32 = DataType::Float32();

Buffer MakeBuffer(const std::string& name, DataType dtype, std::vector<Expr> shape) {
  return std::make_shared<BufferNode>(name, dtype, std::move(shape));
}

// A kernel over a float32 input of shape [rows, d] (d a dimension variable)
// that stores `value(i, j, d)` into an int64 output of the same shape, in
// loops i < rows, j < d.
struct IndexKernel {
  Var d = MakeVar("d");
  Var i = MakeVar("i");
  Var j = MakeVar("j");
  int64_t rows = 3;

  PrimFunc Make(const Expr& value) const {
    const Buffer input = MakeBuffer("x", kF32, {IntImm(rows), d});
    const Buffer output = MakeBuffer("out", kI64, {IntImm(rows), d});
    const Stmt store = Store(output, Add(Mul(i, d), j), value);
    return PrimFunc{
        .name = "index",
        .params = {input, output},
        .num_inputs = 1,
        .body = For(i, IntImm(rows), ForKind::kSerial, For(j, d, ForKind::kSerial, store))};
  }

  // The stored expression of a kernel made by Make, after simplification.
  std::string Simplified(const Expr& value) const {
    const PrimFunc func = Simplify(Make(value));
    const auto& outer = static_cast<const ForNode&>(*func.body);
    const auto& inner = static_cast<const ForNode&>(*outer.body);
    return ToString(static_cast<const StoreNode&>(*inner.body).value);
  }

  std::vector<int64_t> Run(const PrimFunc& func, int64_t dim) const {
    const Tensor input = TensorNode::Empty({rows, dim}, kF32);
    const Tensor output = TensorNode::Empty({rows, dim}, kI64);
    testing::Interpret(func, std::vector{input, output});
    const int64_t* data = output->data<int64_t>();
    return std::vector<int64_t>(data, data + rows * dim);
  }
};

TEST(SimplifyTest, ReshapeIndicesBecomeTheLoopVariables) {
  const IndexKernel k;
  const Expr flat = Add(Mul(k.i, k.d), k.j);
  EXPECT_EQ(k.Simplified(FloorDiv(flat, k.d)), "i");
  EXPECT_EQ(k.Simplified(FloorMod(flat, k.d)), "j");
  // A row index that is split by a constant and put back together.
  EXPECT_EQ(
      k.Simplified(Add(Mul(FloorDiv(k.i, IntImm(64)), IntImm(64)), FloorMod(k.i, IntImm(64)))),
      "i");
  EXPECT_EQ(k.Simplified(FloorDiv(k.i, IntImm(3))), "0");
  EXPECT_EQ(k.Simplified(FloorMod(k.j, k.d)), "j");
}

TEST(SimplifyTest, AConstantTimesASumIsDistributedToFindMultiples) {
  // A transpose of a reshape: (d * 2 + i mod 2) * 16 + j mod 16 taken mod
  // 32 loses its d term, whose multiple of 32 shows only once distributed.
  const IndexKernel k;
  const Expr value =
      FloorMod(Add(Mul(Add(Mul(k.d, IntImm(2)), FloorMod(k.i, IntImm(2))), IntImm(16)),
                   FloorMod(k.j, IntImm(16))),
               IntImm(32));
  EXPECT_EQ(k.Simplified(value), "((floormod(i, 2) * 16) + floormod(j, 16))");
  EXPECT_EQ(k.Run(Simplify(k.Make(value)), 37), k.Run(k.Make(value), 37));
}

TEST(SimplifyTest, NestedFlatIndicesAreBoundedByTheProductOfExtents) {
  // (i * d + j) < 3 * d: a flat index over the whole [3, d] iteration space.
  const IndexKernel k;
  const Expr flat = Add(Mul(k.i, k.d), k.j);
  EXPECT_EQ(k.Simplified(FloorDiv(flat, Mul(IntImm(3), k.d))), "0");
  EXPECT_EQ(k.Simplified(FloorMod(flat, Mul(k.d, IntImm(3)))), "((i * d) + j)");
}

TEST(SimplifyTest, QuotientAndRemainderRecombineForAnyDividend) {
  // floordiv(x, e) * e + floormod(x, e) == x holds without bounds on x.
  const Var x = MakeVar("x");
  const Var e = MakeVar("e");
  EXPECT_EQ(ToString(Simplify(Add(FloorMod(x, e), Mul(FloorDiv(x, e), e)))), "x");
  EXPECT_EQ(ToString(Simplify(FloorDiv(Mul(IntImm(768), x), IntImm(768)))), "x");
  EXPECT_EQ(ToString(Simplify(FloorDiv(FloorDiv(x, IntImm(4)), IntImm(8)))), "floordiv(x, 32)");
  EXPECT_EQ(ToString(Simplify(FloorMod(Mul(x, IntImm(6)), IntImm(3)))), "0");
}

TEST(SimplifyTest, KeepsWhatItCannotProve) {
  const IndexKernel k;
  // j + 1 reaches d on the last iteration.
  EXPECT_EQ(k.Simplified(FloorDiv(Add(k.j, IntImm(1)), k.d)), "floordiv((j + 1), d)");
  // i may be 2 while d is 1.
  EXPECT_EQ(k.Simplified(FloorMod(k.i, k.d)), "floormod(i, d)");
  // A negative dividend: floordiv(j - 1, d) is -1 at j = 0.
  EXPECT_EQ(k.Simplified(FloorDiv(Sub(k.j, IntImm(1)), k.d)), "floordiv((j - 1), d)");
  // Narrow integers wrap, so ranges say nothing about them.
  const Var narrow = MakeVar("n", kI32);
  EXPECT_EQ(ToString(Simplify(FloorMod(FloorMod(narrow, IntImm(4, kI32)), IntImm(8, kI32)))),
            "floormod(floormod(n, 4_int32), 8_int32)");
}

TEST(SimplifyTest, ProvenComparisonsFoldAndTheirAssertionsGo) {
  const IndexKernel k;
  EXPECT_EQ(k.Simplified(Cast(kI64, Compare(CompareOp::kLt, k.j, k.d))), "1");
  EXPECT_EQ(k.Simplified(Cast(kI64, Compare(CompareOp::kGe, k.i, IntImm(3)))), "0");
  EXPECT_EQ(k.Simplified(Cast(kI64, Compare(CompareOp::kLt, k.i, k.d))), "int64((i < d))");

  const Var d = MakeVar("d");
  const Buffer input = MakeBuffer("x", kF32, {d});
  const Buffer output = MakeBuffer("y", kF32, {FloorDiv(Mul(IntImm(4), d), IntImm(4))});
  const Var i = MakeVar("i");
  const Stmt copy = For(i, d, ForKind::kVectorized, Store(output, i, Load(input, i)));
  const PrimFunc func = Simplify(
      PrimFunc{.name = "copy",
               .params = {input, output},
               .num_inputs = 1,
               .body = Assert(Compare(CompareOp::kEq, Mul(IntImm(4), d),
                                      Mul(IntImm(4), FloorDiv(Mul(IntImm(4), d), IntImm(4)))),
                              "sizes differ",
                              Assert(Compare(CompareOp::kGt, d, IntImm(2)), "too small", copy))});
  EXPECT_EQ(ToString(func),
            "kernel copy(x: float32[d], out y: float32[d]) {\n"
            "  assert (d > 2), \"too small\"\n"
            "  for i in [0, d) vectorized {\n"
            "    y[i] = x[i]\n"
            "  }\n"
            "}\n");
}

// Random index expressions over i < 3, j < d and d itself, with constant and
// symbolic divisors: the simplified kernel stores the same values for every d.
TEST(SimplifyTest, RandomIndexExpressionsKeepTheirValues) {
  const IndexKernel k;
  std::mt19937_64 random(20261124);
  const auto pick = [&](int n) { return static_cast<int>(random() % static_cast<uint64_t>(n)); };
  std::function<Expr(int)> generate = [&](int depth) -> Expr {
    if (depth == 0 || pick(4) == 0) {
      switch (pick(4)) {
        case 0:
          return k.i;
        case 1:
          return k.j;
        case 2:
          return k.d;
        default:
          return IntImm(pick(7));
      }
    }
    const Expr a = generate(depth - 1);
    const Expr divisor =
        pick(2) ? IntImm(1 + pick(6)) : (pick(2) ? Expr(k.d) : Mul(k.d, IntImm(1 + pick(3))));
    switch (pick(8)) {
      case 0:
        return Add(a, generate(depth - 1));
      case 1:
        return Sub(a, generate(depth - 1));
      case 2:
        return Mul(a, pick(2) ? Expr(k.d) : IntImm(pick(5)));
      case 3:
        return FloorDiv(a, divisor);
      case 4:
        return FloorMod(a, divisor);
      case 5:
        // The pattern reshapes produce: a quotient and remainder put back.
        return Add(Mul(FloorDiv(a, divisor), divisor), FloorMod(a, divisor));
      case 6:
        return Add(Mul(a, divisor), FloorMod(generate(depth - 1), divisor));
      default:
        return Select(Compare(CompareOp::kLt, a, k.d), generate(depth - 1), a);
    }
  };
  int simplified = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const Expr value = generate(4);
    const PrimFunc original = k.Make(value);
    const PrimFunc result = Simplify(original);
    if (ToString(result) != ToString(original)) ++simplified;
    for (const int64_t dim : {1, 2, 3, 5, 8}) {
      ASSERT_EQ(k.Run(result, dim), k.Run(original, dim)) << "d = " << dim << "\noriginal:\n"
                                                          << ToString(original) << "simplified:\n"
                                                          << ToString(result);
    }
  }
  // About half of them contain something to simplify.
  EXPECT_GT(simplified, 150);
}

}  // namespace
}  // namespace nimble::tir
