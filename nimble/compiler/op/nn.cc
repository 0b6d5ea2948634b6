// Neural-network operators with Relay's names, arguments and attributes:
// nn.dense, nn.batch_matmul, nn.bias_add, nn.softmax and nn.layer_norm.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "nimble/compiler/op/elemwise.h"
#include "nimble/compiler/op/op.h"
#include "nimble/compiler/op/type_relations.h"
#include "nimble/vm/error.h"

namespace nimble::op {

namespace {

using ir::Dim;

// The matrix and normalisation kernels compute in float16, float32 or float64.
void CheckFloatDType(DataType dtype, const std::string& what) {
  if (!dtype.is_float()) {
    throw Error(what + " must be float16, float32 or float64, got " + dtype.name());
  }
}

// DispatchDType restricted to the float dtypes, so that the float kernels are
// only instantiated for them; the type relations reject the others first.
template <typename Fn>
void DispatchFloat(DataType dtype, const std::string& op, const Fn& fn) {
  DispatchDType(dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, Half> || std::is_floating_point_v<T>) {
      fn(tag);
    } else {
      throw Error(op + ": unsupported dtype " + dtype.name());
    }
  });
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

void CheckRuntimeReduction(int64_t lhs, int64_t rhs, const std::string& op, const Shape& lhs_shape,
                           const Shape& rhs_shape) {
  if (lhs != rhs) {
    throw Error(op + ": reduction dimensions differ at run time: " + std::to_string(lhs) + " vs " +
                std::to_string(rhs) + " for shapes " + ShapeToString(lhs_shape) + " and " +
                ShapeToString(rhs_shape));
  }
}

// ---------------------------------------------------------------------------
// Matrix products

constexpr int64_t kLanes = 8;     // independent partial sums per dot product
constexpr int64_t kRowBlock = 4;  // rows of b that share one pass over a row of a

// out[r] = dot(x, w + r * k) for kRows consecutive rows of w. kLanes partial
// sums per row let the lane loop vectorise without reassociating
// floating-point additions, and the kRows rows reuse each load of x.
template <int64_t kRows, typename T, typename Out>
void DotRows(const T* x, const T* w, int64_t k, Out* out) {
  using A = ComputeType<T>;
  A partial[kRows][kLanes] = {};
  int64_t l = 0;
  for (; l + kLanes <= k; l += kLanes) {
    for (int64_t r = 0; r < kRows; ++r) {
      for (int64_t lane = 0; lane < kLanes; ++lane) {
        partial[r][lane] += LoadElement(x[l + lane]) * LoadElement(w[r * k + l + lane]);
      }
    }
  }
  for (int64_t r = 0; r < kRows; ++r) {
    A sum = 0;
    for (int64_t lane = 0; lane < kLanes; ++lane) sum += partial[r][lane];
    for (int64_t tail = l; tail < k; ++tail) {
      sum += LoadElement(x[tail]) * LoadElement(w[r * k + tail]);
    }
    out[r] = ConvertElement<Out>(sum);
  }
}

// c[i, j] = sum_l a[i, l] * b[j, l] for row-major a (m x k), b (n x k) and
// c (m x n): both operands are read along contiguous rows of k. The rows of b
// are taken in panels small enough to stay in cache while every row of a
// passes over them, so b is read from memory once rather than m times.
template <typename T, typename Out>
void MatMulTransposedB(const T* a, const T* b, Out* c, int64_t m, int64_t n, int64_t k) {
  constexpr int64_t kPanelBytes = 128 * 1024;
  const int64_t row_bytes = std::max<int64_t>(1, k * static_cast<int64_t>(sizeof(T)));
  const int64_t panel = std::max<int64_t>(1, kPanelBytes / row_bytes / kRowBlock) * kRowBlock;
  for (int64_t j0 = 0; j0 < n; j0 += panel) {
    const int64_t j1 = std::min(n, j0 + panel);
    for (int64_t i = 0; i < m; ++i) {
      const T* a_row = a + i * k;
      Out* c_row = c + i * n;
      int64_t j = j0;
      for (; j + kRowBlock <= j1; j += kRowBlock) {
        DotRows<kRowBlock>(a_row, b + j * k, k, c_row + j);
      }
      for (; j < j1; ++j) DotRows<1>(a_row, b + j * k, k, c_row + j);
    }
  }
}

// dst (cols x rows) = the transpose of src (rows x cols).
template <typename T>
void Transpose(const T* src, int64_t rows, int64_t cols, T* dst) {
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) dst[j * rows + i] = src[i * cols + j];
  }
}

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
  CheckSameDType(data, "data", weight, "weight");
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

