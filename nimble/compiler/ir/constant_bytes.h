// How many bytes of named constants (a model's weights) a module holds, each
// tensor counted once however many places use it. The benchmark reports it,
// and kernel tuning asks it whether a program's weights can stay in the
// caches between two inferences.
#pragma once

#include <cstddef>

#include "nimble/compiler/ir/module.h"

namespace nimble::ir {

size_t ConstantBytes(const IRModule& module);

}  // namespace nimble::ir
