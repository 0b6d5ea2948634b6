// The runtime half of the neural-network operators: the shape functions of
// nn.dense, nn.batch_matmul, nn.bias_add, nn.softmax and nn.layer_norm, and
// the built-in kernels of the last three (dense.cc registers the matrix
// products' kernels itself).
//
// The axis ops see their data as (outer, extent, inner) around the axis. With
// inner == 1 every line along the axis is a contiguous row; otherwise a block
// of neighbouring lines is processed together, so the inner loops still run
// over contiguous memory (one lane per line) and nothing is transposed.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "nimble/vm/error.h"
#include "nimble/vm/kernels/element.h"
#include "nimble/vm/kernels/op_kernel.h"
#include "nimble/vm/kernels/shape_util.h"
#include "nimble/vm/kernels/vector_math.h"
#include "nimble/vm/thread_pool.h"

namespace nimble::vm {
namespace {

// ---------------------------------------------------------------------------
// Shape functions

void CheckRuntimeReduction(int64_t lhs, int64_t rhs, const std::string& op, const Shape& lhs_shape,
                           const Shape& rhs_shape) {
  if (lhs != rhs) {
    throw Error(op + ": reduction dimensions differ at run time: " + std::to_string(lhs) + " vs " +
                std::to_string(rhs) + " for shapes " + ShapeToString(lhs_shape) + " and " +
                ShapeToString(rhs_shape));
  }
}

// The type relations check ranks; a shape function reached directly through
// the kernel ABI checks them again rather than index past a shape.
void CheckRank(const Shape& shape, size_t rank, const std::string& what) {
  if (shape.size() != rank) {
    throw Error(what + " must have rank " + std::to_string(rank) + ", got shape " +
                ShapeToString(shape));
  }
}

std::vector<Shape> DenseShapeFunc(std::span<const Shape> input_shapes, TensorArgs,
                                  const Attrs& attrs) {
  const Shape& data = input_shapes[0];
  const Shape& weight = input_shapes[1];
  if (data.empty()) throw Error("data must have rank >= 1, got shape ()");
  CheckRank(weight, 2, "weight");
  CheckRuntimeReduction(data.back(), weight[1], "nn.dense", data, weight);
  if (!attrs.IsNone("units") && attrs.GetInt("units") != weight[0]) {
    throw Error("nn.dense: units=" + std::to_string(attrs.GetInt("units")) +
                " does not match weight shape " + ShapeToString(weight));
  }
  Shape out(data.begin(), data.end() - 1);
  out.push_back(weight[0]);
  return {out};
}

std::vector<Shape> PackedDenseShapeFunc(std::span<const Shape> input_shapes, TensorArgs,
                                        const Attrs&) {
  const Shape& data = input_shapes[0];
  const Shape& weight = input_shapes[1];
  if (data.empty()) throw Error("data must have rank >= 1, got shape ()");
  CheckRank(weight, 3, "weight");
  CheckRuntimeReduction(data.back(), weight[1], "nn.contrib_dense_pack", data, weight);
  Shape out(data.begin(), data.end() - 1);
  out.push_back(weight[0] * weight[2]);
  if (input_shapes.size() > 2 && input_shapes[2] != Shape{out.back()}) {
    throw Error("nn.contrib_dense_pack: bias must have shape " + ShapeToString(Shape{out.back()}) +
                ", got " + ShapeToString(input_shapes[2]));
  }
  return {out};
}

std::vector<Shape> BatchMatMulShapeFunc(std::span<const Shape> input_shapes, TensorArgs,
                                        const Attrs& attrs) {
  const Shape& x = input_shapes[0];
  const Shape& y = input_shapes[1];
  CheckRank(x, 3, "x");
  CheckRank(y, 3, "y");
  const bool transpose_a = attrs.GetBool("transpose_a");
  const bool transpose_b = attrs.GetBool("transpose_b");
  const int64_t m = transpose_a ? x[2] : x[1];
  const int64_t n = transpose_b ? y[1] : y[2];
  CheckRuntimeReduction(transpose_a ? x[1] : x[2], transpose_b ? y[2] : y[1], "nn.batch_matmul", x,
                        y);
  if (x[0] != y[0] && x[0] != 1 && y[0] != 1) {
    throw Error("nn.batch_matmul: batch dimensions differ at run time for shapes " +
                ShapeToString(x) + " and " + ShapeToString(y));
  }
  return {Shape{x[0] == 1 ? y[0] : x[0], m, n}};
}

int64_t AxisAttr(const Attrs& attrs, int64_t ndim, const std::string& op) {
  return NormalizeAxis(attrs.GetInt("axis"), ndim, op);
}

// A 1-D parameter (bias, gamma, beta) must be as long as data's `axis`.
void CheckAxisParameter(const Shape& data, const Shape& param, int64_t axis, const std::string& op,
                        const std::string& what) {
  if (param.size() != 1 || param[0] != data[axis]) {
    throw Error(op + ": " + what + " shape " + ShapeToString(param) + " does not match axis " +
                std::to_string(axis) + " of data shape " + ShapeToString(data));
  }
}

// The shape function of an op whose output has data's shape and whose inputs
// after data are 1-D parameters along `axis`, named `params`.
ShapeFunction AxisParameterShapeFunc(std::string op, std::vector<std::string> params) {
  return [op, params](std::span<const Shape> input_shapes, TensorArgs, const Attrs& attrs) {
    const Shape& data = input_shapes[0];
    const int64_t axis = AxisAttr(attrs, static_cast<int64_t>(data.size()), op);
    for (size_t i = 0; i < params.size(); ++i) {
      CheckAxisParameter(data, input_shapes[i + 1], axis, op, params[i]);
    }
    return std::vector<Shape>{data};
  };
}

// ---------------------------------------------------------------------------
// Loops shared by the kernels

// Below this many elements of work a chunk is not worth handing to a thread.
constexpr int64_t kMinChunkElements = 32 * 1024;
// Lines processed together when the axis is not the innermost dimension:
// enough for long vector loops, few enough for the per-line statistics to
// stay in L1.
constexpr int64_t kLineBlock = 512;
// Independent partial results per reduction, so that the reduction loops
// vectorise without reassociating floating-point operations.
constexpr int64_t kLanes = 8;

// The sum of term(i) for i < n, in Acc.
template <typename Acc, typename Fn>
Acc SumOf(int64_t n, const Fn& term) {
  Acc partial[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int64_t lane = 0; lane < kLanes; ++lane) partial[lane] += term(i + lane);
  }
  Acc sum = 0;
  for (int64_t lane = 0; lane < kLanes; ++lane) sum += partial[lane];
  for (; i < n; ++i) sum += term(i);
  return sum;
}

// The largest of term(i) for i < n; NaNs are skipped (they reach the output
// through the op's later passes).
template <typename Acc, typename Fn>
Acc MaxOf(int64_t n, const Fn& term) {
  Acc partial[kLanes];
  std::fill_n(partial, kLanes, -std::numeric_limits<Acc>::infinity());
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int64_t lane = 0; lane < kLanes; ++lane) {
      const Acc value = term(i + lane);
      partial[lane] = value > partial[lane] ? value : partial[lane];
    }
  }
  Acc max = -std::numeric_limits<Acc>::infinity();
  for (int64_t lane = 0; lane < kLanes; ++lane) max = partial[lane] > max ? partial[lane] : max;
  for (; i < n; ++i) max = term(i) > max ? term(i) : max;
  return max;
}

