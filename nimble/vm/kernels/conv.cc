// The runtime half of the convolution and pooling operators: the shape
// functions and built-in kernels of nn.conv1d, nn.conv2d, nn.max_pool1d,
// nn.max_pool2d, nn.avg_pool1d and nn.avg_pool2d (window geometry: conv.h).
//
// Both kernels see 1-D ops as 2-D ones of height 1 and run one output plane
// (a batch element and a channel) per task on the thread pool.
//   - Convolution is direct: for each input channel of the group and each
//     kernel tap, the tap's weight times a row of the input is added to a
//     row of the output plane, over the output columns whose input column is
//     inside the input (so the padding costs nothing). With stride 1 that
//     inner loop reads and writes contiguous memory and vectorises; the
//     output plane's rows stay in cache across the taps. Sums are in the
//     compute type (float for float16 and float32).
//   - Pooling visits each output element's window, its rows clipped to the
//     input, the column range of each output column computed once per call.
//     Max pooling skips padding and NaNs (a window of neither is -inf), as
//     the `max` reduction does; avg pooling divides by the taps inside the
//     input, or with count_include_pad inside the input and its padding (an
//     empty window gives 0).
#include "nimble/vm/kernels/conv.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "nimble/vm/error.h"
#include "nimble/vm/kernels/element.h"
#include "nimble/vm/kernels/op_kernel.h"
#include "nimble/vm/thread_pool.h"

