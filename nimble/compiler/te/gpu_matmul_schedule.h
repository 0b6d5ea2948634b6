// The GPU's schedule template of matrix products (nn.dense, nn.batch_matmul
// when code generation runs them on the GPU): a block of threads per tile of
// the output, with the operands staged through shared memory.
//
// A block computes block rows x block columns of one batch's output with
// thread_rows x thread_cols threads; each thread keeps sums_rows x
// sums_cols sums in registers, for the rows ty, ty + thread_rows, ... and
// the columns tx, tx + thread_cols, ... of the block's tile (so that a warp's
// neighbouring threads read neighbouring words of shared memory and store
// neighbouring outputs). The reduction advances `depth` at a time: the
// block's threads copy that slice of the first operand's rows and of the
// second operand's columns into shared memory (along k for an operand read
// along k, along the columns for the outer-product form's [k, n] operand, so
// that neighbouring threads load neighbouring addresses), wait at a barrier,
// add their products, and wait again before the next slice overwrites it.
// Each operand value is loaded from device memory once per block, where a
// block per output element (the lowering's default) loads it once per
// output. Past the operands' edges the copies store zeros and the sums' stores
// are skipped, so any shape, static or symbolic, takes the template. The sums
// add in the order of k, as the reference evaluator's do.
#pragma once

#include <optional>

#include "nimble/compiler/te/matmul_schedule.h"
#include "nimble/compiler/tir/stmt.h"

namespace nimble::te {

struct GpuMatMulTile {
  int thread_rows = 16;
  int thread_cols = 16;
  int sums_rows = 4;
  int sums_cols = 4;
  int depth = 16;
};

// Throws nimble::Error unless the tile is at most 1024 threads, 64 sums a
// thread and 48 KiB of shared memory for float64 operands, each side at least 1.
void CheckGpuMatMulTile(const GpuMatMulTile& tile);

// The loops computing `stage` into its buffer, or nothing when the template
// does not apply: the reduction is not a sum, or its element is not a product
// of a value of the first operand (read without the output's column) and one
// of the second (read without its row).
std::optional<tir::Stmt> ScheduleGpuMatMul(const MatMulStage& stage,
                                           const GpuMatMulTile& tile = {});

}  // namespace nimble::te
