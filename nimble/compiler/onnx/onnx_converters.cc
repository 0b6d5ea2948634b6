#include "nimble/compiler/onnx/onnx_converters.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <numeric>
#include <sstream>

#include "nimble/compiler/ir/functor.h"
#include "nimble/compiler/onnx/onnx_control_flow.h"
#include "nimble/compiler/op/invoke.h"
#include "nimble/compiler/op/op.h"
#include "nimble/vm/error.h"

namespace nimble::onnx_import {
namespace {

// Tensors of more elements than this are refused (a dimension that large is
// a broken file, not a model).
constexpr int64_t kMaxElements = int64_t{1} << 40;
// Values known at import time are computed then up to this size; larger
// ones (a ConstantOfShape of a big static shape) are left to run time.
constexpr int64_t kMaxFoldedElements = int64_t{1} << 24;
// The same bound in bytes (of int64 elements, the widest) on every tensor a
// fold computes, for what a static type does not tell: an output typed `?`,
// or a small result (a ReduceMean) of a large value left to run time.
constexpr int64_t kMaxFoldedBytes = kMaxFoldedElements * 8;

using Values = std::vector<Value>;

// The elements of a small integer scalar or vector, for shape arithmetic.
std::vector<ShapeElement> ElementsOf(const Tensor& tensor) {
  std::vector<ShapeElement> elements;
  const DataType dtype = tensor->dtype();
  if ((dtype != DataType::Int64() && dtype != DataType::Int32()) || tensor->ndim() > 1 ||
      tensor->numel() > 16) {
    return elements;
  }
  for (int64_t i = 0; i < tensor->numel(); ++i) {
    elements.push_back({LoadElementAsInt64(tensor->raw_data(), dtype, i)});
  }
  return elements;
}

Value Known(const Tensor& tensor) {
  return KnownValue(tensor);
}

// `value` with what is known of its elements; a constant once all of them
// are known (a shape whose `?` dimensions were not the ones taken).
Value WithElements(const NodeContext& context, Value value, std::vector<ShapeElement> elements) {
  if (value.known || elements.empty()) return value;
  std::vector<int64_t> values;
  for (const ShapeElement& element : elements) {
    if (!element.value) {
      value.elements = std::move(elements);
      return value;
    }
    values.push_back(*element.value);
  }
  const ir::TensorType type = context.TypeOfExpr(value.expr);
  Shape shape;
  if (type->ndim() == 1) shape.push_back(static_cast<int64_t>(values.size()));
  const Tensor tensor = TensorNode::FromVector<int64_t>(shape, DataType::Int64(), values);
  if (type->dtype == DataType::Int64()) return Known(tensor);
  return context.Call("cast", {Known(tensor)}, AttrsOf({{"dtype", type->dtype}}));
}

Value KnownInts(const std::vector<int64_t>& values) {
  return Known(TensorNode::FromVector<int64_t>({static_cast<int64_t>(values.size())},
                                               DataType::Int64(), values));
}

int64_t Rank(const NodeContext& context, size_t input) {
  return static_cast<int64_t>(context.TypeOf(input)->ndim());
}

// `axis` in [-rank, rank) as a non-negative axis.
int64_t NormalAxis(const NodeContext& context, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank) {
    context.Fail("axis " + std::to_string(axis) + " is out of range for rank " +
                 std::to_string(rank));
  }
  return axis < 0 ? axis + rank : axis;
}

// The axes of an Unsqueeze, Squeeze or ReduceMean: an attribute before
// opset 13 (18 for reductions), an input from then on.
std::optional<std::vector<int64_t>> AxesOf(const NodeContext& context, int64_t input_from_opset) {
  if (context.opset() >= input_from_opset) {
    if (!context.Has(1)) return std::nullopt;
    return context.KnownInts(1, "axes");
  }
  return context.IntsAttr("axes");
}

Converter Unary(const std::string& op) {
  return [op](const NodeContext& context) {
    context.OnlyAttrs({});
    return Values{context.Call(op, {context.Input(0)})};
  };
}

Converter Binary(const std::string& op) {
  return [op](const NodeContext& context) {
    context.OnlyAttrs({});
    return Values{context.Call(op, {context.Input(0), context.Input(1)})};
  };
}

// An activation with float attributes `names`, given their ONNX defaults,
// passed to `op` under the same names.
Converter Activation(const std::string& op, std::vector<std::pair<std::string, float>> defaults) {
  return [op, defaults](const NodeContext& context) {
    std::vector<std::string> names;
    for (const auto& [name, value] : defaults) names.push_back(name);
    context.OnlyAttrs(names);
    ir::Attrs attrs;
    for (const auto& [name, value] : defaults) {
      attrs.Set(name, static_cast<double>(context.FloatAttr(name).value_or(value)));
    }
    return Values{context.Call(op, {context.Input(0)}, attrs)};
  };
}

// Clip from opset 11: min and max are optional inputs, which must be scalars
// known at import time (they become the op's attributes); an absent one is
// no bound.
Values Clip(const NodeContext& context) {
  context.OnlyAttrs({});
  const auto bound = [&](size_t input, const std::string& what, double absent) {
    if (!context.Has(input)) return absent;
    const Value& value = context.Input(input);
    if (!value.known) {
      context.Fail(what + " (input " + std::to_string(input) + ") must be known at import time");
    }
    if ((*value.known)->numel() != 1 || (*value.known)->ndim() > 1) {
      context.Fail(what + " (input " + std::to_string(input) + ") must be a scalar");
    }
    return (*value.known)->GetAsDouble(0);
  };
  const double infinity = std::numeric_limits<double>::infinity();
  const double a_min = bound(1, "min", -infinity);
  const double a_max = bound(2, "max", infinity);
  return {context.Call("clip", {context.Input(0)}, AttrsOf({{"a_min", a_min}, {"a_max", a_max}}))};
}

// fmod=0 is the integer remainder with the divisor's sign (Python's %),
// fmod=1 C's fmod with the dividend's; the spec allows floats only with
// fmod=1.
Values Mod(const NodeContext& context) {
  context.OnlyAttrs({"fmod"});
  const int64_t fmod = context.IntAttr("fmod").value_or(0);
  if (fmod != 0 && fmod != 1) context.Fail("fmod must be 0 or 1, not " + std::to_string(fmod));
  if (fmod == 0 && context.TypeOf(0)->dtype.is_float()) {
    context.Fail("fmod=0 is not defined for floating-point inputs (the spec requires fmod=1)");
  }
  return {context.Call(fmod == 1 ? "mod" : "floor_mod", {context.Input(0), context.Input(1)})};
}

Values Identity(const NodeContext& context) {
  return {context.Input(0)};
}

// Dropout in inference: its input, and a mask of all true when asked for.
Values Dropout(const NodeContext& context) {
  context.OnlyAttrs({"seed"});
  if (context.Has(2) && (!context.Input(2).known || (*context.Input(2).known)->data<bool>()[0])) {
    context.Fail("training_mode must be false (inference)");
  }
  return {context.Input(0),
          context.Call("ones_like", {context.Call("cast", {context.Input(0)},
                                                  AttrsOf({{"dtype", DataType::Bool()}}))})};
}

Values Cast(const NodeContext& context) {
  context.OnlyAttrs({"to", "saturate"});
  const std::optional<int64_t> to = context.IntAttr("to");
  if (!to) context.Fail("attribute 'to' is required");
  const DataType dtype = DTypeFromOnnx(static_cast<int32_t>(*to), "attribute 'to'");
  const Value result = context.Call("cast", {context.Input(0)}, AttrsOf({{"dtype", dtype}}));
  const bool integer = dtype == DataType::Int64() || dtype == DataType::Int32();
  return {WithElements(context, result,
                       integer ? context.Input(0).elements : std::vector<ShapeElement>{})};
}

Values Constant(const NodeContext& context) {
  if (const onnx::TensorProto* value = context.TensorAttr("value")) {
    return {Known(TensorFromProto(*value, "attribute 'value'"))};
  }
  if (const std::optional<int64_t> value = context.IntAttr("value_int")) {
    return {Known(TensorNode::Scalar<int64_t>(DataType::Int64(), *value))};
  }
  if (const std::optional<float> value = context.FloatAttr("value_float")) {
    return {Known(TensorNode::Scalar<float>(DataType::Float32(), *value))};
  }
  if (const std::optional<std::vector<int64_t>> values = context.IntsAttr("value_ints")) {
    return {KnownInts(*values)};
  }
  for (const onnx::AttributeProto& attribute : context.node().attribute()) {
    if (attribute.name() == "value_floats") {
      std::vector<float> values(attribute.floats().begin(), attribute.floats().end());
      return {Known(TensorNode::FromVector<float>({static_cast<int64_t>(values.size())},
                                                  DataType::Float32(), values))};
    }
  }
  context.Fail(
      "needs one of the attributes value, value_int, value_float, value_ints, "
      "value_floats (sparse and string constants are not supported)");
}

Values ConstantOfShape(const NodeContext& context) {
  context.OnlyAttrs({"value"});
  Tensor fill = TensorNode::Scalar<float>(DataType::Float32(), 0.0f);
  if (const onnx::TensorProto* value = context.TensorAttr("value")) {
    fill = TensorFromProto(*value, "attribute 'value'");
    if (fill->numel() != 1) context.Fail("attribute 'value' must have one element");
  }
  const Tensor scalar = TensorNode::Empty({}, fill->dtype());
  std::memcpy(scalar->raw_data(), fill->raw_data(), fill->nbytes());
  const Value fill_value = Known(scalar);
  if (context.Input(0).known) {
    return {context.Call(
        "full", {fill_value},
        AttrsOf({{"shape", context.KnownInts(0, "shape")}, {"dtype", scalar->dtype()}}))};
  }
  return {context.Call("dyn.full", {fill_value, context.Input(0)},
                       AttrsOf({{"dtype", scalar->dtype()}}))};
}

Values ShapeOp(const NodeContext& context) {
  context.OnlyAttrs({"start", "end"});
  const ir::TensorType type = context.TypeOf(0);
  const int64_t rank = static_cast<int64_t>(type->ndim());
  const auto clamp = [rank](int64_t index) {
    return std::clamp<int64_t>(index < 0 ? index + rank : index, 0, rank);
  };
  const int64_t start = clamp(context.IntAttr("start").value_or(0));
  const int64_t end = clamp(context.IntAttr("end").value_or(rank));
  if (type->is_static()) {
    std::vector<int64_t> dims;
    for (int64_t d = start; d < end; ++d) dims.push_back(type->shape[d].value());
    return {KnownInts(dims)};
  }
  std::vector<ShapeElement> elements;
  for (int64_t d = start; d < end; ++d) {
    const ir::Dim& dim = type->shape[d];
    elements.push_back(dim.is_static() ? ShapeElement{dim.value()}
                                       : ShapeElement{std::nullopt, context.Input(0).expr.get(), d,
                                                      dim.upper_bound()});
  }
  Value shape =
      context.Call("shape_of", {context.Input(0)}, AttrsOf({{"dtype", DataType::Int64()}}));
  if (start != 0 || end != rank) {
    shape = context.Call(
        "strided_slice", {shape},
        AttrsOf({{"begin", std::vector<int64_t>{start}}, {"end", std::vector<int64_t>{end}}}));
  }
  return {WithElements(context, shape, elements)};
}

Values Reshape(const NodeContext& context) {
  context.OnlyAttrs({"allowzero"});
  const bool allowzero = context.IntAttr("allowzero").value_or(0) != 0;
  if (context.Input(1).known) {
    return {context.Call(
        "reshape", {context.Input(0)},
        AttrsOf({{"newshape", context.KnownInts(1, "shape")}, {"allowzero", allowzero}}))};
  }
  // A shape of known sizes and of the data's own sizes at the same
  // positions (copied: 0), with at most one other (inferred: -1), is a
  // static reshape: its output keeps a known rank and sizes.
  const std::vector<ShapeElement>& elements = context.Input(1).elements;
  if (!elements.empty() && !allowzero) {
    std::vector<int64_t> newshape;
    int inferred = 0;
    for (size_t i = 0; i < elements.size(); ++i) {
      const ShapeElement& element = elements[i];
      if (element.value) {
        newshape.push_back(*element.value);
        inferred += *element.value == -1 ? 1 : 0;
      } else if (element.size_of == context.Input(0).expr.get() &&
                 element.dim == static_cast<int64_t>(i)) {
        newshape.push_back(0);
      } else {
        newshape.push_back(-1);
        ++inferred;
      }
    }
    if (inferred <= 1) {
      return {context.Call("reshape", {context.Input(0)}, AttrsOf({{"newshape", newshape}}))};
    }
  }
  return {context.Call("dyn.reshape", {context.Input(0), context.Input(1)},
                       AttrsOf({{"allowzero", allowzero}}))};
}

Values Transpose(const NodeContext& context) {
  context.OnlyAttrs({"perm"});
  ir::Attrs attrs;
  if (const std::optional<std::vector<int64_t>> perm = context.IntsAttr("perm")) {
    attrs.Set("axes", *perm);
  }
  return {context.Call("transpose", {context.Input(0)}, attrs)};
}

Values Unsqueeze(const NodeContext& context) {
  context.OnlyAttrs({"axes"});
  const std::optional<std::vector<int64_t>> given = AxesOf(context, 13);
  if (!given) context.Fail("axes are required");
  const int64_t rank = Rank(context, 0) + static_cast<int64_t>(given->size());
  std::vector<int64_t> axes;
  for (int64_t axis : *given) axes.push_back(NormalAxis(context, axis, rank));
  std::sort(axes.begin(), axes.end());
  Value result = context.Input(0);
  for (int64_t axis : axes) {
    result = context.Call("expand_dims", {result}, AttrsOf({{"axis", axis}}));
  }
  return {WithElements(context, result,
                       rank == 1 ? context.Input(0).elements : std::vector<ShapeElement>{})};
}

Values Squeeze(const NodeContext& context) {
  context.OnlyAttrs({"axes"});
  ir::Attrs attrs;
  if (const std::optional<std::vector<int64_t>> axes = AxesOf(context, 13)) {
    attrs.Set("axis", *axes);
  }
  const Value result = context.Call("squeeze", {context.Input(0)}, attrs);
  return {WithElements(
      context, result,
      Rank(context, 0) <= 1 ? context.Input(0).elements : std::vector<ShapeElement>{})};
}

Values Concat(const NodeContext& context) {
  context.OnlyAttrs({"axis"});
  const std::optional<int64_t> axis = context.IntAttr("axis");
  if (!axis) context.Fail("attribute 'axis' is required");
  std::vector<ir::Expr> fields;
  std::vector<ShapeElement> elements;
  bool tracked = true;
  for (size_t i = 0; i < context.num_inputs(); ++i) {
    const Value& input = context.Input(i);
    fields.push_back(input.expr);
    tracked = tracked && !input.elements.empty() && Rank(context, i) == 1;
    if (tracked) elements.insert(elements.end(), input.elements.begin(), input.elements.end());
  }
  const Value result = context.Expr(
      op::MakeOpCall("concatenate", {Make<ir::TupleNode>(fields)}, AttrsOf({{"axis", *axis}})));
  return {WithElements(context, result, tracked ? elements : std::vector<ShapeElement>{})};
}

Values Gather(const NodeContext& context) {
  context.OnlyAttrs({"axis"});
  const int64_t rank = Rank(context, 0);
  const int64_t axis = NormalAxis(context, context.IntAttr("axis").value_or(0), rank);
  Value indices = context.Input(1);
  if (indices.known) {
    // Negative indices count from the end (take would clip them).
    const ir::TensorType type = context.TypeOf(0);
    if (type->shape[axis].is_static()) {
      const int64_t size = type->shape[axis].value();
      std::vector<int64_t> values = context.KnownInts(1, "indices");
      for (int64_t& index : values) {
        if (index < -size || index >= size) {
          context.Fail("index " + std::to_string(index) + " is out of range for a dimension of " +
                       std::to_string(size));
        }
        if (index < 0) index += size;
      }
      indices = Known(
          TensorNode::FromVector<int64_t>((*indices.known)->shape(), DataType::Int64(), values));
    }
  }
  const Value result = context.Call("take", {context.Input(0), indices},
                                    AttrsOf({{"axis", axis}, {"mode", std::string("fast")}}));
  // An element of a shape vector: what is known of it.
  std::vector<ShapeElement> elements;
  const std::vector<ShapeElement>& from = context.Input(0).elements;
  if (!from.empty() && indices.known && (*indices.known)->ndim() <= 1) {
    for (int64_t index : context.KnownInts(1, "indices")) {
      if (index < 0) index += static_cast<int64_t>(from.size());
      if (index < 0 || index >= static_cast<int64_t>(from.size())) break;
      elements.push_back(from[index]);
    }
  }
  return {WithElements(context, result, elements)};
}

Values Slice(const NodeContext& context) {
  context.OnlyAttrs({});
  const int64_t rank = Rank(context, 0);
  std::vector<int64_t> starts = context.KnownInts(1, "starts");
  std::vector<int64_t> ends = context.KnownInts(2, "ends");
  std::vector<int64_t> axes(starts.size());
  std::iota(axes.begin(), axes.end(), 0);
  if (context.Has(3)) axes = context.KnownInts(3, "axes");
  std::vector<int64_t> steps(starts.size(), 1);
  if (context.Has(4)) steps = context.KnownInts(4, "steps");
  if (ends.size() != starts.size() || axes.size() != starts.size() ||
      steps.size() != starts.size()) {
    context.Fail("starts, ends, axes and steps must have the same length");
  }
  for (int64_t& axis : axes) axis = NormalAxis(context, axis, rank);
  // INT64_MAX and INT64_MIN ("to the end") become the int32 range the
  // slice's clamping understands.
  const auto clamp = [](int64_t value) {
    return std::clamp<int64_t>(value, std::numeric_limits<int32_t>::min(),
                               std::numeric_limits<int32_t>::max());
  };
  for (int64_t& value : starts) value = clamp(value);
  for (int64_t& value : ends) value = clamp(value);
  const Value result =
      context.Call("strided_slice", {context.Input(0)},
                   AttrsOf({{"begin", starts}, {"end", ends}, {"strides", steps}, {"axes", axes}}));
  std::vector<ShapeElement> elements;
  const std::vector<ShapeElement>& from = context.Input(0).elements;
  if (!from.empty() && rank == 1 && steps.size() == 1 && steps.front() == 1) {
    const int64_t size = static_cast<int64_t>(from.size());
    const auto clamp = [size](int64_t index) {
      return std::clamp<int64_t>(index < 0 ? index + size : index, 0, size);
    };
    for (int64_t i = clamp(starts.front()); i < clamp(ends.front()); ++i) {
      elements.push_back(from[i]);
    }
  }
  return {WithElements(context, result, elements)};
}

Values Split(const NodeContext& context) {
  context.OnlyAttrs({"axis", "split", "num_outputs"});
  const int64_t rank = Rank(context, 0);
  const int64_t axis = NormalAxis(context, context.IntAttr("axis").value_or(0), rank);
  const int64_t outputs = context.node().output_size();
  std::optional<std::vector<int64_t>> sizes;
  if (const std::optional<int64_t> count = context.IntAttr("num_outputs")) {
    if (context.opset() < 18) context.Fail("attribute 'num_outputs' is from opset 18");
    if (context.Has(1)) context.Fail("takes 'num_outputs' or the sizes (input 1), not both");
    if (*count != outputs) {
      context.Fail("num_outputs is " + std::to_string(*count) + " for " + std::to_string(outputs) +
                   " outputs");
    }
    // Parts of ceil(size / n), the last one smaller, where the size is known.
    const ir::Dim dim = context.TypeOf(0)->shape[axis];
    if (dim.is_static() && dim.value() % outputs != 0) {
      const int64_t part = (dim.value() + outputs - 1) / outputs;
      sizes.emplace();
      for (int64_t i = 0; i < outputs; ++i) {
        sizes->push_back(std::max<int64_t>(0, std::min(part, dim.value() - i * part)));
      }
    }
  } else if (context.opset() >= 13) {
    if (context.IntsAttr("split")) {
      context.Fail("the sizes are input 1 from opset 13, not the attribute 'split' (opset " +
                   std::to_string(context.opset()) + ")");
    }
    if (context.Has(1)) sizes = context.KnownInts(1, "split");
  } else {
    sizes = context.IntsAttr("split");
  }
  AttrValue sections = outputs;
  if (sizes) {
    if (static_cast<int64_t>(sizes->size()) != outputs) {
      context.Fail("split has " + std::to_string(sizes->size()) + " sizes for " +
                   std::to_string(outputs) + " outputs");
    }
    std::vector<int64_t> indices;
    int64_t offset = 0;
    for (size_t i = 0; i + 1 < sizes->size(); ++i) indices.push_back(offset += (*sizes)[i]);
    sections = indices;
  }
  const ir::Expr parts =
      op::MakeOpCall("split", {context.Input(0).expr},
                     AttrsOf({{"indices_or_sections", sections}, {"axis", axis}}));
  Values results;
  for (int64_t i = 0; i < outputs; ++i) {
    results.push_back(context.Expr(Make<ir::TupleGetItemNode>(parts, static_cast<int>(i))));
  }
  return results;
}

// MatMul: a 2-D right operand is nn.dense's weight (transposed, at import
// time when it is known); otherwise a batched product, on 3-D operands.
Values MatMul(const NodeContext& context) {
  context.OnlyAttrs({});
  const int64_t rank_a = Rank(context, 0);
  const int64_t rank_b = Rank(context, 1);
  if (rank_a < 2 || rank_b < 2) context.Fail("operands of rank below 2 are not supported");
  if (rank_b == 2) {
    const Value weight = context.Call("transpose", {context.Input(1)});
    return {context.Call("nn.dense", {context.Input(0), weight})};
  }
  if (rank_a != rank_b) context.Fail("batched operands must have the same rank");
  if (rank_a == 3) {
    return {context.Call("nn.batch_matmul", {context.Input(0), context.Input(1)},
                         AttrsOf({{"transpose_b", false}}))};
  }
  // [b1, b2, m, k]: the batch dimensions merged into one, then split again.
  if (rank_a != 4) context.Fail("batched operands of rank above 4 are not supported");
  const ir::TensorType type_a = context.TypeOf(0);
  const ir::TensorType type_b = context.TypeOf(1);
  for (int64_t d = 0; d < 2; ++d) {
    if (!type_a->shape[d].is_static() || !type_b->shape[d].is_static() ||
        type_a->shape[d].value() != type_b->shape[d].value()) {
      context.Fail("batched operands need equal static batch dimensions");
    }
  }
  const ir::Attrs merge = AttrsOf({{"newshape", std::vector<int64_t>{-3, -2}}});
  const Value product = context.Call("nn.batch_matmul",
                                     {context.Call("reshape", {context.Input(0)}, merge),
                                      context.Call("reshape", {context.Input(1)}, merge)},
                                     AttrsOf({{"transpose_b", false}}));
  return {
      context.Call("reshape", {product},
                   AttrsOf({{"newshape", std::vector<int64_t>{-4, type_a->shape[0].value(),
                                                              type_a->shape[1].value(), -2}}}))};
}

Values Gemm(const NodeContext& context) {
  context.OnlyAttrs({"alpha", "beta", "transA", "transB"});
  Value a = context.Input(0);
  if (context.IntAttr("transA").value_or(0)) a = context.Call("transpose", {a});
  Value b = context.Input(1);
  if (!context.IntAttr("transB").value_or(0)) b = context.Call("transpose", {b});
  Value result = context.Call("nn.dense", {a, b});
  const float alpha = context.FloatAttr("alpha").value_or(1.0f);
  if (alpha != 1.0f) {
    result = context.Call("multiply",
                          {result, Known(TensorNode::Scalar<float>(DataType::Float32(), alpha))});
  }
  if (context.Has(2)) {
    Value c = context.Input(2);
    const float beta = context.FloatAttr("beta").value_or(1.0f);
    if (beta != 1.0f) {
      c = context.Call("multiply",
                       {c, Known(TensorNode::Scalar<float>(DataType::Float32(), beta))});
    }
    result = context.Call("add", {result, c});
  }
  return {result};
}

Values Softmax(const NodeContext& context) {
  context.OnlyAttrs({"axis"});
  const int64_t rank = Rank(context, 0);
  const int64_t axis =
      NormalAxis(context, context.IntAttr("axis").value_or(context.opset() >= 13 ? -1 : 1), rank);
  // Before opset 13 softmax flattens from `axis`: the same as one axis only
  // when it is the last.
  if (context.opset() < 13 && axis != rank - 1) {
    context.Fail("before opset 13, only the last axis is supported");
  }
  return {context.Call("nn.softmax", {context.Input(0)}, AttrsOf({{"axis", axis}}))};
}

Values LayerNormalization(const NodeContext& context) {
  context.OnlyAttrs({"axis", "epsilon", "stash_type"});
  if (context.node().output_size() > 1) context.Fail("only the normalised output is supported");
  const int64_t rank = Rank(context, 0);
  const int64_t axis = NormalAxis(context, context.IntAttr("axis").value_or(-1), rank);
  if (axis != rank - 1) context.Fail("only the last axis is supported");
  Value beta = context.Has(2) ? context.Input(2) : context.Call("zeros_like", {context.Input(1)});
  return {
      context.Call("nn.layer_norm", {context.Input(0), context.Input(1), beta},
                   AttrsOf({{"axis", axis},
                            {"epsilon", double{context.FloatAttr("epsilon").value_or(1e-5f)}}}))};
}

// ReduceMean and friends; their axes become an input at `axes_input_opset`
// (13 for ReduceSum, 18 for the others).
Converter Reduce(const std::string& op, int64_t axes_input_opset) {
  return [op, axes_input_opset](const NodeContext& context) {
    context.OnlyAttrs({"axes", "keepdims", "noop_with_empty_axes"});
    const std::optional<std::vector<int64_t>> axes = AxesOf(context, axes_input_opset);
    const bool none = !axes || axes->empty();
    if (none && context.IntAttr("noop_with_empty_axes").value_or(0)) {
      return Values{context.Input(0)};
    }
    ir::Attrs attrs;
    if (!none) attrs.Set("axis", *axes);
    attrs.Set("keepdims", context.IntAttr("keepdims").value_or(1) != 0);
    return Values{context.Call(op, {context.Input(0)}, attrs)};
  };
}

// ReduceL1, ReduceL2, ReduceSumSquare, ReduceLogSumExp: sums of element-wise
// functions of the data, over the axes ONNX names (all by default).
Converter ReduceComposite(const std::string& kind) {
  return [kind](const NodeContext& context) {
    context.OnlyAttrs({"axes", "keepdims", "noop_with_empty_axes"});
    const std::optional<std::vector<int64_t>> axes = AxesOf(context, 18);
    const bool none = !axes || axes->empty();
    const Value& x = context.Input(0);
    if (none && context.IntAttr("noop_with_empty_axes").value_or(0)) return Values{x};
    const bool keepdims = context.IntAttr("keepdims").value_or(1) != 0;
    const auto reduce = [&](const std::string& op, const Value& data, bool keep) {
      ir::Attrs attrs;
      if (!none) attrs.Set("axis", *axes);
      attrs.Set("keepdims", keep);
      return context.Call(op, {data}, attrs);
    };
    if (kind == "l1") return Values{reduce("sum", context.Call("abs", {x}), keepdims)};
    const Value squares = reduce("sum", context.Call("multiply", {x, x}), keepdims);
    if (kind == "sum_square") return Values{squares};
    if (kind == "l2") return Values{context.Call("sqrt", {squares})};
    // log(sum(exp(x - max))) + max: no overflow for large x.
    const Value largest = reduce("max", x, true);
    const Value sum =
        reduce("sum", context.Call("exp", {context.Call("subtract", {x, largest})}), keepdims);
    return Values{context.Call(
        "add", {context.Call("log", {sum}), keepdims ? largest : reduce("max", x, false)})};
  };
}

// GlobalAveragePool, GlobalMaxPool: the mean or max over every axis after
// the batch and channels, kept as size-1 axes.
Converter GlobalPool(const std::string& op) {
  return [op](const NodeContext& context) {
    context.OnlyAttrs({});
    const int64_t rank = Rank(context, 0);
    if (rank < 3) context.Fail("the data must have spatial axes, got rank " + std::to_string(rank));
    std::vector<int64_t> axes;
    for (int64_t axis = 2; axis < rank; ++axis) axes.push_back(axis);
    return Values{
        context.Call(op, {context.Input(0)}, AttrsOf({{"axis", axes}, {"keepdims", true}}))};
  };
}

// BatchNormalization at inference: x * s + (B - mean * s) with s = scale /
// sqrt(var + epsilon) per channel (axis 1), computed at import time when the
// statistics are weights.
Values BatchNormalization(const NodeContext& context) {
  context.OnlyAttrs({"epsilon", "momentum", "training_mode", "spatial"});
  if (context.IntAttr("training_mode").value_or(0) != 0) {
    context.Fail("training_mode=1 is not supported (inference only)");
  }
  if (context.node().output_size() > 1) {
    context.Fail("the running mean and variance outputs are training's; inference has one output");
  }
  const int64_t rank = Rank(context, 0);
  if (rank < 2) context.Fail("the data must have a channel axis, got rank " + std::to_string(rank));
  const float epsilon = context.FloatAttr("epsilon").value_or(1e-5f);
  const DataType dtype = context.TypeOf(0)->dtype;
  const Value eps = Known(TensorNode::Scalar<float>(DataType::Float32(), epsilon));
  const Value typed_eps =
      dtype == DataType::Float32() ? eps : context.Call("cast", {eps}, AttrsOf({{"dtype", dtype}}));
  const Value factor = context.Call(
      "divide", {context.Input(1),
                 context.Call("sqrt", {context.Call("add", {context.Input(4), typed_eps})})});
  const Value shift = context.Call(
      "subtract", {context.Input(2), context.Call("multiply", {context.Input(3), factor})});
  // (C) as (C, 1, ..., 1), to broadcast along axis 1.
  std::vector<int64_t> per_channel{-1};
  for (int64_t axis = 2; axis < rank; ++axis) per_channel.push_back(1);
  const auto along_channels = [&](const Value& value) {
    return context.Call("reshape", {value}, AttrsOf({{"newshape", per_channel}}));
  };
  return {context.Call("add", {context.Call("multiply", {context.Input(0), along_channels(factor)}),
                               along_channels(shift)})};
}

// Gelu (opset 20): `gelu` (erf), or its tanh approximation spelled out.
Values Gelu(const NodeContext& context) {
  context.OnlyAttrs({"approximate"});
  const std::string approximate = context.StringAttr("approximate").value_or("none");
  const Value& x = context.Input(0);
  if (approximate == "none") return {context.Call("gelu", {x})};
  if (approximate != "tanh") {
    context.Fail("approximate must be 'none' or 'tanh', not '" + approximate + "'");
  }
  const DataType dtype = context.TypeOf(0)->dtype;
  const auto constant = [&](double value) {
    const Value c =
        Known(TensorNode::Scalar<float>(DataType::Float32(), static_cast<float>(value)));
    return dtype == DataType::Float32() ? c
                                        : context.Call("cast", {c}, AttrsOf({{"dtype", dtype}}));
  };
  // 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))
  const Value cube = context.Call("multiply", {context.Call("multiply", {x, x}), x});
  const Value inner = context.Call(
      "multiply", {constant(std::sqrt(2.0 / M_PI)),
                   context.Call("add", {x, context.Call("multiply", {constant(0.044715), cube})})});
  return {context.Call("multiply",
                       {context.Call("multiply", {constant(0.5), x}),
                        context.Call("add", {constant(1.0), context.Call("tanh", {inner})})})};
}

// Flatten: (d0 .. d(axis-1), d(axis) ..) as a matrix of their two products;
// a static reshape when either side's sizes are all static, else one of a
// shape computed at run time.
Values Flatten(const NodeContext& context) {
  context.OnlyAttrs({"axis"});
  const ir::TensorType type = context.TypeOf(0);
  const int64_t rank = static_cast<int64_t>(type->ndim());
  int64_t axis = context.IntAttr("axis").value_or(1);
  if (axis < -rank || axis > rank) {
    context.Fail("axis " + std::to_string(axis) + " is out of range for rank " +
                 std::to_string(rank));
  }
  if (axis < 0) axis += rank;
  const auto product = [&](int64_t begin, int64_t end) -> std::optional<int64_t> {
    int64_t size = 1;
    for (int64_t d = begin; d < end; ++d) {
      if (!type->shape[d].is_static()) return std::nullopt;
      size *= type->shape[d].value();
    }
    return size;
  };
  const std::optional<int64_t> outer = product(0, axis), inner = product(axis, rank);
  if (outer || inner) {
    const std::vector<int64_t> newshape{outer.value_or(-1), outer ? inner.value_or(-1) : *inner};
    return {context.Call("reshape", {context.Input(0)}, AttrsOf({{"newshape", newshape}}))};
  }
  const Value shape =
      context.Call("shape_of", {context.Input(0)}, AttrsOf({{"dtype", DataType::Int64()}}));
  const auto size_of = [&](int64_t begin, int64_t end) {
    return context.Call("prod",
                        {context.Call("strided_slice", {shape},
                                      AttrsOf({{"begin", std::vector<int64_t>{begin}},
                                               {"end", std::vector<int64_t>{end}},
                                               {"strides", std::vector<int64_t>{1}}}))},
                        AttrsOf({{"keepdims", true}}));
  };
  const Value sizes = context.Expr(op::MakeOpCall(
      "concatenate",
      {Make<ir::TupleNode>(std::vector<ir::Expr>{size_of(0, axis).expr, size_of(axis, rank).expr})},
      AttrsOf({{"axis", int64_t{0}}})));
  return {context.Call("dyn.reshape", {context.Input(0), sizes})};
}

// Size: the element count, int64 (a constant for a static shape).
Values Size(const NodeContext& context) {
  context.OnlyAttrs({});
  return {
      context.Call("ndarray_size", {context.Input(0)}, AttrsOf({{"dtype", DataType::Int64()}}))};
}

// NonZero: the indices of the non-zero elements, one row per axis (int64).
Values NonZero(const NodeContext& context) {
  context.OnlyAttrs({});
  const Value positions = context.Call("argwhere", {context.Input(0)});
  return {context.Call("cast", {context.Call("transpose", {positions})},
                       AttrsOf({{"dtype", DataType::Int64()}}))};
}

// ArgMax, ArgMin: `argmax`/`argmin` over one axis, as int64 (Nimble's give
// int32).
Converter ArgReduce(const std::string& op) {
  return [op](const NodeContext& context) {
    context.OnlyAttrs({"axis", "keepdims", "select_last_index"});
    const Value indices = context.Call(
        op, {context.Input(0)},
        AttrsOf({{"axis", std::vector<int64_t>{context.IntAttr("axis").value_or(0)}},
                 {"keepdims", context.IntAttr("keepdims").value_or(1) != 0},
                 {"select_last_index", context.IntAttr("select_last_index").value_or(0) != 0}}));
    return Values{context.Call("cast", {indices}, AttrsOf({{"dtype", DataType::Int64()}}))};
  };
}

std::vector<int64_t> IntsOf(const Tensor& tensor) {
  std::vector<int64_t> values;
  for (int64_t i = 0; i < tensor->numel(); ++i) {
    values.push_back(LoadElementAsInt64(tensor->raw_data(), tensor->dtype(), i));
  }
  return values;
}

// `value` broadcast against `shape` (an int64 vector): its sum with zeros of
// that shape (`logical_or` with false for bool), static where the shape is
// known at import time.
Value BroadcastTo(const NodeContext& context, const Value& value, const Value& shape) {
  const DataType dtype = context.TypeOfExpr(value.expr)->dtype;
  const Value zero =
      shape.known
          ? context.Call("zeros", {}, AttrsOf({{"shape", IntsOf(*shape.known)}, {"dtype", dtype}}))
          : context.Call("dyn.zeros", {shape}, AttrsOf({{"dtype", dtype}}));
  return context.Call(dtype == DataType::Bool() ? "logical_or" : "add", {value, zero});
}

// `value` reshaped to `shape` (an int64 vector): static where the shape is
// known at import time.
Value ReshapeTo(const NodeContext& context, const Value& value, const Value& shape) {
  if (shape.known) {
    return context.Call("reshape", {value}, AttrsOf({{"newshape", IntsOf(*shape.known)}}));
  }
  return context.Call("dyn.reshape", {value, shape});
}

// The shape of `value` as an int64 vector: a constant when it is static.
Value ShapeVector(const NodeContext& context, const Value& value) {
  const ir::TensorType type = context.TypeOfExpr(value.expr);
  if (type->is_static()) {
    std::vector<int64_t> dims;
    for (const ir::Dim& dim : type->shape) dims.push_back(dim.value());
    return KnownInts(dims);
  }
  return context.Call("shape_of", {value}, AttrsOf({{"dtype", DataType::Int64()}}));
}

// Elements [begin, end) of the int64 vector `vector`.
Value Elements(const NodeContext& context, const Value& vector, int64_t begin, int64_t end) {
  return context.Call(
      "strided_slice", {vector},
      AttrsOf({{"begin", std::vector<int64_t>{begin}}, {"end", std::vector<int64_t>{end}}}));
}

Value ConcatVectors(const NodeContext& context, const std::vector<Value>& parts) {
  std::vector<ir::Expr> exprs;
  for (const Value& part : parts) exprs.push_back(part.expr);
  return context.Expr(
      op::MakeOpCall("concatenate", {Make<ir::TupleNode>(exprs)}, AttrsOf({{"axis", int64_t{0}}})));
}

// Expand: a broadcast against a tensor of the given shape.
Values Expand(const NodeContext& context) {
  context.OnlyAttrs({});
  return {BroadcastTo(context, context.Input(0), context.Input(1))};
}

// Einsum of one or two operands (no repeated letter within an operand):
// letters only one operand has and the output lacks are summed out first;
// then the batch letters (both operands and the output), the contracted
// ones (both, not the output) and each operand's own become one
// nn.batch_matmul of (batch, own, contracted) operands, reshaped to the
// letters' sizes and transposed to the output's order.
Values Einsum(const NodeContext& context) {
  context.OnlyAttrs({"equation"});
  std::string equation;
  for (char c : context.StringAttr("equation").value_or("")) {
    if (c != ' ') equation += c;
  }
  const size_t arrow = equation.find("->");
  std::vector<std::string> terms;
  std::stringstream split(equation.substr(0, arrow));
  for (std::string term; std::getline(split, term, ',');) terms.push_back(term);
  if (terms.empty() || terms.size() > 2 || terms.size() != context.num_inputs()) {
    context.Fail("equation '" + equation + "' must name one or two operands, as the node has " +
                 std::to_string(context.num_inputs()) + " inputs");
  }
  // An ellipsis stands for the same leading letters in each operand.
  const std::string ellipsis_letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ";
  size_t ellipsis_rank = 0;
  for (size_t i = 0; i < terms.size(); ++i) {
    const size_t at = terms[i].find("...");
    if (at == std::string::npos) continue;
    const size_t rank = static_cast<size_t>(Rank(context, i)) - (terms[i].size() - 3);
    if (ellipsis_rank != 0 && rank != ellipsis_rank) {
      context.Fail(
          "the operands' ellipses stand for different ranks (broadcasting is not supported)");
    }
    ellipsis_rank = rank;
    terms[i].replace(at, 3, ellipsis_letters.substr(0, rank));
  }
  std::string output;
  if (arrow != std::string::npos) {
    output = equation.substr(arrow + 2);
    const size_t at = output.find("...");
    if (at != std::string::npos) output.replace(at, 3, ellipsis_letters.substr(0, ellipsis_rank));
  } else {
    // Implicit: the letters that appear once, in alphabetical order (the ellipsis first).
    std::map<char, int> uses;
    for (const std::string& term : terms) {
      for (char c : term) ++uses[c];
    }
    output = ellipsis_letters.substr(0, ellipsis_rank);
    for (const auto& [c, n] : uses) {
      if (n == 1 && std::islower(static_cast<unsigned char>(c))) output += c;
    }
  }
  for (size_t i = 0; i < terms.size(); ++i) {
    if (static_cast<int64_t>(terms[i].size()) != Rank(context, i)) {
      context.Fail("operand " + std::to_string(i) + " has rank " +
                   std::to_string(Rank(context, i)) + " but '" + terms[i] + "' names " +
                   std::to_string(terms[i].size()) + " axes");
    }
    for (char c : terms[i]) {
      if (!std::isalpha(static_cast<unsigned char>(c))) {
        context.Fail("equation '" + equation + "' has '" + std::string(1, c) + "'");
      }
      if (std::count(terms[i].begin(), terms[i].end(), c) > 1) {
        context.Fail("a letter repeated within an operand (a diagonal) is not supported");
      }
    }
  }
  const auto has = [](const std::string& letters, char c) {
    return letters.find(c) != std::string::npos;
  };
  for (char c : output) {
    if (!std::any_of(terms.begin(), terms.end(), [&](const std::string& t) { return has(t, c); })) {
      context.Fail("the output's '" + std::string(1, c) + "' is in no operand");
    }
  }
  // Each operand with the letters only it has and the output lacks summed out.
  std::vector<Value> operands;
  for (size_t i = 0; i < terms.size(); ++i) {
    const std::string& other = terms.size() == 2 ? terms[1 - i] : std::string();
    std::vector<int64_t> summed;
    std::string kept;
    for (size_t d = 0; d < terms[i].size(); ++d) {
      const char c = terms[i][d];
      if (!has(output, c) && !has(other, c)) {
        summed.push_back(static_cast<int64_t>(d));
      } else {
        kept += c;
      }
    }
    operands.push_back(summed.empty()
                           ? context.Input(i)
                           : context.Call("sum", {context.Input(i)}, AttrsOf({{"axis", summed}})));
    terms[i] = kept;
  }
  const auto transposed = [&](const Value& value, const std::string& from, const std::string& to) {
    if (from == to) return value;
    std::vector<int64_t> axes;
    for (char c : to) axes.push_back(static_cast<int64_t>(from.find(c)));
    return context.Call("transpose", {value}, AttrsOf({{"axes", axes}}));
  };
  if (terms.size() == 1) return {transposed(operands[0], terms[0], output)};
  std::string batch, contracted, left, right;
  for (char c : terms[0]) {
    if (has(terms[1], c)) {
      (has(output, c) ? batch : contracted) += c;
    } else {
      left += c;
    }
  }
  for (char c : terms[1]) {
    if (!has(terms[0], c)) right += c;
  }
  const Value a = transposed(operands[0], terms[0], batch + left + contracted);
  const Value b = transposed(operands[1], terms[1], batch + right + contracted);
  const Value a_shape = ShapeVector(context, a);
  const Value b_shape = ShapeVector(context, b);
  // The product of elements [begin, end) of a shape, as a vector of one.
  const auto size = [&](const Value& shape, size_t begin, size_t end) {
    if (begin == end) return KnownInts({1});
    return context.Call(
        "prod", {Elements(context, shape, static_cast<int64_t>(begin), static_cast<int64_t>(end))},
        AttrsOf({{"keepdims", true}}));
  };
  const size_t nb = batch.size(), nl = left.size(), nr = right.size(), nc = contracted.size();
  const Value a3 =
      ReshapeTo(context, a,
                ConcatVectors(context, {size(a_shape, 0, nb), size(a_shape, nb, nb + nl),
                                        size(a_shape, nb + nl, nb + nl + nc)}));
  const Value b3 =
      ReshapeTo(context, b,
                ConcatVectors(context, {size(b_shape, 0, nb), size(b_shape, nb, nb + nr),
                                        size(b_shape, nb + nr, nb + nr + nc)}));
  const Value product = context.Call("nn.batch_matmul", {a3, b3});
  const Value full = ReshapeTo(
      context, product,
      ConcatVectors(context, {Elements(context, a_shape, 0, static_cast<int64_t>(nb + nl)),
                              Elements(context, b_shape, static_cast<int64_t>(nb),
                                       static_cast<int64_t>(nb + nr))}));
  return {transposed(full, batch + left + right, output)};
}

// Resize (nearest or linear) by scales or sizes known at import time, one
// axis at a time: each output position's source coordinate, computed over
// an `arange` of the output's length (at run time where the axis is `?`,
// folded at import time where it is static), picks a row by `take`
// (nearest) or blends the two rows around it (linear).
Values Resize(const NodeContext& context) {
  context.OnlyAttrs({"mode", "coordinate_transformation_mode", "nearest_mode", "cubic_coeff_a",
                     "exclude_outside", "extrapolation_value"});
  const std::string mode = context.StringAttr("mode").value_or("nearest");
  if (mode != "nearest" && mode != "linear") {
    context.Fail("mode '" + mode + "' is not supported (nearest, linear)");
  }
  const std::string transform =
      context.StringAttr("coordinate_transformation_mode").value_or("half_pixel");
  if (transform != "half_pixel" && transform != "pytorch_half_pixel" && transform != "asymmetric" &&
      transform != "align_corners") {
    context.Fail("coordinate_transformation_mode '" + transform +
                 "' is not supported (half_pixel, pytorch_half_pixel, asymmetric, align_corners)");
  }
  const std::string rounding = context.StringAttr("nearest_mode").value_or("round_prefer_floor");
  if (rounding != "round_prefer_floor" && rounding != "round_prefer_ceil" && rounding != "floor" &&
      rounding != "ceil") {
    context.Fail("nearest_mode '" + rounding + "' is not supported");
  }
  if (context.IntAttr("exclude_outside").value_or(0) != 0) {
    context.Fail("exclude_outside is not supported");
  }
  const ir::TensorType type = context.TypeOf(0);
  const int64_t rank = static_cast<int64_t>(type->ndim());
  std::vector<double> scales;
  std::vector<int64_t> sizes;
  if (context.Has(3)) {
    sizes = context.KnownInts(3, "sizes");
  } else if (context.Has(2)) {
    const Value& given = context.Input(2);
    if (!given.known) context.Fail("scales (input 2) must be known at import time");
    for (int64_t i = 0; i < (*given.known)->numel(); ++i) {
      scales.push_back(LoadElementAsDouble((*given.known)->raw_data(), (*given.known)->dtype(), i));
    }
  }
  if (sizes.empty() && scales.empty()) context.Fail("takes scales (input 2) or sizes (input 3)");
  if (std::max(sizes.size(), scales.size()) != static_cast<size_t>(rank)) {
    context.Fail("scales or sizes must have one entry per axis (" + std::to_string(rank) + ")");
  }
  for (double scale : scales) {
    if (!(scale > 0)) context.Fail("scales must be positive");
  }
  const auto real = [&](double value) {
    return Known(TensorNode::Scalar<float>(DataType::Float32(), static_cast<float>(value)));
  };
  const auto call = [&](const std::string& op, const std::vector<Value>& args) {
    return context.Call(op, args);
  };
  const auto as = [&](const Value& value, DataType dtype) {
    return context.Call("cast", {value}, AttrsOf({{"dtype", dtype}}));
  };
  Value result = context.Input(0);
  for (int64_t axis = 0; axis < rank; ++axis) {
    const ir::Dim dim = type->shape[axis];
    if (!sizes.empty() && dim.is_static() && sizes[axis] == dim.value()) continue;
    if (!scales.empty() && scales[axis] == 1.0) continue;
    const Value in_length =
        dim.is_static()
            ? Known(TensorNode::Scalar<int64_t>(DataType::Int64(), dim.value()))
            : context.Call("take",
                           {context.Call("shape_of", {context.Input(0)},
                                         AttrsOf({{"dtype", DataType::Int64()}})),
                            Known(TensorNode::Scalar<int64_t>(DataType::Int64(), axis))},
                           AttrsOf({{"axis", int64_t{0}}}));
    const Value in_real = as(in_length, DataType::Float32());
    const Value out_length =
        sizes.empty() ? as(call("floor", {call("multiply", {in_real, real(scales[axis])})}),
                           DataType::Int64())
                      : Known(TensorNode::Scalar<int64_t>(DataType::Int64(), sizes[axis]));
    const Value out_real = as(out_length, DataType::Float32());
    const Value scale = sizes.empty() ? real(scales[axis]) : call("divide", {out_real, in_real});
    const Value position = context.Call("arange", {real(0), out_real, real(1)},
                                        AttrsOf({{"dtype", DataType::Float32()}}));
    // The source coordinate of each output position.
    Value source;
    if (transform == "asymmetric") {
      source = call("divide", {position, scale});
    } else if (transform == "align_corners") {
      const Value one = real(1);
      source = call(
          "multiply",
          {position, call("divide", {call("subtract", {in_real, one}),
                                     call("maximum", {call("subtract", {out_real, one}), one})})});
    } else {
      source = call("subtract",
                    {call("divide", {call("add", {position, real(0.5)}), scale}), real(0.5)});
      if (transform == "pytorch_half_pixel") {
        source = context.Call("where", {call("greater", {out_real, real(1)}), source, real(0)});
      }
    }
    const Value last = call("subtract", {in_real, real(1)});
    const auto clamped = [&](const Value& value) {
      return call("minimum", {call("maximum", {value, real(0)}), last});
    };
    const auto take = [&](const Value& index) {
      return context.Call("take", {result, as(clamped(index), DataType::Int64())},
                          AttrsOf({{"axis", axis}}));
    };
    if (mode == "nearest") {
      Value index;
      if (rounding == "floor") index = call("floor", {source});
      if (rounding == "ceil") index = call("ceil", {source});
      if (rounding == "round_prefer_floor") {
        index = call("ceil", {call("subtract", {source, real(0.5)})});
      }
      if (rounding == "round_prefer_ceil")
        index = call("floor", {call("add", {source, real(0.5)})});
      result = take(index);
      continue;
    }
    const Value at = clamped(source);
    const Value low = call("floor", {at});
    const Value high = call("minimum", {call("add", {low, real(1)}), last});
    // The weight of the higher row, shaped to broadcast along `axis`.
    std::vector<int64_t> along{-1};
    for (int64_t d = axis + 1; d < rank; ++d) along.push_back(1);
    const Value weight =
        context.Call("reshape", {call("subtract", {at, low})}, AttrsOf({{"newshape", along}}));
    const Value below = take(low), above = take(high);
    result = call("add", {below, call("multiply", {call("subtract", {above, below}), weight})});
  }
  return {result};
}

// Tile by repeats known at import time: x (n0, n1, ...) with a size-1 axis
// before each, broadcast to (r0, n0, r1, n1, ...), reshaped to (r0 n0, r1
// n1, ...); the shapes are computed at run time where x's are `?`.
Values Tile(const NodeContext& context) {
  context.OnlyAttrs({});
  const int64_t rank = Rank(context, 0);
  const std::vector<int64_t> repeats = context.KnownInts(1, "repeats");
  if (static_cast<int64_t>(repeats.size()) != rank) {
    context.Fail("repeats has " + std::to_string(repeats.size()) + " entries for rank " +
                 std::to_string(rank));
  }
  for (int64_t repeat : repeats) {
    if (repeat < 0) context.Fail("repeats must not be negative, got " + std::to_string(repeat));
  }
  if (std::all_of(repeats.begin(), repeats.end(), [](int64_t r) { return r == 1; })) {
    return {context.Input(0)};
  }
  const Value shape = ShapeVector(context, context.Input(0));
  const Value counts = KnownInts(repeats);
  const Value interleaved = context.Call(
      "reshape",
      {context.Expr(op::MakeOpCall(
          "stack", {Make<ir::TupleNode>(std::vector<ir::Expr>{counts.expr, shape.expr})},
          AttrsOf({{"axis", int64_t{1}}})))},
      AttrsOf({{"newshape", std::vector<int64_t>{-1}}}));
  Value spread = context.Input(0);
  for (int64_t d = 0; d < rank; ++d) {
    spread = context.Call("expand_dims", {spread}, AttrsOf({{"axis", 2 * d}}));
  }
  return {ReshapeTo(context, BroadcastTo(context, spread, interleaved),
                    context.Call("multiply", {shape, counts}))};
}

// Pad by pads known at import time, along the axes given (all by default):
// per axis, a negative pad crops, and the blocks either side are the
// constant, copies of the edge, the reflection about the edge (without it)
// or the other end's elements (wrap), concatenated with the data.
Values Pad(const NodeContext& context) {
  context.OnlyAttrs({"mode", "pads", "value"});
  const std::string mode = context.StringAttr("mode").value_or("constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge" && mode != "wrap") {
    context.Fail("mode must be constant, reflect, edge or wrap, not '" + mode + "'");
  }
  if (context.IntsAttr("pads") || context.FloatAttr("value")) {
    context.Fail("pads and the value are inputs from opset 11, not attributes");
  }
  const int64_t rank = Rank(context, 0);
  const std::vector<int64_t> pads = context.KnownInts(1, "pads");
  std::vector<int64_t> axes;
  if (context.Has(3)) {
    for (int64_t axis : context.KnownInts(3, "axes"))
      axes.push_back(NormalAxis(context, axis, rank));
  } else {
    for (int64_t axis = 0; axis < rank; ++axis) axes.push_back(axis);
  }
  const size_t count = axes.size();
  if (pads.size() != 2 * count) {
    context.Fail("pads has " + std::to_string(pads.size()) + " entries for " +
                 std::to_string(count) + " axes (begins, then ends)");
  }
  const DataType dtype = context.TypeOf(0)->dtype;
  Value fill = context.Has(2) ? context.Input(2) : Known(TensorNode::Empty({}, dtype));
  if (context.TypeOfExpr(fill.expr)->ndim() != 0) {
    fill = context.Call("reshape", {fill}, AttrsOf({{"newshape", std::vector<int64_t>{}}}));
  }
  const auto slice = [&](const Value& value, int64_t axis, int64_t begin, int64_t end,
                         int64_t stride) {
    return context.Call("strided_slice", {value},
                        AttrsOf({{"begin", std::vector<int64_t>{begin}},
                                 {"end", std::vector<int64_t>{end}},
                                 {"strides", std::vector<int64_t>{stride}},
                                 {"axes", std::vector<int64_t>{axis}}}));
  };
  constexpr int64_t kEnd = std::numeric_limits<int32_t>::max();
  Value result = context.Input(0);
  for (size_t i = 0; i < count; ++i) {
    const int64_t axis = axes[i];
    const int64_t before = pads[i], after = pads[count + i];
    if (before < 0 || after < 0) {
      result = slice(result, axis, std::max<int64_t>(0, -before), after < 0 ? after : kEnd, 1);
    }
    const ir::Dim dim = context.TypeOfExpr(result.expr)->shape[axis];
    // The block of `size` elements before (`first`) or after the data.
    const auto block = [&](int64_t size, bool first) -> Value {
      if (mode == "reflect") {
        if (dim.is_static() && size >= dim.value()) {
          context.Fail("a reflect pad of " + std::to_string(size) + " needs more than that many " +
                       "elements on axis " + std::to_string(axis) + ", which has " +
                       std::to_string(dim.value()));
        }
        return first ? slice(result, axis, size, 0, -1) : slice(result, axis, -2, -2 - size, -1);
      }
      if (mode == "wrap")
        return first ? slice(result, axis, -size, kEnd, 1) : slice(result, axis, 0, size, 1);
      const Value shape = ShapeVector(context, result);
      const Value sized =
          ConcatVectors(context, {Elements(context, shape, 0, axis), KnownInts({size}),
                                  Elements(context, shape, axis + 1, rank)});
      if (mode == "edge") {
        return BroadcastTo(context,
                           first ? slice(result, axis, 0, 1, 1) : slice(result, axis, -1, kEnd, 1),
                           sized);
      }
      return BroadcastTo(context, fill, sized);
    };
    std::vector<ir::Expr> parts;
    if (before > 0) parts.push_back(block(before, true).expr);
    parts.push_back(result.expr);
    if (after > 0) parts.push_back(block(after, false).expr);
    if (parts.size() > 1) {
      result = context.Expr(
          op::MakeOpCall("concatenate", {Make<ir::TupleNode>(parts)}, AttrsOf({{"axis", axis}})));
    }
  }
  return {result};
}

// An integer range from a known start by a known positive step up to a
// limit that is a bounded dimension's size (PyTorch's
// `torch.arange(ids.shape[1])` for `?<=512`), as the range up to the bound,
// a constant, sliced at run time: its length keeps the bound, so storage
// that depends on it is planned once. Null for any other range.
std::optional<Value> BoundedRange(const NodeContext& context) {
  const DataType dtype = context.TypeOf(0)->dtype;
  const Value& limit = context.Input(1);
  if ((dtype != DataType::Int64() && dtype != DataType::Int32()) || !context.Input(0).known ||
      !context.Input(2).known || limit.known || limit.elements.size() != 1 ||
      !limit.elements[0].upper_bound) {
    return std::nullopt;
  }
  const int64_t start = context.KnownInts(0, "start")[0];
  const int64_t step = context.KnownInts(2, "delta")[0];
  if (step <= 0) return std::nullopt;
  const int64_t count =
      std::max<int64_t>(0, (*limit.elements[0].upper_bound - start + step - 1) / step);
  if (count > kMaxFoldedElements) return std::nullopt;
  std::vector<int64_t> whole(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) whole[static_cast<size_t>(i)] = start + i * step;
  const Value whole_range = context.Call(
      "cast", {Known(TensorNode::FromVector<int64_t>({count}, DataType::Int64(), whole))},
      AttrsOf({{"dtype", dtype}}));
  // The run-time length, ceil(max(0, limit - start) / step), as a shape
  // tensor [1] of int64; a term that cannot change it is left out.
  const auto int64 = [](int64_t value) {
    return Known(TensorNode::FromVector<int64_t>({}, DataType::Int64(), {value}));
  };
  Value length = dtype == DataType::Int64()
                     ? limit
                     : context.Call("cast", {limit}, AttrsOf({{"dtype", DataType::Int64()}}));
  if (start != 0) {
    length = context.Call("maximum", {context.Call("subtract", {length, int64(start)}), int64(0)});
  }
  if (step != 1) {
    length = context.Call("divide", {context.Call("add", {length, int64(step - 1)}), int64(step)});
  }
  const Value end =
      context.Call("reshape", {length}, AttrsOf({{"newshape", std::vector<int64_t>{1}}}));
  return context.Call("dyn.strided_slice", {whole_range, KnownInts({0}), end, KnownInts({1})});
}

Values Range(const NodeContext& context) {
  context.OnlyAttrs({});
  const DataType dtype = context.TypeOf(0)->dtype;
  if (context.Input(0).known && context.Input(1).known && context.Input(2).known) {
    const auto scalar = [&](size_t i) {
      return LoadElementAsDouble((*context.Input(i).known)->raw_data(), dtype, 0);
    };
    const double count = std::ceil((scalar(1) - scalar(0)) / scalar(2));
    if (!(count <= static_cast<double>(kMaxFoldedElements))) {
      context.Fail("a range of " + std::to_string(count) + " elements");
    }
  }
  if (std::optional<Value> bounded = BoundedRange(context)) return {*bounded};
  return {context.Call("arange", {context.Input(0), context.Input(1), context.Input(2)},
                       AttrsOf({{"dtype", dtype}}))};
}

// ---- convolution and pooling (1-D and 2-D, NCW / NCHW) ----

// The spatial window attributes ONNX's Conv, ConvTranspose and pools share,
// for `spatial` axes: strides, dilations (1 each by default) and pads (all
// begins, then all ends), with auto_pad's SAME_UPPER / SAME_LOWER worked out
// from the input's static sizes.
struct Window {
  std::vector<int64_t> kernel, strides, dilations, pads;
};

Window WindowOf(const NodeContext& context, const std::vector<int64_t>& kernel, bool transposed) {
  const ir::TensorType x = context.TypeOf(0);
  const size_t spatial = x->ndim() - 2;
  const auto per_axis = [&](const std::string& name, size_t count, int64_t fallback) {
    const std::vector<int64_t> values =
        context.IntsAttr(name).value_or(std::vector<int64_t>(count, fallback));
    if (values.size() != count) {
      context.Fail(name + " has " + std::to_string(values.size()) + " entries for " +
                   std::to_string(spatial) + " spatial axes");
    }
    for (int64_t value : values) {
      if (value < (name == "pads" || name == "output_padding" ? 0 : 1)) {
        context.Fail(name + " has " + std::to_string(value));
      }
    }
    return values;
  };
  Window window{kernel, per_axis("strides", spatial, 1), per_axis("dilations", spatial, 1),
                per_axis("pads", 2 * spatial, 0)};
  const std::string auto_pad = context.StringAttr("auto_pad").value_or("NOTSET");
  if (auto_pad == "VALID") {
    window.pads.assign(2 * spatial, 0);
  } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    if (transposed) context.Fail("auto_pad " + auto_pad + " is not supported for ConvTranspose");
    for (size_t d = 0; d < spatial; ++d) {
      const ir::Dim in = x->shape[2 + d];
      if (!in.is_static()) {
        context.Fail("auto_pad " + auto_pad + " needs static spatial sizes, got " +
                     ir::TypeToString(x));
      }
      const int64_t stride = window.strides[d];
      const int64_t out = (in.value() + stride - 1) / stride;
      const int64_t total = std::max<int64_t>(
          0, (out - 1) * stride + window.dilations[d] * (kernel[d] - 1) + 1 - in.value());
      const int64_t small = total / 2, large = total - small;
      window.pads[d] = auto_pad == "SAME_UPPER" ? small : large;
      window.pads[spatial + d] = auto_pad == "SAME_UPPER" ? large : small;
    }
  } else if (auto_pad != "NOTSET") {
    context.Fail("auto_pad '" + auto_pad + "' is not supported");
  }
  return window;
}

