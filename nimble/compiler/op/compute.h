// Compute definitions of IR calls: how code generation and operator fusion ask
// an operator for its tensor expressions (OpDef::compute) given the call's
// types, so both agree on what can be generated.
#pragma once

#include <functional>
#include <span>
#include <vector>

#include "nimble/compiler/ir/expr.h"
#include "nimble/compiler/te/tensor.h"

namespace nimble::op {

// The tensor types of `type`, tuples flattened depth first (the kernel
// calling convention); throws nimble::Error for anything but tensors and
// tuples of them.
std::vector<ir::TensorType> FlattenTensorTypes(const ir::Type& type);

// A placeholder per tensor of `type` (flattened), named `name` ("p0", or
// "p0.1" for a tuple's field), whose dimensions are `dim(i, d, static_size)`
// for each tensor i and dimension d (static_size is -1 for `?`).
std::vector<te::Tensor> PlaceholdersFor(
    const std::string& name, const ir::Type& type,
    const std::function<te::Expr(size_t tensor, size_t dim, int64_t static_size)>& dim);

// The op's compute definition applied to `inputs` (the call's arguments,
// flattened); empty when the callee is not an operator, has no definition,
// or the definition does not support these attributes or dtypes.
std::vector<te::Tensor> ComputeCall(const ir::CallNode& call, std::span<const te::Tensor> inputs,
                                    te::ComputeContext& context);

// Whether code generation supports `call`: ComputeCall on placeholders of its
// argument types is not empty. Needs a type-checked call.
bool CanGenerate(const ir::CallNode& call);

}  // namespace nimble::op
