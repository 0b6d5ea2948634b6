// Memory planning, part 2: liveness. A `let %k = memory.kill(%v)` follows the
// last use of every let-bound variable that owns a VM register (its value is
// not another variable, whose register it would share), so the register
// drops its reference as early as possible and, when it was the last one,
// the storage goes back to the pooled allocator for the next allocation of
// its size class: run-time reuse, which is what serves dynamically sized
// buffers. A variable renamed by `let %a = %b` or bound by a variable pattern
// lives until the last use of all its names. Each scope (function body,
// branch, clause) kills what it binds, a clause also the variables its
// pattern binds inside constructors and tuples (each a field read into a
// register of its own). A value used last in an `if` or `match` dies inside
// each branch, after its last use there or on entry, when every branch can
// kill it (it is no branch's value) or the construct is in tail position;
// otherwise after the statement holding it. Nothing is killed after the
// statement computing a function's result (the frame ends there anyway, and
// a call in tail position must stay one), nor after a branch's in tail
// position. In a tail scope, a value handed down from an enclosing scope or
// bound by the clause's pattern, or one used last by the statement before
// the result, is killed only before a call that returns to the frame
// (which then no longer holds it while the callee runs: a recursion over a
// list frees each node on the way down); elsewhere the frame's end or the
// tail call drops it as soon, and the kill would be one more instruction
// each time round a loop.
#pragma once

#include "nimble/compiler/ir/module.h"

namespace nimble::transform {

// Expects a type-checked module in the memory dialect; returns a new one,
// type-checked again. Running it twice adds no kills.
ir::IRModule InsertKills(const ir::IRModule& module);

}  // namespace nimble::transform
