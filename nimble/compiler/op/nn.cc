// Neural-network operators with Relay's names, arguments and attributes:
// nn.dense, nn.contrib_dense_pack, nn.batch_matmul, nn.bias_add, nn.softmax
// and nn.layer_norm: their type relations and reference kernels. The shape functions and the fast
// kernels are the runtime's (nimble/vm/kernels/nn.cc, dense.cc).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <functional>
#include <limits>
#include <span>
#include <vector>

#include "nimble/compiler/op/compute_util.h"
#include "nimble/compiler/op/op.h"
#include "nimble/compiler/op/reference_loops.h"
#include "nimble/compiler/op/reference_scalar.h"
#include "nimble/compiler/op/type_relations.h"
#include "nimble/vm/error.h"
#include "nimble/vm/kernels/element.h"

namespace nimble::op {

namespace {

using ir::Dim;

// The matrix and normalisation kernels compute in float16, float32 or float64.
void CheckFloatDType(DataType dtype, const std::string& what) {
  if (!dtype.is_float()) {
    throw Error(what + " must be float16, float32 or float64, got " + dtype.name());
  }
}

// Element `index` of a tensor of element type T, as a double; a size-1
// dimension broadcasts (batch_matmul's batch of 1).
template <typename T>
double ElementAt(const Tensor& tensor, std::span<const int64_t> index) {
  return LoadElement(tensor->data<T>()[BroadcastOffset(tensor->shape(), index)]);
}

// The result dtype of dense and batch_matmul: `out_dtype`, or the input's when None.
DataType MatMulOutDType(const ir::Attrs& attrs, DataType input) {
  if (attrs.IsNone("out_dtype")) return input;
  const DataType out = attrs.GetDType("out_dtype");
  CheckFloatDType(out, "out_dtype");
  return out;
}

void CheckSameDType(const ir::TensorType& lhs, const std::string& lhs_what,
                    const ir::TensorType& rhs, const std::string& rhs_what) {
  if (lhs->dtype != rhs->dtype) {
    throw Error(lhs_what + " and " + rhs_what + " dtypes differ: " + lhs->dtype.name() + " and " +
                rhs->dtype.name());
  }
}

// A static mismatch of the two sides' reduction (k) dimensions; Any on either
// side is left to the shape function's run-time check.
void CheckReductionDims(Dim lhs, const std::string& lhs_what, Dim rhs, const std::string& rhs_what,
                        const ir::TensorType& lhs_type, const ir::TensorType& rhs_type) {
  if (lhs.is_static() && rhs.is_static() && lhs != rhs) {
    throw Error("reduction dimensions differ: " + lhs_what + " is " + lhs.ToString() + " but " +
                rhs_what + " is " + rhs.ToString() + " (" + ir::TypeToString(lhs_type) + " and " +
                ir::TypeToString(rhs_type) + ")");
  }
}

// ---------------------------------------------------------------------------
// Matrix products

// nn.dense: data [d1..dn, k] x weight [units, k] -> [d1..dn, units].
bool DenseRelation(const std::vector<ir::Type>& types, const ir::Attrs& attrs,
                   TypeReporter& reporter) {
  const ir::TensorType data = AsTensorType(types[0], "nn.dense", "data");
  if (!data) return false;
  if (data->ndim() == 0) throw Error("data must have rank >= 1, got " + ir::TypeToString(data));
  CheckFloatDType(data->dtype, "data");
  const Dim k = data->shape.back();
  const bool has_units = !attrs.IsNone("units");
  if (has_units && attrs.GetInt("units") < 0) {
    throw Error("units must be non-negative, got " + std::to_string(attrs.GetInt("units")));
  }
  ir::TensorType weight = AsTensorType(types[1], "nn.dense", "weight");
  if (!weight) {
    // With `units` the weight's type follows from data's (inference runs both ways).
    if (!has_units) return false;
    weight = ir::MakeTensorType({Dim(attrs.GetInt("units")), k}, data->dtype);
    reporter.Assign(types[1], weight);
  }
  if (weight->ndim() != 2) throw Error("weight must be 2-D, got " + ir::TypeToString(weight));
  // A bfloat16 weight multiplies float32 data in bf16 products
  // (--precision bf16, transform/bf16_weights.h).
  const bool bf16_weight =
      weight->dtype == DataType::BFloat16() && data->dtype == DataType::Float32();
  if (!bf16_weight) CheckSameDType(data, "data", weight, "weight");
  CheckReductionDims(k, "data's last dimension", weight->shape[1], "weight's dimension 1", data,
                     weight);
  Dim units = weight->shape[0];
  if (has_units) {
    const Dim given(attrs.GetInt("units"));
    if (units.is_static() && units != given) {
      throw Error("units=" + given.ToString() + " does not match weight's dimension 0 (" +
                  units.ToString() + ") in " + ir::TypeToString(weight));
    }
    units = given;
  }
  std::vector<Dim> shape(data->shape.begin(), data->shape.end() - 1);
  shape.push_back(units);
  reporter.Assign(types.back(),
                  ir::MakeTensorType(std::move(shape), MatMulOutDType(attrs, data->dtype)));
  return true;
}

// out[..., u] = sum_l data[..., l] * weight[weight_index(u, l)] (+ bias[u]
// when a third input is given), summed in double: nn.dense's and
// nn.contrib_dense_pack's reference, which differ only in where column u of
// the weight lives.
template <typename WeightIndex>
void DenseReference(std::span<const Tensor> inputs, std::span<Tensor> outputs,
                    const WeightIndex& weight_index) {
  const Tensor& data = inputs[0];
  const Tensor& weight = inputs[1];
  const Tensor* bias = inputs.size() > 2 ? &inputs[2] : nullptr;
  const Tensor& out = outputs[0];
  const int64_t k = data->shape().back();
  DispatchFloat(data->dtype(), [&](auto in_tag) {
    using T = decltype(in_tag);
    DispatchFloat(out->dtype(), [&](auto out_tag) {
      using Out = decltype(out_tag);
      ForEachIndex(out->shape(), [&](std::span<const int64_t> index) {
        std::vector<int64_t> data_index(index.begin(), index.end());
        double sum = bias ? ElementAt<T>(*bias, std::array<int64_t, 1>{index.back()}) : 0.0;
        for (int64_t l = 0; l < k; ++l) {
          data_index.back() = l;
          sum +=
              ElementAt<T>(data, data_index) *
              weight->GetAsDouble(BroadcastOffset(weight->shape(), weight_index(index.back(), l)));
        }
        out->data<Out>()[BroadcastOffset(out->shape(), index)] = ConvertElement<Out>(sum);
      });
    });
  });
}

void DenseKernel(std::span<const Tensor> inputs, std::span<Tensor> outputs, const ir::Attrs&) {
  DenseReference(inputs, outputs, [](int64_t unit, int64_t l) {
    return std::array<int64_t, 2>{unit, l};
  });
}

// nn.contrib_dense_pack: data [d1..dn, k] x weight packed as [units / b, k, b]
// (column u of the product is weight[u / b, :, u % b]), plus an optional bias
// [units] -> [d1..dn, units].
bool PackedDenseRelation(const std::vector<ir::Type>& types, const ir::Attrs& attrs,
                         TypeReporter& reporter) {
  const ir::TensorType data = AsTensorType(types[0], "nn.contrib_dense_pack", "data");
  const ir::TensorType weight = AsTensorType(types[1], "nn.contrib_dense_pack", "weight");
  const bool has_bias = types.size() == 4;
  const ir::TensorType bias =
      has_bias ? AsTensorType(types[2], "nn.contrib_dense_pack", "bias") : nullptr;
  if (!data || !weight || (has_bias && !bias)) return false;
  if (data->ndim() == 0) throw Error("data must have rank >= 1, got " + ir::TypeToString(data));
  CheckFloatDType(data->dtype, "data");
  if (weight->ndim() != 3) {
    throw Error("weight must be 3-D (units / b, k, b), got " + ir::TypeToString(weight));
  }
  CheckSameDType(data, "data", weight, "weight");
  CheckReductionDims(data->shape.back(), "data's last dimension", weight->shape[1],
                     "weight's dimension 1", data, weight);
  const Dim blocks = weight->shape[0];
  const Dim block = weight->shape[2];
  std::vector<Dim> shape(data->shape.begin(), data->shape.end() - 1);
  const Dim units =
      blocks.is_static() && block.is_static() ? Dim(blocks.value() * block.value()) : Dim::Any();
  shape.push_back(units);
  if (has_bias) {
    CheckSameDType(data, "data", bias, "bias");
    if (bias->ndim() != 1 || (units.is_static() && bias->shape[0].is_static() &&
                              bias->shape[0].value() != units.value())) {
      throw Error("bias must have shape (units,) = (" + units.ToString() + ",), got " +
                  ir::TypeToString(bias));
    }
  }
  if (!attrs.IsNone("activation") && attrs.GetString("activation") != "gelu") {
    throw Error("activation must be None or \"gelu\", got \"" + attrs.GetString("activation") +
                "\"");
  }
  reporter.Assign(types.back(),
                  ir::MakeTensorType(std::move(shape), MatMulOutDType(attrs, data->dtype)));
  return true;
}

// Column u of a packed weight is weight[u / b, :, u % b]; the activation, if
// any, applies to each element of the product.
void PackedDenseKernel(std::span<const Tensor> inputs, std::span<Tensor> outputs,
                       const ir::Attrs& attrs) {
  const int64_t block = inputs[1]->shape()[2];
  DenseReference(inputs, outputs, [block](int64_t unit, int64_t l) {
    return std::array<int64_t, 3>{unit / block, l, unit % block};
  });
  if (attrs.IsNone("activation")) return;
  const Tensor& out = outputs[0];
  DispatchFloat(out->dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* values = out->data<T>();
    for (int64_t i = 0; i < out->numel(); ++i) {
      values[i] = ConvertElement<T>(reference::Gelu()(ConvertElement<double>(values[i])));
    }
  });
}

// The batch size of batch_matmul's result: equal sizes, or one side 1
// (broadcast). Any against 1 stays Any; Any against d > 1 is d, checked at
// run time.
Dim BroadcastBatch(Dim x, Dim y) {
  if (x.is_any() && y.is_any()) return ir::EitherDim(x, y);
  if (x.is_any()) return y.value() == 1 ? x : y;
  if (y.is_any()) return x.value() == 1 ? y : x;
  if (x == y || y.value() == 1) return x;
  if (x.value() == 1) return y;
  throw Error("batch dimensions " + x.ToString() + " and " + y.ToString() +
              " differ and neither is 1");
}

// The (m, k) of x and (n, k) of y under the transpose flags.
struct MatMulDims {
  Dim m, k_of_x, n, k_of_y;
};
MatMulDims BatchMatMulDims(const std::vector<Dim>& x, const std::vector<Dim>& y,
                           const ir::Attrs& attrs) {
  const bool transpose_a = attrs.GetBool("transpose_a");
  const bool transpose_b = attrs.GetBool("transpose_b");
  return {transpose_a ? x[2] : x[1], transpose_a ? x[1] : x[2], transpose_b ? y[1] : y[2],
          transpose_b ? y[2] : y[1]};
}

// nn.batch_matmul: x [b, m, k] (or [b, k, m] with transpose_a) and y
// [b, n, k] (transpose_b, the default) or [b, k, n] -> [b, m, n].
bool BatchMatMulRelation(const std::vector<ir::Type>& types, const ir::Attrs& attrs,
                         TypeReporter& reporter) {
  const ir::TensorType x = AsTensorType(types[0], "nn.batch_matmul", "x");
  const ir::TensorType y = AsTensorType(types[1], "nn.batch_matmul", "y");
  if (!x || !y) return false;
  if (x->ndim() != 3) throw Error("x must be 3-D, got " + ir::TypeToString(x));
  if (y->ndim() != 3) throw Error("y must be 3-D, got " + ir::TypeToString(y));
  CheckFloatDType(x->dtype, "x");
  CheckSameDType(x, "x", y, "y");
  const MatMulDims dims = BatchMatMulDims(x->shape, y->shape, attrs);
  CheckReductionDims(dims.k_of_x, "x's k", dims.k_of_y, "y's k", x, y);
  const Dim batch = BroadcastBatch(x->shape[0], y->shape[0]);
  reporter.Assign(types.back(),
                  ir::MakeTensorType({batch, dims.m, dims.n}, MatMulOutDType(attrs, x->dtype)));
  return true;
}

// out[b, i, j] = sum_l x[b, i, l] * y[b, j, l], summed in double, with x
// read as [b, k, m] under transpose_a and y as [b, k, n] without transpose_b.
void BatchMatMulKernel(std::span<const Tensor> inputs, std::span<Tensor> outputs,
                       const ir::Attrs& attrs) {
  const Tensor& x = inputs[0];
  const Tensor& y = inputs[1];
  const Tensor& out = outputs[0];
  const bool transpose_a = attrs.GetBool("transpose_a");
  const bool transpose_b = attrs.GetBool("transpose_b");
  const int64_t k = transpose_a ? x->shape()[1] : x->shape()[2];
  DispatchFloat(x->dtype(), [&](auto in_tag) {
    using T = decltype(in_tag);
    DispatchFloat(out->dtype(), [&](auto out_tag) {
      using Out = decltype(out_tag);
      ForEachIndex(out->shape(), [&](std::span<const int64_t> index) {
        const int64_t b = index[0], i = index[1], j = index[2];
        double sum = 0;
        for (int64_t l = 0; l < k; ++l) {
          const std::array<int64_t, 3> x_index =
              transpose_a ? std::array{b, l, i} : std::array{b, i, l};
          const std::array<int64_t, 3> y_index =
              transpose_b ? std::array{b, j, l} : std::array{b, l, j};
          sum += ElementAt<T>(x, x_index) * ElementAt<T>(y, y_index);
        }
        out->data<Out>()[BroadcastOffset(out->shape(), index)] = ConvertElement<Out>(sum);
      });
    });
  });
}

// ---------------------------------------------------------------------------
// Ops with a 1-D parameter along one axis of data (bias_add, layer_norm)

// Checks a 1-D parameter whose length must be data's size along `axis`, or
// assigns it that type while it is still unknown.
void RelateAxisParameter(const std::vector<ir::Type>& types, size_t index,
                         const ir::TensorType& data, int64_t axis, const std::string& op,
                         const std::string& what, TypeReporter& reporter) {
  const Dim channels = data->shape[axis];
  const ir::TensorType param = AsTensorType(types[index], op, what);
  if (!param) {
    reporter.Assign(types[index], ir::MakeTensorType({channels}, data->dtype));
    return;
  }
  if (param->ndim() != 1) throw Error(what + " must be 1-D, got " + ir::TypeToString(param));
  CheckSameDType(data, "data", param, what);
  const Dim length = param->shape[0];
  if (length.is_static() && channels.is_static() && length != channels) {
    throw Error(what + " has " + length.ToString() + " elements but axis " + std::to_string(axis) +
                " of data " + ir::TypeToString(data) + " has " + channels.ToString());
  }
}

int64_t AxisAttr(const ir::Attrs& attrs, int64_t ndim, const std::string& op) {
  return NormalizeAxis(attrs.GetInt("axis"), ndim, op);
}

bool BiasAddRelation(const std::vector<ir::Type>& types, const ir::Attrs& attrs,
                     TypeReporter& reporter) {
  const ir::TensorType data = AsTensorType(types[0], "nn.bias_add", "data");
  if (!data) return false;
  const int64_t axis = AxisAttr(attrs, static_cast<int64_t>(data->ndim()), "nn.bias_add");
  RelateAxisParameter(types, 1, data, axis, "nn.bias_add", "bias", reporter);
  reporter.Assign(types.back(), data);
  return true;
}

// out[..., c, ...] = data[..., c, ...] + bias[c], with c the index along axis.
void BiasAddKernel(std::span<const Tensor> inputs, std::span<Tensor> outputs,
                   const ir::Attrs& attrs) {
  const Tensor& data = inputs[0];
  const Tensor& bias = inputs[1];
  const int64_t axis = AxisAttr(attrs, data->ndim(), "nn.bias_add");
  DispatchDType(data->dtype(), [&](auto tag) {
    using T = decltype(tag);
    ForEachIndex(data->shape(), [&](std::span<const int64_t> index) {
      const int64_t offset = BroadcastOffset(data->shape(), index);
      const auto sum = Wrapping(std::plus<>(), LoadElement(data->data<T>()[offset]),
                                LoadElement(bias->data<T>()[index[axis]]));
      outputs[0]->data<T>()[offset] = ConvertElement<T>(sum);
    });
  });
}

// Calls fn(at) for every line of `shape` along `axis`, where at(j) is the
// flat offset of the line's element j.
template <typename Fn>
void ForEachLine(const Shape& shape, int64_t axis, const Fn& fn) {
  if (shape[axis] == 0) return;
  Shape starts = shape;
  starts[axis] = 1;
  ForEachIndex(starts, [&](std::span<const int64_t> start) {
    std::vector<int64_t> index(start.begin(), start.end());
    fn([&](int64_t j) {
      index[axis] = j;
      return BroadcastOffset(shape, index);
    });
  });
}

// ---------------------------------------------------------------------------
// softmax

bool SoftmaxRelation(const std::vector<ir::Type>& types, const ir::Attrs& attrs,
                     TypeReporter& reporter) {
  const ir::TensorType data = AsTensorType(types[0], "nn.softmax", "data");
  if (!data) return false;
  CheckFloatDType(data->dtype, "data");
  AxisAttr(attrs, static_cast<int64_t>(data->ndim()), "nn.softmax");  // validates the axis
  reporter.Assign(types.back(), data);
  return true;
}

// Along each line: exp(x - max) / sum_j exp(x_j - max), in double.
void SoftmaxKernel(std::span<const Tensor> inputs, std::span<Tensor> outputs,
                   const ir::Attrs& attrs) {
  const Tensor& data = inputs[0];
  const int64_t axis = AxisAttr(attrs, data->ndim(), "nn.softmax");
  const int64_t n = data->shape()[axis];
  DispatchFloat(data->dtype(), [&](auto tag) {
    using T = decltype(tag);
    const auto x = [&](int64_t offset) -> double { return LoadElement(data->data<T>()[offset]); };
    ForEachLine(data->shape(), axis, [&](const auto& at) {
      double max = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < n; ++j) max = std::max(max, x(at(j)));
      double sum = 0;
      for (int64_t j = 0; j < n; ++j) sum += std::exp(x(at(j)) - max);
      for (int64_t j = 0; j < n; ++j) {
        outputs[0]->data<T>()[at(j)] = ConvertElement<T>(std::exp(x(at(j)) - max) / sum);
      }
    });
  });
}