// A tensor seen around `axis` as (outer, extent, inner): the line of elements
// along the axis for (o, i) starts at o * extent * inner + i, with stride inner.
struct AxisLines {
  int64_t outer = 1;
  int64_t extent = 1;
  int64_t inner = 1;
};

AxisLines SplitAtAxis(std::span<const int64_t> shape, int64_t axis) {
  AxisLines lines;
  for (int64_t d = 0; d < axis; ++d) lines.outer *= shape[d];
  lines.extent = shape[axis];
  for (size_t d = axis + 1; d < shape.size(); ++d) lines.inner *= shape[d];
  return lines;
}

// Calls row(start) for each contiguous line (inner == 1), or block(start,
// count) for blocks of `count` neighbouring lines of stride inner, over the
// thread pool when there is enough work.
template <typename RowFn, typename BlockFn>
void ForEachLine(const AxisLines& lines, const RowFn& row, const BlockFn& block) {
  if (lines.extent == 0) return;
  const int64_t grain = std::max<int64_t>(1, kMinChunkElements / lines.extent);
  ParallelFor(0, lines.outer * lines.inner, grain, [&](int64_t begin, int64_t end) {
    if (lines.inner == 1) {
      for (int64_t line = begin; line < end; ++line) row(line * lines.extent);
      return;
    }
    // Blocks never straddle an outer index, where the lines' starts jump.
    for (int64_t line = begin; line < end;) {
      const int64_t o = line / lines.inner;
      const int64_t i = line % lines.inner;
      const int64_t count = std::min({end - line, lines.inner - i, kLineBlock});
      block(o * lines.extent * lines.inner + i, count);
      line += count;
    }
  });
}

