// Running one operator on concrete values, the way every executor does it:
// the type relation gives the output dtypes and ranks, the shape function the
// output shapes (checked against that type), the outputs are allocated, and
// the kernel fills them. The reference evaluator and the operator tests call
// this; it is the single definition of "what an op computes".
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "nimble/compiler/op/op.h"

namespace nimble::op {

// The type of a call of `def` on arguments of these (complete) types. Throws
// nimble::Error, prefixed with the op name, when the relation rejects them or
// cannot decide.
ir::Type ResolveCallType(const OpDef& def, const std::vector<ir::Type>& arg_types,
                         const ir::Attrs& attrs);

// The type of a runtime value: a Tensor gives its exact TensorType, a tuple
// (ADT with tag 0) a TupleType of its fields.
ir::Type TypeOfValue(const Ref<Object>& value);

// An output of more bytes than InvokeOp's `max_output_bytes`, refused before
// it is allocated. Folding at compile or import time sets a bound: a value
// too large to be worth a constant must not be computed at all (a fuzzed
// ONNX model folded a 48 GiB tensor on the way to a small one).
class OutputTooLarge : public Error {
 public:
  using Error::Error;
};

// Runs `def` on `args` (tensors, or tuples of tensors for ops that take
// tuples). Returns a Tensor, or a tuple ADT for multi-output ops. Errors name
// the op and the shapes involved; an output past `max_output_bytes` throws
// OutputTooLarge.
Ref<Object> InvokeOp(const OpDef& def, const std::vector<Ref<Object>>& args, const ir::Attrs& attrs,
                     int64_t max_output_bytes = std::numeric_limits<int64_t>::max());

}  // namespace nimble::op
