// Keeping a GPU thread's intermediate values in registers. After
// MergeGpuThreadLoops, the stages of a fused kernel run in one thread (or
// block) loop, but each intermediate stage still goes through a temporary
// buffer in device memory that thread i stores at element i (block b at row
// b) and then reads back there. Each such buffer is a device allocation and
// a free on every launch (the host's cudaMallocAsync and cudaFreeAsync: an
// LSTM cell's two per token, a softmax's row maximum and sum) and a round
// trip through global memory; a value bound once in the thread needs neither.
#pragma once

#include "nimble/compiler/tir/stmt.h"

namespace nimble::tir {

// `stmt` with each allocated buffer that lives in one kGpuThreads or
// kGpuBlocks loop turned into a value of that loop's body: the buffer is
// stored once, at the loop variable, outside any inner loop or branch, and
// read only after that store and only at the loop variable (or a let-bound
// copy of it). The store becomes a let of its value over the rest of the
// body, each load that value, and the allocation goes.
Stmt RegisterizeThreadBuffers(const Stmt& stmt);

}  // namespace nimble::tir