// ---------------------------------------------------------------------------
// layer_norm

bool LayerNormRelation(const std::vector<ir::Type>& types, const ir::Attrs& attrs,
                       TypeReporter& reporter) {
  const ir::TensorType data = AsTensorType(types[0], "nn.layer_norm", "data");
  if (!data) return false;
  CheckFloatDType(data->dtype, "data");
  const int64_t axis = AxisAttr(attrs, static_cast<int64_t>(data->ndim()), "nn.layer_norm");
  RelateAxisParameter(types, 1, data, axis, "nn.layer_norm", "gamma", reporter);
  RelateAxisParameter(types, 2, data, axis, "nn.layer_norm", "beta", reporter);
  reporter.Assign(types.back(), data);
  return true;
}

// Along each line: (x - mean) / sqrt(variance + epsilon), times gamma[j]
// when scale, plus beta[j] when center, in double.
void LayerNormKernel(std::span<const Tensor> inputs, std::span<Tensor> outputs,
                     const ir::Attrs& attrs) {
  const Tensor& data = inputs[0];
  const int64_t axis = AxisAttr(attrs, data->ndim(), "nn.layer_norm");
  const int64_t n = data->shape()[axis];
  const double epsilon = attrs.GetFloat("epsilon");
  const bool center = attrs.GetBool("center");
  const bool scale = attrs.GetBool("scale");
  DispatchFloat(data->dtype(), [&](auto tag) {
    using T = decltype(tag);
    const auto x = [&](int64_t offset) -> double { return LoadElement(data->data<T>()[offset]); };
    const auto param = [&](int input, int64_t j) -> double {
      return LoadElement(inputs[input]->data<T>()[j]);
    };
    ForEachLine(data->shape(), axis, [&](const auto& at) {
      double sum = 0;
      for (int64_t j = 0; j < n; ++j) sum += x(at(j));
      const double mean = sum / static_cast<double>(n);
      double squares = 0;
      for (int64_t j = 0; j < n; ++j) squares += (x(at(j)) - mean) * (x(at(j)) - mean);
      const double variance = squares / static_cast<double>(n);
      for (int64_t j = 0; j < n; ++j) {
        double y = (x(at(j)) - mean) / std::sqrt(variance + epsilon);
        if (scale) y *= param(1, j);
        if (center) y += param(2, j);
        outputs[0]->data<T>()[at(j)] = ConvertElement<T>(y);
      }
    });
  });
}

