// The matrix-product template and residue dispatch (te/matmul_schedule.h),
// run by the loop-IR interpreter: every tile shape and dispatch degree gives
// the product for row counts covering every residue, static and symbolic,
// batched, with symbolic columns and empty sizes; full dispatch leaves no
// boundary loop; a matrix-vector product widens its tile; bad knobs are
// refused; the outer-product form (b read as [k, n]) gives the same products
// with its reduction outside a vectorised column loop. The expected values
// come from a plain triple loop here.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "nimble/compiler/te/lower.h"
#include "nimble/compiler/tir/printer.h"
#include "nimble/vm/error.h"
#include "tests/compiler/tir/interpreter.h"

namespace nimble::te {
namespace {

constexpr DataType kF32 = DataType::Float32();

// c[batch, row, col] = sum over k of a[batch, row, k] * b[col, k] (or
// b[k, col] with `outer`, the outer-product form), without the batch
// dimension when `batched` is off.
struct ProductShape {
  bool batched = false;
  int64_t batch = 1, rows = 0, cols = 0, depth = 0;
  bool symbolic_rows = false;
  bool symbolic_cols = false;
  bool outer = false;
};

Expr Dim(int64_t value, bool symbolic, const std::string& name) {
  return symbolic ? Expr(tir::MakeVar(name)) : tir::IntImm(value);
}

tir::PrimFunc LowerProduct(const ProductShape& shape, const MatMulKnobs& knobs) {
  const Expr rows = Dim(shape.rows, shape.symbolic_rows, "m");
  const Expr cols = Dim(shape.cols, shape.symbolic_cols, "n");
  const Expr depth = tir::IntImm(shape.depth);
  std::vector<Expr> a_shape = {rows, depth};
  std::vector<Expr> c_shape = {rows, cols};
  if (shape.batched) {
    a_shape.insert(a_shape.begin(), tir::IntImm(shape.batch));
    c_shape.insert(c_shape.begin(), tir::IntImm(shape.batch));
  }
  const Tensor a = Placeholder("a", kF32, a_shape);
  const Tensor b =
      Placeholder("b", kF32, shape.outer ? std::vector{depth, cols} : std::vector{cols, depth});
  const Tensor c = Compute(
      "c", c_shape,
      [&](const std::vector<Expr>& indices) {
        const ReduceAxis k = MakeReduceAxis("k", depth);
        std::vector<Expr> a_indices(indices.begin(), indices.end() - 1);
        a_indices.push_back(k.var);
        const Expr b_element =
            shape.outer ? Read(b, {k.var, indices.back()}) : Read(b, {indices.back(), k.var});
        return Reduce(ReduceKind::kSum, tir::Mul(Read(a, a_indices), b_element), {k});
      },
      shape.outer ? ScheduleHint::kOuterProduct : ScheduleHint::kMatMul);
  return Lower("product", {a, b}, {c}, {}, knobs);
}

// Small integers, so that every sum is exact in float32 in any order.
nimble::Tensor RandomInts(const Shape& shape, std::mt19937& rng) {
  nimble::Tensor tensor = nimble::TensorNode::Empty(shape, kF32);
  std::uniform_int_distribution<int> uniform(-3, 3);
  for (int64_t i = 0; i < tensor->numel(); ++i) tensor->data<float>()[i] = uniform(rng);
  return tensor;
}

// Runs the kernel on random operands and compares with the triple loop.
void ExpectProduct(const ProductShape& shape, const MatMulKnobs& knobs) {
  static std::mt19937 rng(20261125);
  const tir::PrimFunc func = LowerProduct(shape, knobs);
  const int64_t batch = shape.batched ? shape.batch : 1;
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
            << shape.cols << " with " << MatMulKnobsText(knobs) << "\n"
            << tir::ToString(func);
      }
    }
  }
}

