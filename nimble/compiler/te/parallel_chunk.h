// How finely a schedule splits a parallel loop over the thread pool.
#pragma once

#include <cstdint>

#include "nimble/compiler/tir/expr.h"

namespace nimble::te {

// Elements of work (stores times reduction steps) that make a parallel chunk
// worth its hand-off to another thread; the runtime's kernels use the same.
inline constexpr int64_t kParallelGrain = 32768;

// Iterations per chunk of a parallel loop whose iteration costs `work`.
inline tir::Expr ChunkFor(const tir::Expr& work) {
  return tir::Max(tir::IntImm(1),
                  tir::FloorDiv(tir::IntImm(kParallelGrain), tir::Max(tir::IntImm(1), work)));
}

}  // namespace nimble::te
