// The dtype-class check of elementwise type relations: an op accepts the
// dtypes of one class (element.h) and rejects the others by name.
#pragma once

#include "nimble/compiler/op/op.h"
#include "nimble/vm/kernels/element.h"

namespace nimble::op {

// `base`, after checking that every tensor among the arguments (and the
// output too when `check_output`) has a dtype of `accepted`; the error names
// the argument and its type.
TypeRelation RequireDTypeClass(DTypeClass accepted, TypeRelation base, bool check_output);

}  // namespace nimble::op
