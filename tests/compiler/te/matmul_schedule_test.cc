// The matrix-product template and residue dispatch (te/matmul_schedule.h),
// run by the loop-IR interpreter: every tile shape and dispatch degree gives
// the product for row counts covering every residue, static and symbolic,
// batched, with symbolic columns and empty sizes; full dispatch leaves no
// boundary loop; a matrix-vector product widens its tile; bad knobs are
// refused; the outer-product form (b read as [k, n]) gives the same products
// with its reduction outside a vectorised column loop. The expected values
// come from a plain triple loop (product_test_util.h).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "nimble/compiler/te/lower.h"
#include "nimble/compiler/tir/printer.h"
#include "nimble/vm/error.h"
#include "tests/compiler/te/product_test_util.h"

namespace nimble::te {
namespace {

using testing::Count;
using testing::LowerProduct;
using testing::ProductShape;

void ExpectProduct(const ProductShape& shape, const MatMulKnobs& knobs) {
  testing::ExpectProduct(shape, LowerProduct(shape, knobs), MatMulKnobsText(knobs));
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
