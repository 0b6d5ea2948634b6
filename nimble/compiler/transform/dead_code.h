// Dead-code elimination: drops `let` bindings whose variable is never used
// and whose value has no effect (every op call except the memory dialect's
// invoke_mut, shape_func and kill, which write through their arguments, is
// pure; a call of a global or closure may not terminate or may fail, so it
// is kept), and globals that the entry functions cannot reach.
#pragma once

#include <string>
#include <vector>

#include "nimble/compiler/ir/module.h"

namespace nimble::transform {

// `roots` are the entry functions, the globals callers may run; empty means
// @main, or every global of a module without @main (a library). Throws
// nimble::Error naming a root the module does not define. Returns a new
// module, type-checked again.
ir::IRModule EliminateDeadCode(const ir::IRModule& module,
                               const std::vector<std::string>& roots = {});

}  // namespace nimble::transform