// ---------------------------------------------------------------------------
// Compute definitions. They compute in the output dtype (the reference
// kernels above in double), so results agree to rounding.

using te::ReduceKind;

std::vector<Expr> WithoutAxis(std::vector<Expr> indices, size_t axis) {
  indices.erase(indices.begin() + static_cast<std::ptrdiff_t>(axis));
  return indices;
}

std::vector<Expr> WithAxis(std::vector<Expr> indices, size_t axis, Expr index) {
  indices.insert(indices.begin() + static_cast<std::ptrdiff_t>(axis), std::move(index));
  return indices;
}

// The `kind` reduction of value(data's indices) along `axis` of data, for
// each position of the other axes (a stage of softmax and layer_norm).
te::Tensor ReduceAlongAxis(const std::string& name, const te::Tensor& data, size_t axis,
                           ReduceKind kind,
                           const std::function<Expr(const std::vector<Expr>&)>& value) {
  return te::Compute(name, WithoutAxis(data->shape, axis), [&](const std::vector<Expr>& indices) {
    const te::ReduceAxis j = te::MakeReduceAxis(name + ".j", data->shape[axis]);
    return te::Reduce(kind, value(WithAxis(indices, axis, j.var)), {j});
  });
}

// A 1-D parameter's length must be data's size along `axis`.
void RequireAxisParameter(te::ComputeContext& context, const std::string& op,
                          const std::string& what, const te::Tensor& data, size_t axis,
                          const te::Tensor& param) {
  RequireEqual(context, param->shape[0], data->shape[axis],
               op + ": " + what + "'s length differs from data's axis " + std::to_string(axis));
}

