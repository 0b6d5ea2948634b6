// Memory planning, part 2: liveness. A `let %k = memory.kill(%v)` follows the
// last use of every let-bound variable that owns a VM register (its value is
// not another variable, whose register it would share), so the register
// drops its reference as early as possible and, when it was the last one,
// the storage goes back to the pooled allocator for the next allocation of
// its size class: run-time reuse, which is what serves dynamically sized
// buffers. A variable renamed by `let %a = %b` or bound by a variable pattern
// lives until the last use of all its names. Each scope (function body,
// branch, clause) kills what it binds; a value of an outer scope used last
// inside a branch dies after the statement holding the branch. Nothing is
// killed after the statement computing a function's result (the frame ends
// there anyway, and a call in tail position must stay one), nor after a
// branch's in tail position.
#pragma once

#include "nimble/compiler/ir/module.h"

namespace nimble::transform {

// Expects a type-checked module in the memory dialect; returns a new one,
// type-checked again. Running it twice adds no kills.
ir::IRModule InsertKills(const ir::IRModule& module);

}  // namespace nimble::transform