std::vector<Shape> DenseShapeFunc(std::span<const Shape> input_shapes, vm::TensorArgs,
                                  const ir::Attrs& attrs) {
  const Shape& data = input_shapes[0];
  const Shape& weight = input_shapes[1];
  CheckRuntimeReduction(data.back(), weight[1], "nn.dense", data, weight);
  if (!attrs.IsNone("units") && attrs.GetInt("units") != weight[0]) {
    throw Error("nn.dense: units=" + std::to_string(attrs.GetInt("units")) +
                " does not match weight shape " + ShapeToString(weight));
  }
  Shape out(data.begin(), data.end() - 1);
  out.push_back(weight[0]);
  return {out};
}

void DenseKernel(std::span<const Tensor> inputs, std::span<Tensor> outputs, const ir::Attrs&) {
  const Tensor& data = inputs[0];
  const Tensor& weight = inputs[1];
  const Tensor& out = outputs[0];
  const int64_t units = weight->shape()[0];
  const int64_t k = weight->shape()[1];
  const int64_t rows = ShapeNumel(std::span(data->shape()).first(data->shape().size() - 1));
  DispatchFloat(data->dtype(), "nn.dense", [&](auto in_tag) {
    using T = decltype(in_tag);
    DispatchFloat(out->dtype(), "nn.dense", [&](auto out_tag) {
      using Out = decltype(out_tag);
      MatMulTransposedB(data->data<T>(), weight->data<T>(), out->data<Out>(), rows, units, k);
    });
  });
}

