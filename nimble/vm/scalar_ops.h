// The VM's scalar control arithmetic: what a Scalar instruction computes
// (bytecode.h), and the small CPU tensors that hold its results.
//
// A loop counter, the comparison that ends the loop and a shape read would
// otherwise each be a kernel call writing a freshly allocated tensor. Here
// each is a few nanoseconds of work in the interpreter, with the built-in
// kernels' scalar functions (elemwise_functions.h), so the two cannot differ.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "nimble/vm/bytecode.h"
#include "nimble/vm/tensor.h"

namespace nimble::vm {

// The dtype of `op`'s result on operands of `dtype` (bool for comparisons).
DataType ScalarResultDType(ScalarOperator op, DataType dtype);

// Computes `op` on `lhs` and `rhs` (the immediate `rhs_value` when `rhs` is
// null) and stores the result, of ScalarResultDType(op, dtype), at `out`.
// Throws nimble::Error naming the operator for an operand that is not a CPU
// tensor of the expected rank and dtype, a zero divisor, or an index out of
// range (take.fast, or any take of an empty tensor).
void EvaluateScalar(ScalarOperator op, DataType dtype, const TensorNode& lhs, const TensorNode* rhs,
                    int64_t rhs_value, void* out);

// Small CPU tensors for the VM's own results (scalars, shapes), recycled: a
// tensor that nobody but the cache holds any more is handed out again instead
// of allocating, so a loop's counter and tests allocate nothing once warm.
// One cache per VM; not thread-safe.
class ScalarTensorCache {
 public:
  // A CPU tensor of `dtype` and `shape` (rank at most 1) that no one else
  // holds, its contents unspecified.
  Tensor Get(DataType dtype, std::span<const int64_t> shape);

 private:
  struct Slot {
    DataType dtype;
    Shape shape;
    std::vector<Tensor> tensors;
    size_t next = 0;
  };
  Slot& SlotFor(DataType dtype, std::span<const int64_t> shape);
  std::vector<Slot> slots_;
};

}  // namespace nimble::vm
