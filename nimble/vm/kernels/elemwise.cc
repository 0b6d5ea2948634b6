// The runtime half of the elementwise operators (compiler/op/unary.cc and
// binary.cc): unary ops and cast (identity shape function), two-input
// broadcast ops and where (broadcast shape function). Each built-in kernel
// checks its arguments once, dispatches on the dtype once, and runs the op's
// scalar function (elemwise_functions.h) in the loops of elemwise_loops.h.
// The compiler's reference kernels, which the tests check these against, do
// not share those functions (compiler/op/reference_scalar.h).
#include <algorithm>
#include <cstring>
#include <string>
#include <type_traits>

#include "nimble/vm/dlpack.h"
#include "nimble/vm/error.h"
#include "nimble/vm/kernels/elemwise_functions.h"
#include "nimble/vm/kernels/elemwise_loops.h"
#include "nimble/vm/kernels/op_kernel.h"
#include "nimble/vm/kernels/shape_util.h"

namespace nimble::vm {

namespace {

// The argument checks a direct call through the kernel ABI needs to stay in
// bounds; the compiler's relations already guarantee them for its calls.
void CheckArgCounts(TensorArgs inputs, TensorArgs outputs, size_t num_inputs) {
  if (inputs.size() != num_inputs || outputs.size() != 1) {
    throw Error("expects " + std::to_string(num_inputs) + " inputs and 1 output, got " +
                std::to_string(inputs.size()) + " inputs and " + std::to_string(outputs.size()) +
                " outputs");
  }
  for (const TensorArgs args : {inputs, outputs}) {
    for (const DLTensor* tensor : args) {
      if (tensor->device.device_type != kDLCPU) throw Error("arguments must be on the CPU");
      if (tensor->strides == nullptr) continue;
      int64_t expected = 1;
      for (int32_t d = tensor->ndim; d-- > 0;) {
        if (tensor->shape[d] != 1 && tensor->strides[d] != expected) {
          throw Error("arguments must be dense row-major");
        }
        expected *= tensor->shape[d];
      }
    }
  }
}

void CheckDType(const DLTensor& tensor, DataType expected, const char* what) {
  if (DTypeOf(tensor) != expected) {
    throw Error(std::string(what) + " has dtype " + DTypeOf(tensor).name() + ", expected " +
                expected.name());
  }
}

void CheckSameShape(const DLTensor& input, const DLTensor& output) {
  const std::span<const int64_t> in = ShapeOf(input);
  const std::span<const int64_t> out = ShapeOf(output);
  if (!std::equal(in.begin(), in.end(), out.begin(), out.end())) {
    throw Error("the output has shape " + ShapeToString(out) + " but the input has shape " +
                ShapeToString(in));
  }
}

// out = fn(in); a copy in the same dtype is a memcpy, bit-exact for float16.
template <typename In, typename Out, typename Fn>
void Map(const DLTensor& input, const DLTensor& output, const Fn& fn) {
  if constexpr (std::is_same_v<In, Out> && std::is_same_v<Fn, elemwise::Identity>) {
    const std::byte* in = DataOf<const std::byte>(input);
    std::byte* out = DataOf<std::byte>(output);
    ParallelChunks(NumelOf(output), [&](int64_t begin, int64_t end) {
      std::memcpy(out + begin * sizeof(In), in + begin * sizeof(In), (end - begin) * sizeof(In));
    });
  } else {
    UnaryLoop<In, Out>(input, output, fn);
  }
}

template <typename Fn>
void RegisterUnary(OpKernelRegistry& registry, const std::string& name, Fn fn) {
  OpKernelDef& def = registry.Register(name);
  def.shape_func = IdentityShapeFunc;
  def.shape_rule = ShapeRule::kSameAsFirstInput;
  def.kernel = [fn](TensorArgs inputs, TensorArgs outputs, const Attrs& attrs) {
    CheckArgCounts(inputs, outputs, 1);
    const DLTensor& input = *inputs[0];
    const DLTensor& output = *outputs[0];
    CheckSameShape(input, output);
    const DataType dtype = DTypeOf(input);
    CheckDType(output, Fn::kReturnsBool ? DataType::Bool() : dtype, "the output");
    const Fn configured = elemwise::Configured(fn, attrs);
    DispatchDType(dtype, [&](auto tag) {
      using T = decltype(tag);
      if constexpr (ElementInClass<T>(Fn::kAccepts)) {
        Map<T, elemwise::ResultOf<Fn, T>>(input, output, configured);
      } else {
        ThrowUnsupportedDType(dtype);
      }
    });
  };
}

void RegisterCast(OpKernelRegistry& registry) {
  OpKernelDef& def = registry.Register("cast");
  def.shape_func = IdentityShapeFunc;
  def.shape_rule = ShapeRule::kSameAsFirstInput;
  // The output was allocated with the `dtype` attribute; its dtype picks the conversion.
  def.kernel = [](TensorArgs inputs, TensorArgs outputs, const Attrs&) {
    CheckArgCounts(inputs, outputs, 1);
    const DLTensor& input = *inputs[0];
    const DLTensor& output = *outputs[0];
    CheckSameShape(input, output);
    DispatchDType(DTypeOf(input), [&](auto in_tag) {
      DispatchDType(DTypeOf(output), [&](auto out_tag) {
        Map<decltype(in_tag), decltype(out_tag)>(input, output, elemwise::Identity());
      });
    });
  };
}

template <typename Fn>
void RegisterBinary(OpKernelRegistry& registry, const std::string& name, Fn fn) {
  OpKernelDef& def = registry.Register(name);
  def.shape_func = BroadcastShapeFunc(name);
  def.shape_rule = ShapeRule::kBroadcast;
  def.kernel = [fn](TensorArgs inputs, TensorArgs outputs, const Attrs&) {
    CheckArgCounts(inputs, outputs, 2);
    const DLTensor& a = *inputs[0];
    const DLTensor& b = *inputs[1];
    const DLTensor& output = *outputs[0];
    const DataType dtype = DTypeOf(a);
    CheckDType(b, dtype, "input 1");
    CheckDType(output, Fn::kReturnsBool ? DataType::Bool() : dtype, "the output");
    CheckBroadcastsTo(a, output, "input 0");
    CheckBroadcastsTo(b, output, "input 1");
    DispatchDType(dtype, [&](auto tag) {
      using T = decltype(tag);
      if constexpr (ElementInClass<T>(Fn::kAccepts)) {
        BroadcastLoop<elemwise::ResultOf<Fn, T>, T, T>(output, {&a, &b}, fn);
      } else {
        ThrowUnsupportedDType(dtype);
      }
    });
  };
}

void RegisterWhere(OpKernelRegistry& registry) {
  OpKernelDef& def = registry.Register("where");
  def.shape_func = BroadcastShapeFunc("where");
  def.shape_rule = ShapeRule::kBroadcast;
  def.kernel = [](TensorArgs inputs, TensorArgs outputs, const Attrs&) {
    CheckArgCounts(inputs, outputs, 3);
    const DLTensor& condition = *inputs[0];
    const DLTensor& x = *inputs[1];
    const DLTensor& y = *inputs[2];
    const DLTensor& output = *outputs[0];
    CheckDType(condition, DataType::Bool(), "the condition");
    const DataType dtype = DTypeOf(x);
    CheckDType(y, dtype, "y");
    CheckDType(output, dtype, "the output");
    CheckBroadcastsTo(condition, output, "the condition");
    CheckBroadcastsTo(x, output, "x");
    CheckBroadcastsTo(y, output, "y");
    DispatchDType(dtype, [&](auto tag) {
      using T = decltype(tag);
      BroadcastLoop<T, bool, T, T>(output, {&condition, &x, &y}, elemwise::Select());
    });
  };
}

}  // namespace

void RegisterElemwiseOpKernels(OpKernelRegistry& registry) {
  elemwise::ForEachUnaryFunction(
      [&](const char* name, auto fn) { RegisterUnary(registry, name, fn); });
  RegisterCast(registry);
  elemwise::ForEachBinaryFunction(
      [&](const char* name, auto fn) { RegisterBinary(registry, name, fn); });
  RegisterWhere(registry);
}

}  // namespace nimble::vm