std::vector<te::Tensor> DenseCompute(te::ComputeContext& context,
                                     std::span<const te::Tensor> inputs, const ir::Attrs& attrs,
                                     std::span<const DataType> output_dtypes) {
  if (HasFloat16(inputs, output_dtypes)) return {};
  const te::Tensor& data = inputs[0];
  const te::Tensor& weight = inputs[1];
  const DataType out = output_dtypes[0];
  const Expr& k = data->shape.back();
  RequireEqual(context, k, weight->shape[1], "nn.dense: reduction dimensions differ");
  if (!attrs.IsNone("units")) {
    RequireEqual(context, weight->shape[0], tir::IntImm(attrs.GetInt("units")),
                 "nn.dense: units does not match weight's dimension 0");
  }
  std::vector<Expr> shape = WithoutAxis(data->shape, data->shape.size() - 1);
  shape.push_back(weight->shape[0]);
  return {te::Compute(
      "nn.dense", shape,
      [&](const std::vector<Expr>& indices) {
        const te::ReduceAxis l = te::MakeReduceAxis("nn.dense.k", k);
        std::vector<Expr> data_indices = WithoutAxis(indices, indices.size() - 1);
        data_indices.push_back(l.var);
        return te::Reduce(ReduceKind::kSum,
                          tir::Mul(tir::Cast(out, te::Read(data, data_indices)),
                                   tir::Cast(out, te::Read(weight, {indices.back(), l.var}))),
                          {l});
      },
      te::ScheduleHint::kMatMul)};
}