// The kernels' guard against a caller that does not follow the shape
// function: a wrong argument count or output fails instead of reading or
// writing out of bounds.
void CheckSameAsData(TensorArgs inputs, TensorArgs outputs, size_t num_inputs,
                     const std::string& op) {
  if (inputs.size() != num_inputs || outputs.size() != 1) {
    throw Error(op + ": expected " + std::to_string(num_inputs) + " inputs and 1 output, got " +
                std::to_string(inputs.size()) + " and " + std::to_string(outputs.size()));
  }
  const DLTensor& data = *inputs[0];
  for (size_t i = 0; i < inputs.size() + 1; ++i) {
    const DLTensor& arg = i < inputs.size() ? *inputs[i] : *outputs[0];
    if (DTypeOf(arg) != DTypeOf(data)) {
      throw Error(op + ": argument " + std::to_string(i) + " is " + DTypeOf(arg).name() +
                  " but data is " + DTypeOf(data).name());
    }
  }
  const std::span<const int64_t> out_shape = ShapeOf(*outputs[0]);
  if (!std::ranges::equal(out_shape, ShapeOf(data))) {
    throw Error(op + ": output shape " + ShapeToString(Shape(out_shape.begin(), out_shape.end())) +
                " differs from data shape " +
                ShapeToString(Shape(data.shape, data.shape + data.ndim)));
  }
}

// The data's lines around the op's axis, after checking that every parameter
// input matches that axis.
AxisLines LinesOf(TensorArgs inputs, const Attrs& attrs, const std::string& op,
                  std::initializer_list<const char*> params) {
  const DLTensor& data = *inputs[0];
  const int64_t axis = AxisAttr(attrs, data.ndim, op);
  const Shape data_shape(data.shape, data.shape + data.ndim);
  size_t index = 1;
  for (const char* what : params) {
    const std::span<const int64_t> param = ShapeOf(*inputs[index++]);
    CheckAxisParameter(data_shape, Shape(param.begin(), param.end()), axis, op, what);
  }
  return SplitAtAxis(ShapeOf(data), axis);
}

// Calls fn(T{}) for `dtype` when it is in kAccepted.
template <DTypeClass kAccepted, typename Fn>
void DispatchAccepted(DataType dtype, const Fn& fn) {
  DispatchDType(dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (ElementInClass<T>(kAccepted)) {
      fn(tag);
    } else {
      ThrowUnsupportedDType(dtype);
    }
  });
}

// ---------------------------------------------------------------------------
// nn.bias_add

template <typename T>
T AddElements(T a, T b) {
  return ConvertElement<T>(Wrapping(std::plus<>(), LoadElement(a), LoadElement(b)));
}

void BiasAddKernel(TensorArgs inputs, TensorArgs outputs, const Attrs& attrs) {
  CheckSameAsData(inputs, outputs, 2, "nn.bias_add");
  const AxisLines lines = LinesOf(inputs, attrs, "nn.bias_add", {"bias"});
  DispatchAccepted<DTypeClass::kAny>(DTypeOf(*inputs[0]), [&](auto tag) {
    using T = decltype(tag);
    const T* data = DataOf<const T>(*inputs[0]);
    const T* bias = DataOf<const T>(*inputs[1]);
    T* out = DataOf<T>(*outputs[0]);
    ForEachLine(
        lines,
        [&](int64_t start) {
          for (int64_t c = 0; c < lines.extent; ++c) {
            out[start + c] = AddElements(data[start + c], bias[c]);
          }
        },
        [&](int64_t start, int64_t count) {
          for (int64_t c = 0; c < lines.extent; ++c) {
            const int64_t offset = start + c * lines.inner;
            for (int64_t i = 0; i < count; ++i) {
              out[offset + i] = AddElements(data[offset + i], bias[c]);
            }
          }
        });
  });
}

// ---------------------------------------------------------------------------
// nn.softmax

// exp(x - max) <= 1: vector_math's exponential for float, which vectorises
// (std::exp does not), libm's for double.
template <typename A>
A ExpShifted(A x) {
  if constexpr (std::is_same_v<A, float>) {
    return vector_math::ExpOfNonPositive(x);
  } else {
    return std::exp(x);
  }
}

