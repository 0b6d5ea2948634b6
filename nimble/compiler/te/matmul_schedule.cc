#include "nimble/compiler/te/matmul_schedule.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "nimble/compiler/te/parallel_chunk.h"
#include "nimble/compiler/tir/simplify.h"
#include "nimble/vm/error.h"

namespace nimble::te {
namespace {

constexpr int kMaxTileSide = 16;
constexpr int kMaxTileElements = 64;
constexpr int kMaxDispatch = 64;

// What a copy of the kernel knows of the row count: rows mod `modulus` is
// `residue` (modulus 1: nothing).
struct RowResidue {
  int64_t modulus = 1;
  int64_t residue = 0;
};

// A product with a constant number of rows below tile_rows (a matrix-vector
// product) spends the tile's registers on columns instead.
MatMulKnobs WidenedForFewRows(const MatMulStage& stage, MatMulKnobs knobs) {
  int64_t rows;
  if (tir::AsInt(stage.shape[stage.shape.size() - 2], &rows) && rows >= 1 &&
      rows < knobs.tile_rows) {
    const int64_t cols = knobs.tile_rows * knobs.tile_cols / rows;
    knobs.tile_rows = static_cast<int>(rows);
    knobs.tile_cols = static_cast<int>(std::min<int64_t>(cols, kMaxTileSide));
  }
  return knobs;
}

class MatMulScheduler {
 public:
  MatMulScheduler(const MatMulStage& stage, const MatMulKnobs& knobs)
      : stage_(stage), knobs_(WidenedForFewRows(stage, knobs)), rank_(stage.shape.size()) {}

  tir::Stmt Run() {
    const Expr& rows = stage_.shape[rank_ - 2];
    const int dispatch = knobs_.dispatch == 0 ? knobs_.tile_rows : knobs_.dispatch;
    int64_t static_rows;
    if (tir::AsInt(rows, &static_rows) || dispatch == 1) return Body(rows, RowResidue{});
    // rows = dispatch * q + r in the copy for residue r; the last copy is the
    // else branch of the others.
    const tir::Var quotient = tir::MakeVar(stage_.name + ".q");
    const Expr remainder = tir::FloorMod(rows, tir::IntImm(dispatch));
    tir::Stmt chain;
    for (int r = dispatch; r-- > 0;) {
      tir::Stmt copy = Body(tir::Add(tir::Mul(tir::IntImm(dispatch), quotient), tir::IntImm(r)),
                            RowResidue{dispatch, r});
      chain = chain ? tir::If(tir::Compare(tir::CompareOp::kEq, remainder, tir::IntImm(r)),
                              std::move(copy), chain)
                    : std::move(copy);
    }
    return tir::Let(quotient, tir::FloorDiv(rows, tir::IntImm(dispatch)), chain);
  }

 private:
  // The whole product with `rows` as the row count.
  tir::Stmt Body(const Expr& rows, RowResidue known) {
    const Expr& cols = stage_.shape[rank_ - 1];
    const Expr tile_cols = tir::IntImm(knobs_.tile_cols);
    const Expr col_tiles = tir::FloorDiv(cols, tile_cols);
    const Expr batch = BatchExtent();
    const Expr work_per_row = tir::Mul(tir::Max(stage_.depth, tir::IntImm(1)), rows);

    // Whole column tiles, with the batch, in parallel.
    const tir::Var tile = tir::MakeVar(stage_.name + ".tile");
    const Expr batch_index = tir::FloorDiv(tile, col_tiles);
    const Expr col_begin = tir::Mul(tir::FloorMod(tile, col_tiles), tile_cols);
    std::vector<tir::Stmt> parts = {
        tir::For(tile, tir::Mul(batch, col_tiles), tir::ForKind::kParallel,
                 Rows(BatchIndices(batch_index), col_begin, knobs_.tile_cols, rows, known),
                 ChunkFor(tir::Mul(work_per_row, tile_cols)))};

    // The columns after them: a constant number in one narrower tile, or one
    // column at a time.
    const Expr tail_cols = tir::Simplify(tir::FloorMod(cols, tile_cols));
    const Expr tail_begin = tir::Mul(col_tiles, tile_cols);
    const tir::Var b = tir::MakeVar(stage_.name + ".b");
    int64_t static_tail;
    if (tir::AsInt(tail_cols, &static_tail)) {
      if (static_tail > 0) {
        parts.push_back(
            tir::For(b, batch, tir::ForKind::kParallel,
                     Rows(BatchIndices(b), tail_begin, static_cast<int>(static_tail), rows, known),
                     ChunkFor(tir::Mul(work_per_row, tail_cols))));
      }
    } else {
      const tir::Var col = tir::MakeVar(stage_.name + ".col");
      parts.push_back(
          tir::For(b, batch, tir::ForKind::kParallel,
                   tir::For(col, tail_cols, tir::ForKind::kSerial,
                            Rows(BatchIndices(b), tir::Add(tail_begin, col), 1, rows, known)),
                   ChunkFor(tir::Mul(work_per_row, tail_cols))));
    }
    return tir::Seq(std::move(parts));
  }