TEST(MatMulScheduleTest, EveryDispatchDegreeGivesTheProductOnEveryResidue) {
  for (const auto& [tile_rows, tile_cols] :
       std::vector<std::pair<int, int>>{{4, 3}, {1, 1}, {3, 2}, {5, 1}, {8, 2}}) {
    for (int dispatch : {1, 2, 3, 4, 8}) {
      const MatMulKnobs knobs{.tile_rows = tile_rows, .tile_cols = tile_cols, .dispatch = dispatch};
      for (int64_t rows = 0; rows <= 17; ++rows) {
        ExpectProduct({.rows = rows, .cols = 7, .depth = 5, .symbolic_rows = true}, knobs);
      }
    }
  }
}

TEST(MatMulScheduleTest, StaticShapesOfEverySize) {
  for (int64_t rows : {0, 1, 2, 3, 4, 5, 9}) {
    for (int64_t cols : {0, 1, 2, 3, 4, 11}) {
      for (int64_t depth : {0, 1, 8, 13}) {
        ExpectProduct({.rows = rows, .cols = cols, .depth = depth}, MatMulKnobs{});
      }
    }
  }
}

TEST(MatMulScheduleTest, BatchedWithSymbolicColumns) {
  for (int64_t cols : {0, 1, 5, 6}) {
    for (int64_t rows : {1, 6, 7}) {
      ExpectProduct({.batched = true,
                     .batch = 3,
                     .rows = rows,
                     .cols = cols,
                     .depth = 4,
                     .symbolic_rows = true,
                     .symbolic_cols = true},
                    MatMulKnobs{});
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

TEST(MatMulScheduleTest, FullDispatchProvesEveryBoundaryConstant) {
  const ProductShape shape{.rows = 0, .cols = 6, .depth = 16, .symbolic_rows = true};
  // Four copies, one per residue of m mod 4, none with a boundary loop: the
  // boundary of the copy for residue r is one tile of r rows.
  const std::string full = tir::ToString(LowerProduct(shape, {.dispatch = 4}));
  EXPECT_EQ(Count(full, "if (floormod(m, 4) == "), 3u) << full;
  EXPECT_EQ(Count(full, "c.block"), 0u) << full;
  EXPECT_EQ(Count(full, "allocate c.sums: float32[12]"), 4u) << full;  // whole tiles
  EXPECT_EQ(Count(full, "allocate c.sums: float32[9]"), 1u) << full;   // 3 rows
  EXPECT_EQ(Count(full, "allocate c.sums: float32[6]"), 1u) << full;   // 2 rows
  EXPECT_EQ(Count(full, "allocate c.sums: float32[3]"), 1u) << full;   // 1 row

  // One kernel: the boundary goes a row at a time.
  const std::string none = tir::ToString(LowerProduct(shape, {.dispatch = 1}));
  EXPECT_EQ(Count(none, "if ("), 0u) << none;
  EXPECT_EQ(Count(none, "for c.block in [0, floormod(m, 4))"), 1u) << none;

  // Two copies: the boundary is known to be even or odd, so it goes two rows
  // at a time, then one constant row in the odd copy.
  const std::string half = tir::ToString(LowerProduct(shape, {.dispatch = 2}));
  EXPECT_EQ(Count(half, "for c.block in"), 2u) << half;
  EXPECT_EQ(Count(half, "allocate c.sums: float32[6]"), 2u) << half;
}

TEST(MatMulScheduleTest, StaticRowsNeedNoDispatch) {
  const std::string printed =
      tir::ToString(LowerProduct({.rows = 6, .cols = 6, .depth = 16}, {.dispatch = 4}));
  EXPECT_EQ(Count(printed, "if ("), 0u) << printed;
  EXPECT_EQ(Count(printed, "c.block"), 0u) << printed;
}

TEST(MatMulScheduleTest, AMatrixVectorProductSpendsTheTileOnColumns) {
  const std::string printed = tir::ToString(LowerProduct({.rows = 1, .cols = 24, .depth = 16}, {}));
  EXPECT_EQ(Count(printed, "allocate c.sums: float32[12]"), 1u) << printed;
  EXPECT_EQ(Count(printed, "for c.tile in [0, 2) parallel"), 1u) << printed;
}

TEST(MatMulScheduleTest, OuterProductTilesGiveTheProductOnEveryShape) {
  for (const auto& [tile_rows, tile_cols] :
       std::vector<std::pair<int, int>>{{4, 3}, {1, 1}, {3, 2}}) {
    for (int dispatch : {1, 4}) {
      const MatMulKnobs knobs{.tile_rows = tile_rows, .tile_cols = tile_cols, .dispatch = dispatch};
      for (int64_t rows : {0, 1, 5, 9}) {
        for (int64_t cols : {0, 1, 15, 16, 33, 50}) {
          for (bool symbolic_cols : {false, true}) {
            ExpectProduct({.batched = true,
                           .batch = 2,
                           .rows = rows,
                           .cols = cols,
                           .depth = 5,
                           .symbolic_rows = true,
                           .symbolic_cols = symbolic_cols,
                           .outer = true},
                          knobs);
          }
        }
      }
    }
  }
  for (int64_t depth : {0, 1, 13}) {
    ExpectProduct({.rows = 6, .cols = 20, .depth = depth, .outer = true}, MatMulKnobs{});
  }
}

TEST(MatMulScheduleTest, AnOuterProductTileVectorisesItsColumns) {
  // 4 x 3 knobs: tiles of 4 rows by 48 columns. 100 columns are two whole
  // tiles and one of 4; any number of columns is whole tiles and one tile
  // of the rest, never a column at a time.
  const std::string fixed =
      tir::ToString(LowerProduct({.rows = 8, .cols = 100, .depth = 16, .outer = true}, {}));
  EXPECT_EQ(Count(fixed, "allocate c.sums: float32[192]"), 1u) << fixed;
  EXPECT_EQ(Count(fixed, "allocate c.sums: float32[16]"), 1u) << fixed;
  EXPECT_EQ(Count(fixed, "for c.tile in [0, 2) parallel"), 1u) << fixed;
  EXPECT_EQ(Count(fixed, "for c.k in [0, 16) {"), 2u) << fixed;
  EXPECT_EQ(Count(fixed, "for c.col in [0, 48) vectorized"), 3u) << fixed;
  EXPECT_EQ(Count(fixed, "for c.col in [0, 4) vectorized"), 3u) << fixed;

  const std::string symbolic = tir::ToString(
      LowerProduct({.rows = 8, .cols = 0, .depth = 16, .symbolic_cols = true, .outer = true}, {}));
  EXPECT_EQ(Count(symbolic, "allocate c.sums: float32[192]"), 2u) << symbolic;
  EXPECT_EQ(Count(symbolic, "for c.col in [0, floormod(n, 48)) vectorized"), 3u) << symbolic;
}

TEST(MatMulScheduleTest, KnobsOutOfRangeAreRefused) {
  const auto message = [](const MatMulKnobs& knobs) {
    try {
      CheckMatMulKnobs(knobs);
    } catch (const Error& error) {
      return std::string(error.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message({.tile_rows = 0}),
            "matmul schedule: tile rows must be between 1 and 16, got 0");
  EXPECT_EQ(message({.tile_rows = 8, .tile_cols = 9}),
            "matmul schedule: a tile's elements must be between 1 and 64, got 72");
  EXPECT_EQ(message({.dispatch = 65}),
            "matmul schedule: dispatch must be between 1 and 64, got 65");
  EXPECT_EQ(MatMulKnobsText({.tile_rows = 4, .tile_cols = 3}), "tile 4x3 dispatch/4");
  EXPECT_EQ(MatMulKnobsText({.tile_rows = 4, .tile_cols = 3, .dispatch = 1}),
            "tile 4x3 dispatch/1");
}

}  // namespace
}  // namespace nimble::te
