// Convolution and pooling with Relay's names and attributes: nn.conv1d (data
// NCW, weight OIW), nn.conv2d (data NCHW, weight OIHW), nn.max_pool1d/2d and
// nn.avg_pool1d/2d: their type relations, reference kernels and compute
// definitions. The window geometry (attributes, output sizes, errors) is
// shared with the runtime (vm/kernels/conv.h), whose shape functions and
// built-in kernels these are the other half of (vm/kernels/conv.cc).
//
// Dimensions may be `?`: an output's spatial size is `?` where the input's
// is, and what a relation cannot check on a `?` (channels divisible by
// groups) the shape function checks at run time. Convolution is
// out-elemwise-fusable like nn.dense (its group takes an elementwise
// epilogue: a bias add, a relu), and so are the pools, as in TVM; their
// compute definitions are reductions over the window, with padding read as
// 0 (avg_pool, conv) or skipped (max_pool), and need static kernel sizes.
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "nimble/compiler/op/compute_util.h"
#include "nimble/compiler/op/op.h"
#include "nimble/compiler/op/reference_loops.h"
#include "nimble/compiler/op/type_relations.h"
#include "nimble/vm/error.h"
#include "nimble/vm/kernels/conv.h"
#include "nimble/vm/kernels/element.h"

namespace nimble::op {

namespace {

using ir::Dim;
using vm::WindowAxis;

std::string LayoutOf(size_t spatial, bool weight) {
  if (weight) return spatial == 1 ? "(O, I, W)" : "(O, I, H, W)";
  return spatial == 1 ? "(N, C, W)" : "(N, C, H, W)";
}

void CheckInput(const ir::TensorType& type, size_t spatial, bool weight, const std::string& op) {
  const std::string what = weight ? "weight" : "data";
  if (type->ndim() != spatial + 2) {
    throw Error(op + ": " + what + " must be " + std::to_string(spatial + 2) + "-D " +
                LayoutOf(spatial, weight) + ", got " + ir::TypeToString(type));
  }
  if (!type->dtype.is_float()) {
    throw Error(op + ": " + what + " must be float16, float32 or float64, got " +
                ir::TypeToString(type));
  }
}

// The output's spatial sizes: a size where the input's and the kernel's are
// static, else `?`; a window wider than the padded input is an error.
std::vector<Dim> SpatialDims(const ir::TensorType& data, const std::vector<Dim>& kernel,
                             const ir::Attrs& attrs, bool ceil_mode, const std::string& op,
                             const std::string& types) {
  std::vector<int64_t> sizes;
  for (const Dim& k : kernel) sizes.push_back(k.is_static() ? k.value() : 1);
  const std::vector<WindowAxis> axes = vm::WindowAxes(attrs, sizes, op);  // validates the attrs
  std::vector<Dim> out;
  for (size_t d = 0; d < axes.size(); ++d) {
    const Dim in = data->shape[d + 2];
    if (!in.is_static() || !kernel[d].is_static()) {
      out.push_back(Dim::Any());
      continue;
    }
    const int64_t count = vm::WindowCount(in.value(), axes[d], ceil_mode);
    if (count <= 0) throw Error(vm::WindowMisfit(op, d + 2, in.value(), axes[d]) + " in " + types);
    out.push_back(Dim(count));
  }
  return out;
}

TypeRelation ConvRelation(const std::string& op, size_t spatial) {
  return [op, spatial](const std::vector<ir::Type>& types, const ir::Attrs& attrs,
                       TypeReporter& reporter) {
    const ir::TensorType data = AsTensorType(types[0], op, "data");
    const ir::TensorType weight = AsTensorType(types[1], op, "weight");
    if (!data || !weight) return false;
    CheckInput(data, spatial, false, op);
    CheckInput(weight, spatial, true, op);
    const std::string shapes =
        "data " + ir::TypeToString(data) + " and weight " + ir::TypeToString(weight);
    if (data->dtype != weight->dtype) {
      throw Error(op + ": data and weight dtypes differ: " + shapes);
    }
    const int64_t groups = attrs.GetInt("groups");
    if (groups < 1) throw Error(op + ": groups must be >= 1, got " + std::to_string(groups));
    const Dim channels = data->shape[1];
    const Dim out_channels = weight->shape[0];
    const Dim in_channels = weight->shape[1];
    if (channels.is_static() && channels.value() % groups != 0) {
      throw Error(op + ": data's " + channels.ToString() +
                  " channels are not divisible by groups=" + std::to_string(groups) + " in " +
                  shapes);
    }
    if (out_channels.is_static() && out_channels.value() % groups != 0) {
      throw Error(op + ": weight's " + out_channels.ToString() +
                  " output channels are not divisible by groups=" + std::to_string(groups) +
                  " in " + shapes);
    }
    if (channels.is_static() && in_channels.is_static() &&
        in_channels.value() * groups != channels.value()) {
      throw Error(op + ": weight's in-channels (" + in_channels.ToString() + ") times groups (" +
                  std::to_string(groups) + ") must equal data's channels (" + channels.ToString() +
                  ") in " + shapes);
    }
    const std::vector<Dim> kernel(weight->shape.begin() + 2, weight->shape.end());
    std::vector<Dim> shape = {data->shape[0], out_channels};
    for (const Dim& dim : SpatialDims(data, kernel, attrs, false, op, shapes)) {
      shape.push_back(dim);
    }
    reporter.Assign(types.back(), ir::MakeTensorType(std::move(shape), data->dtype));
    return true;
  };
}

TypeRelation PoolRelation(const std::string& op, size_t spatial) {
  return [op, spatial](const std::vector<ir::Type>& types, const ir::Attrs& attrs,
                       TypeReporter& reporter) {
    const ir::TensorType data = AsTensorType(types[0], op, "data");
    if (!data) return false;
    CheckInput(data, spatial, false, op);
    std::vector<Dim> kernel;
    for (int64_t size : vm::PoolSize(attrs, spatial, op)) kernel.push_back(Dim(size));
    std::vector<Dim> shape = {data->shape[0], data->shape[1]};
    for (const Dim& dim : SpatialDims(data, kernel, attrs, attrs.GetBool("ceil_mode"), op,
                                      "data " + ir::TypeToString(data))) {
      shape.push_back(dim);
    }
    reporter.Assign(types.back(), ir::MakeTensorType(std::move(shape), data->dtype));
    return true;
  };
}

// ---------------------------------------------------------------------------
// Reference kernels: one output element at a time, summed in double over its
// window's taps in row-major order, a tap in the padding skipped.

ReferenceKernel ConvReference(const std::string& op) {
  return [op](std::span<const Tensor> inputs, std::span<Tensor> outputs, const ir::Attrs& attrs) {
    const Tensor& data = inputs[0];
    const Tensor& weight = inputs[1];
    const Tensor& out = outputs[0];
    const Shape& weight_shape = weight->shape();
    const Shape kernel(weight_shape.begin() + 2, weight_shape.end());
    const std::vector<WindowAxis> axes = vm::WindowAxes(attrs, kernel, op);
    const int64_t groups = attrs.GetInt("groups");
    const int64_t group_in = weight_shape[1];
    const int64_t group_out = weight_shape[0] / groups;
    DispatchFloat(data->dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* x = data->data<T>();
      const T* w = weight->data<T>();
      ForEachIndex(out->shape(), [&](std::span<const int64_t> index) {
        const int64_t n = index[0];
        const int64_t oc = index[1];
        const int64_t g = oc / group_out;
        double sum = 0;
        for (int64_t ic = 0; ic < group_in; ++ic) {
          ForEachIndex(kernel, [&](std::span<const int64_t> tap) {
            std::vector<int64_t> at = {n, g * group_in + ic};
            for (size_t d = 0; d < axes.size(); ++d) {
              const int64_t position = axes[d].Position(index[d + 2], tap[d]);
              if (position < 0 || position >= data->shape()[d + 2]) return;
              at.push_back(position);
            }
            std::vector<int64_t> weight_at = {oc, ic};
            weight_at.insert(weight_at.end(), tap.begin(), tap.end());
            sum += static_cast<double>(LoadElement(x[BroadcastOffset(data->shape(), at)])) *
                   static_cast<double>(LoadElement(w[BroadcastOffset(weight_shape, weight_at)]));
          });
        }
        out->data<T>()[BroadcastOffset(out->shape(), index)] = ConvertElement<T>(sum);
      });
    });
  };
}

// Max: the largest element in the window, NaNs and padding skipped (-inf
// when nothing is left). Avg: the sum of the window's elements over the
// number of its taps inside the input (with count_include_pad: inside the
// input and its padding); 0 for an empty window.
ReferenceKernel PoolReference(const std::string& op, size_t spatial, bool is_max) {
  return [op, spatial, is_max](std::span<const Tensor> inputs, std::span<Tensor> outputs,
                               const ir::Attrs& attrs) {
    const Tensor& data = inputs[0];
    const Tensor& out = outputs[0];
    const Shape kernel = vm::PoolSize(attrs, spatial, op);
    const std::vector<WindowAxis> axes = vm::WindowAxes(attrs, kernel, op);
    const bool include_pad = !is_max && attrs.GetBool("count_include_pad");
    DispatchFloat(data->dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* x = data->data<T>();
      ForEachIndex(out->shape(), [&](std::span<const int64_t> index) {
        double value = is_max ? -std::numeric_limits<double>::infinity() : 0.0;
        int64_t count = 0;
        ForEachIndex(kernel, [&](std::span<const int64_t> tap) {
          std::vector<int64_t> at = {index[0], index[1]};
          bool inside = true;
          bool in_padding = true;
          for (size_t d = 0; d < axes.size(); ++d) {
            const int64_t in = data->shape()[d + 2];
            const int64_t position = axes[d].Position(index[d + 2], tap[d]);
            inside = inside && position >= 0 && position < in;
            in_padding =
                in_padding && position >= -axes[d].pad_begin && position < in + axes[d].pad_end;
            at.push_back(position);
          }
          if (include_pad ? in_padding : inside) ++count;
          if (!inside) return;
          const double element =
              static_cast<double>(LoadElement(x[BroadcastOffset(data->shape(), at)]));
          if (!is_max) {
            value += element;
          } else if (element > value) {
            value = element;
          }
        });
        if (!is_max) value = count > 0 ? value / static_cast<double>(count) : 0.0;
        out->data<T>()[BroadcastOffset(out->shape(), index)] = ConvertElement<T>(value);
      });
    });
  };
}