  // Every row of `cols` columns from `col_begin`: whole row tiles, then the
  // boundary.
  tir::Stmt Rows(const std::vector<Expr>& batch, const Expr& col_begin, int cols, const Expr& rows,
                 RowResidue known) {
    const int tile_rows = knobs_.tile_rows;
    const Expr row_tiles = tir::FloorDiv(rows, tir::IntImm(tile_rows));
    const tir::Var row_tile = tir::MakeVar(stage_.name + ".row_tile");
    std::vector<tir::Stmt> parts = {tir::For(
        row_tile, row_tiles, tir::ForKind::kSerial,
        Tile(batch, tir::Mul(row_tile, tir::IntImm(tile_rows)), col_begin, tile_rows, cols))};
    const Expr boundary_begin = tir::Mul(row_tiles, tir::IntImm(tile_rows));
    const Expr boundary = tir::Simplify(tir::FloorMod(rows, tir::IntImm(tile_rows)));
    int64_t static_boundary;
    if (tir::AsInt(boundary, &static_boundary)) {
      if (static_boundary > 0) {
        parts.push_back(
            Tile(batch, boundary_begin, col_begin, static_cast<int>(static_boundary), cols));
      }
      return tir::Seq(std::move(parts));
    }
    // rows mod step is known: the boundary is blocks of step rows, then the
    // constant rest.
    const int64_t step = std::gcd(known.modulus, int64_t{tile_rows});
    const int64_t rest = known.residue % step;
    const Expr blocks = tir::FloorDiv(tir::Sub(boundary, tir::IntImm(rest)), tir::IntImm(step));
    const tir::Var block = tir::MakeVar(stage_.name + ".block");
    parts.push_back(
        tir::For(block, blocks, tir::ForKind::kSerial,
                 Tile(batch, tir::Add(boundary_begin, tir::Mul(block, tir::IntImm(step))),
                      col_begin, static_cast<int>(step), cols)));
    if (rest > 0) {
      parts.push_back(Tile(batch, tir::Add(boundary_begin, tir::Mul(blocks, tir::IntImm(step))),
                           col_begin, static_cast<int>(rest), cols));
    }
    return tir::Seq(std::move(parts));
  }

  // One register tile: rows x cols sums, written out after the reduction.
  tir::Stmt Tile(const std::vector<Expr>& batch, const Expr& row_begin, const Expr& col_begin,
                 int rows, int cols) {
    const tir::Buffer sums = std::make_shared<tir::BufferNode>(
        stage_.name + ".sums", stage_.dtype, std::vector<Expr>{tir::IntImm(rows * cols)});
    const tir::Var k = tir::MakeVar(stage_.name + ".k");
    std::vector<tir::Stmt> init, update, store;
    for (int row = 0; row < rows; ++row) {
      for (int col = 0; col < cols; ++col) {
        const Expr slot = tir::IntImm(row * cols + col);
        std::vector<Expr> indices = batch;
        indices.push_back(tir::Add(row_begin, tir::IntImm(row)));
        indices.push_back(tir::Add(col_begin, tir::IntImm(col)));
        init.push_back(tir::Store(sums, slot, ReduceIdentity(stage_.reduce_kind, stage_.dtype)));
        update.push_back(tir::Store(
            sums, slot,
            ReduceCombine(stage_.reduce_kind, tir::Load(sums, slot), stage_.element(indices, k)),
            /*reassociate=*/true));
        store.push_back(tir::Store(stage_.out, tir::FlatIndex(stage_.out->shape, indices),
                                   tir::Load(sums, slot)));
      }
    }
    return tir::Allocate(
        sums,
        tir::Seq({tir::Seq(std::move(init)),
                  tir::For(k, stage_.depth, tir::ForKind::kVectorized, tir::Seq(std::move(update))),
                  tir::Seq(std::move(store))}));
  }

  Expr BatchExtent() const {
    Expr extent = tir::IntImm(1);
    for (size_t d = 0; d + 2 < rank_; ++d) extent = tir::Mul(extent, stage_.shape[d]);
    return extent;
  }

  // The leading indices of flat batch index `flat`.
  std::vector<Expr> BatchIndices(const Expr& flat) const {
    std::vector<Expr> indices(rank_ - 2);
    Expr remaining = flat;
    for (size_t d = rank_ - 2; d-- > 0;) {
      indices[d] = d == 0 ? remaining : tir::FloorMod(remaining, stage_.shape[d]);
      remaining = tir::FloorDiv(remaining, stage_.shape[d]);
    }
    return indices;
  }

  const MatMulStage& stage_;
  const MatMulKnobs knobs_;
  const size_t rank_;
};

}  // namespace

void CheckMatMulKnobs(const MatMulKnobs& knobs) {
  const auto check = [](int value, int limit, const std::string& what) {
    if (value < 1 || value > limit) {
      throw Error("matmul schedule: " + what + " must be between 1 and " + std::to_string(limit) +
                  ", got " + std::to_string(value));
    }
  };
  check(knobs.tile_rows, kMaxTileSide, "tile rows");
  check(knobs.tile_cols, kMaxTileSide, "tile columns");
  check(knobs.tile_rows * knobs.tile_cols, kMaxTileElements, "a tile's elements");
  if (knobs.dispatch != 0) check(knobs.dispatch, kMaxDispatch, "dispatch");
}

std::string MatMulKnobsText(const MatMulKnobs& knobs) {
  return "tile " + std::to_string(knobs.tile_rows) + "x" + std::to_string(knobs.tile_cols) +
         " dispatch/" + std::to_string(knobs.dispatch == 0 ? knobs.tile_rows : knobs.dispatch);
}

tir::Stmt ScheduleMatMul(const MatMulStage& stage, const MatMulKnobs& knobs) {
  CheckMatMulKnobs(knobs);
  if (stage.shape.size() < 2) {
    throw Error("matmul schedule: " + stage.name + " has rank " +
                std::to_string(stage.shape.size()) + ", expected at least 2");
  }
  return MatMulScheduler(stage, knobs).Run();
}

}  // namespace nimble::te
