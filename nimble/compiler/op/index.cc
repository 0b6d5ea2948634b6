// The indexing family, after ONNX's operators of the same meaning:
// gather_elements and gather_nd (injective, with compute definitions, so they
// fuse like take), scatter_nd, cumsum and topk (opaque, built-in kernels).
// This is the compiler's half: type relations, attribute schemas, fusion
// patterns, reference kernels and compute definitions; the shape functions
// and built-in kernels are the runtime's (nimble/vm/kernels/index.cc), and the
// output-shape rules, shared by both, are in nimble/vm/kernels/index_rules.h.
//
// Negative indices count from the end of their axis; any other index out of
// range is an error. The reference kernels and the built-in ones name the op,
// the index and the axis's size; a generated kernel fails with "an index is
// out of range" under the kernel's name (fused_gather_elements_..., which
// names the ops), since generated code carries no values into its messages.
//
// topk's k is a tensor input, so that it can be computed at run time: a type
// relation sees types only, so the output's axis is `?` (bounded by the
// axis's size) and the data-dependent shape function reads k.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "nimble/compiler/op/compute_util.h"
#include "nimble/compiler/op/op.h"
#include "nimble/compiler/op/reference_loops.h"
#include "nimble/compiler/op/type_relations.h"
#include "nimble/vm/error.h"
#include "nimble/vm/kernels/element.h"
#include "nimble/vm/kernels/index_rules.h"

