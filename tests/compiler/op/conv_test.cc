// nn.conv1d, nn.conv2d, nn.max_pool1d/2d and nn.avg_pool1d/2d: the reference
// kernels (through the shared invocation path) against a naive loop written
// here, on random shapes with strides, dilation, asymmetric padding and
// groups; the type relations on static and `?` shapes and their errors; and
// whole programs with a `?` spatial dimension compiled by backend::Compile
// and run on the VM at several lengths, with generated (fused with a
// following relu) and built-in kernels.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "nimble/compiler/backend/pipeline.h"
#include "nimble/compiler/text/parser.h"
#include "nimble/compiler/typing/type_infer.h"
#include "nimble/vm/executable.h"
#include "nimble/vm/vm.h"
#include "tests/compiler/op/op_test_util.h"

namespace nimble::op::testing {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// ---------------------------------------------------------------------------
// Naive loops, written from the definition. Both 1-D and 2-D ops are held
// as 2-D: a 1-D case has height 1, kernel 1, stride 1 and no padding along
// its first axis.

struct Window {
  size_t spatial = 2;
  std::array<int64_t, 2> kernel = {1, 1};
  std::array<int64_t, 2> stride = {1, 1};
  std::array<int64_t, 2> dilation = {1, 1};
  std::array<int64_t, 2> pad_begin = {0, 0};
  std::array<int64_t, 2> pad_end = {0, 0};
  bool ceil_mode = false;

  int64_t OutSize(size_t d, int64_t in) const {
    const int64_t span = in + pad_begin[d] + pad_end[d] - dilation[d] * (kernel[d] - 1) - 1;
    if (!ceil_mode) return span / stride[d] + 1;
    int64_t out = (span + stride[d] - 1) / stride[d] + 1;
    if ((out - 1) * stride[d] >= in + pad_begin[d]) --out;
    return out;
  }
  // The attributes of the real axes: the last `spatial` of the two.
  std::vector<int64_t> List(const std::array<int64_t, 2>& values) const {
    return std::vector<int64_t>(values.end() - static_cast<std::ptrdiff_t>(spatial), values.end());
  }
  std::vector<int64_t> Padding() const {
    std::vector<int64_t> padding = List(pad_begin);
    for (int64_t pad : List(pad_end)) padding.push_back(pad);
    return padding;
  }
  ir::Attrs WindowAttrs() const {
    return MakeAttrs(
        {{"strides", List(stride)}, {"padding", Padding()}, {"dilation", List(dilation)}});
  }
};

// The shape N, C, spatial... of a case whose 2-D sizes are `sizes`.
Shape ShapeOf(int64_t n, int64_t c, const std::array<int64_t, 2>& sizes, size_t spatial) {
  Shape shape = {n, c};
  if (spatial == 2) shape.push_back(sizes[0]);
  shape.push_back(sizes[1]);
  return shape;
}

std::vector<double> RandomValues(int64_t count, std::mt19937& rng) {
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  std::vector<double> values(static_cast<size_t>(count));
  for (double& value : values) value = uniform(rng);
  return values;
}

struct ConvCase {
  Window window;
  int64_t batch = 1, channels = 1, out_channels = 1, groups = 1;
  std::array<int64_t, 2> in = {1, 1};

