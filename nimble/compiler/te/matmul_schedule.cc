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

// The columns a tile computes: `count` of them from `begin`, at most
// `capacity` (a dot-product tile's count is its capacity, a constant).
struct Columns {
  Expr begin;
  Expr count;
  int capacity;
};

class MatMulScheduler {
 public:
  MatMulScheduler(const MatMulStage& stage, const MatMulKnobs& knobs)
      : stage_(stage),
        knobs_(WidenedForFewRows(stage, knobs)),
        rank_(stage.shape.size()),
        outer_(stage.form == ScheduleHint::kOuterProduct),
        tile_width_(outer_ ? knobs_.tile_cols * kOuterProductColumns : knobs_.tile_cols) {}

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
    const Expr width = tir::IntImm(tile_width_);
    const Expr col_tiles = tir::FloorDiv(cols, width);
    const Expr batch = BatchExtent();
    const Expr work_per_row = tir::Mul(tir::Max(stage_.depth, tir::IntImm(1)), rows);

    // Whole column tiles, with the batch, in parallel.
    const tir::Var tile = tir::MakeVar(stage_.name + ".tile");
    const Expr batch_index = tir::FloorDiv(tile, col_tiles);
    const Columns whole{tir::Mul(tir::FloorMod(tile, col_tiles), width), width, tile_width_};
    std::vector<tir::Stmt> parts = {tir::For(tile, tir::Mul(batch, col_tiles),
                                             tir::ForKind::kParallel,
                                             Rows(BatchIndices(batch_index), whole, rows, known),
                                             ChunkFor(tir::Mul(work_per_row, width)))};

    // The columns after them: a constant number, or any number in an
    // outer-product tile, in one narrower tile; else one column at a time.
    const Expr tail_cols = tir::Simplify(tir::FloorMod(cols, width));
    const Expr tail_begin = tir::Mul(col_tiles, width);
    const tir::Var b = tir::MakeVar(stage_.name + ".b");
    const auto per_batch = [&](tir::Stmt body) {
      return tir::For(b, batch, tir::ForKind::kParallel, std::move(body),
                      ChunkFor(tir::Mul(work_per_row, tail_cols)));
    };
    int64_t static_tail;
    if (tir::AsInt(tail_cols, &static_tail)) {
      if (static_tail > 0) {
        const int count = static_cast<int>(static_tail);
        parts.push_back(
            per_batch(Rows(BatchIndices(b), {tail_begin, tir::IntImm(count), count}, rows, known)));
      }
    } else if (outer_) {
      parts.push_back(
          per_batch(Rows(BatchIndices(b), {tail_begin, tail_cols, tile_width_}, rows, known)));
    } else {
      const tir::Var col = tir::MakeVar(stage_.name + ".col");
      parts.push_back(per_batch(tir::For(
          col, tail_cols, tir::ForKind::kSerial,
          Rows(BatchIndices(b), {tir::Add(tail_begin, col), tir::IntImm(1), 1}, rows, known))));
    }
    return tir::Seq(std::move(parts));
  }

  // Every row of `cols`: whole row tiles, then the boundary.
  tir::Stmt Rows(const std::vector<Expr>& batch, const Columns& cols, const Expr& rows,
                 RowResidue known) {
    const int tile_rows = knobs_.tile_rows;
    const Expr row_tiles = tir::FloorDiv(rows, tir::IntImm(tile_rows));
    const tir::Var row_tile = tir::MakeVar(stage_.name + ".row_tile");
    std::vector<tir::Stmt> parts = {
        tir::For(row_tile, row_tiles, tir::ForKind::kSerial,
                 Tile(batch, tir::Mul(row_tile, tir::IntImm(tile_rows)), cols, tile_rows))};
    const Expr boundary_begin = tir::Mul(row_tiles, tir::IntImm(tile_rows));
    const Expr boundary = tir::Simplify(tir::FloorMod(rows, tir::IntImm(tile_rows)));
    int64_t static_boundary;
    if (tir::AsInt(boundary, &static_boundary)) {
      if (static_boundary > 0) {
        parts.push_back(Tile(batch, boundary_begin, cols, static_cast<int>(static_boundary)));
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
                 Tile(batch, tir::Add(boundary_begin, tir::Mul(block, tir::IntImm(step))), cols,
                      static_cast<int>(step))));
    if (rest > 0) {
      parts.push_back(Tile(batch, tir::Add(boundary_begin, tir::Mul(blocks, tir::IntImm(step))),
                           cols, static_cast<int>(rest)));
    }
    return tir::Seq(std::move(parts));
  }

  // One register tile: rows x cols sums, written out after the reduction.
  tir::Stmt Tile(const std::vector<Expr>& batch, const Expr& row_begin, const Columns& cols,
                 int rows) {
    const tir::Buffer sums = std::make_shared<tir::BufferNode>(
        stage_.name + ".sums", stage_.dtype, std::vector<Expr>{tir::IntImm(rows * cols.capacity)});
    const tir::Var k = tir::MakeVar(stage_.name + ".k");
    const auto indices = [&](int row, const Expr& col) {
      std::vector<Expr> at = batch;
      at.push_back(tir::Add(row_begin, tir::IntImm(row)));
      at.push_back(tir::Add(cols.begin, col));
      return at;
    };
    const auto slot = [&](int row, const Expr& col) {
      return tir::Add(tir::IntImm(row * cols.capacity), col);
    };
    // `statement(row, col)` for every sum: each a statement of its own in a
    // dot-product tile; in an outer-product tile, one vectorised loop over
    // the columns doing every row, so that a row of the second operand is
    // loaded once for all of them.
    const auto each_sum = [&](const std::function<tir::Stmt(int, const Expr&)>& statement) {
      std::vector<tir::Stmt> statements;
      if (outer_) {
        const tir::Var col = tir::MakeVar(stage_.name + ".col");
        for (int row = 0; row < rows; ++row) statements.push_back(statement(row, col));
        return tir::For(col, cols.count, tir::ForKind::kVectorized,
                        tir::Seq(std::move(statements)));
      }
      for (int row = 0; row < rows; ++row) {
        for (int col = 0; col < cols.capacity; ++col) {
          statements.push_back(statement(row, tir::IntImm(col)));
        }
      }
      return tir::Seq(std::move(statements));
    };
    const tir::Stmt init = each_sum([&](int row, const Expr& col) {
      return tir::Store(sums, slot(row, col), ReduceIdentity(stage_.reduce_kind, stage_.dtype));
    });
    // A dot-product tile vectorises k, which reorders each sum; an
    // outer-product tile adds in k's order.
    const tir::Stmt update = each_sum([&](int row, const Expr& col) {
      return tir::Store(sums, slot(row, col),
                        ReduceCombine(stage_.reduce_kind, tir::Load(sums, slot(row, col)),
                                      stage_.element(indices(row, col), k)),
                        /*reassociate=*/!outer_);
    });
    const tir::Stmt store = each_sum([&](int row, const Expr& col) {
      return StoreSum(stage_, indices(row, col), tir::Load(sums, slot(row, col)));
    });
    return tir::Allocate(
        sums,
        tir::Seq({init,
                  tir::For(k, stage_.depth,
                           outer_ ? tir::ForKind::kSerial : tir::ForKind::kVectorized, update),
                  store}));
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
  const bool outer_;
  const int tile_width_;  // columns
};

}  // namespace

tir::Stmt StoreSum(const MatMulStage& stage, const std::vector<Expr>& indices, const Expr& sum) {
  if (stage.store) return stage.store(indices, sum);
  return tir::Store(stage.out, tir::FlatIndex(stage.out->shape, indices), sum);
}

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