// The batch size of batch_matmul's result: equal sizes, or one side 1
// (broadcast). Any against 1 stays Any; Any against d > 1 is d, checked at
// run time.
Dim BroadcastBatch(Dim x, Dim y) {
  if (x.is_any() && y.is_any()) return Dim::Any();
  if (x.is_any()) return y.value() == 1 ? Dim::Any() : y;
  if (y.is_any()) return x.value() == 1 ? Dim::Any() : x;
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

std::vector<Shape> BatchMatMulShapeFunc(std::span<const Shape> input_shapes, vm::TensorArgs,
                                        const ir::Attrs& attrs) {
  const Shape& x = input_shapes[0];
  const Shape& y = input_shapes[1];
  const MatMulDims dims = BatchMatMulDims(std::vector<Dim>(x.begin(), x.end()),
                                          std::vector<Dim>(y.begin(), y.end()), attrs);
  CheckRuntimeReduction(dims.k_of_x.value(), dims.k_of_y.value(), "nn.batch_matmul", x, y);
  if (x[0] != y[0] && x[0] != 1 && y[0] != 1) {
    throw Error("nn.batch_matmul: batch dimensions differ at run time for shapes " +
                ShapeToString(x) + " and " + ShapeToString(y));
  }
  return {Shape{x[0] == 1 ? y[0] : x[0], dims.m.value(), dims.n.value()}};
}

void BatchMatMulKernel(std::span<const Tensor> inputs, std::span<Tensor> outputs,
                       const ir::Attrs& attrs) {
  const Tensor& x = inputs[0];
  const Tensor& y = inputs[1];
  const Tensor& out = outputs[0];
  const bool transpose_a = attrs.GetBool("transpose_a");
  const bool transpose_b = attrs.GetBool("transpose_b");
  const int64_t batch = out->shape()[0];
  const int64_t m = out->shape()[1];
  const int64_t n = out->shape()[2];
  const int64_t k = transpose_a ? x->shape()[1] : x->shape()[2];
  // A batch of size 1 is broadcast: every output batch reads its only matrix.
  const int64_t x_step = x->shape()[0] == 1 ? 0 : m * k;
  const int64_t y_step = y->shape()[0] == 1 ? 0 : n * k;
  DispatchFloat(x->dtype(), "nn.batch_matmul", [&](auto in_tag) {
    using T = decltype(in_tag);
    DispatchFloat(out->dtype(), "nn.batch_matmul", [&](auto out_tag) {
      using Out = decltype(out_tag);
      // Operands not already in the (m x k) / (n x k) layout are packed.
      std::vector<T> a_packed(transpose_a ? m * k : 0);
      std::vector<T> b_packed(transpose_b ? 0 : n * k);
      for (int64_t b = 0; b < batch; ++b) {
        const T* a = x->data<T>() + b * x_step;
        const T* bt = y->data<T>() + b * y_step;
        if (transpose_a) {
          Transpose(a, k, m, a_packed.data());
          a = a_packed.data();
        }
        if (!transpose_b) {
          Transpose(bt, k, n, b_packed.data());
          bt = b_packed.data();
        }
        MatMulTransposedB(a, bt, out->data<Out>() + b * m * n, m, n, k);
      }
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

// The run-time half of RelateAxisParameter.
void CheckAxisParameter(const Shape& data, const Shape& param, int64_t axis, const std::string& op,
                        const std::string& what) {
  if (param[0] != data[axis]) {
    throw Error(op + ": " + what + " shape " + ShapeToString(param) + " does not match axis " +
                std::to_string(axis) + " of data shape " + ShapeToString(data));
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

std::vector<Shape> BiasAddShapeFunc(std::span<const Shape> input_shapes, vm::TensorArgs,
                                    const ir::Attrs& attrs) {
  const Shape& data = input_shapes[0];
  const int64_t axis = AxisAttr(attrs, static_cast<int64_t>(data.size()), "nn.bias_add");
  CheckAxisParameter(data, input_shapes[1], axis, "nn.bias_add", "bias");
  return {data};
}

void BiasAddKernel(std::span<const Tensor> inputs, std::span<Tensor> outputs,
                   const ir::Attrs& attrs) {
  const Tensor& data = inputs[0];
  const int64_t axis = AxisAttr(attrs, data->ndim(), "nn.bias_add");
  // bias viewed as (C, 1, ..., 1) broadcasts along the axes after `axis`.
  Shape bias_shape(data->ndim() - axis, 1);
  bias_shape[0] = inputs[1]->shape()[0];
  const Tensor bias = inputs[1]->View(bias_shape);
  DispatchDType(data->dtype(), [&](auto tag) {
    using T = decltype(tag);
    BroadcastLoop<T, T, T>(outputs[0], {data, bias}, [](auto a, auto b) { return a + b; });
  });
}

// A tensor seen around `axis` as (outer, extent, inner): the line of elements
// along the axis for (o, i) starts at o * extent * inner + i, with stride inner.
struct AxisLines {
  int64_t outer = 1;
  int64_t extent = 1;
  int64_t inner = 1;
};

AxisLines SplitAtAxis(const Shape& shape, int64_t axis) {
  AxisLines lines;
  for (int64_t d = 0; d < axis; ++d) lines.outer *= shape[d];
  lines.extent = shape[axis];
  for (size_t d = axis + 1; d < shape.size(); ++d) lines.inner *= shape[d];
  return lines;
}

// Calls fn(start) for the start offset of every line along the axis.
template <typename Fn>
void ForEachLine(const AxisLines& lines, const Fn& fn) {
  for (int64_t o = 0; o < lines.outer; ++o) {
    for (int64_t i = 0; i < lines.inner; ++i) fn(o * lines.extent * lines.inner + i);
  }
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

// One pass keeps the running maximum and the sum of exp(x - max), rescaling
// the sum whenever the maximum grows (online softmax), so no exp overflows;
// a second pass normalises.
template <typename T>
void SoftmaxLine(const T* in, T* out, int64_t n, int64_t stride) {
  using A = ComputeType<T>;
  A max = -std::numeric_limits<A>::infinity();
  A sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    const A x = LoadElement(in[i * stride]);
    if (x > max) {
      sum = sum * std::exp(max - x) + 1;
      max = x;
    } else {
      sum += std::exp(x - max);
    }
  }
  const A scale = 1 / sum;
  for (int64_t i = 0; i < n; ++i) {
    out[i * stride] = ConvertElement<T>(std::exp(LoadElement(in[i * stride]) - max) * scale);
  }
}

void SoftmaxKernel(std::span<const Tensor> inputs, std::span<Tensor> outputs,
                   const ir::Attrs& attrs) {
  const Tensor& data = inputs[0];
  const AxisLines lines = SplitAtAxis(data->shape(), AxisAttr(attrs, data->ndim(), "nn.softmax"));
  DispatchFloat(data->dtype(), "nn.softmax", [&](auto tag) {
    using T = decltype(tag);
    const T* in = data->data<T>();
    T* out = outputs[0]->data<T>();
    ForEachLine(lines, [&](int64_t start) {
      SoftmaxLine(in + start, out + start, lines.extent, lines.inner);
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

std::vector<Shape> LayerNormShapeFunc(std::span<const Shape> input_shapes, vm::TensorArgs,
                                      const ir::Attrs& attrs) {
  const Shape& data = input_shapes[0];
  const int64_t axis = AxisAttr(attrs, static_cast<int64_t>(data.size()), "nn.layer_norm");
  CheckAxisParameter(data, input_shapes[1], axis, "nn.layer_norm", "gamma");
  CheckAxisParameter(data, input_shapes[2], axis, "nn.layer_norm", "beta");
  return {data};
}

struct LayerNormParams {
  double epsilon;
  bool center;
  bool scale;
};

// One pass gathers the statistics, a second normalises. The sums are taken
// in double about a shift (the first element), so that E[x^2] - E[x]^2 does
// not cancel when the mean is large against the spread.
template <typename T>
void LayerNormLine(const T* in, const T* gamma, const T* beta, T* out, int64_t n, int64_t stride,
                   const LayerNormParams& params) {
  using A = ComputeType<T>;
  if (n == 0) return;
  const double shift = LoadElement(in[0]);
  double sum = 0;
  double sum_squares = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double centered = static_cast<double>(LoadElement(in[i * stride])) - shift;
    sum += centered;
    sum_squares += centered * centered;
  }
  const double mean_offset = sum / static_cast<double>(n);
  const double variance =
      std::max(0.0, sum_squares / static_cast<double>(n) - mean_offset * mean_offset);
  const A mean = static_cast<A>(shift + mean_offset);
  const A inv_std = static_cast<A>(1 / std::sqrt(variance + params.epsilon));
  for (int64_t i = 0; i < n; ++i) {
    A y = (LoadElement(in[i * stride]) - mean) * inv_std;
    if (params.scale) y *= LoadElement(gamma[i]);
    if (params.center) y += LoadElement(beta[i]);
    out[i * stride] = ConvertElement<T>(y);
  }
}

void LayerNormKernel(std::span<const Tensor> inputs, std::span<Tensor> outputs,
                     const ir::Attrs& attrs) {
  const Tensor& data = inputs[0];
  const AxisLines lines =
      SplitAtAxis(data->shape(), AxisAttr(attrs, data->ndim(), "nn.layer_norm"));
  const LayerNormParams params{attrs.GetFloat("epsilon"), attrs.GetBool("center"),
                               attrs.GetBool("scale")};
  DispatchFloat(data->dtype(), "nn.layer_norm", [&](auto tag) {
    using T = decltype(tag);
    const T* in = data->data<T>();
    const T* gamma = inputs[1]->data<T>();
    const T* beta = inputs[2]->data<T>();
    T* out = outputs[0]->data<T>();
    ForEachLine(lines, [&](int64_t start) {
      LayerNormLine(in + start, gamma, beta, out + start, lines.extent, lines.inner, params);
    });
  });
}

OpDef& RegisterNnOp(OpRegistry& registry, const std::string& name, std::string description,
                    int num_inputs, std::vector<AttrSpec> attrs, OpPattern pattern) {
  OpDef& def = registry.Register(name);
  def.description = std::move(description);
  def.min_inputs = num_inputs;
  def.max_inputs = num_inputs;
  def.attrs = std::move(attrs);
  def.shape_mode = ShapeFuncMode::kDataIndependent;
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
  dense.shape_func = DenseShapeFunc;
  dense.kernel = DenseKernel;

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
  batch_matmul.shape_func = BatchMatMulShapeFunc;
  batch_matmul.kernel = BatchMatMulKernel;

  OpDef& bias_add =
      RegisterNnOp(registry, "nn.bias_add",
                   "Adds a 1-D bias along `axis` of data (broadcast over the other axes).", 2,
                   {{"axis", AttrKind::kInt, int64_t{1}}}, OpPattern::kBroadcast);
  bias_add.relation = BiasAddRelation;
  bias_add.shape_func = BiasAddShapeFunc;
  bias_add.kernel = BiasAddKernel;

  OpDef& softmax = RegisterNnOp(registry, "nn.softmax",
                                "Softmax along `axis`: exp(x - max) / sum(exp(x - max)).", 1,
                                {{"axis", AttrKind::kInt, int64_t{-1}}}, OpPattern::kOpaque);
  softmax.relation = SoftmaxRelation;
  softmax.shape_func = IdentityShapeFunc;
  softmax.kernel = SoftmaxKernel;

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
  layer_norm.shape_func = LayerNormShapeFunc;
  layer_norm.kernel = LayerNormKernel;
}

}  // namespace nimble::op
