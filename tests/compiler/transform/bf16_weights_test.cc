// ConvertDenseWeightsToBf16 and --precision bf16: which weights the pass
// rounds and how, the compiled program against the fp32 one on the VM, and
// the refusals (another target, an unknown precision, a host without the
// bf16 instructions, simulated by NIMBLE_CPU_FEATURES_OFF).
#include "nimble/compiler/transform/bf16_weights.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>

#include "nimble/compiler/backend/pipeline.h"
#include "nimble/vm/cpu_features.h"
#include "nimble/vm/error.h"
#include "nimble/vm/vm.h"
#include "tests/compiler/transform/normalize_test_util.h"
#include "tests/scoped_env.h"

namespace nimble::transform {
namespace {

using testing::ExactValues;
using testing::ExpectProgram;
using testing::ParseTyped;

// NIMBLE_CPU_FEATURES_OFF for a scope (cpu_features.h reads it on every check).
class FeaturesOff : public nimble::testing::ScopedEnv {
 public:
  explicit FeaturesOff(const char* features) : ScopedEnv("NIMBLE_CPU_FEATURES_OFF", features) {}
};

Tensor RoundedByHand(const Tensor& weight) {
  Tensor rounded = TensorNode::Empty(weight->shape(), DataType::BFloat16());
  for (int64_t i = 0; i < weight->numel(); ++i) {
    rounded->data<BFloat16>()[i] = FloatToBFloat16(weight->data<float>()[i]);
  }
  return rounded;
}

// Random-looking weights with more mantissa bits than bf16 keeps.
Tensor Weights(const Shape& shape, int seed) {
  Tensor tensor = TensorNode::Empty(shape, DataType::Float32());
  uint32_t state = 2654435761u * static_cast<uint32_t>(seed + 1);
  for (int64_t i = 0; i < tensor->numel(); ++i) {
    state = state * 1664525u + 1013904223u;
    tensor->data<float>()[i] = static_cast<float>(state >> 8) / 16777216.0f - 0.5f;
  }
  return tensor;
}

TEST(BFloat16, RoundsToNearestEvenAndKeepsSpecials) {
  EXPECT_EQ(FloatToBFloat16(1.0f).bits, 0x3f80);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: the even one, 1.
  EXPECT_EQ(FloatToBFloat16(1.00390625f).bits, 0x3f80);
  // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6: the even one.
  EXPECT_EQ(FloatToBFloat16(1.01171875f).bits, 0x3f82);
  EXPECT_EQ(FloatToBFloat16(1.0f + 0x1p-8f + 0x1p-20f).bits, 0x3f81);
  EXPECT_EQ(FloatToBFloat16(std::numeric_limits<float>::max()).bits, 0x7f80);  // to infinity
  EXPECT_TRUE(std::isnan(BFloat16ToFloat(FloatToBFloat16(std::nanf("")))));
  EXPECT_EQ(FloatToBFloat16(-0.0f).bits, 0x8000);
  EXPECT_EQ(BFloat16ToFloat({0x4049}), 3.140625f);
  EXPECT_EQ(DataType::Parse("bfloat16"), DataType::BFloat16());
  EXPECT_EQ(DataType::BFloat16().name(), "bfloat16");
}

// A constant weight is rounded once for both calls that share it; a weight
// that is a parameter, and a product of two computed values, stay float32.
TEST(ConvertDenseWeightsToBf16, RoundsEachConstantWeightOnce) {
  const text::ParamMap params{{"w", Weights({32, 5}, 1)}};
  const ir::IRModule module = ParseTyped(R"(
def @main(%x: Tensor[(?, 5), float32], %v: Tensor[(4, 5), float32]) {
  (nn.dense(%x, meta[relay.Constant][w]), nn.dense(%x, meta[relay.Constant][w], units=32),
   nn.dense(%x, %v))
})",
                                         &params);
  const ir::IRModule converted = ConvertDenseWeightsToBf16(module);
  const text::ParamMap expected_params{{"w.bf16", RoundedByHand(params.at("w"))}};
  ExpectProgram(converted, R"(
def @main(%x: Tensor[(?, 5), float32], %v: Tensor[(4, 5), float32]) {
  (nn.dense(%x, meta[relay.Constant][w.bf16]), nn.dense(%x, meta[relay.Constant][w.bf16], units=32),
   nn.dense(%x, %v))
})",
                &expected_params);
  const auto& tuple = static_cast<const ir::TupleNode&>(*converted->Lookup("main")->body);
  EXPECT_EQ(static_cast<const ir::CallNode&>(*tuple.fields[0]).args[1].get(),
            static_cast<const ir::CallNode&>(*tuple.fields[1]).args[1].get());
}

