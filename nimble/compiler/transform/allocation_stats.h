// Counts the allocations a program in the memory dialect makes, as written
// in its text (each memory.alloc_storage call once, however often it runs):
// how memory manifestation and memory planning are measured against each
// other (the paper's "47% fewer allocations", §6).
#pragma once

#include <cstdint>

#include "nimble/compiler/ir/module.h"

namespace nimble::transform {

struct AllocationStats {
  // memory.alloc_storage calls.
  int64_t allocations = 0;
  // The sizes of those whose size is a constant (an int64 scalar), summed.
  int64_t static_bytes = 0;
  // Those sized at run time (from a shape register or a computed size).
  int64_t dynamic_allocations = 0;
};

// Over every function of `module`, primitive bodies included.
AllocationStats CountAllocations(const ir::IRModule& module);

}  // namespace nimble::transform