// ---------------------------------------------------------------------------
// Compute definitions

// The static kernel sizes of `dims`; false when one is `?`.
bool StaticSizes(std::span<const Expr> dims, std::vector<int64_t>* sizes) {
  for (const Expr& dim : dims) {
    int64_t value;
    if (!tir::AsInt(dim, &value)) return false;
    sizes->push_back(value);
  }
  return true;
}

// The number of windows along an axis of `in` positions, as index arithmetic
// (vm::WindowCount); the kernel requires the window to fit.
Expr WindowCountExpr(te::ComputeContext& context, const Expr& in, const WindowAxis& axis,
                     bool ceil_mode, size_t dim, const std::string& op) {
  int64_t size;
  if (tir::AsInt(in, &size)) return tir::IntImm(vm::WindowCount(size, axis, ceil_mode));
  const Expr span = tir::Sub(tir::Add(in, tir::IntImm(axis.pad_begin + axis.pad_end)),
                             tir::IntImm(axis.Extent()));
  context.Require(tir::Compare(tir::CompareOp::kGe, span, tir::IntImm(0)),
                  op + ": the window along axis " + std::to_string(dim) + " spans " +
                      std::to_string(axis.Extent()) + " positions, more than the padded input");
  const Expr stride = tir::IntImm(axis.stride);
  if (!ceil_mode) return tir::Add(tir::FloorDiv(span, stride), tir::IntImm(1));
  const Expr count =
      tir::Add(tir::FloorDiv(tir::Add(span, tir::IntImm(axis.stride - 1)), stride), tir::IntImm(1));
  const Expr last_start = tir::Mul(tir::Sub(count, tir::IntImm(1)), stride);
  return tir::Select(
      tir::Compare(tir::CompareOp::kGe, last_start, tir::Add(in, tir::IntImm(axis.pad_begin))),
      tir::Sub(count, tir::IntImm(1)), count);
}