// The 1-D or 2-D Nimble operator `stem` ("nn.conv" -> "nn.conv2d") of the
// node's data.
std::string SpatialOp(const NodeContext& context, const std::string& stem) {
  const int64_t rank = Rank(context, 0);
  if (rank != 3 && rank != 4) {
    context.Fail("only 1-D and 2-D data (rank 3 or 4) is supported, got rank " +
                 std::to_string(rank));
  }
  return stem + std::to_string(rank - 2) + "d";
}

// `bias` (C) added along axis 1 of `value`.
Value AddChannelBias(const NodeContext& context, const Value& value, const Value& bias) {
  std::vector<int64_t> per_channel{-1};
  for (size_t d = 2; d < context.TypeOfExpr(value.expr)->ndim(); ++d) per_channel.push_back(1);
  return context.Call(
      "add", {value, context.Call("reshape", {bias}, AttrsOf({{"newshape", per_channel}}))});
}

std::vector<int64_t> KernelOf(const NodeContext& context, size_t spatial) {
  const ir::TensorType w = context.TypeOf(1);
  if (w->ndim() != spatial + 2) {
    context.Fail("W must have rank " + std::to_string(spatial + 2) + ", got " +
                 ir::TypeToString(w));
  }
  std::vector<int64_t> kernel;
  for (size_t d = 0; d < spatial; ++d) {
    if (!w->shape[2 + d].is_static()) context.Fail("W's kernel sizes must be static");
    kernel.push_back(w->shape[2 + d].value());
  }
  if (const auto given = context.IntsAttr("kernel_shape"); given && *given != kernel) {
    context.Fail("kernel_shape " + ShapeToString(*given) + " differs from W's " +
                 ShapeToString(kernel));
  }
  return kernel;
}