// Three passes per line: the maximum, exp(x - max) and its sum, the scaling
// by 1 / sum. exp(x - max) <= 1, so nothing overflows. When T is its own
// compute type the second pass stores the exponentials in the output;
// float16 recomputes them in the third, rather than round them twice.
void SoftmaxKernel(TensorArgs inputs, TensorArgs outputs, const Attrs& attrs) {
  CheckSameAsData(inputs, outputs, 1, "nn.softmax");
  const AxisLines lines = LinesOf(inputs, attrs, "nn.softmax", {});
  DispatchAccepted<DTypeClass::kFloat>(DTypeOf(*inputs[0]), [&](auto tag) {
    using T = decltype(tag);
    using A = ComputeType<T>;
    constexpr bool kStoreExp = std::is_same_v<T, A>;
    const T* in = DataOf<const T>(*inputs[0]);
    T* out = DataOf<T>(*outputs[0]);
    const int64_t n = lines.extent;
    ForEachLine(
        lines,
        [&](int64_t start) {
          const T* x = in + start;
          T* y = out + start;
          const A max = MaxOf<A>(n, [&](int64_t i) { return LoadElement(x[i]); });
          const A sum = SumOf<A>(n, [&](int64_t i) {
            const A e = ExpShifted(LoadElement(x[i]) - max);
            if constexpr (kStoreExp) y[i] = e;
            return e;
          });
          const A scale = 1 / sum;
          for (int64_t i = 0; i < n; ++i) {
            if constexpr (kStoreExp) {
              y[i] *= scale;
            } else {
              y[i] = ConvertElement<T>(ExpShifted(LoadElement(x[i]) - max) * scale);
            }
          }
        },
        [&](int64_t start, int64_t count) {
          A max[kLineBlock];
          A sum[kLineBlock];
          std::fill_n(max, count, -std::numeric_limits<A>::infinity());
          std::fill_n(sum, count, A(0));
          for (int64_t k = 0; k < n; ++k) {
            const T* x = in + start + k * lines.inner;
            for (int64_t i = 0; i < count; ++i) {
              const A value = LoadElement(x[i]);
              max[i] = value > max[i] ? value : max[i];
            }
          }
          for (int64_t k = 0; k < n; ++k) {
            const T* x = in + start + k * lines.inner;
            T* y = out + start + k * lines.inner;
            for (int64_t i = 0; i < count; ++i) {
              const A e = ExpShifted(LoadElement(x[i]) - max[i]);
              if constexpr (kStoreExp) y[i] = e;
              sum[i] += e;
            }
          }
          for (int64_t i = 0; i < count; ++i) sum[i] = 1 / sum[i];
          for (int64_t k = 0; k < n; ++k) {
            const T* x = in + start + k * lines.inner;
            T* y = out + start + k * lines.inner;
            for (int64_t i = 0; i < count; ++i) {
              if constexpr (kStoreExp) {
                y[i] *= sum[i];
              } else {
                y[i] = ConvertElement<T>(ExpShifted(LoadElement(x[i]) - max[i]) * sum[i]);
              }
            }
          }
        });
  });
}

// ---------------------------------------------------------------------------
// nn.layer_norm

// The statistics of a line are taken in double, in two passes (the mean, then
// the squared deviations from it), so that a mean large against the spread
// does not cancel. The normalisation runs in the compute type, with the mean
// split into its rounding (high) and the remainder (low), so that x - mean
// stays precise.
template <typename A>
struct Normalization {
  A mean_high;
  A mean_low;
  A inv_std;
};

template <typename A>
Normalization<A> NormalizationOf(double mean, double sum_squares, int64_t n, double epsilon) {
  const A high = static_cast<A>(mean);
  return {high, static_cast<A>(mean - static_cast<double>(high)),
          static_cast<A>(1 / std::sqrt(sum_squares / static_cast<double>(n) + epsilon))};
}

template <typename A>
A Normalize(A x, A mean_high, A mean_low, A inv_std, A gamma, A beta) {
  return ((x - mean_high) - mean_low) * inv_std * gamma + beta;
}