// `data` at (n, c, positions), where positions may fall in the padding:
// there `outside` instead. Only the sides that can be reached are guarded;
// the read's indices are clamped there too.
Expr WindowRead(const te::Tensor& data, const Expr& n, const Expr& c,
                const std::vector<Expr>& positions, const std::vector<WindowAxis>& axes,
                bool ceil_mode, const Expr& outside) {
  std::vector<Expr> indices = {n, c};
  Expr inside;
  const auto guard = [&](Expr condition) {
    inside = inside ? tir::And(inside, std::move(condition)) : std::move(condition);
  };
  for (size_t d = 0; d < axes.size(); ++d) {
    Expr index = positions[d];
    const Expr& in = data->shape[d + 2];
    if (axes[d].pad_begin > 0) {
      guard(tir::Compare(tir::CompareOp::kGe, positions[d], tir::IntImm(0)));
      index = tir::Max(index, tir::IntImm(0));
    }
    // Without end padding a window ends inside the input, unless ceil_mode
    // added a last one.
    if (axes[d].pad_end > 0 || ceil_mode) {
      guard(tir::Compare(tir::CompareOp::kLt, positions[d], in));
      index = tir::Min(index, tir::Sub(in, tir::IntImm(1)));
    }
    indices.push_back(index);
  }
  const Expr read = te::Read(data, std::move(indices));
  return inside ? tir::Select(inside, read, outside) : read;
}