namespace nimble::op {

namespace {

namespace rules = vm::indexing;
using ir::Dim;
using Dims = std::vector<Dim>;
using Indices = std::vector<Expr>;

// ---------------------------------------------------------------------------
// Type relations.

void CheckIndexDType(const ir::TensorType& indices, const std::string& op) {
  const DataType dtype = indices->dtype;
  if (dtype != DataType::Int32() && dtype != DataType::Int64()) {
    throw Error(op + ": indices must be int32 or int64, got " + dtype.name());
  }
}

// The tensor types of the first `count` arguments; false while one is unknown.
bool TensorArgs(const std::vector<ir::Type>& types, size_t count, const std::string& op,
                std::vector<ir::TensorType>* inputs) {
  static const char* const kNames[] = {"data", "indices", "updates"};
  for (size_t i = 0; i < count; ++i) {
    ir::TensorType tensor = AsTensorType(types[i], op, i < 3 ? kNames[i] : "argument");
    if (!tensor) return false;
    inputs->push_back(tensor);
  }
  return true;
}

// data, indices -> the rule's dims, of data's dtype.
TypeRelation GatherRelation(std::string op, vm::transform::Rule<Dim> rule) {
  return [op, rule](const std::vector<ir::Type>& types, const ir::Attrs& attrs,
                    TypeReporter& reporter) {
    std::vector<ir::TensorType> inputs;
    if (!TensorArgs(types, 2, op, &inputs)) return false;
    CheckIndexDType(inputs[1], op);
    const Dims out = rule({inputs[0]->shape, inputs[1]->shape}, attrs)[0];
    reporter.Assign(types.back(), ir::MakeTensorType(out, inputs[0]->dtype));
    return true;
  };
}

bool ScatterNdRelation(const std::vector<ir::Type>& types, const ir::Attrs& attrs,
                       TypeReporter& reporter) {
  const std::string op = "scatter_nd";
  std::vector<ir::TensorType> inputs;
  if (!TensorArgs(types, 3, op, &inputs)) return false;
  CheckIndexDType(inputs[1], op);
  const DataType dtype = inputs[0]->dtype;
  if (inputs[2]->dtype != dtype) {
    throw Error(op + ": updates must have data's dtype " + dtype.name() + ", got " +
                inputs[2]->dtype.name());
  }
  const std::string& reduction = attrs.GetString("reduction");
  if (reduction != "none" && reduction != "add" && reduction != "mul" && reduction != "max" &&
      reduction != "min") {
    throw Error(op + ": reduction must be \"none\", \"add\", \"mul\", \"max\" or \"min\", got \"" +
                reduction + "\"");
  }
  if (reduction != "none" && dtype.is_bool()) {
    throw Error(op + ": reduction \"" + reduction + "\" needs int or float data, got bool");
  }
  const Dims out =
      rules::ScatterNdRule<Dim>({inputs[0]->shape, inputs[1]->shape, inputs[2]->shape}, attrs)[0];
  reporter.Assign(types.back(), ir::MakeTensorType(out, dtype));
  return true;
}

bool CumsumRelation(const std::vector<ir::Type>& types, const ir::Attrs& attrs,
                    TypeReporter& reporter) {
  ir::TensorType data = AsTensorType(types[0], "cumsum", "data");
  if (!data) return false;
  const DataType dtype = data->dtype;
  if (dtype != DataType::Int32() && dtype != DataType::Int64() && dtype != DataType::Float32() &&
      dtype != DataType::Float64()) {
    throw Error("cumsum: data must be int32, int64, float32 or float64, got " + dtype.name());
  }
  reporter.Assign(types.back(),
                  ir::MakeTensorType(rules::CumsumRule<Dim>({data->shape}, attrs)[0], dtype));
  return true;
}

bool TopKRelation(const std::vector<ir::Type>& types, const ir::Attrs& attrs,
                  TypeReporter& reporter) {
  ir::TensorType data = AsTensorType(types[0], "topk", "data");
  ir::TensorType k = AsTensorType(types[1], "topk", "k");
  if (!data || !k) return false;
  if (!data->dtype.is_int() && !data->dtype.is_float()) {
    throw Error("topk: data must be int or float, got " + data->dtype.name());
  }
  const bool one_element =
      k->ndim() == 0 || (k->ndim() == 1 && (k->shape[0].is_any() || k->shape[0].value() == 1));
  if (k->dtype != DataType::Int64() || !one_element) {
    throw Error("topk: k must be an int64 scalar or a one-element vector, got " +
                ir::TypeToString(k));
  }
  const size_t axis = rules::TopKAxis(data->shape, attrs);
  Dims out = data->shape;
  out[axis] = Dim::AnyAtMost(out[axis].upper_bound());
  reporter.Assign(types.back(), ir::MakeTupleType({ir::MakeTensorType(out, data->dtype),
                                                   ir::MakeTensorType(out, DataType::Int64())}));
  return true;
}

// ---------------------------------------------------------------------------
// Reference kernels: one output element at a time.

int64_t RowMajorOffset(const Shape& shape, std::span<const int64_t> index) {
  int64_t offset = 0;
  for (size_t d = 0; d < shape.size(); ++d) offset = offset * shape[d] + index[d];
  return offset;
}

// `index` along `axis` of `data`, wrapped; the error names the op, the index
// and the axis's size.
int64_t Wrap(int64_t index, size_t axis, const Tensor& data, const std::string& op) {
  const int64_t extent = data->shape()[axis];
  const int64_t wrapped = index < 0 ? index + extent : index;
  if (wrapped < 0 || wrapped >= extent) {
    throw Error(op + ": index " + std::to_string(index) + " is out of range for axis " +
                std::to_string(axis) + " of data " + ShapeToString(data->shape()) + ", of size " +
                std::to_string(extent));
  }
  return wrapped;
}

// Copies element `from` of `src` to element `to` of `dst` (same dtype).
void CopyElement(const Tensor& src, int64_t from, const Tensor& dst, int64_t to) {
  const size_t bytes = src->dtype().bytes();
  std::memcpy(static_cast<std::byte*>(dst->raw_data()) + to * static_cast<int64_t>(bytes),
              static_cast<const std::byte*>(src->raw_data()) + from * static_cast<int64_t>(bytes),
              bytes);
}

void GatherElementsReference(std::span<const Tensor> inputs, std::span<Tensor> outputs,
                             const ir::Attrs& attrs) {
  const Tensor& data = inputs[0];
  const Tensor& indices = inputs[1];
  const size_t axis = static_cast<size_t>(NormalizeAxis(
      attrs.GetInt("axis"), static_cast<int64_t>(data->shape().size()), "gather_elements"));
  int64_t k = 0;
  ForEachIndex(indices->shape(), [&](std::span<const int64_t> index) {
    std::vector<int64_t> source(index.begin(), index.end());
    source[axis] = Wrap(indices->GetAsInt64(k), axis, data, "gather_elements");
    CopyElement(data, RowMajorOffset(data->shape(), source), outputs[0], k++);
  });
}

void GatherNdReference(std::span<const Tensor> inputs, std::span<Tensor> outputs,
                       const ir::Attrs& attrs) {
  const Tensor& data = inputs[0];
  const Tensor& indices = inputs[1];
  const size_t batch_dims = static_cast<size_t>(attrs.GetInt("batch_dims"));
  const size_t q = indices->shape().size();
  const size_t depth = static_cast<size_t>(indices->shape().back());
  int64_t k = 0;
  // out index = indices' [:q - 1] then data's [batch_dims + depth:].
  ForEachIndex(outputs[0]->shape(), [&](std::span<const int64_t> index) {
    std::vector<int64_t> row(index.begin(), index.begin() + static_cast<std::ptrdiff_t>(q - 1));
    row.push_back(0);
    std::vector<int64_t> source(index.begin(),
                                index.begin() + static_cast<std::ptrdiff_t>(batch_dims));
    for (size_t j = 0; j < depth; ++j) {
      row.back() = static_cast<int64_t>(j);
      source.push_back(Wrap(indices->GetAsInt64(RowMajorOffset(indices->shape(), row)),
                            batch_dims + j, data, "gather_nd"));
    }
    source.insert(source.end(), index.begin() + static_cast<std::ptrdiff_t>(q - 1), index.end());
    CopyElement(data, RowMajorOffset(data->shape(), source), outputs[0], k++);
  });
}

void ScatterNdReference(std::span<const Tensor> inputs, std::span<Tensor> outputs,
                        const ir::Attrs& attrs) {
  const Tensor& data = inputs[0];
  const Tensor& indices = inputs[1];
  const Tensor& updates = inputs[2];
  const Tensor& out = outputs[0];
  const std::string& reduction = attrs.GetString("reduction");
  for (int64_t i = 0; i < data->numel(); ++i) CopyElement(data, i, out, i);
  const Shape& index_shape = indices->shape();
  const size_t depth = static_cast<size_t>(index_shape.back());
  const Shape rows(index_shape.begin(), index_shape.end() - 1);
  const Shape slice(data->shape().begin() + static_cast<std::ptrdiff_t>(depth),
                    data->shape().end());
  int64_t update = 0;
  DispatchDType(data->dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* dst = out->data<T>();
    const T* from = updates->data<T>();
    ForEachIndex(rows, [&](std::span<const int64_t> row) {
      std::vector<int64_t> at(row.begin(), row.end());
      at.push_back(0);
      std::vector<int64_t> target;
      for (size_t j = 0; j < depth; ++j) {
        at.back() = static_cast<int64_t>(j);
        target.push_back(
            Wrap(indices->GetAsInt64(RowMajorOffset(index_shape, at)), j, data, "scatter_nd"));
      }
      target.resize(data->shape().size());
      ForEachIndex(slice, [&](std::span<const int64_t> rest) {
        std::copy(rest.begin(), rest.end(), target.begin() + static_cast<std::ptrdiff_t>(depth));
        T& old = dst[RowMajorOffset(data->shape(), target)];
        const T value = from[update++];
        if constexpr (std::is_same_v<T, bool>) {
          old = value;
        } else {
          const auto a = LoadElement(old), b = LoadElement(value);
          if (reduction == "none") {
            old = value;
          } else if (reduction == "add") {
            old = ConvertElement<T>(Wrapping(std::plus<>(), a, b));
          } else if (reduction == "mul") {
            old = ConvertElement<T>(Wrapping(std::multiplies<>(), a, b));
          } else if (reduction == "max") {
            if (b > a) old = value;
          } else if (b < a) {
            old = value;
          }
        }
      });
    });
  });
}

void CumsumReference(std::span<const Tensor> inputs, std::span<Tensor> outputs,
                     const ir::Attrs& attrs) {
  const Tensor& data = inputs[0];
  const Shape& shape = data->shape();
  const size_t axis = static_cast<size_t>(
      NormalizeAxis(attrs.GetInt("axis"), static_cast<int64_t>(shape.size()), "cumsum"));
  const bool exclusive = attrs.GetBool("exclusive");
  const bool reverse = attrs.GetBool("reverse");
  DispatchDType(data->dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool> || !std::is_same_v<T, ComputeType<T>>) {
      throw Error("cumsum: data must be int32, int64, float32 or float64, got " +
                  data->dtype().name());
    } else {
      // Element i along the axis sums the elements before it (after it when
      // reversed), and itself unless exclusive, in order from the start.
      int64_t k = 0;
      ForEachIndex(shape, [&](std::span<const int64_t> index) {
        std::vector<int64_t> at(index.begin(), index.end());
        const int64_t i = index[axis];
        T sum = 0;
        const int64_t n = shape[axis];
        for (int64_t s = 0; s < n; ++s) {
          const int64_t j = reverse ? n - 1 - s : s;
          const bool included =
              reverse ? (exclusive ? j > i : j >= i) : (exclusive ? j < i : j <= i);
          if (!included) continue;
          at[axis] = j;
          sum = Wrapping(std::plus<>(), sum, data->data<T>()[RowMajorOffset(shape, at)]);
        }
        outputs[0]->data<T>()[k++] = sum;
      });
    }
  });
}