std::vector<te::Tensor> BatchMatMulCompute(te::ComputeContext& context,
                                           std::span<const te::Tensor> inputs,
                                           const ir::Attrs& attrs,
                                           std::span<const DataType> output_dtypes) {
  if (HasFloat16(inputs, output_dtypes)) return {};
  const te::Tensor& x = inputs[0];
  const te::Tensor& y = inputs[1];
  const DataType out = output_dtypes[0];
  const bool transpose_a = attrs.GetBool("transpose_a");
  const bool transpose_b = attrs.GetBool("transpose_b");
  const Expr& k = transpose_a ? x->shape[1] : x->shape[2];
  RequireEqual(context, k, transpose_b ? y->shape[2] : y->shape[1],
               "nn.batch_matmul: reduction dimensions differ");
  const std::vector<Expr> batch =
      BroadcastShape(context, "nn.batch_matmul", {{x->shape[0]}, {y->shape[0]}});
  const std::vector<Expr> shape = {batch[0], transpose_a ? x->shape[2] : x->shape[1],
                                   transpose_b ? y->shape[1] : y->shape[2]};
  // The matrix-product template streams both operands along k, or, with y
  // read as [k, n], y along n (an outer product per k).
  const te::ScheduleHint hint = !transpose_b   ? te::ScheduleHint::kOuterProduct
                                : !transpose_a ? te::ScheduleHint::kMatMul
                                               : te::ScheduleHint::kDefault;
  return {te::Compute(
      "nn.batch_matmul", shape,
      [&](const std::vector<Expr>& indices) {
        const Expr& i = indices[1];
        const Expr& j = indices[2];
        const Expr bx = BroadcastIndices({x->shape[0]}, batch, {indices[0]})[0];
        const Expr by = BroadcastIndices({y->shape[0]}, batch, {indices[0]})[0];
        const te::ReduceAxis l = te::MakeReduceAxis("nn.batch_matmul.k", k);
        const Expr& k_index = l.var;
        const Expr a =
            te::Read(x, transpose_a ? std::vector{bx, k_index, i} : std::vector{bx, i, k_index});
        const Expr b =
            te::Read(y, transpose_b ? std::vector{by, j, k_index} : std::vector{by, k_index, j});
        return te::Reduce(ReduceKind::kSum, tir::Mul(tir::Cast(out, a), tir::Cast(out, b)), {l});
      },
      hint)};
}