// The input positions of the window taps `taps` for the output element at
// `indices` (spatial from dimension 2).
std::vector<Expr> Positions(const std::vector<Expr>& indices,
                            const std::vector<te::ReduceAxis>& taps,
                            const std::vector<WindowAxis>& axes) {
  std::vector<Expr> positions;
  for (size_t d = 0; d < axes.size(); ++d) {
    positions.push_back(tir::Sub(tir::Add(tir::Mul(indices[d + 2], tir::IntImm(axes[d].stride)),
                                          tir::Mul(taps[d].var, tir::IntImm(axes[d].dilation))),
                                 tir::IntImm(axes[d].pad_begin)));
  }
  return positions;
}

std::vector<te::ReduceAxis> TapAxes(const std::string& op, const std::vector<int64_t>& kernel) {
  std::vector<te::ReduceAxis> taps;
  for (size_t d = 0; d < kernel.size(); ++d) {
    taps.push_back(te::MakeReduceAxis(op + ".k" + std::to_string(d), tir::IntImm(kernel[d])));
  }
  return taps;
}

ComputeFunction ConvCompute(const std::string& op) {
  return
      [op](te::ComputeContext& context, std::span<const te::Tensor> inputs, const ir::Attrs& attrs,
           std::span<const DataType> output_dtypes) -> std::vector<te::Tensor> {
        if (HasFloat16(inputs, output_dtypes)) return {};
        const te::Tensor& data = inputs[0];
        const te::Tensor& weight = inputs[1];
        const DataType dtype = output_dtypes[0];
        std::vector<int64_t> kernel;
        int64_t out_channels = 0;
        if (!StaticSizes(std::span(weight->shape).subspan(2), &kernel) ||
            !tir::AsInt(weight->shape[0], &out_channels)) {
          return {};
        }
        const std::vector<WindowAxis> axes = vm::WindowAxes(attrs, kernel, op);
        const int64_t groups = attrs.GetInt("groups");
        const int64_t group_out = out_channels / groups;
        const Expr& group_in = weight->shape[1];
        RequireEqual(context, data->shape[1], tir::Mul(group_in, tir::IntImm(groups)),
                     op + ": data's channels differ from weight's in-channels times groups");
        std::vector<Expr> shape = {data->shape[0], weight->shape[0]};
        for (size_t d = 0; d < axes.size(); ++d) {
          shape.push_back(WindowCountExpr(context, data->shape[d + 2], axes[d], false, d + 2, op));
        }
        return {te::Compute(op, shape, [&](const std::vector<Expr>& indices) {
          const te::ReduceAxis ic = te::MakeReduceAxis(op + ".ic", group_in);
          const std::vector<te::ReduceAxis> taps = TapAxes(op, kernel);
          const Expr channel =
              groups == 1
                  ? ic.var
                  : tir::Add(tir::Mul(tir::FloorDiv(indices[1], tir::IntImm(group_out)), group_in),
                             ic.var);
          const Expr x = WindowRead(data, indices[0], channel, Positions(indices, taps, axes), axes,
                                    false, tir::Constant(data->dtype, 0));
          std::vector<Expr> weight_indices = {indices[1], ic.var};
          for (const te::ReduceAxis& tap : taps) weight_indices.push_back(tap.var);
          std::vector<te::ReduceAxis> reduce_axes = {ic};
          reduce_axes.insert(reduce_axes.end(), taps.begin(), taps.end());
          return te::Reduce(
              te::ReduceKind::kSum,
              tir::Mul(tir::Cast(dtype, x), tir::Cast(dtype, te::Read(weight, weight_indices))),
              reduce_axes);
        })};
      };
}

