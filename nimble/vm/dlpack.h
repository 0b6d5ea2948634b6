// Zero-copy exchange of tensors through DLPack (the header here is v0.6,
// DLPACK_VERSION 60): with kernels, which take DLTensor arguments, and with
// other frameworks (PyTorch, NumPy, CuPy), which trade DLManagedTensor.
//
// Conventions. Nimble tensors are dense row-major, so exported tensors have
// null strides (AsDLTensor) or compact ones (ToDLPack), and `data` points at
// the first element with byte_offset 0, as PyTorch exports them: a kernel
// indexes `data` directly. Imports accept any byte_offset.
// Element types: bool is {kDLUInt, 1 bit, 1 lane} stored one byte per element
// (TVM's convention; v0.6 has no kDLBool, and {kDLUInt, 8} is uint8). Where
// the header has kDLBool (v0.8 on), bool is {kDLBool, 8} and the TVM form is
// still accepted on import. float16 is {kDLFloat, 16}.
#pragma once

#include <dlpack/dlpack.h>

#include "nimble/vm/dtype.h"
#include "nimble/vm/tensor.h"

namespace nimble {

// The DLPack type of `dtype`.
DLDataType ToDLDataType(DataType dtype);
// The dtype of `type`; throws nimble::Error naming it when nimble has no
// equivalent (bfloat16, complex, more than one lane...).
DataType FromDLDataType(DLDataType type);

// A borrowed view of `tensor`, valid while the tensor lives; `shape` points
// into the tensor's own (immutable) shape, so consumers must not write it.
DLTensor AsDLTensor(const TensorNode& tensor);
inline DLTensor AsDLTensor(const Tensor& tensor) {
  return AsDLTensor(*tensor);
}

// An owned DLPack tensor sharing `tensor`'s memory; the memory stays alive
// until the consumer calls the deleter.
DLManagedTensor* ToDLPack(const Tensor& tensor);

// Takes ownership of `managed` and wraps its memory without copying; its
// deleter runs once, when the last tensor viewing the memory dies. Throws
// nimble::Error, after running the deleter, for non-compact strides, an
// unsupported dtype or lane count, or a device other than CPU and CUDA.
Tensor FromDLPack(DLManagedTensor* managed);

}  // namespace nimble
