// Window geometry of the convolution and pooling operators (nn.conv1d,
// nn.conv2d, nn.max_pool1d/2d, nn.avg_pool1d/2d), shared by their runtime
// shape functions and kernels (conv.cc) and their compiler type relations,
// reference kernels and compute definitions (compiler/op/conv.cc), so all of
// them agree on the output sizes and on the errors.
//
// Attributes, per spatial axis (Relay's names; ONNX's order):
//   strides, dilation  one value for every axis, or one per axis (>= 1);
//   padding            one value for every side, one per axis (both sides),
//                      or all the axes' begins then all their ends (ONNX's
//                      `pads`), each >= 0;
//   pool_size          (pools) one value or one per axis (>= 1);
//   ceil_mode          (pools) output sizes rounded up, as ONNX and PyTorch
//                      do: a last window that would start past the input and
//                      its begin padding is dropped.
// Output size along an axis: floor((in + pad_begin + pad_end - dilation *
// (kernel - 1) - 1) / stride) + 1 (ceil under ceil_mode); a window wider than
// the padded input is an error.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "nimble/vm/attrs.h"

namespace nimble::vm {

struct WindowAxis {
  int64_t kernel = 1;
  int64_t stride = 1;
  int64_t dilation = 1;
  int64_t pad_begin = 0;
  int64_t pad_end = 0;

  // The span of input positions one window covers.
  int64_t Extent() const { return dilation * (kernel - 1) + 1; }
  // The input position of tap `t` of window `o` (negative or past the input
  // in the padding).
  int64_t Position(int64_t o, int64_t t) const { return o * stride + t * dilation - pad_begin; }
};

// The geometry of `op`'s windows along each of its kernel.size() spatial
// axes, from the strides, dilation and padding attributes and the kernel
// sizes. Errors (a list of the wrong length, a stride or dilation below 1, a
// negative pad) name `op` and the attribute.
std::vector<WindowAxis> WindowAxes(const Attrs& attrs, std::span<const int64_t> kernel,
                                   const std::string& op);

// The pools' kernel sizes: pool_size for each of `rank` axes.
std::vector<int64_t> PoolSize(const Attrs& attrs, size_t rank, const std::string& op);

// The number of windows along an axis of `in` positions; 0 or less when the
// window is wider than the padded input.
int64_t WindowCount(int64_t in, const WindowAxis& axis, bool ceil_mode);

// The error for a window wider than the padded input along spatial axis
// `axis` (dimension `dim` of the data), without the shapes, which callers
// append.
std::string WindowMisfit(const std::string& op, size_t dim, int64_t in, const WindowAxis& axis);

// The taps [first, last) of window `o` whose positions lie in [low, high)
// (the input, or the input and its padding); first >= last when none do.
std::pair<int64_t, int64_t> TapRange(int64_t o, const WindowAxis& axis, int64_t low, int64_t high);

// How many taps of window `o` lie in [low, high): avg_pool's divisor along
// one axis.
int64_t TapsWithin(int64_t o, const WindowAxis& axis, int64_t low, int64_t high);

}  // namespace nimble::vm
