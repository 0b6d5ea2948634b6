// The schedule template of matrix products (nn.dense, nn.batch_matmul) and
// residue dispatch on their symbolic row dimension [paper 4.5].
//
// The template computes the output [batch..., rows, cols] in register tiles
// of tile_rows x tile_cols elements: each tile keeps its sums in registers
// while the reduction loop (innermost, vectorised) streams one row of each
// operand per tile row and column, so every loaded vector feeds several
// multiply-adds. Column tiles, with the batch, are the parallel loop; the row
// tiles of one column tile run in order, so that tile's weight rows stay in
// cache for all of them.
//
// A product whose second operand is read along the output's columns (nn.
// batch_matmul without transpose_b: y is [k, n]) takes the outer-product form
// instead: its tiles are tile_cols lines of kOuterProductColumns columns, the
// reduction loop runs serially outside a vectorised loop over the tile's
// columns, and each step adds a column of the first operand times a row of
// the second to every sum, so the sums need no horizontal additions at the
// end, whatever the depth (BERT's probabilities times values, depth = tokens).
// Its columns after the last whole tile are one narrower tile, of a symbolic
// width if need be. The default 4 x 3 lines are 12 AVX-512 registers of sums
// but 24 AVX2 and 48 NEON ones, more than those register files hold: there
// `nimble-bench tune` (or --matmul-tile) is what picks a narrower tile.
// (On AVX-512, 4 x 1 to 3 x 4 lines all took 20-23 us at BERT's 12 x 54 x 54
// times 12 x 54 x 64.)
//
// Rows left over after the last whole row tile (rows mod tile_rows of them)
// are the boundary. With static rows their count is a constant and they are
// one smaller tile. With symbolic rows the kernel is split `dispatch` ways on
// rows mod dispatch: each copy substitutes rows = dispatch * q + r, so the
// simplifier knows rows mod gcd(dispatch, tile_rows), and the boundary is
// that many rows at a time plus a constant remainder. Full dispatch (a
// multiple of tile_rows) makes every boundary a constant tile; dispatch 1 is
// one kernel that takes its boundary one row at a time. Both the dispatch and
// the copies are loop IR in the one kernel.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "nimble/compiler/te/tensor.h"
#include "nimble/compiler/tir/stmt.h"

namespace nimble::te {

// The knobs of the template (what tuning searches) and the dispatch degree.
struct MatMulKnobs {
  int tile_rows = 4;
  int tile_cols = 3;
  // Kernel copies for a symbolic row dimension; 0: tile_rows (full dispatch).
  int dispatch = 0;
};

// Throws nimble::Error unless each knob is between 1 and its limit (tiles of
// at most 16 rows or columns and 64 elements, dispatch at most 64).
void CheckMatMulKnobs(const MatMulKnobs& knobs);

// "tile 4x3 dispatch/4": the knobs as tuning records and dumps name them.
std::string MatMulKnobsText(const MatMulKnobs& knobs);

// The columns of an outer-product tile per tile_cols: a 64-byte line of
// float32, one AVX-512 vector (two AVX2 ones, four NEON ones).
inline constexpr int kOuterProductColumns = 16;

// What writes a finished value of a tensor at `indices` in place of a store
// into its own buffer (te/lower.h folds an elementwise epilogue so).
using StoreValueFn = std::function<tir::Stmt(const std::vector<Expr>& indices, const Expr& value)>;

// One matrix-product stage: out[indices] = the `reduce_kind` combination
// over k in [0, depth) of element(indices, k).
struct MatMulStage {
  std::string name;
  DataType dtype;
  std::vector<Expr> shape;  // rank >= 2
  Expr depth;
  ReduceKind reduce_kind;
  tir::Buffer out;
  std::function<Expr(const std::vector<Expr>& indices, const Expr& k)> element;
  // Which loop of a tile is vectorised: the reduction (kMatMul: each sum a
  // dot product of two rows read along k) or the tile's columns
  // (kOuterProduct: an outer product per k).
  ScheduleHint form = ScheduleHint::kMatMul;
  // What writes the finished sum at `indices`; null: a store into `out`.
  // The lowering sets it to store the product's elementwise consumer (a
  // bias, an activation, a residual) instead, computed from the sum while it
  // is in a register (te/lower.h), so that the product is never written out.
  StoreValueFn store = nullptr;
};

// The statement `stage` writes the sum at `indices` with.
tir::Stmt StoreSum(const MatMulStage& stage, const std::vector<Expr>& indices, const Expr& sum);

// The loops computing `stage` into its buffer.
tir::Stmt ScheduleMatMul(const MatMulStage& stage, const MatMulKnobs& knobs);

}  // namespace nimble::te
