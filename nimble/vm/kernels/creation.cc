// The runtime half of the tensor-creation operators (compiler/op/creation.cc):
// zeros / ones / full (static shape attribute), their _like forms (data's
// shape), their dyn. forms (shape tensor, data-dependent) and arange
// (data-dependent length). Fills and ranges are written in parallel chunks.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "nimble/vm/error.h"
#include "nimble/vm/kernels/element.h"
#include "nimble/vm/kernels/op_kernel.h"
#include "nimble/vm/kernels/shape_util.h"
#include "nimble/vm/thread_pool.h"

namespace nimble::vm {

namespace {

// Elements per parallel chunk: below this a fill is faster than waking a thread.
constexpr int64_t kChunkElements = int64_t{1} << 16;

// Every element of `out` (any dtype) = `value` converted to it.
template <typename From>
void Fill(const DLTensor& out, From value) {
  DispatchDType(DTypeOf(out), [&](auto tag) {
    using T = decltype(tag);
    const T element = ConvertElement<T>(value);
    T* data = DataOf<T>(out);
    ParallelFor(0, NumelOf(out), kChunkElements,
                [=](int64_t begin, int64_t end) { std::fill(data + begin, data + end, element); });
  });
}

// Input `index`, which must hold one element (the relation checked it; a
// direct call may not have).
const DLTensor& ScalarInput(TensorArgs inputs, size_t index) {
  const DLTensor& input = *inputs[index];
  if (NumelOf(input) != 1) {
    throw Error("input " + std::to_string(index) + " must be a scalar, got shape " +
                ShapeToString(ShapeOf(input)));
  }
  return input;
}

// Every element of `out` = the element of the scalar `fill_value`, converted.
void FillWithScalar(const DLTensor& out, const DLTensor& fill_value) {
  // Through ComputeType: ConvertElement has no float16 to float16 case.
  DispatchDType(DTypeOf(fill_value),
                [&](auto tag) { Fill(out, LoadElement(DataOf<decltype(tag)>(fill_value)[0])); });
}

// The kernel filling its output with the scalar input `index`.
OpKernelFunc FillFromInput(size_t index) {
  return [index](TensorArgs inputs, TensorArgs outputs, const Attrs&) {
    FillWithScalar(*outputs[0], ScalarInput(inputs, index));
  };
}

std::vector<Shape> AttrShapeFunc(std::span<const Shape>, TensorArgs, const Attrs& attrs) {
  const std::vector<int64_t>& shape = attrs.GetIntList("shape");
  if (std::any_of(shape.begin(), shape.end(), [](int64_t dim) { return dim < 0; })) {
    throw Error("shape " + ShapeToString(shape) + " has a negative dimension");
  }
  return {shape};
}

// dyn.*: the output shape is the value of input `index`.
ShapeFunction ShapeTensorShapeFunc(const std::string& op, size_t index) {
  return [op, index](std::span<const Shape>, TensorArgs input_data, const Attrs&) {
    const Shape shape = ElementsAsInt64(*input_data[index]);
    if (std::any_of(shape.begin(), shape.end(), [](int64_t dim) { return dim < 0; })) {
      throw Error(op + ": the shape tensor holds a negative size: " + ShapeToString(shape));
    }
    ShapeNumel(shape);  // rejects an overflowing element count before anything allocates
    return std::vector<Shape>{shape};
  };
}

std::string ScalarToString(const DLTensor& scalar) {
  return DTypeOf(scalar).is_float() ? FormatFloatLiteral(ElementAsDouble(scalar, 0))
                                    : std::to_string(ElementAsInt64(scalar, 0));
}

// The number of elements of arange(start, stop, step). Integer ranges are
// counted exactly (no rounding through double for int64); float ranges as
// numpy does, ceil((stop - start) / step).
int64_t ArangeLength(const DLTensor& start, const DLTensor& stop, const DLTensor& step) {
  const std::string args = "(start=" + ScalarToString(start) + ", stop=" + ScalarToString(stop) +
                           ", step=" + ScalarToString(step) + ")";
  if (DTypeOf(start).is_float()) {
    const double step_value = ElementAsDouble(step, 0);
    if (step_value == 0) throw Error("arange: step must not be zero " + args);
    const double length =
        std::ceil((ElementAsDouble(stop, 0) - ElementAsDouble(start, 0)) / step_value);
    if (!(length < static_cast<double>(std::numeric_limits<int64_t>::max()))) {
      throw Error("arange: the range " + args + " has no finite length");
    }
    return std::max<int64_t>(0, static_cast<int64_t>(length));
  }
  const int64_t first = ElementAsInt64(start, 0);
  const int64_t last = ElementAsInt64(stop, 0);
  const int64_t stride = ElementAsInt64(step, 0);
  if (stride == 0) throw Error("arange: step must not be zero " + args);
  if (stride > 0 ? last <= first : last >= first) return 0;
  // Unsigned arithmetic: the distance between two int64 values may not fit int64.
  const uint64_t distance = stride > 0 ? static_cast<uint64_t>(last) - static_cast<uint64_t>(first)
                                       : static_cast<uint64_t>(first) - static_cast<uint64_t>(last);
  const uint64_t magnitude =
      stride > 0 ? static_cast<uint64_t>(stride) : 0 - static_cast<uint64_t>(stride);
  const uint64_t length = distance / magnitude + (distance % magnitude != 0);
  if (length > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    throw Error("arange: the range " + args + " is too long");
  }
  return static_cast<int64_t>(length);
}

std::vector<Shape> ArangeShapeFunc(std::span<const Shape>, TensorArgs input_data, const Attrs&) {
  return {{ArangeLength(ScalarInput(input_data, 0), ScalarInput(input_data, 1),
                        ScalarInput(input_data, 2))}};
}

// out[i] = start + i * step. Integers wrap through uint64, which is exact for
// every value inside the range even where i * step alone overflows int64;
// floats compute in double, then convert.
void ArangeKernel(TensorArgs inputs, TensorArgs outputs, const Attrs&) {
  const DLTensor& out = *outputs[0];
  DispatchDType(DTypeOf(out), [&](auto tag) {
    using T = decltype(tag);
    T* data = DataOf<T>(out);
    if constexpr (std::is_integral_v<T>) {
      const uint64_t start = static_cast<uint64_t>(ElementAsInt64(ScalarInput(inputs, 0), 0));
      const uint64_t step = static_cast<uint64_t>(ElementAsInt64(ScalarInput(inputs, 2), 0));
      ParallelFor(0, NumelOf(out), kChunkElements, [=](int64_t begin, int64_t end) {
        uint64_t value = start + static_cast<uint64_t>(begin) * step;
        for (int64_t i = begin; i < end; ++i, value += step) data[i] = static_cast<T>(value);
      });
    } else {
      const double start = ElementAsDouble(ScalarInput(inputs, 0), 0);
      const double step = ElementAsDouble(ScalarInput(inputs, 2), 0);
      ParallelFor(0, NumelOf(out), kChunkElements, [=](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          data[i] = ConvertElement<T>(start + static_cast<double>(i) * step);
        }
      });
    }
  });
}

void RegisterOp(OpKernelRegistry& registry, const std::string& name, ShapeFunction shape_func,
                OpKernelFunc kernel, ShapeFuncMode mode = ShapeFuncMode::kDataIndependent) {
  OpKernelDef& def = registry.Register(name);
  const auto* plain = shape_func.target<decltype(&IdentityShapeFunc)>();
  if (plain && *plain == &IdentityShapeFunc) def.shape_rule = ShapeRule::kSameAsFirstInput;
  def.shape_func = std::move(shape_func);
  def.shape_mode = mode;
  def.kernel = std::move(kernel);
}

}  // namespace

void RegisterCreationOpKernels(OpKernelRegistry& registry) {
  for (const auto& [name, value] : {std::pair<std::string, int>{"zeros", 0}, {"ones", 1}}) {
    const OpKernelFunc fill = [value](TensorArgs, TensorArgs outputs, const Attrs&) {
      Fill(*outputs[0], value);
    };
    RegisterOp(registry, name, AttrShapeFunc, fill);
    RegisterOp(registry, name + "_like", IdentityShapeFunc, fill);
    RegisterOp(registry, "dyn." + name, ShapeTensorShapeFunc("dyn." + name, 0), fill,
               ShapeFuncMode::kDataDependent);
  }
  RegisterOp(registry, "full", AttrShapeFunc, FillFromInput(0));
  RegisterOp(registry, "full_like", IdentityShapeFunc, FillFromInput(1));
  RegisterOp(registry, "dyn.full", ShapeTensorShapeFunc("dyn.full", 1), FillFromInput(0),
             ShapeFuncMode::kDataDependent);
  RegisterOp(registry, "arange", ArangeShapeFunc, ArangeKernel, ShapeFuncMode::kDataDependent);
}

}  // namespace nimble::vm
