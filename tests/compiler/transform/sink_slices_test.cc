// SinkSlices: text in, text out, each rewrite evaluated against the program
// it came from; then an attention layer read at one token through the whole
// pipeline on the VM.
#include "nimble/compiler/transform/sink_slices.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "nimble/compiler/backend/pipeline.h"
#include "nimble/compiler/eval/evaluator.h"
#include "nimble/compiler/transform/let_chain.h"
#include "nimble/vm/vm.h"
#include "tests/compiler/transform/normalize_test_util.h"
#include "tests/error_of.h"

namespace nimble::transform {
namespace {

using ::testing::ElementsAre;
using testing::ExactValues;
using testing::ExpectProgram;
using testing::ExpectSameResult;
using testing::ParseTyped;

// `text` with each `from` (which must occur) replaced by `to`: a pass's
// expected output as the lines it changes in its input.
std::string Edited(std::string text,
                   const std::vector<std::pair<std::string, std::string>>& edits) {
  for (const auto& [from, to] : edits) {
    const size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos) text.replace(at, from.size(), to);
  }
  return text;
}

// A classifier's head: the first token of a dense, bias and layer norm.
constexpr const char* kHead = R"(
def @main(%x: Tensor[(1, ?<=16, 4), float32], %w: Tensor[(6, 4), float32], %b: Tensor[(6,), float32],
          %g: Tensor[(6,), float32]) {
  let %y = nn.dense(%x, %w);
  let %z = add(%y, %b);
  let %n = nn.layer_norm(%z, %g, %b);
  let %first = take(%n, 0, axis=1);
  %first
})";

TEST(SinkSlices, AProgramWithoutSlicesComesBackAsItWas) {
  testing::ExpectUnchanged(ParseTyped(testing::kNormalProgram), SinkSlices);
}

TEST(SinkSlices, ATakenRowIsComputedFromTheRowsItReads) {
  const ir::IRModule module = ParseTyped(kHead);
  const ir::IRModule sunk = SinkSlices(module);
  ExpectProgram(sunk,
                Edited(kHead, {{"let %y = nn.dense(%x, %w);",
                                "let %row = strided_slice(%x, begin=[0], end=[1], axes=[1]);\n"
                                "  let %y = nn.dense(%row, %w);"}}));
  for (const int64_t tokens : {1, 5}) {
    ExpectSameResult(module, sunk,
                     {ExactValues({1, tokens, 4}, 1), ExactValues({6, 4}, 2), ExactValues({6}, 3),
                      ExactValues({6}, 4)});
  }
}

// %y is read whole by the second output: it stays, and the narrowed add
// reads one slice of it; the take's index moves to 0 of the narrowed value.
TEST(SinkSlices, AValueReadWholeElsewhereIsSlicedOnce) {
  const ir::IRModule module = ParseTyped(R"(
def @main(%x: Tensor[(5, 4), float32], %w: Tensor[(3, 4), float32]) {
  let %y = nn.dense(%x, %w);
  let %a = add(%y, %y);
  let %r = take(%a, 2, axis=0);
  let %s = sigmoid(%y);
  (%r, %s)
})");
  const ir::IRModule sunk = SinkSlices(module);
  ExpectProgram(sunk, R"(
def @main(%x: Tensor[(5, 4), float32], %w: Tensor[(3, 4), float32]) {
  let %y = nn.dense(%x, %w);
  let %row = strided_slice(%y, begin=[2], end=[3], axes=[0]);
  let %a = add(%row, %row);
  let %r = take(%a, 0, axis=0);
  let %s = sigmoid(%y);
  (%r, %s)
})");
  ExpectSameResult(module, sunk, {ExactValues({5, 4}, 1), ExactValues({3, 4}, 2)});
}