Values Conv(const NodeContext& context) {
  context.OnlyAttrs({"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"});
  const std::string op = SpatialOp(context, "nn.conv");
  const std::vector<int64_t> kernel = KernelOf(context, context.TypeOf(0)->ndim() - 2);
  const Window window = WindowOf(context, kernel, false);
  Value result = context.Call(op, {context.Input(0), context.Input(1)},
                              AttrsOf({{"strides", window.strides},
                                       {"padding", window.pads},
                                       {"dilation", window.dilations},
                                       {"groups", context.IntAttr("group").value_or(1)}}));
  if (context.Has(2)) result = AddChannelBias(context, result, context.Input(2));
  return {result};
}

// ConvTranspose as the convolution it is the gradient of: the data with
// stride - 1 zeros between its elements, convolved at stride 1 with the
// weight's kernels flipped and its in and out channels swapped (per group),
// padded by dilation * (kernel - 1) less the pads (output_padding more at
// the end; a negative pad crops).
Values ConvTranspose(const NodeContext& context) {
  context.OnlyAttrs({"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides",
                     "output_padding", "output_shape"});
  if (context.IntsAttr("output_shape")) context.Fail("output_shape is not supported (give pads)");
  const std::string op = SpatialOp(context, "nn.conv");
  const int64_t rank = Rank(context, 0);
  const size_t spatial = static_cast<size_t>(rank - 2);
  const std::vector<int64_t> kernel = KernelOf(context, spatial);
  const Window window = WindowOf(context, kernel, true);
  const std::vector<int64_t> output_padding =
      context.IntsAttr("output_padding").value_or(std::vector<int64_t>(spatial, 0));
  if (output_padding.size() != spatial) context.Fail("output_padding needs one entry per axis");
  const int64_t groups = context.IntAttr("group").value_or(1);
  const ir::TensorType w = context.TypeOf(1);
  if (!w->is_static() || groups < 1 || w->shape[0].value() % groups != 0) {
    context.Fail("W must be static with in-channels divisible by group " + std::to_string(groups) +
                 ", got " + ir::TypeToString(w));
  }
  // W (C, O/g, k...) -> (O, C/g, k... flipped).
  const int64_t in_channels = w->shape[0].value(), out_per_group = w->shape[1].value();
  std::vector<int64_t> grouped{groups, in_channels / groups, out_per_group};
  grouped.insert(grouped.end(), kernel.begin(), kernel.end());
  std::vector<int64_t> swap{0, 2, 1};
  std::vector<int64_t> merged{groups * out_per_group, in_channels / groups};
  for (size_t d = 0; d < spatial; ++d) {
    swap.push_back(static_cast<int64_t>(3 + d));
    merged.push_back(kernel[d]);
  }
  Value weight = context.Call(
      "reshape",
      {context.Call("transpose",
                    {context.Call("reshape", {context.Input(1)}, AttrsOf({{"newshape", grouped}}))},
                    AttrsOf({{"axes", swap}}))},
      AttrsOf({{"newshape", merged}}));
  std::vector<int64_t> spatial_axes, starts(spatial, -1),
      ends(spatial, std::numeric_limits<int32_t>::min()), reverse(spatial, -1);
  for (size_t d = 0; d < spatial; ++d) spatial_axes.push_back(static_cast<int64_t>(2 + d));
  weight = context.Call(
      "strided_slice", {weight},
      AttrsOf({{"begin", starts}, {"end", ends}, {"strides", reverse}, {"axes", spatial_axes}}));
  // Zeros between the elements, one axis at a time.
  Value data = context.Input(0);
  for (size_t d = 0; d < spatial; ++d) {
    const int64_t stride = window.strides[d];
    if (stride == 1) continue;
    const int64_t axis = static_cast<int64_t>(2 + d);
    const Value spread = context.Call("expand_dims", {data}, AttrsOf({{"axis", axis + 1}}));
    const Value shape = ShapeVector(context, spread);
    const Value gap_shape =
        ConcatVectors(context, {Elements(context, shape, 0, axis + 1), KnownInts({stride - 1}),
                                Elements(context, shape, axis + 2, rank + 1)});
    const Value zero = Known(TensorNode::Empty({}, context.TypeOf(0)->dtype));
    const Value gapped =
        context.Expr(op::MakeOpCall("concatenate",
                                    {Make<ir::TupleNode>(std::vector<ir::Expr>{
                                        spread.expr, BroadcastTo(context, zero, gap_shape).expr})},
                                    AttrsOf({{"axis", axis + 1}})));
    const Value data_shape = ShapeVector(context, data);
    const Value flat_shape = ConcatVectors(
        context, {Elements(context, data_shape, 0, axis),
                  context.Call("multiply", {Elements(context, data_shape, axis, axis + 1),
                                            KnownInts({stride})}),
                  Elements(context, data_shape, axis + 1, rank)});
    // (L s) less the zeros after the last element.
    data = context.Call("strided_slice", {ReshapeTo(context, gapped, flat_shape)},
                        AttrsOf({{"begin", std::vector<int64_t>{0}},
                                 {"end", std::vector<int64_t>{-(stride - 1)}},
                                 {"axes", std::vector<int64_t>{axis}}}));
  }
  std::vector<int64_t> padding(2 * spatial), crop_begin(spatial), crop_end(spatial);
  bool crops = false;
  for (size_t d = 0; d < spatial; ++d) {
    const int64_t reach = window.dilations[d] * (kernel[d] - 1);
    const int64_t begin = reach - window.pads[d];
    const int64_t end = reach - window.pads[spatial + d] + output_padding[d];
    padding[d] = std::max<int64_t>(0, begin);
    padding[spatial + d] = std::max<int64_t>(0, end);
    crop_begin[d] = std::max<int64_t>(0, -begin);
    crop_end[d] = end < 0 ? end : std::numeric_limits<int32_t>::max();
    crops = crops || begin < 0 || end < 0;
  }
  Value result = context.Call(op, {data, weight},
                              AttrsOf({{"strides", std::vector<int64_t>(spatial, 1)},
                                       {"padding", padding},
                                       {"dilation", window.dilations},
                                       {"groups", groups}}));
  if (crops) {
    result =
        context.Call("strided_slice", {result},
                     AttrsOf({{"begin", crop_begin}, {"end", crop_end}, {"axes", spatial_axes}}));
  }
  if (context.Has(2)) result = AddChannelBias(context, result, context.Input(2));
  return {result};
}