// Selection by repeated scans: output j along the axis is the best element
// not yet chosen; the first (lowest position) best wins a tie. NaN is larger
// than every number.
void TopKReference(std::span<const Tensor> inputs, std::span<Tensor> outputs,
                   const ir::Attrs& attrs) {
  const Tensor& data = inputs[0];
  const Shape& shape = data->shape();
  const size_t axis = static_cast<size_t>(
      NormalizeAxis(attrs.GetInt("axis"), static_cast<int64_t>(shape.size()), "topk"));
  const int64_t k = inputs[1]->GetAsInt64(0);
  if (k < 0 || k > shape[axis]) {
    throw Error("topk: k " + std::to_string(k) + " is larger than axis " + std::to_string(axis) +
                " of data " + ShapeToString(shape) + ", of size " + std::to_string(shape[axis]));
  }
  const bool largest = attrs.GetBool("largest");
  // Whether element `x` beats element `y` (flat offsets): integers compare
  // exactly as int64, floats as doubles with NaN above every number.
  const auto beats = [&](int64_t x, int64_t y) {
    if (data->dtype().is_int()) {
      const int64_t a = data->GetAsInt64(x), b = data->GetAsInt64(y);
      return largest ? a > b : a < b;
    }
    const double a = data->GetAsDouble(x), b = data->GetAsDouble(y);
    if (std::isnan(a) || std::isnan(b)) {
      return largest ? std::isnan(a) && !std::isnan(b) : std::isnan(b) && !std::isnan(a);
    }
    return largest ? a > b : a < b;
  };
  Shape lanes = shape;
  lanes[axis] = 1;
  ForEachIndex(lanes, [&](std::span<const int64_t> index) {
    std::vector<int64_t> at(index.begin(), index.end());
    std::vector<bool> taken(static_cast<size_t>(shape[axis]), false);
    for (int64_t j = 0; j < k; ++j) {
      int64_t best = -1;
      int64_t best_offset = 0;
      for (int64_t e = 0; e < shape[axis]; ++e) {
        if (taken[e]) continue;
        at[axis] = e;
        const int64_t offset = RowMajorOffset(shape, at);
        if (best < 0) {
          best = e;
          best_offset = offset;
          continue;
        }
        if (beats(offset, best_offset)) {
          best = e;
          best_offset = offset;
        }
      }
      taken[best] = true;
      at[axis] = j;
      const int64_t out_offset = RowMajorOffset(outputs[0]->shape(), at);
      CopyElement(data, best_offset, outputs[0], out_offset);
      outputs[1]->data<int64_t>()[out_offset] = best;
    }
  });
}

