// adt.tree_schedule: the schedule of a tree value (vm/tree_schedule.h) as a
// Relay operator, which transform/tree_batching.h writes. Like the memory
// dialect it is an instruction, not a kernel: it reads an ADT value, which no
// kernel can take, so fusion, memory manifestation and device placement
// leave it alone and the VM compiler emits TreeSchedule.
#pragma once

#include "nimble/compiler/ir/expr.h"
#include "nimble/vm/tree_schedule.h"

namespace nimble::op {

// The layout its attributes give: max_children, and per payload a tag
// (payload_tags), a field (payload_fields), a rank (payload_ranks), dims
// (payload_shapes, all payloads' concatenated) and a dtype (payload_dtypes,
// comma-separated names). Throws nimble::Error naming an inconsistency.
vm::TreeScheduleLayout TreeScheduleLayoutOf(const ir::Attrs& attrs);

// The call adt.tree_schedule(tree) for `layout`, its attributes written so
// that TreeScheduleLayoutOf gives the layout back. Throws nimble::Error as
// MakeOpCall does.
ir::Call MakeTreeScheduleCall(ir::Expr tree, const vm::TreeScheduleLayout& layout);

}  // namespace nimble::op
