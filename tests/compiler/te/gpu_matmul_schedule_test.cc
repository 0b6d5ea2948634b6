// The GPU's matrix-product template (te/gpu_matmul_schedule.h), run by the
// loop-IR interpreter with a thread of its own per GPU thread of a block:
// small tiles and the default one give the product on static, symbolic,
// batched and empty shapes in both forms (b as [n, k] and as [k, n]); te::Lower
// takes the template for GPU products of many rows and keeps a block per
// element for few; an element that is no product of the two operands, or a
// reduction other than a sum, gets no template; bad tiles are refused. The
// expected values come from a plain triple loop (product_test_util.h).
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "nimble/compiler/te/gpu_matmul_schedule.h"
#include "nimble/compiler/te/lower.h"
#include "nimble/compiler/tir/printer.h"
#include "nimble/compiler/tir/simplify.h"
#include "nimble/vm/error.h"
#include "tests/compiler/te/product_test_util.h"
#include "tests/error_of.h"

namespace nimble::te {
namespace {

constexpr DataType kF32 = DataType::Float32();
using testing::Count;
using testing::ProductShape;

struct Operands {
  tir::Buffer a, b, c;
  std::vector<Expr> a_shape, b_shape, c_shape;
};

Operands MakeOperands(const ProductShape& shape) {
  const testing::ProductShapes shapes = testing::ShapesOf(shape);
  return Operands{.a = std::make_shared<tir::BufferNode>("a", kF32, shapes.a),
                  .b = std::make_shared<tir::BufferNode>("b", kF32, shapes.b),
                  .c = std::make_shared<tir::BufferNode>("c", kF32, shapes.c),
                  .a_shape = shapes.a,
                  .b_shape = shapes.b,
                  .c_shape = shapes.c};
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

// The GPU kernel c = product(a, b) that runs the template's `body`.
tir::PrimFunc GpuKernel(const Operands& operands, const std::optional<tir::Stmt>& body) {
  if (!body) throw Error("no template for the product");
  return tir::Simplify(tir::PrimFunc{.name = "product",
                                     .params = {operands.a, operands.b, operands.c},
                                     .num_inputs = 2,
                                     .body = *body,
                                     .device = tir::PrimFunc::Device::kGpu});
}

tir::PrimFunc ScheduledKernel(const ProductShape& shape, const GpuMatMulTile& tile) {
  const Operands operands = MakeOperands(shape);
  return GpuKernel(operands, ScheduleGpuMatMul(StageOf(operands, shape), tile));
}

// The same product as te::Lower builds it for the GPU.
tir::PrimFunc LoweredKernel(const ProductShape& shape) {
  return testing::LowerProduct(shape, {}, tir::PrimFunc::Device::kGpu);
}

void ExpectProduct(const ProductShape& shape, const tir::PrimFunc& func) {
  testing::ExpectProduct(shape, func, "the GPU's template");
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
                                     .symbolic_rows = symbolic,
                                     .symbolic_cols = symbolic,
                                     .symbolic_depth = symbolic,
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
        ProductShape{.rows = 17,
        .cols = 3,
        .depth = 5,
        .symbolic_rows = true,
        .symbolic_cols = true,
        .symbolic_depth = true}}) {
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
  // The stage with its element rebuilt from the two sides of the product.
  const auto rebuilt = [&](const std::function<Expr(const Expr&, const Expr&)>& combine) {
    MatMulStage stage = StageOf(operands, shape);
    stage.element = [product = stage.element, combine](const std::vector<Expr>& indices,
                                                       const Expr& k) {
      const Expr element = product(indices, k);
      const auto& mul = static_cast<const tir::BinaryNode&>(*element);
      return combine(mul.a, mul.b);
    };
    return stage;
  };
  // A sum of the operands, and a product whose one side reads both indices.
  EXPECT_FALSE(ScheduleGpuMatMul(rebuilt(tir::Add)));
  EXPECT_FALSE(ScheduleGpuMatMul(
      rebuilt([](const Expr& a, const Expr& b) { return tir::Mul(tir::Add(a, b), b); })));
  // Either side may come first.
  const MatMulStage stage = rebuilt([](const Expr& a, const Expr& b) { return tir::Mul(b, a); });
  const std::optional<tir::Stmt> swapped = ScheduleGpuMatMul(
      stage, {.thread_rows = 2, .thread_cols = 2, .sums_rows = 1, .sums_cols = 2, .depth = 2});
  ASSERT_TRUE(swapped);
  ExpectProduct(shape, GpuKernel(operands, swapped));
}

TEST(GpuMatMulScheduleTest, TilesOutOfRangeAreRefused) {
  CheckGpuMatMulTile({});  // the default
  const auto message = [](const GpuMatMulTile& tile) {
    return ErrorOf([&] { CheckGpuMatMulTile(tile); });
  };
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
