// The runtime half of every operator: its shape function [paper 4.2] and its
// built-in kernel. The compiler's op registry (nimble/compiler/op) holds the
// other half (type relation, attribute schema, fusion pattern, and a plain
// reference kernel for the evaluator) and takes the shape functions from here,
// so each op's output shapes have one definition, and a compiled program runs
// its shape functions with the runtime alone.
//
// Every op reaches the VM through the one kernel ABI (kernel.h), registered in
// the KernelRegistry under two names:
//   "OP"            the built-in kernel. Arguments: the inputs (tuple
//                   arguments flattened into their fields), then the outputs,
//                   allocated with the shape function's shapes. An upper-bound
//                   op takes, after its outputs, one int64 tensor [rank] per
//                   output that receives the output's true shape; the valid
//                   part of each output is its leading elements in row-major
//                   order, so the caller views it without a copy.
//   "shape_func.OP" the shape function. Arguments: per input, its shape as an
//                   int64 tensor [rank] (a data-dependent op gets the input
//                   itself instead), then per output an int64 tensor [rank]
//                   that receives the output's shape.
// nn.dense and nn.batch_matmul register their kernels themselves (dense.h,
// with library variants); here they contribute only their shape functions.
//
// Kernels here are written for speed: dtype dispatch once per call, contiguous
// inner loops the compiler vectorises, outer loops on the process's thread
// pool (thread_pool.h) when the work is large enough to pay for it.
#pragma once

#include <dlpack/dlpack.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "nimble/vm/attrs.h"
#include "nimble/vm/dlpack.h"
#include "nimble/vm/dtype.h"
#include "nimble/vm/kernel.h"
#include "nimble/vm/tensor.h"

namespace nimble::vm {

// What a shape function needs from its inputs [paper 4.2].
enum class ShapeFuncMode {
  kDataIndependent,  // input shapes only
  kDataDependent,    // input values (arange, unique, full with a shape tensor)
  kUpperBound,       // a bound; the kernel then reports the true shape
};

std::string ShapeFuncModeName(ShapeFuncMode mode);

// Tensor arguments of shape functions and kernels: borrowed DLPack views,
// CPU memory, dense row-major (kernel.h's ABI).
using TensorArgs = std::span<const DLTensor* const>;

// Output shapes from input shapes and, for data-dependent ops, input values
// (`input_data` is empty for the other modes). It is also the run-time half of
// gradual typing: a check the type relation deferred (broadcast of `?`
// against 3) fails here with an error naming the shapes. Errors are
// nimble::Error without the op's name; callers prefix it.
using ShapeFunction = std::function<std::vector<Shape>(std::span<const Shape> input_shapes,
                                                       TensorArgs input_data, const Attrs& attrs)>;

// Destination passing: fills `outputs` (see the ABI above for upper-bound
// ops). Throws nimble::Error on a value error (an index out of range).
using OpKernelFunc = std::function<void(TensorArgs inputs, TensorArgs outputs, const Attrs& attrs)>;

// What the compiler may assume of an op's output shape without running its
// shape function (which still runs, and still checks): storage planning
// reuses buffers of provably equal shapes.
enum class ShapeRule : uint8_t {
  kOpaque,            // nothing
  kSameAsFirstInput,  // the first input's shape (unary ops, bias_add, softmax, ...)
  kBroadcast,         // the inputs' broadcast: their shape when all are equal
  kReplacesLastDim,   // the first input's, its last dimension a static one (dense's units)
};

struct OpKernelDef {
  std::string name;
  ShapeFunction shape_func;
  ShapeFuncMode shape_mode = ShapeFuncMode::kDataIndependent;
  ShapeRule shape_rule = ShapeRule::kOpaque;
  // Null for ops whose kernels a family registers in the KernelRegistry itself.
  OpKernelFunc kernel;
  // How many tensors the op returns, from its attributes (split); null: one.
  std::function<int(const Attrs& attrs)> num_outputs;

  int NumOutputs(const Attrs& attrs) const { return num_outputs ? num_outputs(attrs) : 1; }
};

class OpKernelRegistry {
 public:
  // The registry with every operator's runtime half, built on first use.
  static const OpKernelRegistry& Global();

  // Adds a definition; a duplicate name throws.
  OpKernelDef& Register(const std::string& name);
  // Null when there is no such operator.
  const OpKernelDef* Find(const std::string& name) const;
  std::vector<std::string> Names() const;

 private:
  std::map<std::string, std::unique_ptr<OpKernelDef>> ops_;
};

// The KernelRegistry name of an op's shape function: "shape_func.OP".
std::string ShapeFuncKernelName(const std::string& op_name);

// Registers "OP" and "shape_func.OP" for every op of OpKernelRegistry::Global()
// as described above (RegisterBuiltinKernels calls it).
void RegisterOpKernels(KernelRegistry& registry);

// Registration of each family (nimble/vm/kernels/<family>.cc);
// OpKernelRegistry::Global() calls them all.
void RegisterElemwiseOpKernels(OpKernelRegistry& registry);  // unary, binary, where, cast
void RegisterNnOpKernels(OpKernelRegistry& registry);
void RegisterConvOpKernels(OpKernelRegistry& registry);  // convolution and pooling
void RegisterReduceOpKernels(OpKernelRegistry& registry);
void RegisterTransformOpKernels(OpKernelRegistry& registry);
void RegisterCreationOpKernels(OpKernelRegistry& registry);
void RegisterDynamicOpKernels(OpKernelRegistry& registry);
void RegisterIndexOpKernels(OpKernelRegistry& registry);  // gathers, scatter, cumsum, topk

// Reading DLTensor arguments.
inline DataType DTypeOf(const DLTensor& tensor) {
  return FromDLDataType(tensor.dtype);
}
inline std::span<const int64_t> ShapeOf(const DLTensor& tensor) {
  return {tensor.shape, static_cast<size_t>(tensor.ndim)};
}
inline int64_t NumelOf(const DLTensor& tensor) {
  int64_t numel = 1;
  for (int32_t d = 0; d < tensor.ndim; ++d) numel *= tensor.shape[d];
  return numel;
}
template <typename T>
T* DataOf(const DLTensor& tensor) {
  return reinterpret_cast<T*>(static_cast<std::byte*>(tensor.data) + tensor.byte_offset);
}
// Element `index` (flat) of a tensor of any dtype.
int64_t ElementAsInt64(const DLTensor& tensor, int64_t index);
double ElementAsDouble(const DLTensor& tensor, int64_t index);
// Every element of a tensor of rank 0 or 1 as int64 (a shape or an index list).
std::vector<int64_t> ElementsAsInt64(const DLTensor& tensor);

// DLTensor views of tensors, to call a shape function or a kernel on them;
// valid while the tensors live.
class TensorArgViews {
 public:
  explicit TensorArgViews(std::span<const Tensor> tensors);
  TensorArgViews(const TensorArgViews&) = delete;
  TensorArgViews& operator=(const TensorArgViews&) = delete;
  TensorArgs args() const { return pointers_; }

 private:
  std::vector<DLTensor> views_;
  std::vector<const DLTensor*> pointers_;
};

}  // namespace nimble::vm
