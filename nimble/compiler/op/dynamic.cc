// Operators about shapes, and operators whose output shape depends on their
// input values [paper 4.2]:
//   shape_of, ndarray_size   read only their input's shape (data-independent);
//   unique                   its length is the number of distinct values, which
//                            the shape function counts (data-dependent);
//   argwhere                 its shape function returns a bound and the kernel
//                            trims the output to the true rows (upper-bound).
// Here: their type relations and plain reference kernels; their shape
// functions and fast kernels are in nimble/vm/kernels/dynamic.cc.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "nimble/compiler/op/op.h"
#include "nimble/compiler/op/reference_loops.h"
#include "nimble/compiler/op/type_relations.h"
#include "nimble/vm/error.h"
#include "nimble/vm/kernels/element.h"

namespace nimble::op {

namespace {

AttrSpec IndexDTypeAttr() {
  return {"dtype", ir::AttrKind::kDType, DataType::Int32()};
}

bool ShapeOfRelation(const std::vector<ir::Type>& types, const ir::Attrs& attrs,
                     TypeReporter& reporter) {
  ir::TensorType data = AsTensorType(types[0], "shape_of", "data");
  if (!data) return false;
  reporter.Assign(types.back(), ir::MakeTensorType({static_cast<int64_t>(data->ndim())},
                                                   attrs.GetDType("dtype")));
  return true;
}

// out[i] = values[i] converted to out's dtype.
void WriteInt64s(const Tensor& out, const Shape& values) {
  DispatchDType(out->dtype(), [&](auto tag) {
    using T = decltype(tag);
    for (size_t i = 0; i < values.size(); ++i) out->data<T>()[i] = ConvertElement<T>(values[i]);
  });
}

void ShapeOfKernel(std::span<const Tensor> inputs, std::span<Tensor> outputs, const ir::Attrs&) {
  WriteInt64s(outputs[0], inputs[0]->shape());
}

bool NdarraySizeRelation(const std::vector<ir::Type>& types, const ir::Attrs& attrs,
                         TypeReporter& reporter) {
  if (!AsTensorType(types[0], "ndarray_size", "data")) return false;
  reporter.Assign(types.back(), ir::MakeTensorType({}, attrs.GetDType("dtype")));
  return true;
}

void NdarraySizeKernel(std::span<const Tensor> inputs, std::span<Tensor> outputs,
                       const ir::Attrs&) {
  WriteInt64s(outputs[0], {inputs[0]->numel()});
}

// A strict weak order on elements. NaNs go last and count as equal to each
// other (numpy's order), so sorting float data with NaNs is well defined.
// float16 compares as float.
template <typename T>
bool ElementLess(T lhs, T rhs) {
  const ComputeType<T> a = LoadElement(lhs);
  const ComputeType<T> b = LoadElement(rhs);
  if constexpr (std::is_floating_point_v<ComputeType<T>>) {
    if (std::isnan(b)) return !std::isnan(a);
  }
  return a < b;
}

// The distinct values of `data`, in ascending order.
template <typename T>
std::vector<T> SortedDistinct(const T* begin, int64_t count) {
  std::vector<T> values(begin, begin + count);
  std::sort(values.begin(), values.end(), ElementLess<T>);
  // In sorted order a value repeats the previous one exactly when it is not greater.
  values.erase(std::unique(values.begin(), values.end(),
                           [](T previous, T value) { return !ElementLess(previous, value); }),
               values.end());
  return values;
}

bool UniqueRelation(const std::vector<ir::Type>& types, const ir::Attrs&, TypeReporter& reporter) {
  ir::TensorType data = AsTensorType(types[0], "unique", "data");
  if (!data) return false;
  if (data->ndim() != 1) {
    throw Error("data must be 1-D, got " + ir::TypeToString(data));
  }
  reporter.Assign(types.back(), ir::MakeTensorType({ir::Dim::Any()}, data->dtype));
  return true;
}

void UniqueKernel(std::span<const Tensor> inputs, std::span<Tensor> outputs, const ir::Attrs&) {
  const Tensor& out = outputs[0];
  DispatchDType(inputs[0]->dtype(), [&](auto tag) {
    using T = decltype(tag);
    const std::vector<T> values = SortedDistinct<T>(inputs[0]->data<T>(), inputs[0]->numel());
    if (static_cast<int64_t>(values.size()) != out->numel()) {
      throw Error("unique: output of shape " + ShapeToString(out->shape()) + " for " +
                  std::to_string(values.size()) + " distinct values of input shape " +
                  ShapeToString(inputs[0]->shape()));
    }
    std::copy(values.begin(), values.end(), out->data<T>());
  });
}

bool ArgWhereRelation(const std::vector<ir::Type>& types, const ir::Attrs&,
                      TypeReporter& reporter) {
  ir::TensorType condition = AsTensorType(types[0], "argwhere", "condition");
  if (!condition) return false;
  reporter.Assign(types.back(),
                  ir::MakeTensorType({ir::Dim::Any(), static_cast<int64_t>(condition->ndim())},
                                     DataType::Int32()));
  return true;
}

// Writes the coordinates of the non-zero elements into the bound-sized output
// in row-major order, then replaces the output by a view of the rows written.
void ArgWhereKernel(std::span<const Tensor> inputs, std::span<Tensor> outputs, const ir::Attrs&) {
  const Tensor& condition = inputs[0];
  const Shape& shape = condition->shape();
  const int64_t ndim = condition->ndim();
  const int64_t numel = condition->numel();
  Tensor& out = outputs[0];
  if (out->ndim() != 2 || out->shape()[0] < numel || out->shape()[1] != ndim) {
    throw Error("argwhere: output of shape " + ShapeToString(out->shape()) +
                " is smaller than the bound (" + std::to_string(numel) + ", " +
                std::to_string(ndim) + ") for condition of shape " + ShapeToString(shape));
  }
  int64_t count = 0;
  DispatchDType(condition->dtype(), [&](auto tag) {
    using T = decltype(tag);
    int64_t flat = 0;
    ForEachIndex(shape, [&](std::span<const int64_t> index) {
      // Compared after LoadElement, so float16's -0 is zero and its NaN is not.
      if (LoadElement(condition->data<T>()[flat++]) != ComputeType<T>(0)) {
        for (int64_t d = 0; d < ndim; ++d) {
          out->data<int32_t>()[count * ndim + d] = static_cast<int32_t>(index[d]);
        }
        ++count;
      }
    });
  });
  out = out->SliceRows(0, count);
}

}  // namespace

void RegisterDynamicOps(OpRegistry& registry) {
  OpDef& shape_of = registry.Register("shape_of");
  shape_of.description =
      "The shape of data as a 1-D tensor of dtype; it reads only the shape, never the values.";
  shape_of.attrs = {IndexDTypeAttr()};
  shape_of.relation = ShapeOfRelation;
  shape_of.pattern = OpPattern::kOpaque;
  shape_of.kernel = ShapeOfKernel;

  // Opaque like shape_of: it reads only metadata, so fusing it with the
  // producer of its input would compute that input for nothing.
  OpDef& ndarray_size = registry.Register("ndarray_size");
  ndarray_size.description = "The number of elements of data as a scalar of dtype.";
  ndarray_size.attrs = {IndexDTypeAttr()};
  ndarray_size.relation = NdarraySizeRelation;
  ndarray_size.pattern = OpPattern::kOpaque;
  ndarray_size.kernel = NdarraySizeKernel;

  OpDef& unique = registry.Register("unique");
  unique.description =
      "The distinct values of the 1-D tensor data in ascending order; the length is known only "
      "once the values are.";
  unique.relation = UniqueRelation;
  unique.pattern = OpPattern::kOpaque;
  unique.kernel = UniqueKernel;

  OpDef& argwhere = registry.Register("argwhere");
  argwhere.description =
      "The int32 coordinates of the non-zero elements of condition, one row each in row-major "
      "order; the output is allocated at the bound (numel, ndim) and trimmed by the kernel.";
  argwhere.relation = ArgWhereRelation;
  argwhere.pattern = OpPattern::kOpaque;
  argwhere.kernel = ArgWhereKernel;
}

}  // namespace nimble::op