// MaxPool, AveragePool: nn.max_pool / nn.avg_pool over the node's window.
Converter Pool(const std::string& stem) {
  return [stem](const NodeContext& context) {
    const bool average = stem == "nn.avg_pool";
    context.OnlyAttrs({"auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "strides",
                       average ? "count_include_pad" : "storage_order"});
    if (context.node().output_size() > 1) context.Fail("the Indices output is not supported");
    if (context.IntAttr("storage_order").value_or(0) != 0) {
      context.Fail("storage_order 1 is not supported");
    }
    const std::string op = SpatialOp(context, stem);
    const std::optional<std::vector<int64_t>> kernel = context.IntsAttr("kernel_shape");
    if (!kernel || kernel->size() != context.TypeOf(0)->ndim() - 2) {
      context.Fail("kernel_shape needs one entry per spatial axis");
    }
    const Window window = WindowOf(context, *kernel, false);
    ir::Attrs attrs = AttrsOf({{"pool_size", *kernel},
                               {"strides", window.strides},
                               {"padding", window.pads},
                               {"dilation", window.dilations},
                               {"ceil_mode", context.IntAttr("ceil_mode").value_or(0) != 0}});
    if (average) {
      attrs.Set("count_include_pad", context.IntAttr("count_include_pad").value_or(0) != 0);
    }
    return Values{context.Call(op, {context.Input(0)}, attrs)};
  };
}