  Shape DataShape() const { return ShapeOf(batch, channels, in, window.spatial); }
  Shape WeightShape() const {
    return ShapeOf(out_channels, channels / groups, window.kernel, window.spatial);
  }
  Shape OutShape() const {
    return ShapeOf(batch, out_channels, {window.OutSize(0, in[0]), window.OutSize(1, in[1])},
                   window.spatial);
  }
  std::string Op() const { return window.spatial == 1 ? "nn.conv1d" : "nn.conv2d"; }
  ir::Attrs Attrs() const {
    ir::Attrs attrs = window.WindowAttrs();
    attrs.Set("groups", groups);
    return attrs;
  }
};

std::vector<double> NaiveConv(const ConvCase& c, const std::vector<double>& x,
                              const std::vector<double>& w) {
  const Window& win = c.window;
  const int64_t oh_count = win.OutSize(0, c.in[0]);
  const int64_t ow_count = win.OutSize(1, c.in[1]);
  const int64_t group_in = c.channels / c.groups;
  const int64_t group_out = c.out_channels / c.groups;
  std::vector<double> out;
  for (int64_t n = 0; n < c.batch; ++n) {
    for (int64_t oc = 0; oc < c.out_channels; ++oc) {
      for (int64_t oh = 0; oh < oh_count; ++oh) {
        for (int64_t ow = 0; ow < ow_count; ++ow) {
          double sum = 0;
          for (int64_t ic = 0; ic < group_in; ++ic) {
            const int64_t channel = oc / group_out * group_in + ic;
            for (int64_t kh = 0; kh < win.kernel[0]; ++kh) {
              for (int64_t kw = 0; kw < win.kernel[1]; ++kw) {
                const int64_t ih = oh * win.stride[0] + kh * win.dilation[0] - win.pad_begin[0];
                const int64_t iw = ow * win.stride[1] + kw * win.dilation[1] - win.pad_begin[1];
                if (ih < 0 || ih >= c.in[0] || iw < 0 || iw >= c.in[1]) continue;
                sum += x[((n * c.channels + channel) * c.in[0] + ih) * c.in[1] + iw] *
                       w[((oc * group_in + ic) * win.kernel[0] + kh) * win.kernel[1] + kw];
              }
            }
          }
          out.push_back(sum);
        }
      }
    }
  }
  return out;
}

struct PoolCase {
  Window window;
  bool is_max = true;
  bool count_include_pad = false;
  int64_t batch = 1, channels = 1;
  std::array<int64_t, 2> in = {1, 1};