// One token's attention: the query's row through its projection, reshape
// and transpose into heads, the scores, softmax and the context product,
// back through transpose and reshape; keys and values stay whole.
constexpr const char* kAttention = R"(
def @main(%x: Tensor[(1, ?, 8), float32], %wq: Tensor[(8, 8), float32],
          %wk: Tensor[(8, 8), float32], %wv: Tensor[(8, 8), float32]) {
  let %q0 = nn.dense(%x, %wq);
  let %q1 = reshape(%q0, newshape=[-1, 2, 4]);
  let %q = transpose(%q1, axes=[1, 0, 2]);
  let %k0 = nn.dense(%x, %wk);
  let %k1 = reshape(%k0, newshape=[-1, 2, 4]);
  let %k = transpose(%k1, axes=[1, 0, 2]);
  let %v0 = nn.dense(%x, %wv);
  let %v1 = reshape(%v0, newshape=[-1, 2, 4]);
  let %v = transpose(%v1, axes=[1, 2, 0]);
  let %scores = nn.batch_matmul(%q, %k);
  let %probs = nn.softmax(%scores);
  let %context0 = nn.batch_matmul(%v, %probs);
  let %context1 = transpose(%context0, axes=[2, 0, 1]);
  let %context = reshape(%context1, newshape=[1, -1, 8]);
  let %out = add(%context, %x);
  let %first = take(%out, 0, axis=1, mode="fast");
  %first
})";

TEST(SinkSlices, OneTokensAttentionReadsTheOtherTokensKeysAndValuesOnly) {
  const ir::IRModule module = ParseTyped(kAttention);
  const ir::IRModule sunk = SinkSlices(module);
  ExpectProgram(sunk,
                Edited(kAttention, {{"let %q0 = nn.dense(%x, %wq);",
                                     "let %row = strided_slice(%x, begin=[0], end=[1], axes=[1]);\n"
                                     "  let %q0 = nn.dense(%row, %wq);"},
                                    {"add(%context, %x)", "add(%context, %row)"}}));
  for (const int64_t tokens : {1, 2, 7}) {
    ExpectSameResult(module, sunk,
                     {ExactValues({1, tokens, 8}, 1), ExactValues({8, 8}, 2),
                      ExactValues({8, 8}, 3), ExactValues({8, 8}, 4)});
  }
}

// What cannot be narrowed stays as it was.
TEST(SinkSlices, ProgramsWithoutOneReadRowStay) {
  const std::vector<std::string> programs = {
      // Two rows read: %y is read whole.
      R"(
def @main(%x: Tensor[(5, 4), float32]) {
  let %y = sigmoid(%x);
  let %a = take(%y, 0, axis=0);
  let %b = take(%y, 1, axis=0);
  (%a, %b)
})",
      // The row runs along softmax's axis.
      R"(
def @main(%x: Tensor[(5, 4), float32]) {
  let %y = nn.softmax(%x, axis=0);
  let %a = take(%y, 0, axis=0);
  %a
})",
      // Along a dense's output columns.
      R"(
def @main(%x: Tensor[(5, 4), float32], %w: Tensor[(3, 4), float32]) {
  let %y = nn.dense(%x, %w);
  let %a = take(%y, 1, axis=1);
  %a
})",
      // A clipped index on a run-time extent may not be row 2.
      R"(
def @main(%x: Tensor[(?, 4), float32]) {
  let %y = sigmoid(%x);
  let %a = take(%y, 2, axis=0);
  %a
})",
      // Row 2 of an operand of run-time extent: it may be broadcast (1).
      R"(
def @main(%x: Tensor[(?, 4), float32], %z: Tensor[(?, 4), float32]) {
  let %y = add(%x, %z);
  let %a = take(%y, 2, axis=0, mode="fast");
  %a
})",
      // The whole axis is the row already.
      R"(
def @main(%x: Tensor[(1, 4), float32]) {
  let %y = sigmoid(%x);
  let %a = take(%y, 0, axis=0);
  %a
})",
  };
  for (const std::string& text : programs) ExpectProgram(SinkSlices(ParseTyped(text)), text);
}