// avg_pool's divisor along one axis for window `o` (vm::TapsWithin): the taps
// in [low, high).
Expr TapsWithinExpr(const Expr& o, const WindowAxis& axis, const Expr& low, const Expr& high) {
  const Expr dilation = tir::IntImm(axis.dilation);
  const Expr base = tir::Sub(tir::Mul(o, tir::IntImm(axis.stride)), tir::IntImm(axis.pad_begin));
  const Expr first = tir::Max(
      tir::IntImm(0), tir::Sub(tir::IntImm(0), tir::FloorDiv(tir::Sub(base, low), dilation)));
  const Expr last =
      tir::Min(tir::IntImm(axis.kernel),
               tir::Add(tir::FloorDiv(tir::Sub(tir::Sub(high, tir::IntImm(1)), base), dilation),
                        tir::IntImm(1)));
  return tir::Max(tir::IntImm(0), tir::Sub(last, first));
}

ComputeFunction PoolCompute(const std::string& op, size_t spatial, bool is_max) {
  return [op, spatial, is_max](te::ComputeContext& context, std::span<const te::Tensor> inputs,
                               const ir::Attrs& attrs,
                               std::span<const DataType> output_dtypes) -> std::vector<te::Tensor> {
    if (HasFloat16(inputs, output_dtypes)) return {};
    const te::Tensor& data = inputs[0];
    const DataType dtype = data->dtype;
    const std::vector<int64_t> kernel = vm::PoolSize(attrs, spatial, op);
    const std::vector<WindowAxis> axes = vm::WindowAxes(attrs, kernel, op);
    const bool ceil_mode = attrs.GetBool("ceil_mode");
    std::vector<Expr> shape = {data->shape[0], data->shape[1]};
    for (size_t d = 0; d < axes.size(); ++d) {
      shape.push_back(WindowCountExpr(context, data->shape[d + 2], axes[d], ceil_mode, d + 2, op));
    }
    const te::ReduceKind kind = is_max ? te::ReduceKind::kMax : te::ReduceKind::kSum;
    const te::Tensor reduced =
        te::Compute(is_max ? op : op + ".sum", shape, [&](const std::vector<Expr>& indices) {
          const std::vector<te::ReduceAxis> taps = TapAxes(op, kernel);
          const Expr x = WindowRead(data, indices[0], indices[1], Positions(indices, taps, axes),
                                    axes, ceil_mode, te::ReduceIdentity(kind, dtype));
          return te::Reduce(kind, x, taps);
        });
    if (is_max) return {reduced};
    const bool include_pad = attrs.GetBool("count_include_pad");
    return {te::Compute(op, shape, [&](const std::vector<Expr>& indices) {
      Expr count = tir::IntImm(1);
      for (size_t d = 0; d < axes.size(); ++d) {
        const WindowAxis& axis = axes[d];
        const bool whole =
            !ceil_mode && (include_pad || (axis.pad_begin == 0 && axis.pad_end == 0));
        const Expr& in = data->shape[d + 2];
        const Expr taps = whole ? tir::IntImm(axis.kernel)
                          : include_pad
                              ? TapsWithinExpr(indices[d + 2], axis, tir::IntImm(-axis.pad_begin),
                                               tir::Add(in, tir::IntImm(axis.pad_end)))
                              : TapsWithinExpr(indices[d + 2], axis, tir::IntImm(0), in);
        count = tir::Mul(count, taps);
      }
      // An empty window's sum is 0, and so is its average.
      return tir::Div(te::Read(reduced, indices),
                      tir::Cast(dtype, tir::Max(count, tir::IntImm(1))));
    })};
  };
}

}  // namespace