  Shape DataShape() const { return ShapeOf(batch, channels, in, window.spatial); }
  Shape OutShape() const {
    return ShapeOf(batch, channels, {window.OutSize(0, in[0]), window.OutSize(1, in[1])},
                   window.spatial);
  }
  std::string Op() const {
    return std::string(is_max ? "nn.max_pool" : "nn.avg_pool") +
           (window.spatial == 1 ? "1d" : "2d");
  }
  ir::Attrs Attrs() const {
    ir::Attrs attrs = window.WindowAttrs();
    attrs.Set("pool_size", window.List(window.kernel));
    attrs.Set("ceil_mode", window.ceil_mode);
    if (!is_max) attrs.Set("count_include_pad", count_include_pad);
    return attrs;
  }
};

std::vector<double> NaivePool(const PoolCase& c, const std::vector<double>& x) {
  const Window& win = c.window;
  const int64_t oh_count = win.OutSize(0, c.in[0]);
  const int64_t ow_count = win.OutSize(1, c.in[1]);
  std::vector<double> out;
  for (int64_t p = 0; p < c.batch * c.channels; ++p) {
    for (int64_t oh = 0; oh < oh_count; ++oh) {
      for (int64_t ow = 0; ow < ow_count; ++ow) {
        double best = -std::numeric_limits<double>::infinity();
        double sum = 0;
        int64_t count = 0;
        for (int64_t kh = 0; kh < win.kernel[0]; ++kh) {
          for (int64_t kw = 0; kw < win.kernel[1]; ++kw) {
            const int64_t ih = oh * win.stride[0] + kh * win.dilation[0] - win.pad_begin[0];
            const int64_t iw = ow * win.stride[1] + kw * win.dilation[1] - win.pad_begin[1];
            const bool inside = ih >= 0 && ih < c.in[0] && iw >= 0 && iw < c.in[1];
            const bool padded = ih >= -win.pad_begin[0] && ih < c.in[0] + win.pad_end[0] &&
                                iw >= -win.pad_begin[1] && iw < c.in[1] + win.pad_end[1];
            if (c.count_include_pad ? padded : inside) ++count;
            if (!inside) continue;
            const double value = x[(p * c.in[0] + ih) * c.in[1] + iw];
            best = std::max(best, value);
            sum += value;
          }
        }
        out.push_back(c.is_max ? best : (count > 0 ? sum / static_cast<double>(count) : 0.0));
      }
    }
  }
  return out;
}

// A random window of `spatial` axes that fits an input of `in` (2-D form),
// with the features each test asks for.
Window RandomWindow(size_t spatial, const std::array<int64_t, 2>& in, std::mt19937& rng,
                    bool ceil_mode) {
  std::uniform_int_distribution<int64_t> small(0, 2);
  Window win;
  win.spatial = spatial;
  win.ceil_mode = ceil_mode;
  for (size_t d = 2 - spatial; d < 2; ++d) {
    win.kernel[d] = 1 + small(rng);
    win.stride[d] = 1 + small(rng) % 2;
    win.dilation[d] = 1 + small(rng) % 2;
    win.pad_begin[d] = std::min<int64_t>(small(rng), win.kernel[d] - 1);
    win.pad_end[d] = std::min<int64_t>(small(rng), win.kernel[d] - 1);
    while (in[d] + win.pad_begin[d] + win.pad_end[d] < win.dilation[d] * (win.kernel[d] - 1) + 1) {
      win.dilation[d] = 1;
      win.kernel[d] = 1;
    }
  }
  return win;
}

// ---------------------------------------------------------------------------
// Values of the reference kernels

void ExpectConv(const ConvCase& c, std::mt19937& rng) {
  const std::vector<double> x = RandomValues(ShapeNumel(c.DataShape()), rng);
  const std::vector<double> w = RandomValues(ShapeNumel(c.WeightShape()), rng);
  const Tensor out =
      Invoke(c.Op(), {TensorFrom(c.DataShape(), kF32, x), TensorFrom(c.WeightShape(), kF32, w)},
             c.Attrs());
  SCOPED_TRACE(c.Op() + " data " + ShapeToString(c.DataShape()) + " weight " +
               ShapeToString(c.WeightShape()));
  EXPECT_EQ(out->shape(), c.OutShape());
  ExpectValues(out, NaiveConv(c, x, w), 1e-5);
}

TEST(ConvTest, StridesDilationAndAsymmetricPadding2D) {
  std::mt19937 rng(1);
  ConvCase c;
  c.window.kernel = {3, 2};
  c.window.stride = {2, 1};
  c.window.dilation = {1, 2};
  c.window.pad_begin = {1, 0};
  c.window.pad_end = {2, 1};
  c.batch = 2;
  c.channels = 3;
  c.out_channels = 4;
  c.in = {7, 6};
  // (7 + 1 + 2 - 3) / 2 + 1 = 4; (6 + 0 + 1 - 2 - 1) / 1 + 1 = 5.
  EXPECT_EQ(c.OutShape(), (Shape{2, 4, 4, 5}));
  ExpectConv(c, rng);
}

TEST(ConvTest, GroupsAndDepthwise) {
  std::mt19937 rng(2);
  ConvCase grouped;
  grouped.window.kernel = {3, 3};
  grouped.window.pad_begin = {1, 1};
  grouped.window.pad_end = {1, 1};
  grouped.channels = 4;
  grouped.out_channels = 6;
  grouped.groups = 2;
  grouped.in = {5, 5};
  ExpectConv(grouped, rng);
  ConvCase depthwise = grouped;
  depthwise.channels = 5;
  depthwise.out_channels = 10;  // a channel multiplier of 2
  depthwise.groups = 5;
  depthwise.window.stride = {2, 2};
  depthwise.window.dilation = {2, 1};
  ExpectConv(depthwise, rng);
}

TEST(ConvTest, OneDimensional) {
  std::mt19937 rng(3);
  ConvCase c;
  c.window.spatial = 1;
  c.window.kernel = {1, 3};
  c.window.stride = {1, 2};
  c.window.dilation = {1, 2};
  c.window.pad_begin = {0, 2};
  c.window.pad_end = {0, 1};
  c.batch = 3;
  c.channels = 4;
  c.out_channels = 2;
  c.groups = 2;
  c.in = {1, 11};
  EXPECT_EQ(c.OutShape(), (Shape{3, 2, 5}));  // (11 + 3 - 5) / 2 + 1
  ExpectConv(c, rng);
}

TEST(ConvTest, RandomShapes) {
  std::mt19937 rng(4);
  std::uniform_int_distribution<int64_t> size(1, 9);
  std::uniform_int_distribution<int64_t> count(1, 3);
  for (int trial = 0; trial < 40; ++trial) {
    ConvCase c;
    const size_t spatial = trial % 2 ? 1 : 2;
    c.in = {spatial == 2 ? size(rng) : 1, size(rng)};
    c.window = RandomWindow(spatial, c.in, rng, false);
    c.groups = count(rng);
    c.channels = c.groups * count(rng);
    c.out_channels = c.groups * count(rng);
    c.batch = count(rng);
    ExpectConv(c, rng);
  }
}

void ExpectPool(const PoolCase& c, std::mt19937& rng) {
  const std::vector<double> x = RandomValues(ShapeNumel(c.DataShape()), rng);
  const Tensor out = Invoke(c.Op(), {TensorFrom(c.DataShape(), kF32, x)}, c.Attrs());
  SCOPED_TRACE(c.Op() + " data " + ShapeToString(c.DataShape()) +
               (c.window.ceil_mode ? " ceil_mode" : "") +
               (c.count_include_pad ? " count_include_pad" : ""));
  EXPECT_EQ(out->shape(), c.OutShape());
  // A window wholly in the padding is -inf (max) or 0 (avg).
  const std::vector<double> expected = NaivePool(c, x);
  ASSERT_EQ(out->numel(), static_cast<int64_t>(expected.size()));
  for (size_t i = 0; i < expected.size(); ++i) {
    const double actual = out->GetAsDouble(static_cast<int64_t>(i));
    if (std::isinf(expected[i])) {
      EXPECT_EQ(actual, expected[i]) << "element " << i;
    } else {
      EXPECT_NEAR(actual, expected[i], 1e-6) << "element " << i;
    }
  }
}

TEST(PoolTest, MaxAndAvgWithPaddingCeilModeAndDilation) {
  std::mt19937 rng(5);
  for (bool is_max : {true, false}) {
    for (bool include_pad : {false, true}) {
      for (bool ceil_mode : {false, true}) {
        PoolCase c;
        c.is_max = is_max;
        c.count_include_pad = include_pad;
        c.window.ceil_mode = ceil_mode;
        c.window.kernel = {3, 2};
        c.window.stride = {2, 2};
        c.window.dilation = {1, 2};
        c.window.pad_begin = {1, 0};
        c.window.pad_end = {0, 1};
        c.batch = 2;
        c.channels = 3;
        c.in = {8, 7};
        ExpectPool(c, rng);
      }
    }
  }
}

TEST(PoolTest, CeilModeAddsAPartialWindow) {
  PoolCase c;
  c.is_max = false;
  c.window.spatial = 1;
  c.window.kernel = {1, 2};
  c.window.stride = {1, 2};
  c.window.ceil_mode = true;
  c.in = {1, 5};
  const Tensor out = Invoke(c.Op(), {TensorFrom({1, 1, 5}, kF32, {1, 2, 3, 4, 5})}, c.Attrs());
  // Windows [1, 2], [3, 4], [5]: the last averages its one element.
  ExpectValues(out, {1.5, 3.5, 5});
  c.window.ceil_mode = false;
  ExpectValues(Invoke(c.Op(), {TensorFrom({1, 1, 5}, kF32, {1, 2, 3, 4, 5})}, c.Attrs()),
               {1.5, 3.5});
  // Max pooling skips padding: all-negative data keeps its values.
  PoolCase m;
  m.window.spatial = 1;
  m.window.kernel = {1, 3};
  m.window.pad_begin = {0, 1};
  m.window.pad_end = {0, 1};
  m.in = {1, 3};
  ExpectValues(Invoke(m.Op(), {TensorFrom({1, 1, 3}, kF32, {-3, -1, -2})}, m.Attrs()),
               {-1, -1, -1});
}

TEST(PoolTest, RandomShapes) {
  std::mt19937 rng(6);
  std::uniform_int_distribution<int64_t> size(1, 9);
  std::uniform_int_distribution<int64_t> count(1, 3);
  for (int trial = 0; trial < 48; ++trial) {
    PoolCase c;
    const size_t spatial = trial % 2 ? 1 : 2;
    c.in = {spatial == 2 ? size(rng) : 1, size(rng)};
    c.window = RandomWindow(spatial, c.in, rng, trial % 3 == 0);
    c.is_max = trial % 4 < 2;
    c.count_include_pad = trial % 5 < 2;
    c.batch = count(rng);
    c.channels = count(rng);
    ExpectPool(c, rng);
  }
}

// ---------------------------------------------------------------------------
// Types, `?` and errors

TEST(ConvTest, TypesWithAnyDims) {
  const ir::Attrs attrs = MakeAttrs(
      {{"strides", std::vector<int64_t>{2}}, {"padding", std::vector<int64_t>{1, 0, 1, 2}}});
  EXPECT_EQ(TypeOf("nn.conv2d", {TensorOf({1, 3, 9, 8}), TensorOf({4, 3, 3, 3})}, attrs),
            "Tensor[(1, 4, 5, 4), float32]");
  EXPECT_EQ(TypeOf("nn.conv2d", {TensorOf({kAny, 3, kAny, 8}), TensorOf({4, 3, 3, 3})}, attrs),
            "Tensor[(?, 4, ?, 4), float32]");
  EXPECT_EQ(TypeOf("nn.conv1d", {TensorOf({1, 8, kAny}), TensorOf({16, 8, 5})}),
            "Tensor[(1, 16, ?), float32]");
  // The shape function gives the `?` sizes at run time.
  EXPECT_EQ(ShapesOf("nn.conv1d", {{1, 8, 20}, {16, 8, 5}}), (std::vector<Shape>{{1, 16, 16}}));
  EXPECT_EQ(ShapesOf("nn.conv2d", {{2, 3, 9, 8}, {4, 3, 3, 3}}, attrs),
            (std::vector<Shape>{{2, 4, 5, 4}}));
  EXPECT_EQ(TypeOf("nn.max_pool1d", {TensorOf({1, 4, kAny})},
                   MakeAttrs({{"pool_size", std::vector<int64_t>{2}}})),
            "Tensor[(1, 4, ?), float32]");
  EXPECT_EQ(TypeOf("nn.avg_pool2d", {TensorOf({1, 4, 7, 7})},
                   MakeAttrs({{"pool_size", std::vector<int64_t>{3}},
                              {"strides", std::vector<int64_t>{2}},
                              {"ceil_mode", true}})),
            "Tensor[(1, 4, 3, 3), float32]");
}

TEST(ConvTest, TypeErrorsNameTheOpAndShapes) {
  EXPECT_THAT(ErrorOf([] {
                TypeOf("nn.conv2d", {TensorOf({1, 6, 8, 8}), TensorOf({4, 2, 3, 3})},
                       MakeAttrs({{"groups", int64_t{4}}}));
              }),
              AllOf(HasSubstr("nn.conv2d"), HasSubstr("6 channels are not divisible by groups=4"),
                    HasSubstr("Tensor[(1, 6, 8, 8), float32]"),
                    HasSubstr("Tensor[(4, 2, 3, 3), float32]")));
  EXPECT_THAT(ErrorOf([] {
                TypeOf("nn.conv1d", {TensorOf({1, 4, 10}), TensorOf({8, 3, 3})});
              }),
              AllOf(HasSubstr("nn.conv1d"), HasSubstr("in-channels (3) times groups (1)"),
                    HasSubstr("data's channels (4)"), HasSubstr("Tensor[(1, 4, 10), float32]"),
                    HasSubstr("Tensor[(8, 3, 3), float32]")));
  EXPECT_THAT(ErrorOf([] {
                TypeOf("nn.conv2d", {TensorOf({1, 4, 10}), TensorOf({8, 4, 3, 3})});
              }),
              AllOf(HasSubstr("nn.conv2d: data must be 4-D"), HasSubstr("(1, 4, 10)")));
  EXPECT_THAT(ErrorOf([] {
                TypeOf("nn.conv2d", {TensorOf({1, 4, 2, 10}), TensorOf({8, 4, 3, 3})});
              }),
              AllOf(HasSubstr("nn.conv2d: the window along axis 2 spans 3"),
                    HasSubstr("Tensor[(1, 4, 2, 10), float32]")));
  EXPECT_THAT(ErrorOf([] {
                TypeOf("nn.max_pool2d", {TensorOf({1, 4, 8, 8})},
                       MakeAttrs({{"pool_size", std::vector<int64_t>{2, 2}},
                                  {"padding", std::vector<int64_t>{1, 1, 1}}}));
              }),
              AllOf(HasSubstr("nn.max_pool2d"), HasSubstr("padding must have 1, 2 or 4 values")));
  EXPECT_THAT(ErrorOf([] {
                TypeOf("nn.avg_pool1d", {TensorOf({1, 4, 8})},
                       MakeAttrs({{"pool_size", std::vector<int64_t>{2}},
                                  {"strides", std::vector<int64_t>{0}}}));
              }),
              HasSubstr("nn.avg_pool1d: strides must be >= 1"));
  EXPECT_THAT(ErrorOf([] {
                TypeOf("nn.max_pool1d", {TensorOf({1, 4, 8})});
              }),
              HasSubstr("requires attribute 'pool_size'"));
  // A `?` leaves the check to the shape function, which names the shapes.
  EXPECT_EQ(TypeOf("nn.conv1d", {TensorOf({1, kAny, 10}), TensorOf({8, 3, 3})}),
            "Tensor[(1, 8, 8), float32]");
  EXPECT_THAT(ErrorOf([] {
                ShapesOf("nn.conv1d", {{1, 4, 10}, {8, 3, 3}});
              }),
              AllOf(HasSubstr("nn.conv1d"), HasSubstr("(1, 4, 10)"), HasSubstr("(8, 3, 3)")));
  EXPECT_THAT(
      ErrorOf([] {
        ShapesOf("nn.max_pool1d", {{1, 4, 2}}, MakeAttrs({{"pool_size", std::vector<int64_t>{3}}}));
      }),
      AllOf(HasSubstr("nn.max_pool1d: the window along axis 2"), HasSubstr("(1, 4, 2)")));
}

// ---------------------------------------------------------------------------
// Compiled programs with a `?` spatial dimension

vm::Executable CompileText(const std::string& text, const std::string& kernels) {
  ir::IRModule module = text::ParseModule(text, "conv_test.relay");
  typing::InferTypes(module);
  return backend::Compile(module, {.kernels = kernels});
}

Tensor RunMain(const vm::Executable& executable, const std::vector<Tensor>& args) {
  vm::VirtualMachine machine(executable);
  const std::vector<Ref<Object>> objects(args.begin(), args.end());
  return machine.Invoke("main", objects).as<TensorNode>();
}

std::vector<double> Relu(std::vector<double> values) {
  for (double& value : values) value = std::max(value, 0.0);
  return values;
}

// A text CNN over a dynamic length: conv1d (stride 2, dilation 2,
// asymmetric padding, 2 groups) + relu, then a max pool in ceil mode.
TEST(ConvProgramTest, DynamicLengthConv1dReluPoolOnTheVm) {
  const std::string program = R"(#[version = "0.0.5"]
def @main(%x: Tensor[(1, 4, ?), float32], %w: Tensor[(6, 2, 3), float32]) {
  let %c = nn.conv1d(%x, %w, strides=[2], padding=[1, 2], dilation=[2], groups=2);
  let %r = nn.relu(%c);
  nn.max_pool1d(%r, pool_size=[2], strides=[2], ceil_mode=True)
}
)";
  ConvCase conv;
  conv.window.spatial = 1;
  conv.window.kernel = {1, 3};
  conv.window.stride = {1, 2};
  conv.window.dilation = {1, 2};
  conv.window.pad_begin = {0, 1};
  conv.window.pad_end = {0, 2};
  conv.channels = 4;
  conv.out_channels = 6;
  conv.groups = 2;
  const vm::Executable generated = CompileText(program, "generated");
  const vm::Executable builtin = CompileText(program, "builtin");
  const std::string table = vm::KernelTableToString(generated);
  ASSERT_FALSE(generated.kernel_library.empty()) << table;
  EXPECT_THAT(table, HasSubstr("fuses nn.conv1d+nn.relu, (1, 4, ?) float32, (6, 2, 3) float32 -> "
                               "(1, 6, ?) float32"));
  EXPECT_THAT(table, HasSubstr("fuses nn.max_pool1d"));
  std::mt19937 rng(7);
  const std::vector<double> w = RandomValues(ShapeNumel(conv.WeightShape()), rng);
  for (int64_t length : {9, 24}) {
    SCOPED_TRACE("length " + std::to_string(length));
    conv.in = {1, length};
    const std::vector<double> x = RandomValues(ShapeNumel(conv.DataShape()), rng);
    PoolCase pool;
    pool.window.spatial = 1;
    pool.window.kernel = {1, 2};
    pool.window.stride = {1, 2};
    pool.window.ceil_mode = true;
    pool.channels = 6;
    pool.in = {1, conv.window.OutSize(1, length)};
    const std::vector<double> expected = NaivePool(pool, Relu(NaiveConv(conv, x, w)));
    const std::vector<Tensor> args = {TensorFrom(conv.DataShape(), kF32, x),
                                      TensorFrom(conv.WeightShape(), kF32, w)};
    for (const vm::Executable* executable : {&generated, &builtin}) {
      const Tensor out = RunMain(*executable, args);
      EXPECT_EQ(out->shape(), pool.OutShape());
      ExpectValues(out, expected, 1e-5);
    }
  }
}

