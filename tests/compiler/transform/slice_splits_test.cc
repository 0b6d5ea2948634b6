// SliceSplits: text in, text out, then the pipeline on an LSTM-like step,
// whose gates must come out of one fused kernel with the same values.
#include "nimble/compiler/transform/slice_splits.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "nimble/compiler/backend/pipeline.h"
#include "nimble/compiler/ir/functor.h"
#include "nimble/compiler/transform/pass_util.h"
#include "tests/compiler/transform/normalize_test_util.h"

namespace nimble::transform {
namespace {

using ::testing::ElementsAre;
using testing::ExpectProgram;
using testing::ExpectSameResult;
using testing::F32;
using testing::ParseTyped;

bool AnySlice(const ir::CallNode&) {
  return true;
}

TEST(SliceSplits, AProgramWithoutSplitsComesBackAsItWas) {
  testing::ExpectUnchanged(ParseTyped(testing::kNormalProgram),
                           [](const ir::IRModule& module) { return SliceSplits(module, AnySlice); });
}

TEST(SliceSplits, FieldsOfEqualSectionsBecomeSlicesAndTheSplitGoes) {
  ir::IRModule module = ParseTyped(R"(
def @main(%x: Tensor[(?, 6), float32]) {
  let %parts = split(%x, indices_or_sections=3, axis=-1);
  let %a = %parts.0;
  let %c = %parts.2;
  let %s = add(%a, %c);
  %s
})");
  ExpectProgram(SliceSplits(module, AnySlice), R"(
def @main(%x: Tensor[(?, 6), float32]) {
  let %a = strided_slice(%x, begin=[0], end=[2], axes=[1]);
  let %c = strided_slice(%x, begin=[4], end=[6], axes=[1]);
  let %s = add(%a, %c);
  %s
})");
}

TEST(SliceSplits, SplitIndicesGiveTheSlicesBounds) {
  ir::IRModule module = ParseTyped(R"(
def @main(%x: Tensor[(5, 3), float32]) {
  let %parts = split(%x, indices_or_sections=[1, 4]);
  let %b = %parts.1;
  let %c = %parts.2;
  (%b, %c)
})");
  ExpectProgram(SliceSplits(module, AnySlice), R"(
def @main(%x: Tensor[(5, 3), float32]) {
  let %b = strided_slice(%x, begin=[1], end=[4], axes=[0]);
  let %c = strided_slice(%x, begin=[4], end=[5], axes=[0]);
  (%b, %c)
})");
}

// The slices' bounds would be run-time values.
TEST(SliceSplits, ASplitAlongADynamicAxisStays) {
  const std::string text = R"(
def @main(%x: Tensor[(?, 6), float32]) {
  let %parts = split(%x, indices_or_sections=2, axis=0);
  let %a = %parts.0;
  %a
})";
  ExpectProgram(SliceSplits(ParseTyped(text), AnySlice), text);
}

TEST(SliceSplits, ASplitStillReadAsATupleStaysBesideTheSlices) {
  ir::IRModule module = ParseTyped(R"(
def @main(%x: Tensor[(4,), float32], %c: Tensor[(), bool]) {
  let %parts = split(%x, indices_or_sections=2);
  let %a = %parts.0;
  let %r = if (%c) { %parts.1 } else { %a };
  %r
})");
  ExpectProgram(SliceSplits(module, AnySlice), R"(
def @main(%x: Tensor[(4,), float32], %c: Tensor[(), bool]) {
  let %parts = split(%x, indices_or_sections=2);
  let %a = strided_slice(%x, begin=[0], end=[2], axes=[0]);
  let %r = if (%c) { %parts.1 } else { %a };
  %r
})");
  const ir::IRModule sliced = SliceSplits(module, AnySlice);
  for (const bool c : {false, true}) {
    ExpectSameResult(module, sliced,
                     {F32({4}, {1, 2, 3, 4}), TensorNode::Scalar(DataType::Bool(), c)});
  }
}

TEST(SliceSplits, ASliceThatCannotFuseIsNotMade) {
  const std::string text = R"(
def @main(%x: Tensor[(4,), float32]) {
  let %parts = split(%x, indices_or_sections=2);
  let %a = %parts.0;
  %a
})";
  ExpectProgram(SliceSplits(ParseTyped(text), [](const ir::CallNode&) { return false; }), text);
}

// The names of the fused primitives' ops, in program order.
class PrimitiveNames : public ir::ExprVisitor {
 public:
  void VisitFunction(const ir::FunctionNode* function) override {
    if (HasFlag(function, kPrimitiveAttr)) {
      const ir::AttrValue* fused = function->attrs.Find(kFusedAttr);
      if (fused) names.push_back(std::get<std::string>(*fused));
    }
    ExprVisitor::VisitFunction(function);
  }
  std::vector<std::string> names;
};

// An LSTM step after the whole pipeline: the bias, the four gate pieces and
// the cell and hidden states are one kernel, which returns both states.
TEST(SliceSplits, AnLstmStepsGatesFuseIntoOneKernelWithTwoOutputs) {
  ir::IRModule module = ParseTyped(R"(
def @main(%gates: Tensor[(1, 8), float32], %bias: Tensor[(8,), float32],
          %c: Tensor[(1, 2), float32]) {
  let %g = add(%gates, %bias);
  let %parts = split(%g, indices_or_sections=4, axis=1);
  let %c_next = add(multiply(sigmoid(%parts.1), %c), multiply(sigmoid(%parts.0), tanh(%parts.2)));
  (multiply(sigmoid(%parts.3), tanh(%c_next)), %c_next)
})");
  backend::CompileOptions options;
  options.kernels = "generated";
  const ir::IRModule fused = backend::RunPasses(module, options, "fuse");
  PrimitiveNames primitives;
  primitives.VisitExpr(fused->Lookup("main"));
  ASSERT_THAT(primitives.names, ElementsAre(::testing::HasSubstr("add+strided_slice")));
  EXPECT_EQ(std::count(primitives.names[0].begin(), primitives.names[0].end(), '+'), 13)
      << primitives.names[0];
  ExpectSameResult(
      module, fused,
      {F32({1, 8}, {0.5f, -1, 2, 0.25f, -0.5f, 1, -2, 3}),
       F32({8}, {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f, 0.8f}), F32({1, 2}, {1.5f, -0.75f})});
}

}  // namespace
}  // namespace nimble::transform