// ---- index operators ----

Values CumSum(const NodeContext& context) {
  context.OnlyAttrs({"exclusive", "reverse"});
  const std::vector<int64_t> axis = context.KnownInts(1, "axis");
  if (axis.size() != 1) context.Fail("axis must be one integer");
  return {context.Call("cumsum", {context.Input(0)},
                       AttrsOf({{"axis", NormalAxis(context, axis[0], Rank(context, 0))},
                                {"exclusive", context.IntAttr("exclusive").value_or(0) != 0},
                                {"reverse", context.IntAttr("reverse").value_or(0) != 0}}))};
}

Values TopK(const NodeContext& context) {
  context.OnlyAttrs({"axis", "largest", "sorted"});
  const ir::Expr both =
      op::MakeOpCall("topk", {context.Input(0).expr, context.Input(1).expr},
                     AttrsOf({{"axis", context.IntAttr("axis").value_or(-1)},
                              {"largest", context.IntAttr("largest").value_or(1) != 0},
                              {"sorted", context.IntAttr("sorted").value_or(1) != 0}}));
  return {context.Expr(Make<ir::TupleGetItemNode>(both, 0)),
          context.Expr(Make<ir::TupleGetItemNode>(both, 1))};
}

Values GatherElements(const NodeContext& context) {
  context.OnlyAttrs({"axis"});
  return {context.Call("gather_elements", {context.Input(0), context.Input(1)},
                       AttrsOf({{"axis", context.IntAttr("axis").value_or(0)}}))};
}