// ---------------------------------------------------------------------------
// Compute definitions: gathers whose read index is computed from indices,
// wrapped and checked (check_index fails the kernel on an out-of-range one).

Expr CheckedRow(const Expr& raw, const Expr& extent) {
  const Expr index = tir::Cast(DataType::Int64(), raw);
  const Expr wrapped = tir::Select(tir::Compare(tir::CompareOp::kLt, index, tir::IntImm(0)),
                                   tir::Add(index, extent), index);
  return tir::Call(tir::Intrinsic::kCheckIndex, {wrapped, extent});
}

std::vector<te::Tensor> GatherElementsCompute(te::ComputeContext& context,
                                              std::span<const te::Tensor> inputs,
                                              const ir::Attrs& attrs,
                                              std::span<const DataType> output_dtypes) {
  if (HasFloat16(inputs, output_dtypes)) return {};
  const te::Tensor& data = inputs[0];
  const te::Tensor& indices = inputs[1];
  const size_t rank = data->shape.size();
  const size_t axis = static_cast<size_t>(
      NormalizeAxis(attrs.GetInt("axis"), static_cast<int64_t>(rank), "gather_elements"));
  for (size_t d = 0; d < rank; ++d) {
    int64_t a = 0, b = 0;
    if (d == axis || (tir::AsInt(indices->shape[d], &a) && tir::AsInt(data->shape[d], &b))) {
      continue;
    }
    context.Require(tir::Compare(tir::CompareOp::kLe, indices->shape[d], data->shape[d]),
                    "gather_elements: indices exceed data in dimension " + std::to_string(d));
  }
  const Expr extent = data->shape[axis];
  return {te::Compute("gather_elements", indices->shape, [&](const Indices& out) {
    Indices source = out;
    source[axis] = CheckedRow(te::Read(indices, out), extent);
    return te::Read(data, source);
  })};
}

