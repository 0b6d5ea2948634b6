// Merging a GPU kernel's consecutive thread loops. Lowering gives each stage
// of a fused primitive a gpu_threads loop of its own, and each loop is a
// launch: an LSTM cell's four elementwise stages were four launches per
// token, each a few microseconds of a GPU that waits on the host. Where the
// next loop has the same extent and reads what the loops before it wrote
// only at its own iteration (thread i reads element i, which thread i
// wrote), the two run as one loop, a thread doing both iterations in order.
// Row reductions merge the same way: consecutive gpu_blocks loops over the
// same rows (a softmax's maximum then its sum, a layer norm's sum then its
// squares), where each block reads what every thread of the block stored
// alike for its own row. An elementwise loop over those rows' elements that
// reads the reductions only at its own row (floordiv(i, C)) then runs in the
// blocks too, as a gpu_block_stride loop over the row: a softmax or a layer
// norm was three launches and is one.
#pragma once

#include "nimble/compiler/tir/stmt.h"

namespace nimble::tir {

// `stmt` with each run of consecutive kGpuThreads (or kGpuBlocks) loops that
// may share their threads merged into one loop. Merging needs equal extents;
// each buffer the earlier loops store to stored and read later only at the
// loop variable (in blocks: stored at the top of the block's body, from block
// intrinsics' results); and no buffer the earlier loops touch stored by the
// later one. A kGpuThreads loop over extent * C elements that follows merged
// kGpuBlocks loops under the same conditions, reading their buffers only at
// floordiv(i, C), becomes a kGpuBlockStride loop over [0, C) in them.
Stmt MergeGpuThreadLoops(const Stmt& stmt);

}  // namespace nimble::tir