void LayerNormKernel(TensorArgs inputs, TensorArgs outputs, const Attrs& attrs) {
  CheckSameAsData(inputs, outputs, 3, "nn.layer_norm");
  const AxisLines lines = LinesOf(inputs, attrs, "nn.layer_norm", {"gamma", "beta"});
  const double epsilon = attrs.GetFloat("epsilon");
  const bool center = attrs.GetBool("center");
  const bool scale = attrs.GetBool("scale");
  DispatchAccepted<DTypeClass::kFloat>(DTypeOf(*inputs[0]), [&](auto tag) {
    using T = decltype(tag);
    using A = ComputeType<T>;
    const T* in = DataOf<const T>(*inputs[0]);
    T* out = DataOf<T>(*outputs[0]);
    const int64_t n = lines.extent;
    // gamma and beta in the compute type, 1 and 0 when scale or center is
    // off, so that the normalisation loops carry no branches.
    std::vector<A> gamma(n, A(1));
    std::vector<A> beta(n, A(0));
    for (int64_t k = 0; k < n; ++k) {
      if (scale) gamma[k] = LoadElement(DataOf<const T>(*inputs[1])[k]);
      if (center) beta[k] = LoadElement(DataOf<const T>(*inputs[2])[k]);
    }
    ForEachLine(
        lines,
        [&](int64_t start) {
          const T* x = in + start;
          T* y = out + start;
          const double mean =
              SumOf<double>(n, [&](int64_t i) { return static_cast<double>(LoadElement(x[i])); }) /
              static_cast<double>(n);
          const double sum_squares = SumOf<double>(n, [&](int64_t i) {
            const double d = static_cast<double>(LoadElement(x[i])) - mean;
            return d * d;
          });
          const auto [high, low, inv_std] = NormalizationOf<A>(mean, sum_squares, n, epsilon);
          for (int64_t i = 0; i < n; ++i) {
            y[i] = ConvertElement<T>(
                Normalize(LoadElement(x[i]), high, low, inv_std, gamma[i], beta[i]));
          }
        },
        [&](int64_t start, int64_t count) {
          double mean[kLineBlock];
          double sum_squares[kLineBlock];
          A high[kLineBlock];
          A low[kLineBlock];
          A inv_std[kLineBlock];
          std::fill_n(mean, count, 0.0);
          std::fill_n(sum_squares, count, 0.0);
          for (int64_t k = 0; k < n; ++k) {
            const T* x = in + start + k * lines.inner;
            for (int64_t i = 0; i < count; ++i) mean[i] += static_cast<double>(LoadElement(x[i]));
          }
          for (int64_t i = 0; i < count; ++i) mean[i] /= static_cast<double>(n);
          for (int64_t k = 0; k < n; ++k) {
            const T* x = in + start + k * lines.inner;
            for (int64_t i = 0; i < count; ++i) {
              const double d = static_cast<double>(LoadElement(x[i])) - mean[i];
              sum_squares[i] += d * d;
            }
          }
          for (int64_t i = 0; i < count; ++i) {
            const Normalization<A> norm = NormalizationOf<A>(mean[i], sum_squares[i], n, epsilon);
            high[i] = norm.mean_high;
            low[i] = norm.mean_low;
            inv_std[i] = norm.inv_std;
          }
          for (int64_t k = 0; k < n; ++k) {
            const T* x = in + start + k * lines.inner;
            T* y = out + start + k * lines.inner;
            for (int64_t i = 0; i < count; ++i) {
              y[i] = ConvertElement<T>(
                  Normalize(LoadElement(x[i]), high[i], low[i], inv_std[i], gamma[k], beta[k]));
            }
          }
        });
  });
}

}  // namespace

void RegisterNnOpKernels(OpKernelRegistry& registry) {
  // The matrix products' kernels are dense.cc's, registered under the op names.
  OpKernelDef& dense = registry.Register("nn.dense");
  dense.shape_func = DenseShapeFunc;
  dense.shape_rule = ShapeRule::kReplacesLastDim;
  OpKernelDef& packed_dense = registry.Register("nn.contrib_dense_pack");
  packed_dense.shape_func = PackedDenseShapeFunc;
  packed_dense.shape_rule = ShapeRule::kReplacesLastDim;
  registry.Register("nn.batch_matmul").shape_func = BatchMatMulShapeFunc;

  // Their outputs have their data's shape.
  OpKernelDef& bias_add = registry.Register("nn.bias_add");
  bias_add.shape_func = AxisParameterShapeFunc("nn.bias_add", {"bias"});
  bias_add.shape_rule = ShapeRule::kSameAsFirstInput;
  bias_add.kernel = BiasAddKernel;

  OpKernelDef& softmax = registry.Register("nn.softmax");
  softmax.shape_func = AxisParameterShapeFunc("nn.softmax", {});
  softmax.shape_rule = ShapeRule::kSameAsFirstInput;
  softmax.kernel = SoftmaxKernel;

  OpKernelDef& layer_norm = registry.Register("nn.layer_norm");
  layer_norm.shape_func = AxisParameterShapeFunc("nn.layer_norm", {"gamma", "beta"});
  layer_norm.shape_rule = ShapeRule::kSameAsFirstInput;
  layer_norm.kernel = LayerNormKernel;
}

}  // namespace nimble::vm
