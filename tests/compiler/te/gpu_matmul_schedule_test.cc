// The GPU's matrix-product template (te/gpu_matmul_schedule.h), run by the
// loop-IR interpreter with a thread of its own per GPU thread of a block:
// small tiles and the default one give the product on static, symbolic,
// batched and empty shapes in both forms (b as [n, k] and as [k, n]); te::Lower
// takes the template for GPU products of many rows and keeps a block per
// element for few; an element that is no product of the two operands, or a
// reduction other than a sum, gets no template; bad tiles are refused. The
// expected values come from a plain triple loop here.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "nimble/compiler/te/gpu_matmul_schedule.h"
#include "nimble/compiler/te/lower.h"
#include "nimble/compiler/tir/printer.h"
#include "nimble/compiler/tir/simplify.h"
#include "nimble/vm/error.h"
#include "tests/compiler/tir/interpreter.h"

namespace nimble::te {
namespace {

constexpr DataType kF32 = DataType::Float32();

// c[batch, row, col] = sum over k of a[batch, row, k] * b[col, k] (b[k, col]
// with `outer`); no batch dimension unless `batched`.
struct ProductShape {
  bool batched = false;
  int64_t batch = 1, rows = 0, cols = 0, depth = 0;
  bool symbolic = false;  // rows, columns and depth
  bool outer = false;
};

struct Operands {
  tir::Buffer a, b, c;
  std::vector<Expr> a_shape, b_shape, c_shape;
};

Operands MakeOperands(const ProductShape& shape) {
  const auto dim = [&](int64_t value, const std::string& name) -> Expr {
    return shape.symbolic ? Expr(tir::MakeVar(name)) : tir::IntImm(value);
  };
  const Expr rows = dim(shape.rows, "m"), cols = dim(shape.cols, "n"),
             depth = dim(shape.depth, "k");
  Operands operands;
  operands.a_shape = {rows, depth};
  operands.c_shape = {rows, cols};
  if (shape.batched) {
    operands.a_shape.insert(operands.a_shape.begin(), tir::IntImm(shape.batch));
    operands.c_shape.insert(operands.c_shape.begin(), tir::IntImm(shape.batch));
  }
  operands.b_shape = shape.outer ? std::vector{depth, cols} : std::vector{cols, depth};
  operands.a = std::make_shared<tir::BufferNode>("a", kF32, operands.a_shape);
  operands.b = std::make_shared<tir::BufferNode>("b", kF32, operands.b_shape);
  operands.c = std::make_shared<tir::BufferNode>("c", kF32, operands.c_shape);
  return operands;
}

// The stage the lowering would build, with `element` of the operands' loads.
MatMulStage StageOf(const Operands& operands, const ProductShape& shape,
                    ReduceKind kind = ReduceKind::kSum) {
  return MatMulStage{
      .name = "c",
      .dtype = kF32,
      .shape = operands.c_shape,
      .depth = operands.a_shape.back(),
      .reduce_kind = kind,
      .out = operands.c,
      .element =
          [operands, shape](const std::vector<Expr>& indices, const Expr& k) {
            std::vector<Expr> a_indices(indices.begin(), indices.end() - 1);
            a_indices.push_back(k);
            const std::vector<Expr> b_indices =
                shape.outer ? std::vector{k, indices.back()} : std::vector{indices.back(), k};
            return tir::Mul(tir::Load(operands.a, tir::FlatIndex(operands.a_shape, a_indices)),
                            tir::Load(operands.b, tir::FlatIndex(operands.b_shape, b_indices)));
          },
      .form = shape.outer ? ScheduleHint::kOuterProduct : ScheduleHint::kMatMul,
  };
}

tir::PrimFunc ScheduledKernel(const ProductShape& shape, const GpuMatMulTile& tile) {
  const Operands operands = MakeOperands(shape);
  const std::optional<tir::Stmt> body = ScheduleGpuMatMul(StageOf(operands, shape), tile);
  if (!body) throw Error("no template for the product");
  return tir::Simplify(tir::PrimFunc{.name = "product",
                                     .params = {operands.a, operands.b, operands.c},
                                     .num_inputs = 2,
                                     .body = *body,
                                     .device = tir::PrimFunc::Device::kGpu});
}

// The same product as te::Lower builds it for the GPU.
tir::PrimFunc LoweredKernel(const ProductShape& shape) {
  const Operands operands = MakeOperands(shape);
  const Tensor a = Placeholder("a", kF32, operands.a_shape);
  const Tensor b = Placeholder("b", kF32, operands.b_shape);
  const Tensor c = Compute(
      "c", operands.c_shape,
      [&](const std::vector<Expr>& indices) {
        const ReduceAxis k = MakeReduceAxis("k", operands.a_shape.back());
        std::vector<Expr> a_indices(indices.begin(), indices.end() - 1);
        a_indices.push_back(k.var);
        const Expr b_element =
            shape.outer ? Read(b, {k.var, indices.back()}) : Read(b, {indices.back(), k.var});
        return Reduce(ReduceKind::kSum, tir::Mul(Read(a, a_indices), b_element), {k});
      },
      shape.outer ? ScheduleHint::kOuterProduct : ScheduleHint::kMatMul);
  return Lower("product", {a, b}, {c}, {}, {}, tir::PrimFunc::Device::kGpu);
}

// Small integers, so that every sum is exact in float32 in any order.
nimble::Tensor RandomInts(const Shape& shape, std::mt19937& rng) {
  nimble::Tensor tensor = nimble::TensorNode::Empty(shape, kF32);
  std::uniform_int_distribution<int> uniform(-3, 3);
  for (int64_t i = 0; i < tensor->numel(); ++i) tensor->data<float>()[i] = uniform(rng);
  return tensor;
}

void ExpectProduct(const ProductShape& shape, const tir::PrimFunc& func) {
  static std::mt19937 rng(20261129);
  Shape a_shape = {shape.rows, shape.depth};
  Shape c_shape = {shape.rows, shape.cols};
  if (shape.batched) {
    a_shape.insert(a_shape.begin(), shape.batch);
    c_shape.insert(c_shape.begin(), shape.batch);
  }
  const nimble::Tensor a = RandomInts(a_shape, rng);
  const nimble::Tensor b = RandomInts(
      shape.outer ? Shape{shape.depth, shape.cols} : Shape{shape.cols, shape.depth}, rng);
  nimble::Tensor c = nimble::TensorNode::Empty(c_shape, kF32);
  std::fill_n(c->data<float>(), c->numel(), 1e9f);
  tir::testing::Interpret(func, std::vector{a, b, c});
  const int64_t batch = shape.batched ? shape.batch : 1;
  for (int64_t n = 0; n < batch; ++n) {
    for (int64_t i = 0; i < shape.rows; ++i) {
      for (int64_t j = 0; j < shape.cols; ++j) {
        float expected = 0;
        for (int64_t k = 0; k < shape.depth; ++k) {
          expected += a->data<float>()[(n * shape.rows + i) * shape.depth + k] *
                      b->data<float>()[shape.outer ? k * shape.cols + j : j * shape.depth + k];
        }
        ASSERT_EQ(c->data<float>()[(n * shape.rows + i) * shape.cols + j], expected)
            << "batch " << n << " row " << i << " col " << j << " of " << shape.rows << "x"
            << shape.cols << "x" << shape.depth << (shape.outer ? " outer" : "") << "\n"
            << tir::ToString(func);
      }
    }
  }
}

size_t Count(const std::string& text, const std::string& word) {
  size_t count = 0;
  for (size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) {
    ++count;
  }
  return count;
}

TEST(GpuMatMulScheduleTest, SmallTilesGiveTheProductOnEveryShape) {
  // 2 x 3 threads of 2 x 2 sums, 3 deep: blocks of 4 x 6 outputs, and 24 or
  // 30 values a slice for 6 threads, so some copies leave threads idle.
  const GpuMatMulTile tile{
      .thread_rows = 2, .thread_cols = 3, .sums_rows = 2, .sums_cols = 2, .depth = 3};
  for (bool outer : {false, true}) {
    for (bool symbolic : {false, true}) {
      for (int64_t rows : {0, 1, 4, 7}) {
        for (int64_t cols : {0, 1, 6, 13}) {
          for (int64_t depth : {0, 1, 3, 8}) {
            const ProductShape shape{.batched = true,
                                     .batch = 2,
                                     .rows = rows,
                                     .cols = cols,
                                     .depth = depth,
                                     .symbolic = symbolic,
                                     .outer = outer};
            ExpectProduct(shape, ScheduledKernel(shape, tile));
          }
        }
      }
    }
  }
}

TEST(GpuMatMulScheduleTest, GpuLoweringTilesProductsOfManyRows) {
  // The default tile: 256 threads, 64 x 64 outputs a block, 16 deep.
  for (const ProductShape& shape :
       {ProductShape{.rows = 70, .cols = 65, .depth = 33},
        ProductShape{
            .batched = true, .batch = 2, .rows = 16, .cols = 20, .depth = 17, .outer = true},
        ProductShape{.rows = 17, .cols = 3, .depth = 5, .symbolic = true}}) {
    const tir::PrimFunc func = LoweredKernel(shape);
    const std::string printed = tir::ToString(func);
    EXPECT_EQ(Count(printed, "gpu_blocks"), 1u) << printed;
    EXPECT_EQ(Count(printed, "for c.thread in [0, 256) gpu_block_threads"), 1u) << printed;
    EXPECT_EQ(Count(printed, "allocate shared c.first: float32[1040]"), 1u) << printed;
    EXPECT_EQ(Count(printed, "allocate shared c.second: float32[1040]"), 1u) << printed;
    EXPECT_EQ(Count(printed, "barrier"), 2u) << printed;
    EXPECT_EQ(Count(printed, "allocate c.sums: float32[16]"), 1u) << printed;
    ExpectProduct(shape, func);
  }
}

TEST(GpuMatMulScheduleTest, FewRowsKeepABlockPerElement) {
  // A matrix-vector product: 40 blocks, each output's k shared by its threads.
  const ProductShape shape{.rows = 1, .cols = 40, .depth = 300};
  const tir::PrimFunc func = LoweredKernel(shape);
  const std::string printed = tir::ToString(func);
  EXPECT_EQ(Count(printed, "gpu_block_threads"), 0u) << printed;
  EXPECT_EQ(Count(printed, "gpu_block_stride"), 1u) << printed;
  EXPECT_EQ(Count(printed, "block_sum"), 1u) << printed;
  ExpectProduct(shape, func);
}

TEST(GpuMatMulScheduleTest, OnlyASumOfProductsOfTheTwoOperandsIsTiled) {
  const ProductShape shape{.rows = 4, .cols = 4, .depth = 4};
  const Operands operands = MakeOperands(shape);
  EXPECT_FALSE(ScheduleGpuMatMul(StageOf(operands, shape, ReduceKind::kMax)));
  MatMulStage stage = StageOf(operands, shape);
  const auto product = stage.element;
  // A sum of the operands, and a product whose one side reads both indices.
  stage.element = [&](const std::vector<Expr>& indices, const Expr& k) {
    const Expr element = product(indices, k);
    const auto& mul = static_cast<const tir::BinaryNode&>(*element);
    return tir::Add(mul.a, mul.b);
  };
  EXPECT_FALSE(ScheduleGpuMatMul(stage));
  stage.element = [&](const std::vector<Expr>& indices, const Expr& k) {
    const Expr element = product(indices, k);
    const auto& mul = static_cast<const tir::BinaryNode&>(*element);
    return tir::Mul(tir::Add(mul.a, mul.b), mul.b);
  };
  EXPECT_FALSE(ScheduleGpuMatMul(stage));
  // Either side may come first.
  stage.element = [&](const std::vector<Expr>& indices, const Expr& k) {
    const Expr element = product(indices, k);
    const auto& mul = static_cast<const tir::BinaryNode&>(*element);
    return tir::Mul(mul.b, mul.a);
  };
  const std::optional<tir::Stmt> swapped = ScheduleGpuMatMul(
      stage, {.thread_rows = 2, .thread_cols = 2, .sums_rows = 1, .sums_cols = 2, .depth = 2});
  ASSERT_TRUE(swapped);
  ExpectProduct(shape, tir::Simplify(tir::PrimFunc{.name = "product",
                                                   .params = {operands.a, operands.b, operands.c},
                                                   .num_inputs = 2,
                                                   .body = *swapped,
                                                   .device = tir::PrimFunc::Device::kGpu}));
}

TEST(GpuMatMulScheduleTest, TilesOutOfRangeAreRefused) {
  const auto message = [](const GpuMatMulTile& tile) {
    try {
      CheckGpuMatMulTile(tile);
    } catch (const Error& error) {
      return std::string(error.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message({}), "no error");
  EXPECT_EQ(message({.depth = 0}),
            "gpu matmul schedule: each side of the tile must be between 1 and 1024, got 0");
  EXPECT_EQ(message({.thread_rows = 32, .thread_cols = 64}),
            "gpu matmul schedule: threads must be between 1 and 1024, got 2048");
  EXPECT_EQ(message({.sums_rows = 16, .sums_cols = 8}),
            "gpu matmul schedule: a thread's sums must be between 1 and 64, got 128");
  EXPECT_EQ(message({.depth = 64}),
            "gpu matmul schedule: shared bytes for float64 must be between 1 and 49152, got 66560");
}

}  // namespace
}  // namespace nimble::te