std::vector<te::Tensor> GatherNdCompute(te::ComputeContext& context,
                                        std::span<const te::Tensor> inputs, const ir::Attrs& attrs,
                                        std::span<const DataType> output_dtypes) {
  if (HasFloat16(inputs, output_dtypes)) return {};
  const te::Tensor& data = inputs[0];
  const te::Tensor& indices = inputs[1];
  const size_t batch_dims = static_cast<size_t>(attrs.GetInt("batch_dims"));
  const size_t q = indices->shape.size();
  int64_t depth_value = 0;
  if (q == 0 || !tir::AsInt(indices->shape.back(), &depth_value)) return {};
  const size_t depth = static_cast<size_t>(depth_value);
  Indices shape;
  for (size_t d = 0; d < batch_dims; ++d) {
    int64_t a = 0, b = 0;
    if (!(tir::AsInt(data->shape[d], &a) && tir::AsInt(indices->shape[d], &b))) {
      context.Require(tir::Compare(tir::CompareOp::kEq, data->shape[d], indices->shape[d]),
                      "gather_nd: data and indices differ in batch dimension " + std::to_string(d));
    }
    shape.push_back(tir::AsInt(data->shape[d], &a) ? data->shape[d] : indices->shape[d]);
  }
  shape.insert(shape.end(), indices->shape.begin() + static_cast<std::ptrdiff_t>(batch_dims),
               indices->shape.end() - 1);
  shape.insert(shape.end(), data->shape.begin() + static_cast<std::ptrdiff_t>(batch_dims + depth),
               data->shape.end());
  return {te::Compute("gather_nd", shape, [&](const Indices& out) {
    Indices row(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(q - 1));
    row.push_back(tir::IntImm(0));
    Indices source(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(batch_dims));
    for (size_t j = 0; j < depth; ++j) {
      row.back() = tir::IntImm(static_cast<int64_t>(j));
      source.push_back(CheckedRow(te::Read(indices, row), data->shape[batch_dims + j]));
    }
    source.insert(source.end(), out.begin() + static_cast<std::ptrdiff_t>(q - 1), out.end());
    return te::Read(data, source);
  })};
}