Values GatherND(const NodeContext& context) {
  context.OnlyAttrs({"batch_dims"});
  return {context.Call("gather_nd", {context.Input(0), context.Input(1)},
                       AttrsOf({{"batch_dims", context.IntAttr("batch_dims").value_or(0)}}))};
}

Values ScatterND(const NodeContext& context) {
  context.OnlyAttrs({"reduction"});
  return {context.Call("scatter_nd", {context.Input(0), context.Input(1), context.Input(2)},
                       AttrsOf({{"reduction", context.StringAttr("reduction").value_or("none")}}))};
}

Values Where(const NodeContext& context) {
  context.OnlyAttrs({});
  return {context.Call("where", {context.Input(0), context.Input(1), context.Input(2)})};
}

constexpr int64_t kMaxHidden = int64_t{1} << 16;

// LSTM and GRU as PyTorch exports them (nn.LSTM, nn.GRU: default
// activations, no peepholes), in each direction ONNX names (forward,
// reverse, bidirectional) and with sequence_lens: the input's projection for
// every step at once (one nn.dense), then per direction a tail-recursive
// global function over the dynamic sequence, as models/lstm's recurrence,
// that concatenates each step's hidden state.
struct Recurrence {
  int gates;         // 4 (LSTM: i o f c) or 3 (GRU: z r h)
  const char* kind;  // "lstm", "gru"
  bool cell_state;   // LSTM's c
};

std::string DimText(const ir::Dim& dim) {
  return dim.is_static() ? std::to_string(dim.value()) : "?";
}

