#include "nimble/compiler/typing/type_infer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "nimble/compiler/ir/functor.h"
#include "nimble/compiler/op/op.h"
#include "nimble/compiler/text/parser.h"
#include "nimble/vm/error.h"
#include "tests/error_of.h"

namespace nimble::typing {
namespace {

using ::testing::HasSubstr;
using namespace nimble::ir;  // NOLINT: the tests build a lot of IR.

Type Tensor(std::vector<Dim> shape, DataType dtype = DataType::Float32()) {
  return MakeTensorType(std::move(shape), dtype);
}
Type ScalarType(DataType dtype) {
  return MakeTensorType({}, dtype);
}

Expr OpCall(const std::string& name, std::vector<Expr> args, Attrs attrs = {}) {
  return op::MakeOpCall(name, std::move(args), std::move(attrs));
}
Expr CallOf(Expr callee, std::vector<Expr> args) {
  return Make<CallNode>(std::move(callee), std::move(args));
}
Function Fn(std::vector<Var> params, Expr body, Type ret = nullptr,
            std::vector<TypeVar> type_params = {}) {
  return Make<FunctionNode>(std::move(params), std::move(body), std::move(ret),
                            std::move(type_params));
}
Expr LetOf(Var var, Expr value, Expr body) {
  return Make<LetNode>(std::move(var), std::move(value), std::move(body));
}
Expr IfOf(Expr cond, Expr then_branch, Expr else_branch) {
  return Make<IfNode>(std::move(cond), std::move(then_branch), std::move(else_branch));
}
Expr Int(int64_t value) {
  return MakeScalar(DataType::Int32(), static_cast<double>(value));
}
Expr Bool(bool value) {
  return MakeScalar(DataType::Bool(), value ? 1 : 0);
}
Attrs AxisAttr(const std::string& name, int64_t value) {
  Attrs attrs;
  attrs.Set(name, value);
  return attrs;
}
template <typename T>
Ref<T> At(Ref<T> node, int line, int column) {
  node->span = {line, column};
  return node;
}

std::string TypeOf(const Expr& expr) {
  return TypeToString(expr->checked_type);
}

// A module with `def @main(params) { body }`.
IRModule MainModule(std::vector<Var> params, Expr body, Type ret = nullptr) {
  IRModule module = MakeModule();
  module->Add(module->GetGlobalVar("main"), Fn(std::move(params), std::move(body), std::move(ret)));
  return module;
}

// `type List[A] { Cons(A, List[A]), Nil }` in `module`.
struct ListType {
  Constructor cons;
  Constructor nil;
  GlobalTypeVar header;
};
ListType AddList(const IRModule& module) {
  GlobalTypeVar header = Make<GlobalTypeVarNode>("List");
  TypeVar a = Make<TypeVarNode>("A");
  Type list_a = Make<TypeCallNode>(header, std::vector<Type>{a});
  Constructor cons = Make<ConstructorNode>("Cons", std::vector<Type>{a, list_a}, header, 0);
  Constructor nil = Make<ConstructorNode>("Nil", std::vector<Type>{}, header, 1);
  module->AddTypeDef(
      Make<TypeDataNode>(header, std::vector<TypeVar>{a}, std::vector<Constructor>{cons, nil}));
  return {cons, nil, header};
}

Pattern PVar(Var var) {
  return Make<PatternVarNode>(std::move(var));
}
Pattern PCons(Constructor constructor, std::vector<Pattern> fields) {
  return Make<PatternConstructorNode>(std::move(constructor), std::move(fields));
}

TEST(TypeInferTest, StaticBroadcastTypesEveryNode) {
  Var x = MakeVar("x", Tensor({3, 2}));
  Var y = MakeVar("y", Tensor({1, 2}));
  Var z = MakeVar("z");
  Expr sum = OpCall("add", {x, y});
  Expr body = LetOf(z, sum, OpCall("multiply", {z, x}));
  IRModule module = MainModule({x, y}, body);
  InferTypes(module);
  EXPECT_EQ(TypeOf(sum), "Tensor[(3, 2), float32]");
  EXPECT_EQ(TypeOf(z), "Tensor[(3, 2), float32]");
  EXPECT_EQ(TypeOf(body), "Tensor[(3, 2), float32]");
  EXPECT_EQ(TypeOf(module->Lookup("main")),
            "fn (Tensor[(3, 2), float32], Tensor[(1, 2), float32]) -> Tensor[(3, 2), float32]");
  EXPECT_EQ(TypeOf(module->GetGlobalVar("main")), TypeOf(module->Lookup("main")));
}

TEST(TypeInferTest, AnyBroadcastFollowsThePaper) {
  // Per dimension: (Any, 1) = Any, (Any, 3) = 3, (1, Any) = Any, (Any, Any) = Any.
  Var x = MakeVar("x", Tensor({Dim::Any(), Dim::Any(), 1, Dim::Any()}));
  Var y = MakeVar("y", Tensor({1, 3, Dim::Any(), Dim::Any()}));
  EXPECT_EQ(TypeToString(InferExprType(OpCall("add", {x, y}))), "Tensor[(?, 3, ?, ?), float32]");
  Var big = MakeVar("big", Tensor({5, Dim::Any()}));
  EXPECT_EQ(TypeToString(InferExprType(OpCall("subtract", {big, y}))),
            "Tensor[(1, 3, 5, ?), float32]");
}

TEST(TypeInferTest, ConflictingStaticDimsNameTheOpAndPosition) {
  Var x = MakeVar("x", Tensor({2, 3}));
  Var y = MakeVar("y", Tensor({4, 3}));
  Expr sum = At(OpCall("add", {x, y}), 3, 10);
  const std::string error = ErrorOf([&] { InferTypes(MainModule({x, y}, sum)); });
  EXPECT_THAT(error, HasSubstr("3:10: add:"));
  EXPECT_THAT(error, HasSubstr("dimension 0 conflicts: 2 does not match 4"));
  EXPECT_THAT(error,
              HasSubstr("(argument types: Tensor[(2, 3), float32], Tensor[(4, 3), float32])"));
}

TEST(TypeInferTest, DenseChainKeepsTheAnyBatch) {
  Var x = MakeVar("x", Tensor({Dim::Any(), 8}));
  Var w1 = MakeVar("w1", Tensor({16, 8}));
  Var w2 = MakeVar("w2", Tensor({4, 16}));
  Expr hidden = OpCall("nn.relu", {OpCall("nn.dense", {x, w1})});
  Expr out = OpCall("nn.dense", {hidden, w2});
  InferTypes(MainModule({x, w1, w2}, out));
  EXPECT_EQ(TypeOf(hidden), "Tensor[(?, 16), float32]");
  EXPECT_EQ(TypeOf(out), "Tensor[(?, 4), float32]");
}

TEST(TypeInferTest, SplitGivesATupleAndProjectionsItsFields) {
  Var x = MakeVar("x", Tensor({6, Dim::Any()}));
  Expr parts = OpCall("split", {x}, AxisAttr("indices_or_sections", 3));
  Var t = MakeVar("t");
  Expr second = Make<TupleGetItemNode>(t, 1);
  InferTypes(MainModule({x}, LetOf(t, parts, second)));
  EXPECT_EQ(TypeOf(parts),
            "(Tensor[(2, ?), float32], Tensor[(2, ?), float32], Tensor[(2, ?), float32])");
  EXPECT_EQ(TypeOf(second), "Tensor[(2, ?), float32]");
}

TEST(TypeInferTest, TupleIndexOutOfRangeNamesIndexAndType) {
  Var x = MakeVar("x", Tensor({3}));
  Expr item = At(Make<TupleGetItemNode>(MakeTupleExpr({x, x}), 2), 4, 7);
  EXPECT_EQ(ErrorOf([&] { InferExprType(item); }),
            "4:7: tuple index 2 is out of range for (Tensor[(3,), float32], Tensor[(3,), "
            "float32])");
}

TEST(TypeInferTest, LetAnnotationAcceptsASubShape) {
  Var x = MakeVar("x", Tensor({3, 2}));
  Var z = MakeVar("z", Tensor({Dim::Any(), 2}));
  Expr body = OpCall("nn.relu", {z});
  InferTypes(MainModule({x}, LetOf(z, x, body)));
  EXPECT_EQ(TypeOf(z), "Tensor[(?, 2), float32]");
  EXPECT_EQ(TypeOf(body), "Tensor[(?, 2), float32]");

  Var bad = MakeVar("bad", Tensor({3, 3}));
  Expr let = At(LetOf(bad, x, bad), 2, 3);
  EXPECT_EQ(ErrorOf([&] { InferTypes(MainModule({x}, let)); }),
            "2:3: let %bad: expected Tensor[(3, 3), float32], got Tensor[(3, 2), float32]");
}

TEST(TypeInferTest, CallArgumentsMayBeSubShapes) {
  IRModule module = MakeModule();
  Var a = MakeVar("a", Tensor({Dim::Any(), 2}));
  module->Add(module->GetGlobalVar("f"), Fn({a}, OpCall("nn.relu", {a})));
  Var x = MakeVar("x", Tensor({3, 2}));
  Expr call = CallOf(module->GetGlobalVar("f"), {x});
  module->Add(module->GetGlobalVar("main"), Fn({x}, call));
  InferTypes(module);
  // Inside @f the declared parameter type governs.
  EXPECT_EQ(TypeOf(call), "Tensor[(?, 2), float32]");
  EXPECT_EQ(TypeOf(module->Lookup("f")), "fn (Tensor[(?, 2), float32]) -> Tensor[(?, 2), float32]");

  Var y = MakeVar("y", Tensor({3, 3}));
  module->Add(module->GetGlobalVar("main"),
              Fn({y}, At(CallOf(module->GetGlobalVar("f"), {y}), 5, 3)));
  EXPECT_EQ(ErrorOf([&] { InferTypes(module); }),
            "5:3: argument 0 of @f: expected Tensor[(?, 2), float32], got Tensor[(3, 3), "
            "float32]");
}

// A bounded `?` parameter takes sizes and bounds up to its bound, and an
// unbounded `?` (the run time checks its size); not a size or bound past it.
TEST(TypeInferTest, ABoundedParameterTakesWhatMayFitItsBound) {
  IRModule module = MakeModule();
  Var a = MakeVar("a", Tensor({Dim::Any(8), 2}));
  module->Add(module->GetGlobalVar("f"), Fn({a}, OpCall("nn.relu", {a})));
  for (const Dim& fits : {Dim(8), Dim::Any(4), Dim::Any()}) {
    Var x = MakeVar("x", Tensor({fits, 2}));
    module->Add(module->GetGlobalVar("main"), Fn({x}, CallOf(module->GetGlobalVar("f"), {x})));
    EXPECT_NO_THROW(InferTypes(module)) << fits.ToString();
  }
  for (const Dim& too_large : {Dim(9), Dim::Any(9)}) {
    Var x = MakeVar("x", Tensor({too_large, 2}));
    module->Add(module->GetGlobalVar("main"),
                Fn({x}, At(CallOf(module->GetGlobalVar("f"), {x}), 4, 2)));
    EXPECT_EQ(ErrorOf([&] { InferTypes(module); }),
              "4:2: argument 0 of @f: expected Tensor[(?<=8, 2), float32], got Tensor[(" +
                  too_large.ToString() + ", 2), float32]");
  }
}

TEST(TypeInferTest, DeclaredReturnTypeMayBeWider) {
  Var x = MakeVar("x", Tensor({3, 2}));
  IRModule module = MainModule({x}, OpCall("nn.relu", {x}), Tensor({Dim::Any(), 2}));
  InferTypes(module);
  EXPECT_EQ(TypeOf(module->Lookup("main")),
            "fn (Tensor[(3, 2), float32]) -> Tensor[(?, 2), float32]");
  IRModule narrow = MainModule({x}, OpCall("nn.relu", {x}), Tensor({2, 2}));
  EXPECT_THAT(ErrorOf([&] { InferTypes(narrow); }),
              HasSubstr("the body of @main: expected Tensor[(2, 2), float32], got Tensor[(3, 2), "
                        "float32]"));
}

TEST(TypeInferTest, IfJoinsBranchShapesToAny) {
  Var c = MakeVar("c", ScalarType(DataType::Bool()));
  Var x = MakeVar("x", Tensor({3, 2}));
  Var y = MakeVar("y", Tensor({4, 2}));
  Expr if_expr = IfOf(c, x, y);
  InferTypes(MainModule({c, x, y}, if_expr));
  EXPECT_EQ(TypeOf(if_expr), "Tensor[(?, 2), float32]");

  Var v = MakeVar("v", Tensor({3}));
  Expr mismatch = At(IfOf(c, x, v), 6, 1);
  EXPECT_EQ(ErrorOf([&] {
              InferTypes(MainModule({c, x, v}, mismatch));
            }),
            "6:1: if branches have different types: Tensor[(3, 2), float32] and Tensor[(3,), "
            "float32]");

  Var not_bool = MakeVar("n", Tensor({1}, DataType::Bool()));
  EXPECT_THAT(ErrorOf([&] {
                InferTypes(MainModule({not_bool, x}, IfOf(not_bool, x, x)));
              }),
              HasSubstr("the if condition: expected Tensor[(), bool], got Tensor[(1,), bool]"));
}

// def @loop(%i: int32, %acc) { if (%i < 3) { @loop(%i + 1, concatenate((%acc, %acc))) } else { %acc
// } } def @main(%x: Tensor[(1, 2), float32]) { @loop(0, %x) }
IRModule GrowingLoop(Type acc_type) {
  IRModule module = MakeModule();
  GlobalVar loop = module->GetGlobalVar("loop");
  Var i = MakeVar("i", ScalarType(DataType::Int32()));
  Var acc = MakeVar("acc", std::move(acc_type));
  Expr grown = OpCall("concatenate", {MakeTupleExpr({acc, acc})}, AxisAttr("axis", 0));
  Expr body =
      IfOf(OpCall("less", {i, Int(3)}), CallOf(loop, {OpCall("add", {i, Int(1)}), grown}), acc);
  module->Add(loop, Fn({i, acc}, body));
  Var x = MakeVar("x", Tensor({1, 2}));
  module->Add(module->GetGlobalVar("main"), Fn({x}, CallOf(loop, {Int(0), x})));
  return module;
}

TEST(TypeInferTest, RecursiveLoopGrowingATensorHasAnAnyDim) {
  IRModule module = GrowingLoop(Tensor({Dim::Any(), 2}));
  InferTypes(module);
  EXPECT_EQ(TypeOf(module->Lookup("loop")),
            "fn (Tensor[(), int32], Tensor[(?, 2), float32]) -> Tensor[(?, 2), float32]");
  EXPECT_EQ(TypeOf(module->Lookup("main")->body), "Tensor[(?, 2), float32]");
}

TEST(TypeInferTest, UnannotatedLoopStateIsWidenedToAny) {
  // The first guess for %acc, (1, 2) from the call in @main, fails on the
  // recursive call with (2, 2); inference widens it to (?, 2).
  IRModule module = GrowingLoop(nullptr);
  InferTypes(module);
  EXPECT_EQ(TypeOf(module->Lookup("loop")),
            "fn (Tensor[(), int32], Tensor[(?, 2), float32]) -> Tensor[(?, 2), float32]");
  EXPECT_EQ(TypeOf(module->Lookup("main")->body), "Tensor[(?, 2), float32]");
}

TEST(TypeInferTest, MutuallyRecursiveGlobals) {
  IRModule module = MakeModule();
  GlobalVar is_even = module->GetGlobalVar("is_even");
  GlobalVar is_odd = module->GetGlobalVar("is_odd");
  Var n = MakeVar("n", ScalarType(DataType::Int32()));
  module->Add(is_even, Fn({n},
                          IfOf(OpCall("equal", {n, Int(0)}), Bool(true),
                               CallOf(is_odd, {OpCall("subtract", {n, Int(1)})})),
                          ScalarType(DataType::Bool())));
  Var m = MakeVar("m");  // inferred from both callers
  module->Add(is_odd, Fn({m}, IfOf(OpCall("equal", {m, Int(0)}), Bool(false),
                                   CallOf(is_even, {OpCall("subtract", {m, Int(1)})}))));
  Var k = MakeVar("k", ScalarType(DataType::Int32()));
  module->Add(module->GetGlobalVar("main"), Fn({k}, CallOf(is_odd, {k})));
  InferTypes(module);
  EXPECT_EQ(TypeOf(module->Lookup("is_odd")), "fn (Tensor[(), int32]) -> Tensor[(), bool]");
  EXPECT_EQ(TypeOf(module->Lookup("main")->body), "Tensor[(), bool]");
}

// @map[A, B](%f: fn (A) -> B, %l: List[A]) -> List[B] and
// @foldl[A, B](%f: fn (A, B) -> A, %acc: A, %l: List[B]) -> A.
void AddMapAndFold(const IRModule& module, const ListType& list) {
  auto list_of = [&](Type arg) { return Make<TypeCallNode>(list.header, std::vector<Type>{arg}); };
  {
    TypeVar a = Make<TypeVarNode>("A");
    TypeVar b = Make<TypeVarNode>("B");
    GlobalVar map = module->GetGlobalVar("map");
    Var f = MakeVar("f", Make<FuncTypeNode>(std::vector<TypeVar>{}, std::vector<Type>{a}, b));
    Var l = MakeVar("l", list_of(a));
    Var h = MakeVar("h");
    Var t = MakeVar("t");
    Expr body = Make<MatchNode>(
        l,
        std::vector<Clause>{{PCons(list.cons, {PVar(h), PVar(t)}),
                             CallOf(list.cons, {CallOf(f, {h}), CallOf(map, {f, t})})},
                            {PCons(list.nil, {}), CallOf(list.nil, {})}},
        true);
    module->Add(map, Fn({f, l}, body, list_of(b), {a, b}));
  }
  {
    TypeVar a = Make<TypeVarNode>("A");
    TypeVar b = Make<TypeVarNode>("B");
    GlobalVar foldl = module->GetGlobalVar("foldl");
    Var f = MakeVar("f", Make<FuncTypeNode>(std::vector<TypeVar>{}, std::vector<Type>{a, b}, a));
    Var acc = MakeVar("acc", a);
    Var l = MakeVar("l", list_of(b));
    Var h = MakeVar("h");
    Var t = MakeVar("t");
    Expr body = Make<MatchNode>(l,
                                std::vector<Clause>{{PCons(list.cons, {PVar(h), PVar(t)}),
                                                     CallOf(foldl, {f, CallOf(f, {acc, h}), t})},
                                                    {PCons(list.nil, {}), acc}},
                                true);
    module->Add(foldl, Fn({f, acc, l}, body, a, {a, b}));
  }
}

TEST(TypeInferTest, PolymorphicListMapAndFold) {
  IRModule module = MakeModule();
  ListType list = AddList(module);
  AddMapAndFold(module, list);
  Var x = MakeVar("x", Tensor({3, 2}));
  Var l = MakeVar("l");
  Var m = MakeVar("m");
  Var y = MakeVar("y");
  Var a = MakeVar("a");
  Var b = MakeVar("b");
  Expr elements = CallOf(list.cons, {x, CallOf(list.cons, {x, CallOf(list.nil, {})})});
  Expr mapped = CallOf(module->GetGlobalVar("map"), {Fn({y}, OpCall("nn.relu", {y})), l});
  Expr folded = CallOf(module->GetGlobalVar("foldl"), {Fn({a, b}, OpCall("add", {a, b})), x, m});
  module->Add(module->GetGlobalVar("main"), Fn({x}, LetOf(l, elements, LetOf(m, mapped, folded))));
  InferTypes(module);
  EXPECT_EQ(TypeOf(l), "List[Tensor[(3, 2), float32]]");
  EXPECT_EQ(TypeOf(m), "List[Tensor[(3, 2), float32]]");
  EXPECT_EQ(TypeOf(y), "Tensor[(3, 2), float32]");
  EXPECT_EQ(TypeOf(folded), "Tensor[(3, 2), float32]");
  EXPECT_EQ(TypeOf(module->Lookup("map")), "fn [A, B](fn (A) -> B, List[A]) -> List[B]");
  // Constructors keep their generic type; each use is instantiated.
  EXPECT_EQ(TypeOf(list.cons), "fn [A](A, List[A]) -> List[A]");
}

TEST(TypeInferTest, ListElementsOfDifferentShapesJoin) {
  IRModule module = MakeModule();
  ListType list = AddList(module);
  Var x = MakeVar("x", Tensor({3, 2}));
  Var y = MakeVar("y", Tensor({4, 2}));
  Expr elements = CallOf(list.cons, {x, CallOf(list.cons, {y, CallOf(list.nil, {})})});
  module->Add(module->GetGlobalVar("main"), Fn({x, y}, elements));
  InferTypes(module);
  EXPECT_EQ(TypeOf(elements), "List[Tensor[(?, 2), float32]]");

  Var v = MakeVar("v", Tensor({3}));
  Expr mixed = At(CallOf(list.cons, {x, CallOf(list.cons, {v, CallOf(list.nil, {})})}), 2, 5);
  module->Add(module->GetGlobalVar("main"), Fn({x, v}, mixed));
  EXPECT_THAT(ErrorOf([&] { InferTypes(module); }), HasSubstr("of Cons"));
}

TEST(TypeInferTest, MatchBindsPatternVariables) {
  IRModule module = MakeModule();
  ListType list = AddList(module);
  Var l = MakeVar("l", Make<TypeCallNode>(list.header, std::vector<Type>{Tensor({Dim::Any(), 4})}));
  Var h = MakeVar("h");
  Var first = MakeVar("first");
  Expr match = Make<MatchNode>(
      l,
      std::vector<Clause>{
          {PCons(list.cons, {PVar(h), Make<PatternWildcardNode>()}), OpCall("nn.relu", {h})},
          {Make<PatternWildcardNode>(), OpCall("zeros", {},
                                               [] {
                                                 Attrs attrs;
                                                 attrs.Set("shape", std::vector<int64_t>{2, 4});
                                                 attrs.Set("dtype", DataType::Float32());
                                                 return attrs;
                                               }())}},
      true);
  Var p = MakeVar("p", MakeTupleType({Tensor({3, 4}), Tensor({2})}));
  Expr tuple_match = Make<MatchNode>(
      p,
      std::vector<Clause>{
          {Make<PatternTupleNode>(std::vector<Pattern>{PVar(first), Make<PatternWildcardNode>()}),
           first}},
      true);
  module->Add(module->GetGlobalVar("main"), Fn({l, p}, MakeTupleExpr({match, tuple_match})));
  InferTypes(module);
  EXPECT_EQ(TypeOf(h), "Tensor[(?, 4), float32]");
  EXPECT_EQ(TypeOf(match), "Tensor[(?, 4), float32]");  // join of (?, 4) and (2, 4)
  EXPECT_EQ(TypeOf(first), "Tensor[(3, 4), float32]");
  EXPECT_EQ(TypeOf(tuple_match), "Tensor[(3, 4), float32]");
}

TEST(TypeInferTest, ClosuresCaptureAndInferTheirParameters) {
  Var x = MakeVar("x", Tensor({3, 2}));
  Var z = MakeVar("z", Tensor({3, 2}));
  Var y = MakeVar("y");
  Var c = MakeVar("c");
  Expr closure = Fn({y}, OpCall("add", {y, x}));
  Expr call = CallOf(c, {z});
  InferTypes(MainModule({x, z}, LetOf(c, closure, call)));
  EXPECT_EQ(TypeOf(y), "Tensor[(3, 2), float32]");
  EXPECT_EQ(TypeOf(c), "fn (Tensor[(3, 2), float32]) -> Tensor[(3, 2), float32]");
  EXPECT_EQ(TypeOf(call), "Tensor[(3, 2), float32]");
}

TEST(TypeInferTest, PolymorphicFunctionInstantiatesPerUse) {
  IRModule module = MakeModule();
  TypeVar t = Make<TypeVarNode>("T");
  Var v = MakeVar("v", t);
  module->Add(module->GetGlobalVar("id"), Fn({v}, v, t, {t}));
  Var x = MakeVar("x", Tensor({3}));
  Var y = MakeVar("y", Tensor({2, 2}, DataType::Int32()));
  Expr body = MakeTupleExpr(
      {CallOf(module->GetGlobalVar("id"), {x}), CallOf(module->GetGlobalVar("id"), {y})});
  module->Add(module->GetGlobalVar("main"), Fn({x, y}, body));
  InferTypes(module);
  EXPECT_EQ(TypeOf(body), "(Tensor[(3,), float32], Tensor[(2, 2), int32])");
  EXPECT_EQ(TypeOf(v), "T");
}

TEST(TypeInferTest, UnderConstrainedProgramsFail) {
  Var x = MakeVar("x");
  EXPECT_EQ(ErrorOf([&] { InferExprType(Fn({x}, x)); }),
            "cannot infer the type of %x (under-constrained)");
  Var y = MakeVar("y");
  Expr sum = At(OpCall("add", {y, y}), 1, 12);
  EXPECT_EQ(ErrorOf([&] { InferTypes(MainModule({y}, sum)); }),
            "1:12: cannot infer the type of the call of add (under-constrained)");
}

TEST(TypeInferTest, BadProgramsNameTheProblem) {
  Var x = MakeVar("x", Tensor({3}));
  EXPECT_EQ(ErrorOf([&] {
              InferExprType(OpCall("add", {x, MakeVar("free")}));
            }),
            "free variable %free has no type annotation");
  EXPECT_EQ(ErrorOf([&] { InferTypes(MainModule({x}, CallOf(x, {x}))); }),
            "cannot call %x of non-function type Tensor[(3,), float32]");
  IRModule module = MainModule({x}, CallOf(MakeModule()->GetGlobalVar("nope"), {x}));
  EXPECT_EQ(ErrorOf([&] { InferTypes(module); }), "unknown global @nope");
  module->Add(module->GetGlobalVar("main"), Fn({x}, CallOf(module->GetGlobalVar("main"), {x, x})));
  EXPECT_EQ(ErrorOf([&] { InferTypes(module); }), "@main takes 1 argument(s), got 2");
  Var i = MakeVar("i", Tensor({3}, DataType::Int32()));
  EXPECT_THAT(ErrorOf([&] { InferExprType(OpCall("add", {x, i})); }), HasSubstr("add:"));
}

TEST(TypeInferTest, RerunsAfterAPassFromScratch) {
  Var x = MakeVar("x", Tensor({Dim::Any(), 2}));
  Expr relu = OpCall("nn.relu", {x});
  IRModule module = MainModule({x}, relu);
  InferTypes(module);
  EXPECT_EQ(TypeOf(relu), "Tensor[(?, 2), float32]");

  // A pass wraps the body in a let and adds a broadcast against a (5, 1)
  // constant; stale checked types must not leak into the new typing.
  relu->checked_type = Tensor({7, 7});
  Var t = MakeVar("t");
  Expr wider =
      OpCall("add", {t, Make<ConstantNode>(TensorNode::Empty({5, 1}, DataType::Float32()), "w")});
  module->Add(module->GetGlobalVar("main"), Fn({x}, LetOf(t, relu, wider)));
  InferTypes(module);
  EXPECT_EQ(TypeOf(relu), "Tensor[(?, 2), float32]");
  EXPECT_EQ(TypeOf(t), "Tensor[(?, 2), float32]");
  EXPECT_EQ(TypeOf(wider), "Tensor[(5, 2), float32]");
  EXPECT_EQ(TypeOf(module->Lookup("main")),
            "fn (Tensor[(?, 2), float32]) -> Tensor[(5, 2), float32]");
}

TEST(TypeInferTest, DeepLetChainsDoNotOverflow) {
  Var x = MakeVar("x", Tensor({Dim::Any(), 4}));
  std::vector<Var> vars;
  for (int i = 0; i < 10000; ++i) vars.push_back(MakeVar("v" + std::to_string(i)));
  Expr body = vars.back();
  for (int i = 9999; i >= 0; --i) {
    Expr input = i == 0 ? Expr(x) : Expr(vars[i - 1]);
    body = LetOf(vars[i], OpCall("add", {input, input}), body);
  }
  InferTypes(MainModule({x}, body));
  EXPECT_EQ(TypeOf(vars.back()), "Tensor[(?, 4), float32]");
  EXPECT_EQ(TypeOf(body), "Tensor[(?, 4), float32]");
}

// Programs in the text format, where errors point at source positions.
IRModule Parse(const std::string& text) {
  return text::ParseModule("#[version = \"0.0.5\"]\n" + text, "test");
}
std::string MainType(const IRModule& module) {
  return TypeOf(module->Lookup("main"));
}

TEST(TypeInferTest, TupleLoopStateWidensOnlyTheGrowingField) {
  IRModule module = Parse(R"(
def @loop(%i: Tensor[(), int32], %state) {
  if (less(%i, 3)) {
    let %h = %state.0;
    @loop(add(%i, 1), (nn.relu(%h), concatenate((%state.1, %h))))
  } else {
    %state
  }
}
def @main(%x: Tensor[(1, 4), float32]) { @loop(0, (%x, %x)) }
)");
  InferTypes(module);
  EXPECT_EQ(MainType(module),
            "fn (Tensor[(1, 4), float32]) -> (Tensor[(1, 4), float32], Tensor[(?, 4), float32])");
}

// Calls of known static argument types are typed as they are met; the rest
// (a parameter known only from a caller, dense's weight that the relation
// refines, an Any dimension) through their constraints: the same types.
TEST(TypeInferTest, CallsOfKnownTypesAndOfPlaceholdersTypeAlike) {
  IRModule module = Parse(R"(
def @twice(%p) { add(%p, %p) }
def @main(%x: Tensor[(2, 3), float32], %w: Tensor[(4, 3), float32], %v: Tensor[(?, 3), float32]) {
  let %a = add(%x, %x);
  let %d = nn.dense(%a, %w);
  let %b = @twice(%x);
  (multiply(%b, %a), %d, add(%v, %a))
}
)");
  InferTypes(module);
  EXPECT_EQ(TypeOf(module->Lookup("twice")), "fn (Tensor[(2, 3), float32]) -> Tensor[(2, 3), float32]");
  EXPECT_EQ(TypeOf(module->Lookup("main")->body),
            "(Tensor[(2, 3), float32], Tensor[(2, 4), float32], Tensor[(2, 3), float32])");
}

TEST(TypeInferTest, JoinsWaitForTheTypesFlowingIn) {
  // %p is only known from the call in @main; the `if` must not settle before.
  IRModule module = Parse(R"(
def @f(%c: Tensor[(), bool], %p, %y: Tensor[(3, 2), float32]) {
  if (%c) { add(%p, %p) } else { %y }
}
def @main(%c: Tensor[(), bool], %x: Tensor[(4, 2), float32], %y: Tensor[(3, 2), float32]) {
  @f(%c, %x, %y)
}
)");
  InferTypes(module);
  EXPECT_EQ(TypeOf(module->Lookup("f")),
            "fn (Tensor[(), bool], Tensor[(4, 2), float32], Tensor[(3, 2), float32]) -> "
            "Tensor[(?, 2), float32]");
}

TEST(TypeInferTest, HigherOrderFunctionsAndLetPolymorphism) {
  IRModule module = Parse(R"(
def @make_adder(%x: Tensor[(3,), float32]) {
  fn (%y) { add(%x, %y) }
}
def @main(%a: Tensor[(3,), float32], %b: Tensor[(2,), int32]) {
  let %f = @make_adder(%a);
  let %id = fn [T](%v: T) -> T { %v };
  (%f(%a), %id(%a), %id(%b))
}
)");
  InferTypes(module);
  EXPECT_EQ(TypeOf(module->Lookup("make_adder")),
            "fn (Tensor[(3,), float32]) -> fn (Tensor[(3,), float32]) -> Tensor[(3,), float32]");
  EXPECT_EQ(MainType(module),
            "fn (Tensor[(3,), float32], Tensor[(2,), int32]) -> (Tensor[(3,), float32], "
            "Tensor[(3,), float32], Tensor[(2,), int32])");
}

// A relation's result of more dimensions than a tensor may have is an
// error at the call (zeros of a 100,000-entry shape typed, then hung the
// VM's code generation).
TEST(TypeInferTest, AResultAboveTheMostDimensionsIsAnError) {
  std::string shape = "1";
  for (int d = 1; d < 33; ++d) shape += ", 1";
  EXPECT_EQ(
      ErrorOf([&] {
        InferTypes(Parse("def @main() {\n  zeros(shape=[" + shape + "], dtype=\"float32\")\n}\n"));
      }),
      "3:3: zeros: the result would have rank 33, above 32, the most a tensor may have "
      "(argument types: )");
}

TEST(TypeInferTest, TextErrorsPointAtTheSource) {
  EXPECT_EQ(ErrorOf([] {
              InferTypes(Parse(R"(
type Option[A] {
  Some(A),
  None,
}
def @main(%o: Option[Tensor[(3,), float32]]) {
  match (%o) {
    Some(%v) => %v,
    None => (1f, 2f),
  }
}
)"));
            }),
            "8:3: match clauses have different types: Tensor[(3,), float32] and (Tensor[(), "
            "float32], Tensor[(), float32])");
  EXPECT_EQ(ErrorOf([] {
              InferTypes(Parse(R"(
def @unused(%x) { %x }
def @main(%a: Tensor[(3,), float32]) { %a }
)"));
            }),
            "3:13: cannot infer the type of %x (under-constrained)");
  EXPECT_THAT(ErrorOf([] {
                InferTypes(Parse(R"(
def @main(%x: Tensor[(2, 3), float32], %y: Tensor[(4, 3), float32]) {
  let %z = add(%x, %y);
  %z
}
)"));
              }),
              HasSubstr("4:12: add: "));
}

TEST(TypeInferTest, StandaloneExpressionsUseTheModulesGlobals) {
  IRModule module = Parse(R"(
def @double(%x: Tensor[(?, 2), float32]) { add(%x, %x) }
)");
  Var y = MakeVar("y", Tensor({5, 2}));
  Expr call = CallOf(module->GetGlobalVar("double"), {y});
  EXPECT_EQ(TypeToString(InferExprType(call, module)), "Tensor[(?, 2), float32]");
  EXPECT_EQ(TypeOf(y), "Tensor[(5, 2), float32]");

  // A global's own function, recursive and partly annotated, as the expression.
  IRModule loop = GrowingLoop(Tensor({Dim::Any(), 2}));
  EXPECT_EQ(TypeToString(InferExprType(loop->Lookup("loop"), loop)),
            "fn (Tensor[(), int32], Tensor[(?, 2), float32]) -> Tensor[(?, 2), float32]");
}

TEST(TypeInferTest, IsSubtypeFollowsSubShaping) {
  const Type static_shape = Tensor({3, 2});
  const Type any_rows = Tensor({Dim::Any(), 2});
  EXPECT_TRUE(IsSubtype(static_shape, any_rows));
  EXPECT_FALSE(IsSubtype(any_rows, static_shape));
  EXPECT_FALSE(IsSubtype(Tensor({3, 2}, DataType::Int32()), any_rows));
  EXPECT_FALSE(IsSubtype(Tensor({3}), any_rows));
  EXPECT_TRUE(IsSubtype(MakeTupleType({static_shape, static_shape}),
                        MakeTupleType({any_rows, static_shape})));
  auto fn = [](Type arg, Type ret) {
    return Make<FuncTypeNode>(std::vector<TypeVar>{}, std::vector<Type>{arg}, ret);
  };
  // Functions: contravariant parameters, covariant results.
  EXPECT_TRUE(IsSubtype(fn(any_rows, static_shape), fn(static_shape, any_rows)));
  EXPECT_FALSE(IsSubtype(fn(static_shape, static_shape), fn(any_rows, static_shape)));
  EXPECT_EQ(TypeToString(JoinTypes(Tensor({3, 2}), Tensor({4, 2}))), "Tensor[(?, 2), float32]");
  EXPECT_EQ(JoinTypes(Tensor({3, 2}), Tensor({3})), nullptr);
}

}  // namespace
}  // namespace nimble::typing
