// ShareShapes: each run-time shape is computed once. After memory
// manifestation every kernel call reads its inputs' shapes (shape_of) and runs
// its shape function, though most of them repeat a shape already in a
// register: BERT's twelve layers compute the same (1, L, 768) some 200 times,
// a VM instruction and often a kernel call each. Shapes are compared by
// ShapeNumbering, with the dimension forms the compiler gives it.
#pragma once

#include <string>
#include <vector>

#include "nimble/compiler/ir/module.h"
#include "nimble/compiler/transform/shape_numbering.h"

namespace nimble::transform {

// Expects the memory dialect, type-checked. A shape register (a shape_of, an
// output of memory.shape_func) whose number an earlier register in scope
// already holds reads as that register. A shape function call goes when all
// its outputs are so replaced and it checks nothing new: an identical call
// (ShapeCall::number) ran earlier in scope, or it only copies its input's
// shape; any other call stays for the checks it makes (layer_norm's of its
// scale's length). What is left unused goes with EliminateDeadCode (`roots`
// as there). `forms` as ShapeNumbering's. Returns a new module, type-checked
// again.
ir::IRModule ShareShapes(const ir::IRModule& module, const std::vector<std::string>& roots = {},
                         const OutputDimForms& forms = {});

}  // namespace nimble::transform