// The step function's text: @name(%xw, %r, %rb, %t, %h[, %c], %ys[, %lengths]).
// `reverse` reads step T-1-t at call t and puts its state first; with
// `masked`, a batch row whose length (%lengths, (batch, 1)) is past the step
// keeps its state and gives zeros, as ONNX's sequence_lens asks (a reverse
// row starts at its own last step, since its state is held until then).
std::string RecurrenceText(const Recurrence& rnn, const std::string& name, const std::string& n,
                           int64_t hidden, bool reverse, bool masked) {
  const std::string h = std::to_string(hidden);
  const std::string g = std::to_string(rnn.gates * hidden);
  const std::string gates = std::to_string(rnn.gates);
  const std::string state = "Tensor[(" + n + ", " + h + "), float32]";
  const std::string states = "Tensor[(?, " + n + ", " + h + "), float32]";
  const std::string c = rnn.cell_state ? ", %c" : "";
  std::string text =
      "def @" + name + "(%xw: Tensor[(?, " + n + ", " + g + "), float32], %r: Tensor[(" + g + ", " +
      h + "), float32], %rb: Tensor[(" + g + "), float32], %t: int64, %h: " + state +
      (rnn.cell_state ? ", %c: " + state : "") + ", %ys: " + states +
      (masked ? ", %lengths: Tensor[(" + n + ", 1), int64]" : "") + ") -> (" + states + ", " +
      state + (rnn.cell_state ? ", " + state : "") + ") {\n" +
      "  let %steps = take(shape_of(%xw, dtype=\"int64\"), 0i64);\n" +
      "  if (less(%t, %steps)) {\n" +
      (reverse ? "    let %at = subtract(subtract(%steps, 1i64), %t);\n" : "    let %at = %t;\n") +
      "    let %x = split(take(%xw, %at, axis=0), indices_or_sections=" + gates +
      ", axis=1);\n"
      "    let %hr = split(add(nn.dense(%h, %r), %rb), indices_or_sections=" +
      gates + ", axis=1);\n";
  if (rnn.cell_state) {
    text +=
        "    let %c2 = add(multiply(sigmoid(add(%x.2, %hr.2)), %c),\n"
        "                  multiply(sigmoid(add(%x.0, %hr.0)), tanh(add(%x.3, %hr.3))));\n"
        "    let %h2 = multiply(sigmoid(add(%x.1, %hr.1)), tanh(%c2));\n";
  } else {
    text +=
        "    let %z = sigmoid(add(%x.0, %hr.0));\n"
        "    let %n = tanh(add(%x.2, multiply(sigmoid(add(%x.1, %hr.1)), %hr.2)));\n"
        "    let %h2 = add(multiply(subtract(1f, %z), %n), multiply(%z, %h));\n";
  }
  std::string next = rnn.cell_state ? "%h2, %c2" : "%h2";
  std::string y = "%h2";
  if (masked) {
    text += "    let %live = less(%at, %lengths);\n";
    next = std::string("where(%live, %h2, %h)") + (rnn.cell_state ? ", where(%live, %c2, %c)" : "");
    y = "where(%live, %h2, zeros_like(%h2))";
  }
  const std::string row = "expand_dims(" + y + ", axis=0)";
  text += "    @" + name + "(%xw, %r, %rb, add(%t, 1i64), " + next + ", concatenate((" +
          (reverse ? row + ", %ys" : "%ys, " + row) + "), axis=0)" + (masked ? ", %lengths" : "") +
          ")\n  } else {\n    (%ys, %h" + c + ")\n  }\n}\n";
  return text;
}

Converter RecurrentLayer(Recurrence rnn) {
  return [rnn](const NodeContext& context) {
    context.OnlyAttrs({"hidden_size", "direction", "layout", "activations", "clip", "input_forget",
                       "linear_before_reset"});
    const std::optional<int64_t> hidden = context.IntAttr("hidden_size");
    if (!hidden || *hidden < 1 || *hidden > kMaxHidden) {
      context.Fail("attribute 'hidden_size' must be between 1 and " + std::to_string(kMaxHidden));
    }
    const std::string direction = context.StringAttr("direction").value_or("forward");
    std::vector<bool> reversed;  // per direction
    if (direction == "forward" || direction == "bidirectional") reversed.push_back(false);
    if (direction == "reverse" || direction == "bidirectional") reversed.push_back(true);
    if (reversed.empty()) {
      context.Fail("direction must be forward, reverse or bidirectional, not '" + direction + "'");
    }
    const int64_t directions = static_cast<int64_t>(reversed.size());
    if (context.IntAttr("layout").value_or(0) != 0) context.Fail("only layout 0 is supported");
    if (context.IntAttr("input_forget").value_or(0) != 0) {
      context.Fail("input_forget is not supported");
    }
    if (context.FloatAttr("clip")) context.Fail("clip is not supported");
    if (const auto activations = context.StringsAttr("activations")) {
      std::vector<std::string> defaults;
      for (int64_t d = 0; d < directions; ++d) {
        defaults.insert(defaults.end(), {"Sigmoid", "Tanh"});
        if (rnn.cell_state) defaults.push_back("Tanh");
      }
      if (*activations != defaults) context.Fail("only the default activations are supported");
    }
    if (!rnn.cell_state && context.IntAttr("linear_before_reset").value_or(0) != 1) {
      context.Fail("only linear_before_reset=1 (PyTorch's GRU) is supported");
    }
    if (context.Has(7)) context.Fail("peepholes are not supported");
    const ir::TensorType x = context.TypeOf(0);
    if (x->ndim() != 3 || !x->shape[2].is_static()) {
      context.Fail("X must be (sequence, batch, features) with static features");
    }
    const int64_t gates = rnn.gates * *hidden;
    // The weights must be the sizes hidden_size and the direction say (a
    // file could say otherwise).
    const auto expect_shape = [&](size_t input, const std::vector<int64_t>& shape,
                                  const char* what) {
      const ir::TensorType type = context.TypeOf(input);
      bool ok = type->ndim() == shape.size();
      for (size_t d = 0; ok && d < shape.size(); ++d) {
        ok = type->shape[d].is_static() && type->shape[d].value() == shape[d];
      }
      if (!ok) {
        context.Fail(std::string(what) + " must be " + ShapeToString(shape) + " for hidden_size " +
                     std::to_string(*hidden) + " and direction " + direction + ", got " +
                     ir::TypeToString(type));
      }
    };
    expect_shape(1, {directions, gates, x->shape[2].value()}, "W");
    expect_shape(2, {directions, gates, *hidden}, "R");
    if (context.Has(3)) expect_shape(3, {directions, 2 * gates}, "B");
    std::optional<Value> lengths;
    if (context.Has(4)) {
      const ir::TensorType type = context.TypeOf(4);
      if (type->ndim() != 1 || type->dtype != DataType::Int32()) {
        context.Fail("sequence_lens must be a vector of int32, got " + ir::TypeToString(type));
      }
      lengths = context.Call(
          "reshape",
          {context.Call("cast", {context.Input(4)}, AttrsOf({{"dtype", DataType::Int64()}}))},
          AttrsOf({{"newshape", std::vector<int64_t>{-1, 1}}}));
    }
    const auto of_direction = [&](const Value& value, int64_t d) {
      return context.Call("take", {value, Known(TensorNode::Scalar<int64_t>(DataType::Int64(), d))},
                          AttrsOf({{"axis", int64_t{0}}}));
    };
    const auto slice = [&](const Value& value, int64_t begin, int64_t end) {
      return context.Call(
          "strided_slice", {value},
          AttrsOf({{"begin", std::vector<int64_t>{begin}}, {"end", std::vector<int64_t>{end}}}));
    };
    const std::string n = DimText(x->shape[1]);
    const auto initial = [&](size_t input, int64_t d) {
      if (context.Has(input)) return of_direction(context.Input(input), d);
      if (!x->shape[1].is_static()) context.Fail("a dynamic batch needs initial states");
      return context.Call("zeros", {},
                          AttrsOf({{"shape", std::vector<int64_t>{x->shape[1].value(), *hidden}},
                                   {"dtype", DataType::Float32()}}));
    };
    // Per direction: every step's state, the last state, the last cell.
    std::vector<std::vector<ir::Expr>> fields(rnn.cell_state ? 3 : 2);
    for (int64_t d = 0; d < directions; ++d) {
      Value xw = context.Call("nn.dense", {context.Input(0), of_direction(context.Input(1), d)});
      Value recurrent_bias = Known(TensorNode::FromVector<float>(
          {gates}, DataType::Float32(), std::vector<float>(static_cast<size_t>(gates), 0.0f)));
      if (context.Has(3)) {
        const Value bias = of_direction(context.Input(3), d);
        xw = context.Call("add", {xw, slice(bias, 0, gates)});
        recurrent_bias = slice(bias, gates, 2 * gates);
      }
      const Value h0 = initial(5, d);
      // No states yet: (0, batch, hidden).
      const Value none = context.Call(
          "strided_slice", {context.Call("expand_dims", {h0}, AttrsOf({{"axis", int64_t{0}}}))},
          AttrsOf({{"begin", std::vector<int64_t>{0}}, {"end", std::vector<int64_t>{0}}}));
      const bool reverse = reversed[static_cast<size_t>(d)];
      const std::string name = std::string("onnx_") + rnn.kind + (reverse ? "_reverse" : "") +
                               (lengths ? "_masked" : "") + "_n" + (n == "?" ? "any" : n) + "_h" +
                               std::to_string(*hidden);
      const ir::GlobalVar step =
          context.Define(name, RecurrenceText(rnn, name, n, *hidden, reverse, lengths.has_value()));
      std::vector<ir::Expr> args = {
          xw.expr, of_direction(context.Input(2), d).expr, recurrent_bias.expr,
          Known(TensorNode::Scalar<int64_t>(DataType::Int64(), 0)).expr, h0.expr};
      if (rnn.cell_state) args.push_back(initial(6, d).expr);
      args.push_back(none.expr);
      if (lengths) args.push_back(lengths->expr);
      const ir::Expr result = Make<ir::CallNode>(step, args);
      for (size_t k = 0; k < fields.size(); ++k) {
        fields[k].push_back(
            context.Expr(Make<ir::TupleGetItemNode>(result, static_cast<int>(k))).expr);
      }
    }
    // Y is (sequence, directions, batch, hidden); Y_h and Y_c (directions,
    // batch, hidden).
    Values outputs;
    for (size_t k = 0; k < fields.size(); ++k) {
      outputs.push_back(context.Expr(op::MakeOpCall("stack", {Make<ir::TupleNode>(fields[k])},
                                                    AttrsOf({{"axis", int64_t{k == 0 ? 1 : 0}}}))));
    }
    return outputs;
  };
}

const std::map<std::string, Converter>& Converters() {
  static const std::map<std::string, Converter> converters = {
      {"Abs", Unary("abs")},
      {"Add", Binary("add")},
      {"And", Binary("logical_and")},
      {"ArgMax", ArgReduce("argmax")},
      {"ArgMin", ArgReduce("argmin")},
      {"AveragePool", Pool("nn.avg_pool")},
      {"BatchNormalization", BatchNormalization},
      {"Cast", Cast},
      {"Ceil", Unary("ceil")},
      {"Clip", Clip},
      {"Concat", Concat},
      {"Constant", Constant},
      {"ConstantOfShape", ConstantOfShape},
      {"Conv", Conv},
      {"ConvTranspose", ConvTranspose},
      {"CumSum", CumSum},
      {"Div", Binary("divide")},
      {"Dropout", Dropout},
      {"Einsum", Einsum},
      {"Elu", Activation("nn.elu", {{"alpha", 1.0f}})},
      {"Equal", Binary("equal")},
      {"Erf", Unary("erf")},
      {"Exp", Unary("exp")},
      {"Expand", Expand},
      {"Flatten", Flatten},
      {"Floor", Unary("floor")},
      {"GRU", RecurrentLayer({3, "gru", false})},
      {"Gather", Gather},
      {"GatherElements", GatherElements},
      {"GatherND", GatherND},
      {"Gelu", Gelu},
      {"Gemm", Gemm},
      {"GlobalAveragePool", GlobalPool("mean")},
      {"GlobalMaxPool", GlobalPool("max")},
      {"Greater", Binary("greater")},
      {"HardSigmoid", Activation("nn.hard_sigmoid", {{"alpha", 0.2f}, {"beta", 0.5f}})},
      {"Identity", Identity},
      {"If", ConvertIf},
      {"IsNaN", Unary("isnan")},
      {"LSTM", RecurrentLayer({4, "lstm", true})},
      {"LayerNormalization", LayerNormalization},
      {"LeakyRelu", Activation("nn.leaky_relu", {{"alpha", 0.01f}})},
      {"Less", Binary("less")},
      {"Log", Unary("log")},
      {"Loop", ConvertLoop},
      {"MatMul", MatMul},
      {"Max", Binary("maximum")},
      {"MaxPool", Pool("nn.max_pool")},
      {"Min", Binary("minimum")},
      {"Mod", Mod},
      {"Mul", Binary("multiply")},
      {"Neg", Unary("negative")},
      {"NonZero", NonZero},
      {"Not", Unary("logical_not")},
      {"Or", Binary("logical_or")},
      {"Pad", Pad},
      {"Pow", Binary("power")},
      {"Range", Range},
      {"ReduceL1", ReduceComposite("l1")},
      {"ReduceL2", ReduceComposite("l2")},
      {"ReduceLogSumExp", ReduceComposite("log_sum_exp")},
      {"ReduceMax", Reduce("max", 18)},
      {"ReduceMean", Reduce("mean", 18)},
      {"ReduceMin", Reduce("min", 18)},
      {"ReduceProd", Reduce("prod", 18)},
      {"ReduceSum", Reduce("sum", 13)},
      {"ReduceSumSquare", ReduceComposite("sum_square")},
      {"Relu", Unary("nn.relu")},
      {"Reshape", Reshape},
      {"Resize", Resize},
      {"Round", Unary("round")},
      {"Scan", ConvertScan},
      {"ScatterND", ScatterND},
      {"Shape", ShapeOp},
      {"Sigmoid", Unary("sigmoid")},
      {"Sign", Unary("sign")},
      {"Size", Size},
      {"Slice", Slice},
      {"Softmax", Softmax},
      {"Softplus", Unary("nn.softplus")},
      {"Split", Split},
      {"Sqrt", Unary("sqrt")},
      {"Squeeze", Squeeze},
      {"Sub", Binary("subtract")},
      {"Tanh", Unary("tanh")},
      {"Tile", Tile},
      {"TopK", TopK},
      {"Transpose", Transpose},
      {"Unsqueeze", Unsqueeze},
      {"Where", Where},
      {"Xor", Binary("logical_xor")},
  };
  return converters;
}

}  // namespace