std::vector<te::Tensor> BiasAddCompute(te::ComputeContext& context,
                                       std::span<const te::Tensor> inputs, const ir::Attrs& attrs,
                                       std::span<const DataType> output_dtypes) {
  const te::Tensor& data = inputs[0];
  const te::Tensor& bias = inputs[1];
  // bool's + is the reference's promotion to int, which tir has no word for.
  if (HasFloat16(inputs, output_dtypes) || data->dtype.is_bool()) return {};
  const size_t axis = static_cast<size_t>(AxisAttr(attrs, data->shape.size(), "nn.bias_add"));
  RequireAxisParameter(context, "nn.bias_add", "bias", data, axis, bias);
  return {te::Compute("nn.bias_add", data->shape, [&](const std::vector<Expr>& indices) {
    return tir::Add(te::Read(data, indices), te::Read(bias, {indices[axis]}));
  })};
}

// Four stages: the maximum along the axis, each element's exp(x - max), their
// sum along the axis, then each exp / sum.
std::vector<te::Tensor> SoftmaxCompute(te::ComputeContext&, std::span<const te::Tensor> inputs,
                                       const ir::Attrs& attrs,
                                       std::span<const DataType> output_dtypes) {
  if (HasFloat16(inputs, output_dtypes)) return {};
  const te::Tensor& data = inputs[0];
  const size_t axis = static_cast<size_t>(AxisAttr(attrs, data->shape.size(), "nn.softmax"));
  const auto read = [&](const std::vector<Expr>& indices) { return te::Read(data, indices); };
  const te::Tensor max = ReduceAlongAxis("nn.softmax.max", data, axis, ReduceKind::kMax, read);
  // A tensor of its own, read by the sum and the quotient: lowering stores it
  // rather than computing each exp twice.
  const te::Tensor exp =
      te::Compute("nn.softmax.exp", data->shape, [&](const std::vector<Expr>& indices) {
        return tir::Call(tir::Intrinsic::kExp,
                         {tir::Sub(read(indices), te::Read(max, WithoutAxis(indices, axis)))});
      });
  const auto read_exp = [&](const std::vector<Expr>& indices) { return te::Read(exp, indices); };
  const te::Tensor sum = ReduceAlongAxis("nn.softmax.sum", exp, axis, ReduceKind::kSum, read_exp);
  return {te::Compute("nn.softmax", data->shape, [&](const std::vector<Expr>& indices) {
    return tir::Div(read_exp(indices), te::Read(sum, WithoutAxis(indices, axis)));
  })};
}

