// How `nimble run` hands back a program's result: as a flat list of tensors
// (written as 0.npy, 1.npy, ...) and a one-line summary of each.
#pragma once

#include <string>
#include <vector>

#include "nimble/vm/object.h"
#include "nimble/vm/tensor.h"

namespace nimble::cli {

// The tensors of `result` in depth-first order: a tensor is itself; a tuple
// or a constructor value (Cons(x, xs)) contributes its fields' tensors in
// order, so a field-less value (Nil) contributes none. Throws nimble::Error
// when the result holds a function.
std::vector<Tensor> FlattenResult(const Ref<Object>& result);

// "Tensor[(3, 2), float32] [0.5, -0.25, ...]": the type and the first
// `max_values` elements in row-major order.
std::string SummarizeTensor(const Tensor& tensor, size_t max_values);

}  // namespace nimble::cli