// conv2d + bias-free relu on `?` height and width, then an avg pool with
// padding counted: generated and built-in kernels agree with the naive loops.
TEST(ConvProgramTest, DynamicSpatialConv2dReluAvgPoolOnTheVm) {
  const std::string program = R"(#[version = "0.0.5"]
def @main(%x: Tensor[(?, 3, ?, ?), float32], %w: Tensor[(4, 3, 3, 3), float32]) {
  let %c = nn.conv2d(%x, %w, strides=[2, 1], padding=[1, 0, 2, 1], dilation=[1, 2]);
  let %r = nn.relu(%c);
  nn.avg_pool2d(%r, pool_size=[2, 2], padding=[1, 1], count_include_pad=True)
}
)";
  ConvCase conv;
  conv.window.kernel = {3, 3};
  conv.window.stride = {2, 1};
  conv.window.dilation = {1, 2};
  conv.window.pad_begin = {1, 0};
  conv.window.pad_end = {2, 1};
  conv.channels = 3;
  conv.out_channels = 4;
  const vm::Executable generated = CompileText(program, "generated");
  const vm::Executable builtin = CompileText(program, "builtin");
  EXPECT_THAT(vm::KernelTableToString(generated), HasSubstr("fuses nn.conv2d+nn.relu"));
  std::mt19937 rng(8);
  const std::vector<double> w = RandomValues(ShapeNumel(conv.WeightShape()), rng);
  for (const std::array<int64_t, 3>& sizes :
       {std::array<int64_t, 3>{1, 6, 7}, std::array<int64_t, 3>{2, 11, 16}}) {
    conv.batch = sizes[0];
    conv.in = {sizes[1], sizes[2]};
    SCOPED_TRACE("data " + ShapeToString(conv.DataShape()));
    const std::vector<double> x = RandomValues(ShapeNumel(conv.DataShape()), rng);
    PoolCase pool;
    pool.is_max = false;
    pool.count_include_pad = true;
    pool.window.kernel = {2, 2};
    pool.window.pad_begin = {1, 1};
    pool.window.pad_end = {1, 1};
    pool.batch = conv.batch;
    pool.channels = 4;
    pool.in = {conv.window.OutSize(0, conv.in[0]), conv.window.OutSize(1, conv.in[1])};
    const std::vector<double> expected = NaivePool(pool, Relu(NaiveConv(conv, x, w)));
    const std::vector<Tensor> args = {TensorFrom(conv.DataShape(), kF32, x),
                                      TensorFrom(conv.WeightShape(), kF32, w)};
    for (const vm::Executable* executable : {&generated, &builtin}) {
      const Tensor out = RunMain(*executable, args);
      EXPECT_EQ(out->shape(), pool.OutShape());
      ExpectValues(out, expected, 1e-5);
    }
  }
}

