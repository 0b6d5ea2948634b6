// Dead-code elimination: drops `let` bindings whose variable is never used
// and whose value has no effect (every op call except the memory dialect's
// invoke_mut, shape_func and kill, which write through their arguments, is
// pure; a call of a global or closure may not terminate or may fail, so it
// is kept), and globals that @main cannot reach (a module without @main is a
// library: all its globals stay).
#pragma once

#include "nimble/compiler/ir/module.h"

namespace nimble::transform {

// Returns a new module, type-checked again.
ir::IRModule EliminateDeadCode(const ir::IRModule& module);

}  // namespace nimble::transform