NodeContext::NodeContext(
    const onnx::NodeProto& node, std::string name, int64_t opset,
    std::vector<std::optional<Value>> inputs,
    std::function<ir::TensorType(const ir::Expr&)> type_of,
    std::function<bool(const ir::Expr&)> reads_inputs,
    std::function<Tensor(const ir::Expr&, int64_t max_bytes)> fold,
    std::function<ir::GlobalVar(const std::string&, const std::string&)> define,
    Subgraphs& subgraphs)
    : node_(node),
      name_(std::move(name)),
      opset_(opset),
      inputs_(std::move(inputs)),
      type_of_(std::move(type_of)),
      reads_inputs_(std::move(reads_inputs)),
      fold_(std::move(fold)),
      define_(std::move(define)),
      subgraphs_(subgraphs) {}

ir::GlobalVar NodeContext::Define(const std::string& name, const std::string& relay_text) const {
  return define_(name, relay_text);
}

const Value& NodeContext::Input(size_t i) const {
  if (!Has(i)) Fail("input " + std::to_string(i) + " is required");
  return *inputs_[i];
}

ir::TensorType NodeContext::TypeOf(size_t i) const {
  return type_of_(Input(i).expr);
}

std::vector<int64_t> NodeContext::KnownInts(size_t i, const std::string& what) const {
  const Value& value = Input(i);
  if (!value.known) {
    Fail(what + " (input " + std::to_string(i) + ") must be known at import time");
  }
  const Tensor& tensor = *value.known;
  std::vector<int64_t> values;
  if (tensor->dtype() == DataType::Int64()) {
    values.assign(tensor->data<int64_t>(), tensor->data<int64_t>() + tensor->numel());
  } else if (tensor->dtype() == DataType::Int32()) {
    values.assign(tensor->data<int32_t>(), tensor->data<int32_t>() + tensor->numel());
  } else {
    Fail(what + " (input " + std::to_string(i) + ") must be integers, not " +
         tensor->dtype().name());
  }
  return values;
}

namespace {
const onnx::AttributeProto* FindAttr(const onnx::NodeProto& node, const std::string& name) {
  for (const onnx::AttributeProto& attribute : node.attribute()) {
    if (attribute.name() == name) return &attribute;
  }
  return nullptr;
}
}  // namespace

std::optional<int64_t> NodeContext::IntAttr(const std::string& name) const {
  const onnx::AttributeProto* attribute = FindAttr(node_, name);
  if (!attribute) return std::nullopt;
  if (attribute->type() != onnx::AttributeProto::INT)
    Fail("attribute '" + name + "' must be an int");
  return attribute->i();
}

std::optional<float> NodeContext::FloatAttr(const std::string& name) const {
  const onnx::AttributeProto* attribute = FindAttr(node_, name);
  if (!attribute) return std::nullopt;
  if (attribute->type() != onnx::AttributeProto::FLOAT) {
    Fail("attribute '" + name + "' must be a float");
  }
  return attribute->f();
}

std::optional<std::vector<int64_t>> NodeContext::IntsAttr(const std::string& name) const {
  const onnx::AttributeProto* attribute = FindAttr(node_, name);
  if (!attribute) return std::nullopt;
  if (attribute->type() != onnx::AttributeProto::INTS) {
    Fail("attribute '" + name + "' must be a list of ints");
  }
  return std::vector<int64_t>(attribute->ints().begin(), attribute->ints().end());
}

const onnx::TensorProto* NodeContext::TensorAttr(const std::string& name) const {
  const onnx::AttributeProto* attribute = FindAttr(node_, name);
  if (!attribute) return nullptr;
  if (attribute->type() != onnx::AttributeProto::TENSOR) {
    Fail("attribute '" + name + "' must be a tensor");
  }
  return &attribute->t();
}

std::optional<std::string> NodeContext::StringAttr(const std::string& name) const {
  const onnx::AttributeProto* attribute = FindAttr(node_, name);
  if (!attribute) return std::nullopt;
  if (attribute->type() != onnx::AttributeProto::STRING) {
    Fail("attribute '" + name + "' must be a string");
  }
  return attribute->s();
}

std::optional<std::vector<std::string>> NodeContext::StringsAttr(const std::string& name) const {
  const onnx::AttributeProto* attribute = FindAttr(node_, name);
  if (!attribute) return std::nullopt;
  if (attribute->type() != onnx::AttributeProto::STRINGS) {
    Fail("attribute '" + name + "' must be a list of strings");
  }
  return std::vector<std::string>(attribute->strings().begin(), attribute->strings().end());
}

const onnx::GraphProto& NodeContext::GraphAttr(const std::string& name) const {
  const onnx::AttributeProto* attribute = FindAttr(node_, name);
  if (!attribute) Fail("attribute '" + name + "' (a graph) is required");
  if (attribute->type() != onnx::AttributeProto::GRAPH || !attribute->has_g()) {
    Fail("attribute '" + name + "' must be a graph");
  }
  return attribute->g();
}

void NodeContext::OnlyAttrs(const std::vector<std::string>& known) const {
  for (const onnx::AttributeProto& attribute : node_.attribute()) {
    if (std::find(known.begin(), known.end(), attribute.name()) == known.end()) {
      Fail("attribute '" + attribute.name() + "' is not supported");
    }
  }
}

Value NodeContext::Call(const std::string& op, const std::vector<Value>& args,
                        ir::Attrs attrs) const {
  std::vector<ir::Expr> exprs;
  for (const Value& arg : args) exprs.push_back(arg.expr);
  return Expr(op::MakeOpCall(op, std::move(exprs), std::move(attrs)));
}

Value NodeContext::Expr(const ir::Expr& expr) const {
  const ir::TensorType type = type_of_(expr);  // a type error names this node
  if (reads_inputs_(expr)) return {expr, std::nullopt, {}};
  // A large value stays an expression, computed at run time. (Sizes that
  // depend on values, as Range's, are checked by their converters.)
  if (type->is_static()) {
    int64_t numel = 1;
    for (const ir::Dim& dim : type->shape) {
      if (dim.value() > 0 && numel > kMaxFoldedElements / dim.value()) {
        return {expr, std::nullopt, {}};
      }
      numel *= dim.value();
    }
  }
  try {
    return Known(fold_(expr, kMaxFoldedBytes));
  } catch (const op::OutputTooLarge&) {
    return {expr, std::nullopt, {}};
  }
}

void NodeContext::Fail(const std::string& reason) const {
  throw Error("node " + name_ + ": " + reason);
}

ir::Attrs AttrsOf(std::initializer_list<std::pair<std::string, AttrValue>> entries) {
  ir::Attrs attrs;
  for (const auto& [name, value] : entries) attrs.Set(name, value);
  return attrs;
}

std::string Identifier(const std::string& name) {
  std::string id;
  for (char c : name) id += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  if (id.empty() || std::isdigit(static_cast<unsigned char>(id.front()))) id = "w_" + id;
  return id;
}

Value KnownValue(const Tensor& tensor, const std::string& name) {
  return {Make<ir::ConstantNode>(tensor, name), tensor, ElementsOf(tensor)};
}

const Converter* FindConverter(const std::string& op_type) {
  const auto found = Converters().find(op_type);
  return found == Converters().end() ? nullptr : &found->second;
}

DataType DTypeFromOnnx(int32_t element_type, const std::string& what) {
  switch (element_type) {
    case onnx::TensorProto::FLOAT:
      return DataType::Float32();
    case onnx::TensorProto::DOUBLE:
      return DataType::Float64();
    case onnx::TensorProto::FLOAT16:
      return DataType::Float16();
    case onnx::TensorProto::INT64:
      return DataType::Int64();
    case onnx::TensorProto::INT32:
      return DataType::Int32();
    case onnx::TensorProto::INT8:
      return DataType::Int8();
    case onnx::TensorProto::UINT8:
      return DataType::UInt8();
    case onnx::TensorProto::BOOL:
      return DataType::Bool();
    default:
      throw Error(what + ": ONNX element type " + std::to_string(element_type) +
                  " is not supported");
  }
}

Tensor TensorFromProto(const onnx::TensorProto& proto, const std::string& what) {
  if (proto.data_location() == onnx::TensorProto::EXTERNAL) {
    throw Error(what + ": external data is not supported (save the model with its weights inside)");
  }
  const DataType dtype = DTypeFromOnnx(proto.data_type(), what);
  Shape shape;
  int64_t numel = 1;
  for (int64_t dim : proto.dims()) {
    if (dim < 0 || (dim > 0 && numel > kMaxElements / dim)) {
      throw Error(what + ": bad dimension " + std::to_string(dim));
    }
    shape.push_back(dim);
    numel *= dim;
  }
  const size_t bytes = static_cast<size_t>(numel) * dtype.bytes();
  // The data must fit the dims before anything is allocated for them.
  const size_t given = proto.has_raw_data()                             ? proto.raw_data().size()
                       : proto.data_type() == onnx::TensorProto::FLOAT  ? proto.float_data_size()
                       : proto.data_type() == onnx::TensorProto::DOUBLE ? proto.double_data_size()
                       : proto.data_type() == onnx::TensorProto::INT64  ? proto.int64_data_size()
                                                                        : proto.int32_data_size();
  const size_t expected = proto.has_raw_data() ? bytes : static_cast<size_t>(numel);
  if (given != expected) {
    throw Error(what + ": " + std::to_string(given) +
                (proto.has_raw_data() ? " bytes of data for " : " values for ") +
                std::to_string(expected));
  }
  Tensor tensor = TensorNode::Empty(shape, dtype);
  if (proto.has_raw_data()) {
    std::memcpy(tensor->raw_data(), proto.raw_data().data(), bytes);
    return tensor;
  }
  switch (proto.data_type()) {
    case onnx::TensorProto::FLOAT:
      std::copy(proto.float_data().begin(), proto.float_data().end(), tensor->data<float>());
      break;
    case onnx::TensorProto::DOUBLE:
      std::copy(proto.double_data().begin(), proto.double_data().end(), tensor->data<double>());
      break;
    case onnx::TensorProto::INT64:
      std::copy(proto.int64_data().begin(), proto.int64_data().end(), tensor->data<int64_t>());
      break;
    case onnx::TensorProto::INT32:
      std::copy(proto.int32_data().begin(), proto.int32_data().end(), tensor->data<int32_t>());
      break;
    case onnx::TensorProto::BOOL:
      for (int i = 0; i < proto.int32_data_size(); ++i) {
        tensor->data<bool>()[i] = proto.int32_data(i) != 0;
      }
      break;
    default:
      throw Error(what + ": element type " + dtype.name() + " must come as raw data");
  }
  return tensor;
}

}  // namespace nimble::onnx_import