std::string ListText(const std::vector<int64_t>& values) {
  std::string text = "[";
  for (size_t i = 0; i < values.size(); ++i) text += (i ? ", " : "") + std::to_string(values[i]);
  return text + "]";
}

// The shape as a type's, with the last dimension `?`.
std::string TypeText(const Shape& shape, bool dynamic_last) {
  std::string text = "Tensor[(";
  for (size_t i = 0; i < shape.size(); ++i) {
    text += (i ? ", " : "") +
            (dynamic_last && i + 1 == shape.size() ? std::string("?") : std::to_string(shape[i]));
  }
  return text + "), float32]";
}

std::string WindowText(const Window& win) {
  return "strides=" + ListText(win.List(win.stride)) + ", padding=" + ListText(win.Padding()) +
         ", dilation=" + ListText(win.List(win.dilation));
}

// The compute definitions, through code generation, on random windows: each
// op alone with a relu after it (one fused kernel), the last axis `?`.
TEST(ConvProgramTest, GeneratedKernelsMatchNaiveLoopsOnRandomWindows) {
  std::mt19937 rng(9);
  std::uniform_int_distribution<int64_t> size(2, 9);
  std::uniform_int_distribution<int64_t> count(1, 2);
  for (int trial = 0; trial < 16; ++trial) {
    const size_t spatial = trial % 2 ? 1 : 2;
    const std::array<int64_t, 2> in = {spatial == 2 ? size(rng) : 1, size(rng)};
    const bool conv = trial % 4 == 0 || trial % 4 == 3;
    std::string program = "#[version = \"0.0.5\"]\n";
    std::vector<Tensor> args;
    std::vector<double> expected;
    std::string op;
    if (conv) {
      ConvCase c;
      c.in = in;
      c.window = RandomWindow(spatial, in, rng, false);
      c.groups = count(rng);
      c.channels = c.groups * count(rng);
      c.out_channels = c.groups * count(rng);
      op = c.Op();
      const std::vector<double> x = RandomValues(ShapeNumel(c.DataShape()), rng);
      const std::vector<double> w = RandomValues(ShapeNumel(c.WeightShape()), rng);
      program += "def @main(%x: " + TypeText(c.DataShape(), true) +
                 ", %w: " + TypeText(c.WeightShape(), false) + ") {\n  nn.relu(" + op +
                 "(%x, %w, " + WindowText(c.window) + ", groups=" + std::to_string(c.groups) +
                 "))\n}\n";
      args = {TensorFrom(c.DataShape(), kF32, x), TensorFrom(c.WeightShape(), kF32, w)};
      expected = Relu(NaiveConv(c, x, w));
    } else {
      PoolCase c;
      c.in = in;
      c.window = RandomWindow(spatial, in, rng, trial % 3 == 0);
      c.is_max = trial % 4 == 1;
      c.count_include_pad = trial % 3 == 1;
      c.channels = count(rng);
      op = c.Op();
      const std::vector<double> x = RandomValues(ShapeNumel(c.DataShape()), rng);
      program += "def @main(%x: " + TypeText(c.DataShape(), true) + ") {\n  nn.relu(" + op +
                 "(%x, pool_size=" + ListText(c.window.List(c.window.kernel)) + ", " +
                 WindowText(c.window) + ", ceil_mode=" + (c.window.ceil_mode ? "True" : "False") +
                 (c.is_max ? ""
                           : std::string(", count_include_pad=") +
                                 (c.count_include_pad ? "True" : "False")) +
                 "))\n}\n";
      args = {TensorFrom(c.DataShape(), kF32, x)};
      expected = Relu(NaivePool(c, x));
    }
    SCOPED_TRACE(program);
    const vm::Executable executable = CompileText(program, "generated");
    EXPECT_THAT(vm::KernelTableToString(executable), HasSubstr("fuses " + op + "+nn.relu"));
    ExpectValues(RunMain(executable, args), expected, 1e-5);
  }
}

// A window too wide for the run-time length fails in the shape function
// (generated) with the op's name, not with a crash.
TEST(ConvProgramTest, AWindowWiderThanTheRunTimeInputIsAnError) {
  const std::string program = R"(#[version = "0.0.5"]
def @main(%x: Tensor[(1, 2, ?), float32], %w: Tensor[(2, 2, 5), float32]) {
  nn.relu(nn.conv1d(%x, %w))
}
)";
  for (const std::string kernels : {"generated", "builtin"}) {
    SCOPED_TRACE(kernels);
    const vm::Executable executable = CompileText(program, kernels);
    EXPECT_THAT(ErrorOf([&] {
                  RunMain(executable, {TensorFrom({1, 2, 3}, kF32, std::vector<double>(6, 1.0)),
                                       TensorFrom({2, 2, 5}, kF32, std::vector<double>(20, 1.0))});
                }),
                HasSubstr("nn.conv1d"));
  }
}

}  // namespace
}  // namespace nimble::op::testing
