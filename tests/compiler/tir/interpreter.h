// An interpreter of the loop IR for tests: runs a tir::PrimFunc on nimble
// Tensors, so that compute definitions and lowering are tested before (and
// apart from) code generation. It keeps the kernel contract of
// tir/stmt.h: it checks the argument count, dtypes and ranks, binds each
// shape variable at its first occurrence and checks every other dimension.
//
// Values are int64 for integer and bool dtypes, wrapped to the dtype's width
// after each operation, and double for floats, rounded to the dtype after
// each operation (float32 arithmetic is thus exact float arithmetic; math
// intrinsics are libm's in double, rounded once). Casts convert as the
// runtime does (ConvertElement). A failing Assert throws nimble::Error with its
// message; so does anything a compiled kernel must never do: a load or store
// out of bounds, an unbound variable, an integer division by zero.
//
// Only the side of a select that is taken is evaluated, as code generation
// evaluates a load there. Parallel loops run
// their iterations in reverse, so that a dependence between them shows. A
// gpu_blocks iteration runs as a block of one thread: its gpu_block_stride
// loops run every iteration, and a block intrinsic returns its argument; but
// its gpu_block_threads loop runs each iteration on an OS thread of its own,
// with a barrier for theirs, and at each barrier fails a kernel in which a
// thread touched a shared element another wrote since the last one (a
// missing barrier), whatever order the threads ran in.
#pragma once

#include <span>

#include "nimble/compiler/tir/stmt.h"
#include "nimble/vm/tensor.h"

namespace nimble::tir::testing {

// Runs `func` on `args`: its inputs, then its outputs, allocated by the
// caller with the shapes the kernel expects; the outputs are written.
void Interpret(const PrimFunc& func, std::span<const Tensor> args);

}  // namespace nimble::tir::testing
