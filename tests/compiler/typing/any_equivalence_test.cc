#include "nimble/compiler/typing/any_equivalence.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "nimble/compiler/op/op.h"
#include "nimble/compiler/typing/type_infer.h"
#include "nimble/vm/error.h"

namespace nimble::typing {
namespace {

using namespace nimble::ir;  // NOLINT: the tests build IR.

Type Tensor(std::vector<Dim> shape) {
  return MakeTensorType(std::move(shape), DataType::Float32());
}
Expr OpCall(const std::string& name, std::vector<Expr> args, Attrs attrs = {}) {
  return op::MakeOpCall(name, std::move(args), std::move(attrs));
}
IRModule MainModule(std::vector<Var> params, Expr body) {
  IRModule module = MakeModule();
  module->Add(module->GetGlobalVar("main"), Make<FunctionNode>(std::move(params), std::move(body),
                                                               nullptr, std::vector<TypeVar>{}));
  return module;
}

TEST(AnyEquivalenceTest, BroadcastOfTwoAnyDimsTiesInputsAndOutput) {
  Var x = MakeVar("x", Tensor({Dim::Any(), 4}));
  Var y = MakeVar("y", Tensor({Dim::Any(), 4}));
  Expr sum = OpCall("add", {x, y});
  const AnyEquivalence result = AnalyzeAnyEquivalence(MainModule({x, y}, sum));
  ASSERT_EQ(result.num_classes(), 1);
  EXPECT_EQ(result.ClassOf(x, 0), 0);
  EXPECT_EQ(result.ClassOf(y, 0), 0);
  EXPECT_EQ(result.ClassOf(sum, 0), 0);
  EXPECT_EQ(result.ClassOf(sum, 1), -1);               // static
  EXPECT_EQ(result.Members(0).front().expr, x.get());  // named after %x's dim 0
  EXPECT_EQ(result.Members(0).size(), 3u);
}

TEST(AnyEquivalenceTest, DenseChainKeepsOneBatchSymbol) {
  Var x = MakeVar("x", Tensor({Dim::Any(), 8}));
  Var w1 = MakeVar("w1", Tensor({16, 8}));
  Var w2 = MakeVar("w2", Tensor({4, 16}));
  Expr hidden = OpCall("nn.relu", {OpCall("nn.dense", {x, w1})});
  Expr out = OpCall("nn.dense", {hidden, w2});
  const AnyEquivalence result = AnalyzeAnyEquivalence(MainModule({x, w1, w2}, out));
  ASSERT_EQ(result.num_classes(), 1);
  EXPECT_EQ(result.ClassOf(hidden, 0), result.ClassOf(x, 0));
  EXPECT_EQ(result.ClassOf(out, 0), result.ClassOf(x, 0));
  EXPECT_EQ(result.ClassOf(out, 1), -1);
}

TEST(AnyEquivalenceTest, IndependentParametersStayApart) {
  Var x = MakeVar("x", Tensor({Dim::Any(), 8}));
  Var y = MakeVar("y", Tensor({Dim::Any(), 8}));
  Var w = MakeVar("w", Tensor({8, 8}));
  Expr dx = OpCall("nn.dense", {x, w});
  Expr dy = OpCall("nn.dense", {y, w});
  const AnyEquivalence result =
      AnalyzeAnyEquivalence(MainModule({x, y, w}, MakeTupleExpr({dx, dy})));
  ASSERT_EQ(result.num_classes(), 2);
  EXPECT_EQ(result.ClassOf(dx, 0), result.ClassOf(x, 0));
  EXPECT_EQ(result.ClassOf(dy, 0), result.ClassOf(y, 0));
  EXPECT_NE(result.ClassOf(x, 0), result.ClassOf(y, 0));
}

TEST(AnyEquivalenceTest, TupleParameterFieldsAreAnalysedToo) {
  Var p = MakeVar("p", MakeTupleType({Tensor({Dim::Any(), 4}), Tensor({Dim::Any(), 4})}));
  Expr first = Make<TupleGetItemNode>(p, 0);
  Expr second = Make<TupleGetItemNode>(p, 1);
  Expr sum = OpCall("add", {first, second});
  const AnyEquivalence result = AnalyzeAnyEquivalence(MainModule({p}, sum));
  ASSERT_EQ(result.num_classes(), 1);
  EXPECT_EQ(result.ClassOf(first, 0), 0);
  EXPECT_EQ(result.ClassOf(second, 0), 0);
  EXPECT_EQ(result.ClassOf(sum, 0), 0);
  EXPECT_EQ(result.ClassOf(p, 0), -1);  // not a tensor
}

TEST(AnyEquivalenceTest, DimensionPinnedByARelationKeepsItsOwnClass) {
  // (?) broadcast against (3) is 1 or 3 at run time: no free symbol.
  Var x = MakeVar("x", Tensor({Dim::Any()}));
  Var c = MakeVar("c", Tensor({3}));
  Expr sum = OpCall("add", {x, c});
  const AnyEquivalence result = AnalyzeAnyEquivalence(MainModule({x, c}, sum));
  ASSERT_EQ(result.num_classes(), 1);
  EXPECT_EQ(result.ClassOf(x, 0), 0);
  EXPECT_EQ(result.ClassOf(sum, 0), -1);
}

TEST(AnyEquivalenceTest, AnyFromDataIsNotTiedAndTypingIsKept) {
  Var x = MakeVar("x", Tensor({Dim::Any()}));
  Expr unique = OpCall("unique", {x});
  IRModule module = MainModule({x}, unique);
  InferTypes(module);
  const std::string before = TypeToString(unique->checked_type);
  const AnyEquivalence result = AnalyzeAnyEquivalence(module);
  EXPECT_EQ(result.ClassOf(x, 0), 0);
  EXPECT_EQ(result.ClassOf(unique, 0), -1);
  EXPECT_EQ(TypeToString(unique->checked_type), before);
  EXPECT_EQ(TypeToString(x->checked_type), "Tensor[(?,), float32]");
}

}  // namespace
}  // namespace nimble::typing