// Three stages: the sum along the axis (the mean is sum / n), the sum of
// squared differences from the mean (the variance is that / n), then each
// element normalised, scaled and shifted.
std::vector<te::Tensor> LayerNormCompute(te::ComputeContext& context,
                                         std::span<const te::Tensor> inputs, const ir::Attrs& attrs,
                                         std::span<const DataType> output_dtypes) {
  if (HasFloat16(inputs, output_dtypes)) return {};
  const te::Tensor& data = inputs[0];
  const te::Tensor& gamma = inputs[1];
  const te::Tensor& beta = inputs[2];
  const DataType dtype = data->dtype;
  const size_t axis = static_cast<size_t>(AxisAttr(attrs, data->shape.size(), "nn.layer_norm"));
  RequireAxisParameter(context, "nn.layer_norm", "gamma", data, axis, gamma);
  RequireAxisParameter(context, "nn.layer_norm", "beta", data, axis, beta);
  const Expr count = tir::Cast(dtype, data->shape[axis]);
  const te::Tensor sum =
      ReduceAlongAxis("nn.layer_norm.sum", data, axis, ReduceKind::kSum,
                      [&](const std::vector<Expr>& indices) { return te::Read(data, indices); });
  const auto centered = [&](const std::vector<Expr>& indices) {
    return tir::Sub(te::Read(data, indices),
                    tir::Div(te::Read(sum, WithoutAxis(indices, axis)), count));
  };
  const te::Tensor squares = ReduceAlongAxis(
      "nn.layer_norm.squares", data, axis, ReduceKind::kSum, [&](const std::vector<Expr>& indices) {
        return tir::Mul(centered(indices), centered(indices));
      });
  const Expr epsilon = tir::FloatImm(attrs.GetFloat("epsilon"), dtype);
  const bool center = attrs.GetBool("center");
  const bool scale = attrs.GetBool("scale");
  return {te::Compute("nn.layer_norm", data->shape, [&](const std::vector<Expr>& indices) {
    const Expr variance = tir::Div(te::Read(squares, WithoutAxis(indices, axis)), count);
    Expr y = tir::Div(centered(indices),
                      tir::Call(tir::Intrinsic::kSqrt, {tir::Add(variance, epsilon)}));
    if (scale) y = tir::Mul(y, te::Read(gamma, {indices[axis]}));
    if (center) y = tir::Add(y, te::Read(beta, {indices[axis]}));
    return y;
  })};
}

