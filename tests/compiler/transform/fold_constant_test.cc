// FoldConstants: text in, text out, and the same values after.
#include "nimble/compiler/transform/fold_constant.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/compiler/transform/normalize_test_util.h"

namespace nimble::transform {
namespace {

using ::testing::ElementsAre;
using testing::ExpectProgram;
using testing::ExpectSameResult;
using testing::F32;
using testing::I32;
using testing::ParseTyped;

std::vector<double> ConstantValues(const ir::Expr& expr) {
  EXPECT_EQ(expr->kind, ir::ExprKind::kConstant);
  if (expr->kind != ir::ExprKind::kConstant) return {};
  const Tensor& data = static_cast<const ir::ConstantNode*>(expr.get())->data;
  std::vector<double> values;
  for (int64_t i = 0; i < data->numel(); ++i) values.push_back(data->GetAsDouble(i));
  return values;
}

TEST(FoldConstants, ScalarArithmeticFoldsThroughLets) {
  ir::IRModule module = ParseTyped(R"(
def @main(%x: Tensor[(), int32]) {
  let %a = add(2, 3);
  let %b = multiply(%a, 4);
  let %c = cast(%b, dtype="int64");
  let %d = add(%x, subtract(%b, 1));
  (%d, %c)
})");
  ExpectProgram(FoldConstants(module), R"(
def @main(%x: Tensor[(), int32]) {
  let %d = add(%x, 19);
  (%d, 20i64)
})");
  ExpectSameResult(module, FoldConstants(module), {I32(1)});
}

TEST(FoldConstants, ShapeOfAStaticTensorIsKnownButNotOfADynamicOne) {
  ir::IRModule module = ParseTyped(R"(
def @main(%x: Tensor[(4, 6), float32], %y: Tensor[(?, 6), float32]) {
  let %rows = take(shape_of(%x), 0);
  let %dynamic_rows = take(shape_of(%y), 0);
  (%rows, %dynamic_rows)
})");
  ExpectProgram(FoldConstants(module), R"(
def @main(%x: Tensor[(4, 6), float32], %y: Tensor[(?, 6), float32]) {
  let %dynamic_rows = take(shape_of(%y), 0);
  (4, %dynamic_rows)
})");
  ir::IRModule shape = FoldConstants(ParseTyped(R"(
def @main(%x: Tensor[(4, 6), float32]) { shape_of(%x, dtype="int64") })"));
  EXPECT_THAT(ConstantValues(shape->Lookup("main")->body), ElementsAre(4, 6));
  EXPECT_EQ(TypeToString(shape->Lookup("main")->body->checked_type), "Tensor[(2,), int64]");
}

TEST(FoldConstants, ResultsLargerThanTheirInputsAreNotFolded) {
  text::ParamMap params{{"w", F32({2, 3}, {1, 2, 3, 4, 5, 6})},
                        {"v", F32({4, 1, 1}, {1, 2, 3, 4})}};
  const char* program = R"(
def @main() {
  let %big = zeros(shape=[64, 64], dtype="float32");
  let %reshaped = reshape(meta[relay.Constant][w], newshape=[3, 2]);
  let %tiled = add(meta[relay.Constant][w], meta[relay.Constant][v]);
  (%big, %reshaped, %tiled)
})";
  ir::IRModule module = ParseTyped(program, &params);
  ir::IRModule folded = FoldConstants(module);
  // Only the reshape, no bigger than its input, became a constant.
  const auto* let = static_cast<const ir::LetNode*>(folded->Lookup("main")->body.get());
  EXPECT_EQ(static_cast<const ir::CallNode*>(let->value.get())->callee->kind, ir::ExprKind::kOp);
  let = static_cast<const ir::LetNode*>(let->body.get());
  EXPECT_EQ(let->var->name_hint, "tiled");
  const auto* tuple = static_cast<const ir::TupleNode*>(let->body.get());
  EXPECT_THAT(ConstantValues(tuple->fields[1]), ElementsAre(1, 2, 3, 4, 5, 6));
  ExpectSameResult(module, folded, {});
}

TEST(FoldConstants, TuplesOfConstantsFeedOps) {
  ir::IRModule module = ParseTyped(R"(
def @main() {
  let %t = (1, 2);
  let %s = concatenate((expand_dims(1, axis=0), expand_dims(2, axis=0)));
  let %n = sum(%s);
  (%t, %n)
})");
  ExpectProgram(FoldConstants(module), R"(
def @main() {
  let %t = (1, 2);
  (%t, 3)
})");
}

TEST(FoldConstants, ACallThatFailsIsLeftForRunTime) {
  ir::IRModule module = ParseTyped(R"(
def @main(%x: Tensor[(4, 6), float32]) -> Tensor[(), int32] {
  take(shape_of(%x), 5, mode="fast")
})");
  ir::Expr body = FoldConstants(module)->Lookup("main")->body;
  ASSERT_EQ(body->kind, ir::ExprKind::kCall);
  const auto* call = static_cast<const ir::CallNode*>(body.get());
  EXPECT_THAT(ConstantValues(call->args[0]), ElementsAre(4, 6));
}

TEST(FoldConstants, InsideBranchesAndFunctionsButNotPrimitives) {
  ir::IRModule module = ParseTyped(R"(
def @main(%c: Tensor[(), bool], %x: Tensor[(), float32]) {
  let %f = fn (%y: Tensor[(), float32]) { multiply(%y, add(1f, 1f)) };
  let %r = if (%c) {
    %f(%x)
  } else {
    fn (%p: Tensor[(), float32], Primitive=1) -> Tensor[(), float32] { negative(%p) }(negative(3f))
  };
  %r
})");
  ExpectProgram(FoldConstants(module), R"(
def @main(%c: Tensor[(), bool], %x: Tensor[(), float32]) {
  let %f = fn (%y: Tensor[(), float32]) { multiply(%y, 2f) };
  let %r = if (%c) {
    %f(%x)
  } else {
    fn (%p: Tensor[(), float32], Primitive=1) -> Tensor[(), float32] { negative(%p) }(-3f)
  };
  %r
})");
  for (bool c : {true, false}) {
    ExpectSameResult(module, FoldConstants(module),
                     {TensorNode::Scalar(DataType::Bool(), c), F32({}, {5})});
  }
}

}  // namespace
}  // namespace nimble::transform