void RegisterConvOps(OpRegistry& registry) {
  using ir::AttrKind;
  for (size_t spatial : {size_t{1}, size_t{2}}) {
    const std::string suffix = std::to_string(spatial) + "d";
    const std::string layout = spatial == 1 ? "NCW" : "NCHW";
    const std::string conv = "nn.conv" + suffix;
    OpDef& conv_def = registry.Register(conv);
    conv_def.description =
        std::to_string(spatial) + "-D convolution (cross-correlation) of data " + layout +
        " with weight " + (spatial == 1 ? "OIW" : "OIHW") +
        " (I = C / groups): strides, padding (all begins, then all ends), dilation, groups.";
    conv_def.min_inputs = 2;
    conv_def.max_inputs = 2;
    conv_def.attrs = {{"strides", AttrKind::kIntList, std::vector<int64_t>{1}},
                      {"padding", AttrKind::kIntList, std::vector<int64_t>{0}},
                      {"dilation", AttrKind::kIntList, std::vector<int64_t>{1}},
                      {"groups", AttrKind::kInt, int64_t{1}}};
    conv_def.relation = ConvRelation(conv, spatial);
    conv_def.pattern = OpPattern::kOutEWiseFusable;
    conv_def.kernel = ConvReference(conv);
    conv_def.compute = ConvCompute(conv);

    for (bool is_max : {true, false}) {
      const std::string pool = std::string(is_max ? "nn.max_pool" : "nn.avg_pool") + suffix;
      OpDef& def = registry.Register(pool);
      def.description = std::to_string(spatial) + "-D " + (is_max ? "max" : "average") +
                        " pooling of data " + layout +
                        " over pool_size windows: strides, padding (all begins, then all ends), " +
                        "dilation, ceil_mode" +
                        (is_max ? "; padding is skipped."
                                : ", count_include_pad (padded cells count in the divisor).");
      def.min_inputs = 1;
      def.max_inputs = 1;
      def.attrs = {{"pool_size", AttrKind::kIntList, std::monostate{}, /*required=*/true},
                   {"strides", AttrKind::kIntList, std::vector<int64_t>{1}},
                   {"padding", AttrKind::kIntList, std::vector<int64_t>{0}},
                   {"dilation", AttrKind::kIntList, std::vector<int64_t>{1}},
                   {"ceil_mode", AttrKind::kBool, false}};
      if (!is_max) def.attrs.push_back({"count_include_pad", AttrKind::kBool, false});
      def.relation = PoolRelation(pool, spatial);
      def.pattern = OpPattern::kOutEWiseFusable;
      def.kernel = PoolReference(pool, spatial, is_max);
      def.compute = PoolCompute(pool, spatial, is_max);
    }
  }
}

}  // namespace nimble::op
