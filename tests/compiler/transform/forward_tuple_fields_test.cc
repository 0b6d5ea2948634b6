// ForwardTupleFields: text in, text out, values kept; then on the pipeline's
// memory dialect, where a kernel's tuple argument is passed as a literal.
#include "nimble/compiler/transform/forward_tuple_fields.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "nimble/compiler/backend/pipeline.h"
#include "tests/compiler/transform/normalize_test_util.h"

namespace nimble::transform {
namespace {

using ::testing::AllOf;
using testing::ExpectProgram;
using testing::ExpectSameResult;
using testing::F32;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::ParseTyped;

TEST(ForwardTupleFields, AFieldReadsAsItsValueAndTheTupleGoes) {
  ir::IRModule module = ParseTyped(R"(
def @main(%a: Tensor[(2,), float32], %b: Tensor[(2,), float32]) {
  let %t = (%a, %b);
  let %x = %t.1;
  let %s = add(%x, %a);
  %s
})");
  const ir::IRModule forwarded = ForwardTupleFields(module);
  ExpectProgram(forwarded, R"(
def @main(%a: Tensor[(2,), float32], %b: Tensor[(2,), float32]) {
  let %s = add(%b, %a);
  %s
})");
  ExpectSameResult(module, forwarded, {F32({2}, {1, 2}), F32({2}, {10, 20})});
}

// A variable bound to another (what normal form leaves where an inlined
// body's tuple is bound) reads as it, so the tuple's fields still forward.
TEST(ForwardTupleFields, AnAliasOfATupleForwardsItsFields) {
  ir::IRModule module = ParseTyped(R"(
def @main(%a: Tensor[(2,), float32], %b: Tensor[(2,), float32]) {
  let %t = (%a, %b);
  let %u = %t;
  let %x = %u.0;
  let %y = %u.1;
  add(%x, %y)
})");
  const ir::IRModule forwarded = ForwardTupleFields(module);
  ExpectProgram(forwarded, R"(
def @main(%a: Tensor[(2,), float32], %b: Tensor[(2,), float32]) {
  add(%a, %b)
})");
  ExpectSameResult(module, forwarded, {F32({2}, {1, 2}), F32({2}, {10, 20})});
}

TEST(ForwardTupleFields, ATupleReadAsAWholeStays) {
  ir::IRModule module = ParseTyped(R"(
def @main(%a: Tensor[(2,), float32], %b: Tensor[(2,), float32], %c: Tensor[(), bool]) {
  let %t = (%a, %b);
  let %r = if (%c) { %t.0 } else { %t.1 };
  (%t, %r)
})");
  const ir::IRModule forwarded = ForwardTupleFields(module);
  ExpectProgram(forwarded, R"(
def @main(%a: Tensor[(2,), float32], %b: Tensor[(2,), float32], %c: Tensor[(), bool]) {
  let %t = (%a, %b);
  let %r = if (%c) { %a } else { %b };
  (%t, %r)
})");
  for (const bool c : {false, true}) {
    ExpectSameResult(
        module, forwarded,
        {F32({2}, {1, 2}), F32({2}, {10, 20}), TensorNode::Scalar(DataType::Bool(), c)});
  }
}

// A tuple of computed values is not taken apart: its fields are not atoms.
TEST(ForwardTupleFields, ATupleOfCallsStays) {
  const std::string text = R"(
def @main(%a: Tensor[(2,), float32]) {
  let %t = (negative(%a), %a);
  let %x = %t.0;
  %x
})";
  ExpectProgram(ForwardTupleFields(ParseTyped(text)), text);
}

// After memory manifestation, concatenate's tuple argument reaches the kernel
// call as a literal, and the tuple of a two-output kernel's results is read
// field by field: no tuple is left for the VM to build.
TEST(ForwardTupleFields, KernelsTakeTupleLiteralsAndGiveTheirOutputsDirectly) {
  ir::IRModule module = ParseTyped(R"(
def @main(%x: Tensor[(1, 2), float32], %y: Tensor[(1, 2), float32]) {
  let %pair = (%x, %y);
  let %joined = concatenate(%pair, axis=1);
  let %parts = split(%joined, indices_or_sections=2, axis=1);
  let %first = %parts.0;
  let %second = %parts.1;
  add(%first, %second)
})");
  backend::CompileOptions options;
  options.kernels = "builtin";
  const std::string before =
      text::PrintModule(backend::RunPasses(module, options, "manifest-alloc"));
  EXPECT_THAT(before, HasSubstr("%pair"));
  const std::string after =
      text::PrintModule(backend::RunPasses(module, options, "forward-tuple-fields"));
  EXPECT_THAT(after, AllOf(Not(HasSubstr("%pair")), HasSubstr("((%x, %y),)"), Not(HasSubstr(".0;")),
                           Not(HasSubstr(".1;"))))
      << after;
}

}  // namespace
}  // namespace nimble::transform
