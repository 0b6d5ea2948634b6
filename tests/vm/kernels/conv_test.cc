// The convolution and pooling family's built-in kernels and shape functions
// (nimble/vm/kernels/conv.cc) against the compiler's reference kernels, on
// random shapes with strides, dilation, asymmetric padding, groups (and
// depthwise), ceil_mode and count_include_pad, in every float dtype and on
// inputs large enough for the thread pool; and their errors through the
// kernel ABI.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "tests/error_of.h"
#include "tests/vm/kernels/kernel_test_util.h"

namespace nimble::vm::testing {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

const DataType kF32 = DataType::Float32();

// The built-in kernels sum in the compute type (float for float16 and
// float32) in another order than the reference, which sums in double.
Tolerance ToleranceFor(DataType dtype) {
  return {.relative = dtype == DataType::Float16() ? 4e-3 : dtype == kF32 ? 1e-5 : 1e-12};
}

struct Geometry {
  std::vector<int64_t> kernel, strides, dilation, padding;
};

// A window of `spatial` axes that fits inputs of `in`.
Geometry RandomGeometry(const std::vector<int64_t>& in, std::mt19937& rng) {
  std::uniform_int_distribution<int64_t> small(0, 2);
  Geometry g;
  std::vector<int64_t> ends;
  for (int64_t size : in) {
    int64_t kernel = 1 + small(rng);
    int64_t dilation = 1 + small(rng) % 2;
    const int64_t begin = std::min<int64_t>(small(rng), kernel - 1);
    const int64_t end = std::min<int64_t>(small(rng), kernel - 1);
    if (size + begin + end < dilation * (kernel - 1) + 1) kernel = dilation = 1;
    g.kernel.push_back(kernel);
    g.strides.push_back(1 + small(rng) % 2);
    g.dilation.push_back(dilation);
    g.padding.push_back(begin);
    ends.push_back(end);
  }
  g.padding.insert(g.padding.end(), ends.begin(), ends.end());
  return g;
}

TEST(ConvKernelsTest, EveryOpHasARuntimeDefinitionAndKernel) {
  ExpectRuntimeHalves({{"nn.conv1d", ShapeFuncMode::kDataIndependent},
                       {"nn.conv2d", ShapeFuncMode::kDataIndependent},
                       {"nn.max_pool1d", ShapeFuncMode::kDataIndependent},
                       {"nn.max_pool2d", ShapeFuncMode::kDataIndependent},
                       {"nn.avg_pool1d", ShapeFuncMode::kDataIndependent},
                       {"nn.avg_pool2d", ShapeFuncMode::kDataIndependent}});
  for (const char* name : {"nn.conv1d", "nn.conv2d", "nn.max_pool1d", "nn.avg_pool2d"}) {
    EXPECT_TRUE(KernelRegistry::Global().Contains(name)) << name;
    EXPECT_TRUE(KernelRegistry::Global().Contains(ShapeFuncKernelName(name))) << name;
    EXPECT_EQ(nimble::op::OpRegistry::Global().Find(name)->pattern,
              nimble::op::OpPattern::kOutEWiseFusable)
        << name;
  }
}

TEST(ConvKernelsTest, ConvMatchesReferenceOnRandomShapes) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int64_t> size(1, 10);
  std::uniform_int_distribution<int64_t> count(1, 3);
  for (int trial = 0; trial < 60; ++trial) {
    const size_t spatial = trial % 2 ? 1 : 2;
    std::vector<int64_t> in;
    for (size_t d = 0; d < spatial; ++d) in.push_back(size(rng));
    const Geometry g = RandomGeometry(in, rng);
    // Every third case depthwise.
    const int64_t groups = trial % 3 == 0 ? 1 + count(rng) : count(rng);
    const int64_t channels = trial % 3 == 0 ? groups : groups * count(rng);
    const int64_t out_channels = groups * count(rng);
    Shape data = {count(rng), channels};
    Shape weight = {out_channels, channels / groups};
    data.insert(data.end(), in.begin(), in.end());
    weight.insert(weight.end(), g.kernel.begin(), g.kernel.end());
    Attrs attrs;
    attrs.Set("strides", g.strides);
    attrs.Set("padding", g.padding);
    attrs.Set("dilation", g.dilation);
    attrs.Set("groups", groups);
    const DataType dtype = trial % 5 == 1   ? DataType::Float16()
                           : trial % 5 == 2 ? DataType::Float64()
                                            : kF32;
    ExpectBuiltinMatchesReference(
        spatial == 1 ? "nn.conv1d" : "nn.conv2d",
        {RandomTensor(data, dtype, rng), RandomTensor(weight, dtype, rng)}, attrs,
        ToleranceFor(dtype));
  }
}

TEST(ConvKernelsTest, ConvLargeEnoughForTheThreadPool) {
  std::mt19937 rng(12);
  Attrs attrs;
  attrs.Set("strides", std::vector<int64_t>{1});
  attrs.Set("padding", std::vector<int64_t>{1});
  attrs.Set("dilation", std::vector<int64_t>{1});
  attrs.Set("groups", int64_t{1});
  ExpectBuiltinMatchesReference(
      "nn.conv2d", {RandomTensor({2, 8, 20, 24}, kF32, rng), RandomTensor({6, 8, 3, 3}, kF32, rng)},
      attrs, ToleranceFor(kF32));
  attrs.Set("strides", std::vector<int64_t>{2});
  ExpectBuiltinMatchesReference(
      "nn.conv1d", {RandomTensor({3, 16, 300}, kF32, rng), RandomTensor({32, 16, 5}, kF32, rng)},
      attrs, ToleranceFor(kF32));
}

