// Binds a model's weights into its main function: parameters named in
// `params` become named constants (their tensors stored in the params file,
// `meta[relay.Constant][name]` in the text), so later passes can fold and
// fuse them.
#pragma once

#include <map>
#include <string>

#include "nimble/compiler/ir/expr.h"
#include "nimble/vm/tensor.h"

namespace nimble::ir {

// `function` without the parameters whose names are keys of `params`, each use
// replaced by a Constant named after the parameter. Each tensor must match the
// parameter's annotation (dtype, rank, static dims; Any accepts any size);
// otherwise throws nimble::Error naming the parameter and both types. Names
// that are not parameters are ignored. Returns `function` itself when nothing
// binds.
Function BindParamsByName(const Function& function, const std::map<std::string, Tensor>& params);

}  // namespace nimble::ir