namespace nimble::vm {

namespace {

// Floor division for a positive divisor.
int64_t FloorDiv(int64_t a, int64_t b) {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}

std::vector<int64_t> PerAxis(const Attrs& attrs, const std::string& name, size_t rank,
                             const std::string& op, int64_t minimum) {
  const std::vector<int64_t>& values = attrs.GetIntList(name);
  if (values.size() != 1 && values.size() != rank) {
    throw Error(op + ": " + name + " must have 1 or " + std::to_string(rank) + " values, got " +
                AttrValueToString(values));
  }
  for (int64_t value : values) {
    if (value < minimum) {
      throw Error(op + ": " + name + " must be >= " + std::to_string(minimum) + ", got " +
                  AttrValueToString(values));
    }
  }
  return values.size() == rank ? values : std::vector<int64_t>(rank, values[0]);
}

}  // namespace

std::vector<WindowAxis> WindowAxes(const Attrs& attrs, std::span<const int64_t> kernel,
                                   const std::string& op) {
  const size_t rank = kernel.size();
  const std::vector<int64_t> strides = PerAxis(attrs, "strides", rank, op, 1);
  const std::vector<int64_t> dilation = PerAxis(attrs, "dilation", rank, op, 1);
  const std::vector<int64_t>& padding = attrs.GetIntList("padding");
  if (padding.size() != 1 && padding.size() != rank && padding.size() != 2 * rank) {
    throw Error(op + ": padding must have 1, " + std::to_string(rank) + " or " +
                std::to_string(2 * rank) + " values (all begins, then all ends), got " +
                AttrValueToString(padding));
  }
  for (int64_t pad : padding) {
    if (pad < 0) throw Error(op + ": padding must be >= 0, got " + AttrValueToString(padding));
  }
  std::vector<WindowAxis> axes(rank);
  for (size_t d = 0; d < rank; ++d) {
    WindowAxis& axis = axes[d];
    axis.kernel = kernel[d];
    axis.stride = strides[d];
    axis.dilation = dilation[d];
    axis.pad_begin = padding.size() == 1 ? padding[0] : padding[d];
    axis.pad_end = padding.size() == 1      ? padding[0]
                   : padding.size() == rank ? padding[d]
                                            : padding[rank + d];
  }
  return axes;
}

std::vector<int64_t> PoolSize(const Attrs& attrs, size_t rank, const std::string& op) {
  return PerAxis(attrs, "pool_size", rank, op, 1);
}

int64_t WindowCount(int64_t in, const WindowAxis& axis, bool ceil_mode) {
  const int64_t span = in + axis.pad_begin + axis.pad_end - axis.Extent();
  if (span < 0) return 0;
  if (!ceil_mode) return span / axis.stride + 1;
  int64_t count = (span + axis.stride - 1) / axis.stride + 1;
  // The last window must start inside the input or its begin padding.
  if ((count - 1) * axis.stride >= in + axis.pad_begin) --count;
  return count;
}

std::string WindowMisfit(const std::string& op, size_t dim, int64_t in, const WindowAxis& axis) {
  return op + ": the window along axis " + std::to_string(dim) + " spans " +
         std::to_string(axis.Extent()) + " positions (kernel " + std::to_string(axis.kernel) +
         ", dilation " + std::to_string(axis.dilation) + ") but the input has " +
         std::to_string(in) + " plus padding " + std::to_string(axis.pad_begin) + " + " +
         std::to_string(axis.pad_end);
}

std::pair<int64_t, int64_t> TapRange(int64_t o, const WindowAxis& axis, int64_t low, int64_t high) {
  // Tap t sits at base + t * dilation; it is in range when low <= that < high.
  const int64_t base = o * axis.stride - axis.pad_begin;
  const int64_t first = std::max<int64_t>(0, -FloorDiv(base - low, axis.dilation));
  const int64_t last = std::min(axis.kernel, FloorDiv(high - 1 - base, axis.dilation) + 1);
  return {first, last};
}

int64_t TapsWithin(int64_t o, const WindowAxis& axis, int64_t low, int64_t high) {
  const auto [first, last] = TapRange(o, axis, low, high);
  return std::max<int64_t>(0, last - first);
}

namespace {

// ---------------------------------------------------------------------------
// Shape functions

void CheckRank(const Shape& shape, size_t rank, const std::string& op, const std::string& what) {
  if (shape.size() != rank) {
    throw Error(op + ": " + what + " must have rank " + std::to_string(rank) + ", got shape " +
                ShapeToString(shape));
  }
}

// The output spatial sizes of `data` (N, C, spatial...) under `axes`.
Shape SpatialOutput(const Shape& data, const std::vector<WindowAxis>& axes, bool ceil_mode,
                    const std::string& op, const std::string& shapes) {
  Shape out;
  for (size_t d = 0; d < axes.size(); ++d) {
    const int64_t count = WindowCount(data[d + 2], axes[d], ceil_mode);
    if (count <= 0) throw Error(WindowMisfit(op, d + 2, data[d + 2], axes[d]) + " in " + shapes);
    out.push_back(count);
  }
  return out;
}

// The output shape of a convolution of `spatial` axes, after the checks the
// type relation could not make on `?` dimensions.
Shape ConvOutputShape(const Shape& data, const Shape& weight, const Attrs& attrs, size_t spatial,
                      const std::string& op) {
  CheckRank(data, spatial + 2, op, "data");
  CheckRank(weight, spatial + 2, op, "weight");
  const std::string shapes = "data " + ShapeToString(data) + " and weight " + ShapeToString(weight);
  const int64_t groups = attrs.GetInt("groups");
  if (groups < 1) throw Error(op + ": groups must be >= 1, got " + std::to_string(groups));
  if (data[1] % groups != 0) {
    throw Error(op + ": data's " + std::to_string(data[1]) +
                " channels are not divisible by groups=" + std::to_string(groups) + " in " +
                shapes);
  }
  if (weight[0] % groups != 0) {
    throw Error(op + ": weight's " + std::to_string(weight[0]) +
                " output channels are not divisible by groups=" + std::to_string(groups) + " in " +
                shapes);
  }
  if (weight[1] * groups != data[1]) {
    throw Error(op + ": weight's in-channels (" + std::to_string(weight[1]) + ") times groups (" +
                std::to_string(groups) + ") must equal data's channels (" +
                std::to_string(data[1]) + ") in " + shapes);
  }
  const std::vector<WindowAxis> axes =
      WindowAxes(attrs, std::span<const int64_t>(weight).subspan(2), op);
  Shape out = {data[0], weight[0]};
  const Shape sizes = SpatialOutput(data, axes, false, op, shapes);
  out.insert(out.end(), sizes.begin(), sizes.end());
  return out;
}

Shape PoolOutputShape(const Shape& data, const Attrs& attrs, size_t spatial,
                      const std::string& op) {
  CheckRank(data, spatial + 2, op, "data");
  const std::vector<WindowAxis> axes = WindowAxes(attrs, PoolSize(attrs, spatial, op), op);
  Shape out = {data[0], data[1]};
  const Shape sizes =
      SpatialOutput(data, axes, attrs.GetBool("ceil_mode"), op, "data " + ShapeToString(data));
  out.insert(out.end(), sizes.begin(), sizes.end());
  return out;
}

ShapeFunction ConvShapeFunc(std::string op, size_t spatial) {
  return [op, spatial](std::span<const Shape> input_shapes, TensorArgs, const Attrs& attrs) {
    return std::vector<Shape>{
        ConvOutputShape(input_shapes[0], input_shapes[1], attrs, spatial, op)};
  };
}

ShapeFunction PoolShapeFunc(std::string op, size_t spatial) {
  return [op, spatial](std::span<const Shape> input_shapes, TensorArgs, const Attrs& attrs) {
    return std::vector<Shape>{PoolOutputShape(input_shapes[0], attrs, spatial, op)};
  };
}

// ---------------------------------------------------------------------------
// Kernels

// Below this many multiply-adds (or window taps) a task is not worth handing
// to a thread.
constexpr int64_t kMinTaskWork = 64 * 1024;

Shape ShapeOfArg(const DLTensor& tensor) {
  return Shape(tensor.shape, tensor.shape + tensor.ndim);
}

// The kernels' guard against a caller that does not follow the shape
// function: wrong argument counts, dtypes or output shapes fail instead of
// reading or writing out of bounds.
void CheckArgs(TensorArgs inputs, TensorArgs outputs, const Shape& expected,
               const std::string& op) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (DTypeOf(*inputs[i]) != DTypeOf(*outputs[0])) {
      throw Error(op + ": input " + std::to_string(i) + " is " + DTypeOf(*inputs[i]).name() +
                  " but the output is " + DTypeOf(*outputs[0]).name());
    }
  }
  const Shape out = ShapeOfArg(*outputs[0]);
  if (out != expected) {
    throw Error(op + ": output shape " + ShapeToString(out) + " differs from the expected " +
                ShapeToString(expected));
  }
}