// Row 0 is in range however an operand broadcasts; an operand of static
// extent 1 is read whole.
TEST(SinkSlices, RowZeroPassesOperandsOfRunTimeExtent) {
  const ir::IRModule module = ParseTyped(R"(
def @main(%x: Tensor[(?, 4), float32], %z: Tensor[(?, 4), float32], %c: Tensor[(1, 4), float32]) {
  let %y = add(%x, %z);
  let %u = multiply(%y, %c);
  let %a = take(%u, 0, axis=0);
  %a
})");
  const ir::IRModule sunk = SinkSlices(module);
  ExpectProgram(sunk, R"(
def @main(%x: Tensor[(?, 4), float32], %z: Tensor[(?, 4), float32], %c: Tensor[(1, 4), float32]) {
  let %xr = strided_slice(%x, begin=[0], end=[1], axes=[0]);
  let %zr = strided_slice(%z, begin=[0], end=[1], axes=[0]);
  let %y = add(%xr, %zr);
  let %u = multiply(%y, %c);
  let %a = take(%u, 0, axis=0);
  %a
})");
  ExpectSameResult(module, sunk,
                   {ExactValues({3, 4}, 1), ExactValues({1, 4}, 2), ExactValues({1, 4}, 3)});
  ExpectSameResult(module, sunk,
                   {ExactValues({3, 4}, 1), ExactValues({3, 4}, 2), ExactValues({1, 4}, 3)});
}

// zeros has no input to narrow (and a shape attribute): its value is sliced.
TEST(SinkSlices, AValueMadeFromNoInputIsSliced) {
  const ir::IRModule module = ParseTyped(R"(
def @main(%x: Tensor[(5, 4), float32]) {
  let %z = zeros(shape=[5, 4]);
  let %y = subtract(%x, %z);
  let %a = take(%y, 3, axis=0);
  %a
})");
  const ir::IRModule sunk = SinkSlices(module);
  ExpectProgram(sunk, R"(
def @main(%x: Tensor[(5, 4), float32]) {
  let %z = zeros(shape=[5, 4]);
  let %xr = strided_slice(%x, begin=[3], end=[4], axes=[0]);
  let %zr = strided_slice(%z, begin=[3], end=[4], axes=[0]);
  let %y = subtract(%xr, %zr);
  let %a = take(%y, 0, axis=0);
  %a
})");
  ExpectSameResult(module, sunk, {ExactValues({5, 4}, 1)});
}

// A slice of a bounded run-time extent is at most as long as its range: the
// narrowed values' types say one row, so that storage is planned for one.
TEST(SinkSlices, NarrowedValuesAreTypedAtMostTheRange) {
  const ir::IRModule sunk = SinkSlices(ParseTyped(kHead));
  std::vector<std::string> types;
  for (const Binding& binding : FlattenLets(sunk->Lookup("main")->body).bindings) {
    types.push_back(ir::TypeToString(binding.value->checked_type));
  }
  EXPECT_THAT(types, ElementsAre("Tensor[(1, ?<=1, 4), float32]", "Tensor[(1, ?<=1, 6), float32]",
                                 "Tensor[(1, ?<=1, 6), float32]", "Tensor[(1, ?<=1, 6), float32]",
                                 "Tensor[(1, 6), float32]"));
}

// The attention through the whole pipeline, fused and not, on the VM: the
// same values as the evaluator on the program as written.
TEST(SinkSlices, AnAttentionHeadRunsOnTheVmLikeTheEvaluator) {
  const ir::IRModule module = ParseTyped(kAttention);
  for (const bool fuse : {false, true}) {
    const backend::CompileOptions options{.fuse_ops = fuse, .kernels = "generated"};
    vm::VirtualMachine machine(backend::Compile(module, options));
    for (const int64_t tokens : {1, 6}) {
      const std::vector<Ref<Object>> args = {ExactValues({1, tokens, 8}, 1), ExactValues({8, 8}, 2),
                                             ExactValues({8, 8}, 3), ExactValues({8, 8}, 4)};
      const Tensor got = machine.Invoke("main", args).as<TensorNode>();
      const Tensor want = eval::Evaluate(module, "main", args).as<TensorNode>();
      ASSERT_TRUE(got && want);
      ASSERT_EQ(got->shape(), want->shape());
      for (int64_t i = 0; i < want->numel(); ++i) {
        EXPECT_NEAR(got->GetAsDouble(i), want->GetAsDouble(i), 1e-4)
            << "fuse " << fuse << ", " << tokens << " tokens, element " << i;
      }
    }
  }
}

}  // namespace
}  // namespace nimble::transform