TEST(ConvKernelsTest, PoolsMatchReferenceOnRandomShapes) {
  std::mt19937 rng(13);
  std::uniform_int_distribution<int64_t> size(1, 10);
  std::uniform_int_distribution<int64_t> count(1, 3);
  for (int trial = 0; trial < 80; ++trial) {
    const size_t spatial = trial % 2 ? 1 : 2;
    const bool is_max = trial % 4 < 2;
    std::vector<int64_t> in;
    for (size_t d = 0; d < spatial; ++d) in.push_back(size(rng));
    const Geometry g = RandomGeometry(in, rng);
    Shape data = {count(rng), count(rng)};
    data.insert(data.end(), in.begin(), in.end());
    Attrs attrs;
    attrs.Set("pool_size", g.kernel);
    attrs.Set("strides", g.strides);
    attrs.Set("padding", g.padding);
    attrs.Set("dilation", g.dilation);
    attrs.Set("ceil_mode", trial % 3 == 0);
    if (!is_max) attrs.Set("count_include_pad", trial % 5 < 2);
    const DataType dtype = trial % 5 == 1   ? DataType::Float16()
                           : trial % 5 == 2 ? DataType::Float64()
                                            : kF32;
    const std::string op =
        std::string(is_max ? "nn.max_pool" : "nn.avg_pool") + (spatial == 1 ? "1d" : "2d");
    // Max pooling compares and copies: exact.
    ExpectBuiltinMatchesReference(op, {RandomTensor(data, dtype, rng)}, attrs,
                                  is_max ? Tolerance{} : ToleranceFor(dtype));
  }
}

TEST(ConvKernelsTest, PoolsLargeEnoughForTheThreadPool) {
  std::mt19937 rng(14);
  Attrs attrs;
  attrs.Set("pool_size", std::vector<int64_t>{3, 3});
  attrs.Set("strides", std::vector<int64_t>{2});
  attrs.Set("padding", std::vector<int64_t>{1});
  attrs.Set("dilation", std::vector<int64_t>{1});
  attrs.Set("ceil_mode", true);
  ExpectBuiltinMatchesReference("nn.max_pool2d", {RandomTensor({4, 16, 33, 40}, kF32, rng)}, attrs);
  attrs.Set("count_include_pad", false);
  ExpectBuiltinMatchesReference("nn.avg_pool2d", {RandomTensor({4, 16, 33, 40}, kF32, rng)}, attrs,
                                ToleranceFor(kF32));
}

TEST(ConvKernelsTest, ShapeFunctionsAndKernelsCheckTheirArguments) {
  const OpKernelDef* conv = OpKernelRegistry::Global().Find("nn.conv2d");
  ASSERT_NE(conv, nullptr);
  Attrs attrs;
  attrs.Set("strides", std::vector<int64_t>{1});
  attrs.Set("padding", std::vector<int64_t>{0});
  attrs.Set("dilation", std::vector<int64_t>{1});
  attrs.Set("groups", int64_t{2});
  const Tensor data = TensorNode::Empty({1, 4, 5, 5}, kF32);
  EXPECT_EQ(RunShapeFunc(*conv, attrs, {data, TensorNode::Empty({6, 2, 3, 3}, kF32)}, {4}),
            (std::vector<Shape>{{1, 6, 3, 3}}));
  EXPECT_THAT(ErrorOf([&] {
                RunShapeFunc(*conv, attrs, {data, TensorNode::Empty({5, 2, 3, 3}, kF32)}, {4});
              }),
              AllOf(HasSubstr("nn.conv2d: weight's 5 output channels are not divisible by "
                              "groups=2"),
                    HasSubstr("(1, 4, 5, 5)"), HasSubstr("(5, 2, 3, 3)")));
  // A wrong output shape is refused before anything is written.
  EXPECT_THAT(ErrorOf([&] {
                CallKernel("nn.conv2d", attrs,
                           {data, TensorNode::Empty({6, 2, 3, 3}, kF32),
                            TensorNode::Empty({1, 6, 3, 4}, kF32)});
              }),
              HasSubstr("nn.conv2d: output shape (1, 6, 3, 4) differs from the expected "
                        "(1, 6, 3, 3)"));
  EXPECT_THAT(ErrorOf([&] {
                CallKernel("nn.conv2d", attrs,
                           {data, TensorNode::Empty({6, 2, 3, 3}, DataType::Float64()),
                            TensorNode::Empty({1, 6, 3, 3}, kF32)});
              }),
              HasSubstr("nn.conv2d: input 1 is float64 but the output is float32"));
  Attrs pool;
  pool.Set("pool_size", std::vector<int64_t>{2});
  pool.Set("strides", std::vector<int64_t>{1});
  pool.Set("padding", std::vector<int64_t>{0});
  pool.Set("dilation", std::vector<int64_t>{1});
  pool.Set("ceil_mode", false);
  EXPECT_THAT(ErrorOf([&] {
                CallKernel(
                    "nn.max_pool1d", pool,
                    {TensorNode::Empty({1, 2, 6, 6}, kF32), TensorNode::Empty({1, 2, 5}, kF32)});
              }),
              HasSubstr("nn.max_pool1d: data must have rank 3, got shape (1, 2, 6, 6)"));
}

}  // namespace
}  // namespace nimble::vm::testing