// ---------------------------------------------------------------------------
// Registration.

AttrSpec Optional(const char* name, ir::AttrKind kind, ir::AttrValue value) {
  return {.name = name, .kind = kind, .default_value = std::move(value)};
}

}  // namespace

void RegisterIndexOps(OpRegistry& registry) {
  using K = ir::AttrKind;

  OpDef& gather_elements = registry.Register("gather_elements");
  gather_elements.description =
      "ONNX GatherElements: out has indices' shape, and out[i][j] = data[indices[i][j]][j] for "
      "axis 0 (likewise on other axes); negative indices count from the end.";
  gather_elements.min_inputs = gather_elements.max_inputs = 2;
  gather_elements.attrs = {Optional("axis", K::kInt, int64_t{0})};
  gather_elements.relation = GatherRelation("gather_elements", rules::GatherElementsRule<Dim>);
  gather_elements.pattern = OpPattern::kInjective;
  gather_elements.kernel = GatherElementsReference;
  gather_elements.compute = GatherElementsCompute;

  OpDef& gather_nd = registry.Register("gather_nd");
  gather_nd.description =
      "ONNX GatherND: each row of indices' last dimension (m) indexes data's dims past "
      "batch_dims; out = indices.shape[:-1] + data.shape[batch_dims + m:].";
  gather_nd.min_inputs = gather_nd.max_inputs = 2;
  gather_nd.attrs = {Optional("batch_dims", K::kInt, int64_t{0})};
  gather_nd.relation = GatherRelation("gather_nd", rules::GatherNdRule<Dim>);
  gather_nd.pattern = OpPattern::kInjective;
  gather_nd.kernel = GatherNdReference;
  gather_nd.compute = GatherNdCompute;

  OpDef& scatter_nd = registry.Register("scatter_nd");
  scatter_nd.description =
      "ONNX ScatterND: a copy of data with updates written at the rows of indices, combined "
      "with the old values by reduction (none, add, mul, max, min).";
  scatter_nd.min_inputs = scatter_nd.max_inputs = 3;
  scatter_nd.attrs = {Optional("reduction", K::kString, std::string("none"))};
  scatter_nd.relation = ScatterNdRelation;
  scatter_nd.pattern = OpPattern::kOpaque;
  scatter_nd.kernel = ScatterNdReference;

  OpDef& cumsum = registry.Register("cumsum");
  cumsum.description =
      "ONNX CumSum along axis: inclusive or exclusive running sums, from the start or (reverse) "
      "from the end.";
  cumsum.attrs = {Optional("axis", K::kInt, int64_t{0}), Optional("exclusive", K::kBool, false),
                  Optional("reverse", K::kBool, false)};
  cumsum.relation = CumsumRelation;
  cumsum.pattern = OpPattern::kOpaque;
  cumsum.kernel = CumsumReference;

  OpDef& topk = registry.Register("topk");
  topk.description =
      "ONNX TopK: the k largest (or smallest) elements along axis and their int64 positions, as "
      "a tuple; k is an int64 scalar tensor, so the axis's size is `?`. Equal values keep the "
      "lower position first.";
  topk.min_inputs = topk.max_inputs = 2;
  topk.attrs = {Optional("axis", K::kInt, int64_t{-1}), Optional("largest", K::kBool, true),
                Optional("sorted", K::kBool, true)};
  topk.relation = TopKRelation;
  topk.pattern = OpPattern::kOpaque;
  topk.kernel = TopKReference;
}

}  // namespace nimble::op