void CheckArgCounts(TensorArgs inputs, TensorArgs outputs, size_t num_inputs,
                    const std::string& op) {
  if (inputs.size() != num_inputs || outputs.size() != 1) {
    throw Error(op + ": expected " + std::to_string(num_inputs) + " inputs and 1 output, got " +
                std::to_string(inputs.size()) + " and " + std::to_string(outputs.size()));
  }
}

// A 1-D op as a 2-D one of height 1: its axes with an identity axis first.
std::vector<WindowAxis> As2D(std::vector<WindowAxis> axes) {
  if (axes.size() == 1) axes.insert(axes.begin(), WindowAxis{});
  return axes;
}

// The output positions [first, last) of `count` along `axis` whose tap `t`
// reads inside an input of `in` positions.
std::pair<int64_t, int64_t> OutputsInside(int64_t count, int64_t in, const WindowAxis& axis,
                                          int64_t t) {
  // o * stride + offset in [0, in).
  const int64_t offset = t * axis.dilation - axis.pad_begin;
  const int64_t first = std::max<int64_t>(0, -FloorDiv(offset, axis.stride));
  const int64_t last = std::min(count, FloorDiv(in - 1 - offset, axis.stride) + 1);
  return {first, std::max(first, last)};
}

void ConvKernel(TensorArgs inputs, TensorArgs outputs, const Attrs& attrs, size_t spatial,
                const std::string& op) {
  CheckArgCounts(inputs, outputs, 2, op);
  const Shape data_shape = ShapeOfArg(*inputs[0]);
  const Shape weight_shape = ShapeOfArg(*inputs[1]);
  const Shape out_shape = ConvOutputShape(data_shape, weight_shape, attrs, spatial, op);
  CheckArgs(inputs, outputs, out_shape, op);
  const std::vector<WindowAxis> axes =
      As2D(WindowAxes(attrs, std::span<const int64_t>(weight_shape).subspan(2), op));
  const WindowAxis& ah = axes[0];
  const WindowAxis& aw = axes[1];
  const int64_t batch = data_shape[0];
  const int64_t channels = data_shape[1];
  const int64_t height = spatial == 2 ? data_shape[2] : 1;
  const int64_t width = data_shape.back();
  const int64_t out_channels = weight_shape[0];
  const int64_t out_height = spatial == 2 ? out_shape[2] : 1;
  const int64_t out_width = out_shape.back();
  const int64_t groups = attrs.GetInt("groups");
  const int64_t group_in = channels / groups;
  const int64_t group_out = out_channels / groups;
  const int64_t plane = out_height * out_width;
  const int64_t taps = ah.kernel * aw.kernel;
  const int64_t work = std::max<int64_t>(1, plane * group_in * taps);
  // Each kernel column's range of output columns inside the input, once.
  std::vector<std::pair<int64_t, int64_t>> columns(aw.kernel);
  for (int64_t kw = 0; kw < aw.kernel; ++kw) {
    columns[kw] = OutputsInside(out_width, width, aw, kw);
  }
  DispatchFloat(DTypeOf(*inputs[0]), [&](auto tag) {
    using T = decltype(tag);
    using A = ComputeType<T>;
    const T* in = DataOf<const T>(*inputs[0]);
    const T* weight = DataOf<const T>(*inputs[1]);
    T* out = DataOf<T>(*outputs[0]);
    ParallelFor(0, batch * out_channels, std::max<int64_t>(1, kMinTaskWork / work),
                [&](int64_t begin, int64_t end) {
                  std::vector<A> scratch;
                  if constexpr (!std::is_same_v<T, A>) scratch.resize(plane);
                  for (int64_t task = begin; task < end; ++task) {
                    const int64_t n = task / out_channels;
                    const int64_t oc = task % out_channels;
                    const int64_t g = oc / group_out;
                    A* acc;
                    if constexpr (std::is_same_v<T, A>) {
                      acc = out + task * plane;
                    } else {
                      acc = scratch.data();
                    }
                    std::fill_n(acc, plane, A(0));
                    for (int64_t ic = 0; ic < group_in; ++ic) {
                      const T* source = in + (n * channels + g * group_in + ic) * height * width;
                      const T* taps_of = weight + (oc * group_in + ic) * taps;
                      for (int64_t kh = 0; kh < ah.kernel; ++kh) {
                        const auto [oh_first, oh_last] = OutputsInside(out_height, height, ah, kh);
                        for (int64_t oh = oh_first; oh < oh_last; ++oh) {
                          const T* row = source + ah.Position(oh, kh) * width;
                          A* acc_row = acc + oh * out_width;
                          for (int64_t kw = 0; kw < aw.kernel; ++kw) {
                            const A w = LoadElement(taps_of[kh * aw.kernel + kw]);
                            const auto [first, last] = columns[kw];
                            if (first >= last) continue;
                            if (aw.stride == 1) {
                              const T* x = row + aw.Position(first, kw);
                              A* y = acc_row + first;
                              for (int64_t i = 0; i < last - first; ++i) {
                                y[i] += w * LoadElement(x[i]);
                              }
                            } else {
                              for (int64_t ow = first; ow < last; ++ow) {
                                acc_row[ow] += w * LoadElement(row[aw.Position(ow, kw)]);
                              }
                            }
                          }
                        }
                      }
                    }
                    if constexpr (!std::is_same_v<T, A>) {
                      T* target = out + task * plane;
                      for (int64_t i = 0; i < plane; ++i) target[i] = ConvertElement<T>(acc[i]);
                    }
                  }
                });
  });
}