OpDef& RegisterNnOp(OpRegistry& registry, const std::string& name, std::string description,
                    int num_inputs, std::vector<AttrSpec> attrs, OpPattern pattern) {
  OpDef& def = registry.Register(name);
  def.description = std::move(description);
  def.min_inputs = num_inputs;
  def.max_inputs = num_inputs;
  def.attrs = std::move(attrs);
  def.pattern = pattern;
  return def;
}

}  // namespace

void RegisterNnOps(OpRegistry& registry) {
  using ir::AttrKind;

  OpDef& dense = RegisterNnOp(
      registry, "nn.dense",
      "Fully connected layer: data [d1..dn, k] times the transpose of weight [units, k], "
      "giving [d1..dn, units].",
      2,
      {{"units", AttrKind::kInt, std::monostate{}},
       {"out_dtype", AttrKind::kDType, std::monostate{}}},
      OpPattern::kOutEWiseFusable);
  dense.relation = DenseRelation;
  dense.kernel = DenseKernel;
  dense.compute = DenseCompute;

  // Written by transform/pack_dense_weights.h for a constant weight, so that
  // the runtime's kernel reads it in register-tile order; Relay's name.
  OpDef& packed_dense = RegisterNnOp(
      registry, "nn.contrib_dense_pack",
      "nn.dense with its weight packed: data [d1..dn, k] and weight [units / b, k, b], whose "
      "column u is weight[u / b, :, u % b], plus an optional bias [units], giving "
      "[d1..dn, units]; activation \"gelu\" applies gelu to each element of that.",
      2,
      {{"out_dtype", AttrKind::kDType, std::monostate{}},
       {"activation", AttrKind::kString, std::monostate{}}},
      OpPattern::kOpaque);
  packed_dense.max_inputs = 3;
  packed_dense.relation = PackedDenseRelation;
  packed_dense.kernel = PackedDenseKernel;

  OpDef& batch_matmul = RegisterNnOp(
      registry, "nn.batch_matmul",
      "Batched matrix product of x [b, m, k] and y [b, n, k] giving [b, m, n]; transpose_a "
      "reads x as [b, k, m], transpose_b=False reads y as [b, k, n]; a batch of 1 broadcasts.",
      2,
      {{"out_dtype", AttrKind::kDType, std::monostate{}},
       {"transpose_a", AttrKind::kBool, false},
       {"transpose_b", AttrKind::kBool, true}},
      OpPattern::kOutEWiseFusable);
  batch_matmul.relation = BatchMatMulRelation;
  batch_matmul.kernel = BatchMatMulKernel;
  batch_matmul.compute = BatchMatMulCompute;

  OpDef& bias_add =
      RegisterNnOp(registry, "nn.bias_add",
                   "Adds a 1-D bias along `axis` of data (broadcast over the other axes).", 2,
                   {{"axis", AttrKind::kInt, int64_t{1}}}, OpPattern::kBroadcast);
  bias_add.relation = BiasAddRelation;
  bias_add.kernel = BiasAddKernel;
  bias_add.compute = BiasAddCompute;

  OpDef& softmax = RegisterNnOp(registry, "nn.softmax",
                                "Softmax along `axis`: exp(x - max) / sum(exp(x - max)).", 1,
                                {{"axis", AttrKind::kInt, int64_t{-1}}}, OpPattern::kOpaque);
  softmax.relation = SoftmaxRelation;
  softmax.kernel = SoftmaxKernel;
  softmax.compute = SoftmaxCompute;

  OpDef& layer_norm = RegisterNnOp(
      registry, "nn.layer_norm",
      "Layer normalisation along `axis`: (x - mean) / sqrt(var + epsilon), times gamma when "
      "scale, plus beta when center.",
      3,
      {{"axis", AttrKind::kInt, int64_t{-1}},
       {"epsilon", AttrKind::kFloat, 1e-5},
       {"center", AttrKind::kBool, true},
       {"scale", AttrKind::kBool, true}},
      OpPattern::kOpaque);
  layer_norm.relation = LayerNormRelation;
  layer_norm.kernel = LayerNormKernel;
  layer_norm.compute = LayerNormCompute;
}

}  // namespace nimble::op
