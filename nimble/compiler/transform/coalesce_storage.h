// Memory planning, part 1 [paper 4.3]: static storage coalescing with reuse.
// Within one scope (a function body, an `if` branch, a match clause) every
// memory.alloc_storage of constant size on one device, whose storage does not
// escape the scope, becomes a slice of a single region allocated at the
// scope's start: each alloc_tensor from it gets the slice's byte offset.
// Slices whose lifetimes (from the allocation to the last use of any value
// that may point into the storage: its tensors, their views, tuples, ADTs,
// closures and call results holding them) do not overlap share bytes; the
// rest are packed side by side, largest first, at the lowest offset that is
// free for the whole lifetime. So a static program makes one allocation per
// scope and device, and the region is close to the peak of live bytes
// rather than their sum. Storage that escapes (returned, or pointed to by
// the scope's result) goes to a second region of its own, its slices side by
// side, so that a loop's result does not pin the temporaries' region: an
// LSTM step's new h and c are then one allocation, not two (as TVM's
// coalescing did, a region lives until the last of its tensors dies).
//
// Storage sized at run time from a shape register is not coalesced (that
// would need size arithmetic in the program, a kernel call per buffer, which
// costs about what the pooled allocator's hit does); instead a later buffer
// whose shape is provably equal (ShapeNumbering) takes a dead one's storage.
#pragma once

#include "nimble/compiler/ir/module.h"

namespace nimble::transform {

// Expects a type-checked module after ManifestAlloc (and PlanDevices);
// returns a new one, type-checked again. Slices start at multiples of the
// largest alignment of the allocations coalesced. What no analysis proves
// reusable is left to run-time reuse (InsertKills and the pooled allocator).
ir::IRModule CoalesceStorage(const ir::IRModule& module);

}  // namespace nimble::transform