void PoolKernel(TensorArgs inputs, TensorArgs outputs, const Attrs& attrs, size_t spatial,
                bool is_max, const std::string& op) {
  CheckArgCounts(inputs, outputs, 1, op);
  const Shape data_shape = ShapeOfArg(*inputs[0]);
  const Shape out_shape = PoolOutputShape(data_shape, attrs, spatial, op);
  CheckArgs(inputs, outputs, out_shape, op);
  const std::vector<WindowAxis> axes = As2D(WindowAxes(attrs, PoolSize(attrs, spatial, op), op));
  const WindowAxis& ah = axes[0];
  const WindowAxis& aw = axes[1];
  const bool include_pad = !is_max && attrs.GetBool("count_include_pad");
  const int64_t planes = data_shape[0] * data_shape[1];
  const int64_t height = spatial == 2 ? data_shape[2] : 1;
  const int64_t width = data_shape.back();
  const int64_t out_height = spatial == 2 ? out_shape[2] : 1;
  const int64_t out_width = out_shape.back();
  // Each output column's taps inside the input, and its share of the
  // divisor, once.
  std::vector<std::pair<int64_t, int64_t>> columns(out_width);
  std::vector<int64_t> column_count(out_width);
  for (int64_t ow = 0; ow < out_width; ++ow) {
    columns[ow] = TapRange(ow, aw, 0, width);
    column_count[ow] = include_pad ? TapsWithin(ow, aw, -aw.pad_begin, width + aw.pad_end)
                                   : std::max<int64_t>(0, columns[ow].second - columns[ow].first);
  }
  const int64_t work = std::max<int64_t>(1, out_height * out_width * ah.kernel * aw.kernel);
  DispatchFloat(DTypeOf(*inputs[0]), [&](auto tag) {
    using T = decltype(tag);
    using A = ComputeType<T>;
    const T* in = DataOf<const T>(*inputs[0]);
    T* out = DataOf<T>(*outputs[0]);
    ParallelFor(
        0, planes, std::max<int64_t>(1, kMinTaskWork / work), [&](int64_t begin, int64_t end) {
          for (int64_t p = begin; p < end; ++p) {
            const T* source = in + p * height * width;
            T* target = out + p * out_height * out_width;
            for (int64_t oh = 0; oh < out_height; ++oh) {
              const auto [kh_first, kh_last] = TapRange(oh, ah, 0, height);
              const int64_t row_count = include_pad
                                            ? TapsWithin(oh, ah, -ah.pad_begin, height + ah.pad_end)
                                            : std::max<int64_t>(0, kh_last - kh_first);
              for (int64_t ow = 0; ow < out_width; ++ow) {
                const auto [kw_first, kw_last] = columns[ow];
                A value = is_max ? -std::numeric_limits<A>::infinity() : A(0);
                for (int64_t kh = kh_first; kh < kh_last; ++kh) {
                  const T* row = source + ah.Position(oh, kh) * width;
                  for (int64_t kw = kw_first; kw < kw_last; ++kw) {
                    const A x = LoadElement(row[aw.Position(ow, kw)]);
                    if (is_max) {
                      value = x > value ? x : value;
                    } else {
                      value += x;
                    }
                  }
                }
                if (!is_max) {
                  const int64_t count = row_count * column_count[ow];
                  value = count > 0 ? value / static_cast<A>(count) : A(0);
                }
                target[oh * out_width + ow] = ConvertElement<T>(value);
              }
            }
          }
        });
  });
}

}  // namespace

void RegisterConvOpKernels(OpKernelRegistry& registry) {
  for (size_t spatial : {size_t{1}, size_t{2}}) {
    const std::string suffix = std::to_string(spatial) + "d";
    const std::string conv = "nn.conv" + suffix;
    OpKernelDef& conv_def = registry.Register(conv);
    conv_def.shape_func = ConvShapeFunc(conv, spatial);
    conv_def.kernel = [conv, spatial](TensorArgs inputs, TensorArgs outputs, const Attrs& attrs) {
      ConvKernel(inputs, outputs, attrs, spatial, conv);
    };
    for (bool is_max : {true, false}) {
      const std::string pool = std::string(is_max ? "nn.max_pool" : "nn.avg_pool") + suffix;
      OpKernelDef& pool_def = registry.Register(pool);
      pool_def.shape_func = PoolShapeFunc(pool, spatial);
      pool_def.kernel = [pool, spatial, is_max](TensorArgs inputs, TensorArgs outputs,
                                                const Attrs& attrs) {
        PoolKernel(inputs, outputs, attrs, spatial, is_max, pool);
      };
    }
  }
}

}  // namespace nimble::vm