TEST(ConvertDenseWeightsToBf16, LeavesAProgramWithoutConstantWeightsAsItIs) {
  const ir::IRModule module = ParseTyped(R"(
def @main(%x: Tensor[(2, 5), float32], %w: Tensor[(3, 5), float32]) {
  nn.dense(%x, %w)
})");
  EXPECT_EQ(ConvertDenseWeightsToBf16(module).get(), module.get());
}

const char* const kLayer = R"(
def @main(%x: Tensor[(?, 300), float32]) {
  tanh(add(nn.dense(%x, meta[relay.Constant][w]), meta[relay.Constant][b]))
})";

// The whole pipeline at bf16 on the VM: within bf16's rounding of the fp32
// program's outputs (300 products of weights rounded by up to 2^-9 of their
// size), and not equal to them (the weights did change).
TEST(PrecisionBf16, RunsWithinBf16RoundingOfTheFp32Program) {
  if (!vm::HostHas(vm::CpuFeature::kAvx512Bf16)) GTEST_SKIP() << "this host has no avx512_bf16";
  const text::ParamMap params{{"w", Weights({40, 300}, 2)}, {"b", Weights({40}, 3)}};
  const ir::IRModule module = ParseTyped(kLayer, &params);
  const Tensor x = Weights({7, 300}, 4);
  for (const std::string kernels : {"auto", "builtin"}) {
    backend::CompileOptions fp32{.kernels = kernels};
    backend::CompileOptions bf16 = fp32;
    bf16.precision = "bf16";
    vm::VirtualMachine exact(backend::Compile(module, fp32));
    vm::VirtualMachine reduced(backend::Compile(module, bf16));
    const Tensor want = exact.Invoke("main", {x}).as<TensorNode>();
    const Tensor got = reduced.Invoke("main", {x}).as<TensorNode>();
    ASSERT_EQ(got->shape(), want->shape());
    double max_diff = 0;
    for (int64_t i = 0; i < want->numel(); ++i) {
      max_diff = std::max(max_diff, std::abs(got->GetAsDouble(i) - want->GetAsDouble(i)));
    }
    EXPECT_GT(max_diff, 0) << kernels;
    EXPECT_LT(max_diff, 0.05) << kernels;
  }
}

TEST(PrecisionBf16, IsRefusedWhereItCannotRun) {
  const text::ParamMap params{{"w", Weights({40, 300}, 2)}, {"b", Weights({40}, 3)}};
  const ir::IRModule module = ParseTyped(kLayer, &params);
  {
    const FeaturesOff off("avx512_bf16");
    try {
      backend::Compile(module, {.precision = "bf16"});
      FAIL() << "compiled for bf16 on a host without avx512_bf16";
    } catch (const Error& error) {
      EXPECT_THAT(error.what(),
                  ::testing::HasSubstr("--precision bf16 needs the CPU feature avx512_bf16, which "
                                       "this host does not have"));
    }
    // fp32 is unaffected.
    EXPECT_NO_THROW(backend::Compile(module, {}));
  }
  EXPECT_THROW(
      {
        try {
          backend::Compile(module, {.target = "arm", .precision = "bf16"});
        } catch (const Error& error) {
          EXPECT_THAT(error.what(), ::testing::HasSubstr("not target arm"));
          throw;
        }
      },
      Error);
  EXPECT_THROW(
      {
        try {
          backend::Compile(module, {.precision = "fp16"});
        } catch (const Error& error) {
          EXPECT_THAT(error.what(), ::testing::HasSubstr("unknown precision 'fp16'"));
          throw;
        }
      },
      Error);
  const FeaturesOff typo("avx512bf16");
  EXPECT_THROW(vm::HostHas(vm::CpuFeature::kAvx512Bf16), Error);
}

}  // namespace
}  // namespace nimble::transform
