#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unordered_map>

#include "nimble/compiler/ir/bind_params.h"
#include "nimble/compiler/ir/free_vars.h"
#include "nimble/compiler/ir/functor.h"
#include "nimble/compiler/ir/module.h"
#include "nimble/compiler/ir/structural_equal.h"
#include "nimble/compiler/ir/structural_hash.h"
#include "nimble/compiler/support/deep_stack.h"
#include "nimble/vm/error.h"

namespace nimble::ir {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int kDeep = 10000;

Type F32(std::vector<Dim> shape) {
  return MakeTensorType(std::move(shape), DataType::Float32());
}

// Calls go through a global so that these tests need no registered operator.
Expr Call(const std::string& callee, std::vector<Expr> args, Attrs attrs = {}) {
  return Make<CallNode>(Make<GlobalVarNode>(callee), std::move(args), std::move(attrs));
}
Expr Add(Expr lhs, Expr rhs) {
  return Call("add", {std::move(lhs), std::move(rhs)});
}

Expr Let(Var var, Expr value, Expr body) {
  return Make<LetNode>(std::move(var), std::move(value), std::move(body));
}

Function Fn(std::vector<Var> params, Expr body, Type ret_type = nullptr,
            std::vector<TypeVar> type_params = {}) {
  return Make<FunctionNode>(std::move(params), std::move(body), std::move(ret_type),
                            std::move(type_params));
}

Constant Weights(std::vector<float> values, std::string name = "w") {
  const Shape shape = {static_cast<int64_t>(values.size())};
  return Make<ConstantNode>(TensorNode::FromVector(shape, DataType::Float32(), values),
                            std::move(name));
}

// fn (%x: Tensor[(2, ?), float32], %y) { let %z = add(%x, %y); add(%z, %z) }, with
// fresh variables on every call.
Function Sample() {
  Var x = MakeVar("x", F32({2, Dim::Any()}));
  Var y = MakeVar("y");
  Var z = MakeVar("z");
  return Fn({x, y}, Let(z, Add(x, y), Add(z, z)));
}

void ExpectEqualAndSameHash(const Expr& lhs, const Expr& rhs) {
  EXPECT_TRUE(StructuralEqual(lhs, rhs));
  EXPECT_TRUE(StructuralEqual(rhs, lhs));
  EXPECT_EQ(StructuralHash(lhs), StructuralHash(rhs));
}

void ExpectNotEqual(const Expr& lhs, const Expr& rhs) {
  EXPECT_FALSE(StructuralEqual(lhs, rhs));
  EXPECT_FALSE(StructuralEqual(rhs, lhs));
}

// List[A] with Cons(A, List[A]) and Nil.
struct ListAdt {
  ListAdt() {
    GlobalTypeVar list = Make<GlobalTypeVarNode>("List");
    TypeVar a = Make<TypeVarNode>("A");
    cons = Make<ConstructorNode>(
        "Cons", std::vector<Type>{a, Make<TypeCallNode>(list, std::vector<Type>{a})}, list, 0);
    nil = Make<ConstructorNode>("Nil", std::vector<Type>{}, list, 1);
    data = Make<TypeDataNode>(list, std::vector<TypeVar>{a}, std::vector<Constructor>{cons, nil});
  }
  Constructor cons;
  Constructor nil;
  TypeData data;
};

// match (%list) { Cons(%head, _) => %head, Nil => %fallback }, fresh binders.
Expr HeadOr(const ListAdt& adt, const Expr& list, const Expr& fallback) {
  Var head = MakeVar("head");
  Pattern cons = Make<PatternConstructorNode>(
      adt.cons, std::vector<Pattern>{Make<PatternVarNode>(head), Make<PatternWildcardNode>()});
  Pattern nil = Make<PatternConstructorNode>(adt.nil, std::vector<Pattern>{});
  return Make<MatchNode>(list, std::vector<Clause>{{cons, head}, {nil, fallback}}, true);
}

TEST(StructuralEqualTest, AlphaRenamedProgramsAreEqual) {
  ExpectEqualAndSameHash(Sample(), Sample());
  EXPECT_TRUE(StructuralEqual(Expr(Sample()), Expr(Sample())));
}

TEST(StructuralEqualTest, BoundVariablesCorrespondByPosition) {
  Var a = MakeVar("a"), b = MakeVar("b"), c = MakeVar("a"), d = MakeVar("b");
  ExpectNotEqual(Fn({a, b}, a), Fn({c, d}, d));
  ExpectEqualAndSameHash(Fn({a, b}, Add(b, a)), Fn({c, d}, Add(d, c)));
  EXPECT_NE(StructuralHash(Fn({a, b}, a)), StructuralHash(Fn({c, d}, d)));
  // One binder cannot stand for two.
  ExpectNotEqual(Fn({a, b}, Add(a, b)), Fn({c, d}, Add(c, c)));
}

TEST(StructuralEqualTest, FreeVariablesEqualOnlyThemselves) {
  Var free = MakeVar("f"), other = MakeVar("f");
  ExpectEqualAndSameHash(Add(free, free), Add(free, free));
  ExpectNotEqual(free, other);
  Var p = MakeVar("p"), q = MakeVar("q");
  ExpectEqualAndSameHash(Fn({p}, Add(p, free)), Fn({q}, Add(q, free)));
  ExpectNotEqual(Fn({p}, Add(p, free)), Fn({q}, Add(q, other)));
  // A free variable does not match a bound one, even the same node.
  ExpectNotEqual(Fn({p}, Add(p, free)), Fn({free}, Add(free, free)));
}

TEST(StructuralEqualTest, BinderAnnotationsMustMatch) {
  Var x = MakeVar("x", F32({2, 3})), y = MakeVar("x", F32({2, Dim::Any()}));
  Var z = MakeVar("x", MakeTensorType({2, 3}, DataType::Float16())), untyped = MakeVar("x");
  ExpectNotEqual(Fn({x}, x), Fn({y}, y));
  ExpectNotEqual(Fn({x}, x), Fn({z}, z));
  ExpectNotEqual(Fn({x}, x), Fn({untyped}, untyped));
  EXPECT_NE(StructuralHash(Fn({x}, x)), StructuralHash(Fn({y}, y)));
  Var x2 = MakeVar("other", F32({2, 3}));
  ExpectEqualAndSameHash(Fn({x}, x), Fn({x2}, x2));
  ExpectNotEqual(Fn({x}, x, F32({2, 3})), Fn({x2}, x2, F32({3, 2})));
}

TEST(StructuralEqualTest, ConstantsCompareByNameDTypeShapeAndBytes) {
  ExpectEqualAndSameHash(Weights({1, 2}), Weights({1, 2}));
  ExpectNotEqual(Weights({1, 2}), Weights({1, 3}));
  ExpectNotEqual(Weights({1, 2}), Weights({1, 2}, "v"));
  ExpectNotEqual(Weights({1, 2}), Weights({1, 2, 0}));
  ExpectNotEqual(MakeScalar(DataType::Float32(), 1), MakeScalar(DataType::Float64(), 1));
  const Tensor matrix = TensorNode::FromVector<float>({2, 1}, DataType::Float32(), {1, 2});
  ExpectNotEqual(Weights({1, 2}), Make<ConstantNode>(matrix, "w"));
  EXPECT_NE(StructuralHash(Weights({1, 2})), StructuralHash(Weights({1, 3})));
}

TEST(StructuralEqualTest, AttrsOpsGlobalsAndConstructorsCompareByValue) {
  Var x = MakeVar("x");
  Attrs axis0, axis1, also_axis0;
  axis0.Set("axis", int64_t{0});
  axis1.Set("axis", int64_t{1});
  also_axis0.Set("axis", int64_t{0});
  ExpectEqualAndSameHash(Call("sum", {x}, axis0), Call("sum", {x}, also_axis0));
  ExpectNotEqual(Call("sum", {x}, axis0), Call("sum", {x}, axis1));
  ExpectNotEqual(Call("sum", {x}, axis0), Call("sum", {x}));
  Attrs zero, negative_zero;
  zero.Set("alpha", 0.0);
  negative_zero.Set("alpha", -0.0);
  ExpectEqualAndSameHash(Call("f", {x}, zero), Call("f", {x}, negative_zero));

  // Ops are interned, so two op nodes are two operators.
  Op add = Make<OpNode>("add", nullptr), multiply = Make<OpNode>("multiply", nullptr);
  ExpectEqualAndSameHash(Make<CallNode>(add, std::vector<Expr>{x, x}),
                         Make<CallNode>(add, std::vector<Expr>{x, x}));
  ExpectNotEqual(Make<CallNode>(add, std::vector<Expr>{x, x}),
                 Make<CallNode>(multiply, std::vector<Expr>{x, x}));
  ExpectNotEqual(add, Make<OpNode>("add", nullptr));

  ExpectEqualAndSameHash(Make<GlobalVarNode>("main"), Make<GlobalVarNode>("main"));
  ExpectNotEqual(Make<GlobalVarNode>("main"), Make<GlobalVarNode>("helper"));
  ListAdt list, other;
  ExpectEqualAndSameHash(list.cons, other.cons);
  ExpectNotEqual(list.cons, list.nil);
  ExpectNotEqual(Make<TupleGetItemNode>(x, 0), Make<TupleGetItemNode>(x, 1));
  ExpectNotEqual(MakeTupleExpr({x, x}), MakeTupleExpr({x}));
  ExpectNotEqual(Make<IfNode>(x, x, MakeTupleExpr({})), Make<IfNode>(x, MakeTupleExpr({}), x));
}

TEST(StructuralEqualTest, SpansAndCheckedTypesAreIgnored) {
  Expr lhs = Sample(), rhs = Sample();
  lhs->span = {3, 4};
  rhs->checked_type = F32({1});
  ExpectEqualAndSameHash(lhs, rhs);
}

TEST(StructuralEqualTest, TypesCompareStructurallyUpToTypeVariableRenaming) {
  EXPECT_TRUE(StructuralEqual(F32({2, Dim::Any()}), F32({2, Dim::Any()})));
  EXPECT_FALSE(StructuralEqual(F32({2, Dim::Any()}), F32({2, 3})));
  EXPECT_FALSE(StructuralEqual(F32({2}), MakeTensorType({2}, DataType::Int32())));
  EXPECT_FALSE(StructuralEqual(Type(MakeTupleType({F32({1})})), Type(MakeTupleType({}))));
  EXPECT_TRUE(StructuralEqual(Type(Make<IncompleteTypeNode>()), Type(Make<IncompleteTypeNode>())));

  TypeVar a = Make<TypeVarNode>("A"), b = Make<TypeVarNode>("B");
  Type identity_a = Make<FuncTypeNode>(std::vector<TypeVar>{a}, std::vector<Type>{a}, a);
  Type identity_b = Make<FuncTypeNode>(std::vector<TypeVar>{b}, std::vector<Type>{b}, b);
  EXPECT_TRUE(StructuralEqual(identity_a, identity_b));
  EXPECT_EQ(StructuralHash(identity_a), StructuralHash(identity_b));
  // Free type variables only equal themselves.
  EXPECT_FALSE(StructuralEqual(Type(a), Type(b)));
  Type free_a = Make<FuncTypeNode>(std::vector<TypeVar>{}, std::vector<Type>{a}, a);
  Type free_b = Make<FuncTypeNode>(std::vector<TypeVar>{}, std::vector<Type>{b}, b);
  EXPECT_FALSE(StructuralEqual(free_a, free_b));
  GlobalTypeVar list = Make<GlobalTypeVarNode>("List");
  EXPECT_TRUE(StructuralEqual(
      Type(Make<TypeCallNode>(list, std::vector<Type>{F32({})})),
      Type(Make<TypeCallNode>(Make<GlobalTypeVarNode>("List"), std::vector<Type>{F32({})}))));
}

TEST(StructuralEqualTest, PolymorphicFunctionsAndMatchesRenameBinders) {
  TypeVar a = Make<TypeVarNode>("A"), b = Make<TypeVarNode>("B");
  Var x = MakeVar("x", a), y = MakeVar("y", b);
  ExpectEqualAndSameHash(Fn({x}, x, a, {a}), Fn({y}, y, b, {b}));
  ExpectNotEqual(Fn({x}, x, a, {a}), Fn({y}, y, a, {b}));

  ListAdt adt;
  Var list = MakeVar("l"), fallback = MakeVar("d");
  ExpectEqualAndSameHash(HeadOr(adt, list, fallback), HeadOr(adt, list, fallback));
  ExpectNotEqual(HeadOr(adt, list, fallback), HeadOr(adt, list, list));
  Var head = MakeVar("h");
  Expr returns_free = Make<MatchNode>(
      list,
      std::vector<Clause>{
          {Make<PatternConstructorNode>(
               adt.cons,
               std::vector<Pattern>{Make<PatternVarNode>(head), Make<PatternWildcardNode>()}),
           list},
          {Make<PatternConstructorNode>(adt.nil, std::vector<Pattern>{}), fallback}},
      true);
  ExpectNotEqual(HeadOr(adt, list, fallback), returns_free);
}

TEST(StructuralEqualTest, RecursiveLetsAreEqualUnderRenaming) {
  const auto countdown = [] {
    Var f = MakeVar("f"), n = MakeVar("n");
    return Let(f, Fn({n}, Call("loop", {f, n})), f);
  };
  ExpectEqualAndSameHash(countdown(), countdown());
}

TEST(StructuralEqualTest, SharingDoesNotMatter) {
  Var x = MakeVar("x");
  Expr shared = Add(x, x);
  ExpectEqualAndSameHash(MakeTupleExpr({shared, shared}), MakeTupleExpr({Add(x, x), Add(x, x)}));
  // A DAG that unfolds to 2^64 nodes compares and hashes in linear time.
  Expr lhs = x, rhs = x;
  for (int i = 0; i < 64; ++i) {
    lhs = Add(lhs, lhs);
    rhs = Add(rhs, rhs);
  }
  ExpectEqualAndSameHash(lhs, rhs);
}

TEST(StructuralEqualTest, ModulesCompareDefinitionsByName) {
  const auto build = [](bool reversed, float weight) {
    IRModule module = MakeModule();
    ListAdt adt;
    module->AddTypeDef(adt.data);
    Function main = Fn({}, Weights({weight}));
    Function helper = Sample();
    if (reversed) {
      module->Add(module->GetGlobalVar("helper"), helper);
      module->Add(module->GetGlobalVar("main"), main);
    } else {
      module->Add(module->GetGlobalVar("main"), main);
      module->Add(module->GetGlobalVar("helper"), helper);
    }
    return module;
  };
  EXPECT_TRUE(StructuralEqual(build(false, 1), build(true, 1)));
  EXPECT_FALSE(StructuralEqual(build(false, 1), build(false, 2)));
  IRModule missing = build(false, 1);
  IRModule renamed = MakeModule();
  renamed->AddTypeDef(ListAdt().data);
  renamed->Add(renamed->GetGlobalVar("main"), missing->Lookup("main"));
  renamed->Add(renamed->GetGlobalVar("other"), missing->Lookup("helper"));
  EXPECT_FALSE(StructuralEqual(missing, renamed));
}

TEST(StructuralHashTest, FunctorsDeduplicateEquivalentFunctions) {
  std::unordered_map<Expr, int, StructuralHasher, StructuralEqualTo> ids;
  for (int i = 0; i < 3; ++i) ids.emplace(Sample(), static_cast<int>(ids.size()));
  Var p = MakeVar("p");
  ids.emplace(Fn({p}, p), static_cast<int>(ids.size()));
  EXPECT_EQ(ids.size(), 2u);
  EXPECT_EQ(ids.at(Sample()), 0);
}

// let %v0 = add(%input, %input); let %v1 = add(%v0, %input); ...; %v9999 (or,
// with `return_previous`, %v9998).
Expr LetChain(const Var& input, bool return_previous = false) {
  std::vector<Var> vars;
  for (int i = 0; i < kDeep; ++i) vars.push_back(MakeVar("v" + std::to_string(i)));
  Expr body = vars[return_previous ? kDeep - 2 : kDeep - 1];
  for (int i = kDeep - 1; i >= 0; --i) {
    body = Let(vars[i], Add(i == 0 ? Expr(input) : Expr(vars[i - 1]), input), body);
  }
  return body;
}

// add(add(...add(%input, 1f)..., 1f), 1f), 10,000 deep.
Expr NestedCalls(const Var& input) {
  Expr expr = input;
  for (int i = 0; i < kDeep; ++i) expr = Add(expr, MakeScalar(DataType::Float32(), 1));
  return expr;
}

TEST(DeepProgramTest, LetChainsCompareHashAndCollectVariables) {
  Var input = MakeVar("input");
  Function lhs = Fn({input}, LetChain(input));
  Var other_input = MakeVar("input");
  Function rhs = Fn({other_input}, LetChain(other_input));
  ExpectEqualAndSameHash(lhs, rhs);
  EXPECT_TRUE(FreeVars(lhs).empty());
  EXPECT_THAT(FreeVars(lhs->body), ElementsAre(input));
  EXPECT_EQ(BoundVars(lhs).size(), static_cast<size_t>(kDeep + 1));
  EXPECT_EQ(BoundVars(lhs->body).size(), static_cast<size_t>(kDeep));

  // A change at the bottom of the chain is found.
  Var changed_input = MakeVar("input");
  ExpectNotEqual(lhs, Fn({changed_input}, LetChain(changed_input, /*return_previous=*/true)));
  EXPECT_NE(StructuralHash(lhs),
            StructuralHash(Fn({changed_input}, LetChain(changed_input, true))));
}

TEST(DeepProgramTest, NestedCallsCompareHashAndCollectVariables) {
  Var input = MakeVar("input");
  Expr lhs = NestedCalls(input), rhs = NestedCalls(input);
  ExpectEqualAndSameHash(lhs, rhs);
  ExpectNotEqual(lhs, NestedCalls(MakeVar("input")));
  EXPECT_THAT(FreeVars(lhs), ElementsAre(input));
  EXPECT_TRUE(BoundVars(lhs).empty());
}

// Changes nothing: every node must come back as is.
class IdentityMutator : public ExprMutator {};

// Renames one variable everywhere.
class Renamer : public ExprMutator {
 public:
  Renamer(Var from, Var to) : from_(std::move(from)), to_(std::move(to)) {}
  Expr VisitVar(const VarNode* node) override {
    return node == from_.get() ? Expr(to_) : ExprMutator::VisitVar(node);
  }

 private:
  Var from_, to_;
};

TEST(ExprMutatorTest, ReturnsTheSameNodeWhenNothingChanges) {
  ListAdt adt;
  Var list = MakeVar("l"), x = MakeVar("x");
  Expr program =
      Fn({list, x},
         Make<IfNode>(x, HeadOr(adt, list, Make<TupleGetItemNode>(MakeTupleExpr({x, x}), 0)),
                      Add(x, Make<ConstructorNode>("Nil", std::vector<Type>{}, nullptr, 1))));
  IdentityMutator mutator;
  EXPECT_EQ(mutator.VisitExpr(program), program);

  Var input = MakeVar("input");
  Expr deep = LetChain(input);
  EXPECT_EQ(RunWithDeepStack([&] { return IdentityMutator().VisitExpr(deep); }), deep);
}

TEST(ExprMutatorTest, RenamingRebuildsOnlyWhatChangesAndKeepsSharing) {
  Var x = MakeVar("x"), y = MakeVar("y"), renamed = MakeVar("r");
  Expr untouched = Add(y, y);
  Expr shared = Add(x, untouched);
  Expr program = MakeTupleExpr({shared, shared, untouched});
  Expr result = Renamer(x, renamed).VisitExpr(program);
  ASSERT_NE(result, program);
  const auto* tuple = result.as<TupleNode>().get();
  ASSERT_NE(tuple, nullptr);
  EXPECT_EQ(tuple->fields[0], tuple->fields[1]);
  EXPECT_EQ(tuple->fields[2], untouched);
  ExpectEqualAndSameHash(
      result, MakeTupleExpr({Add(renamed, untouched), Add(renamed, untouched), untouched}));
  EXPECT_THAT(FreeVars(result), ElementsAre(renamed, y));
  EXPECT_THAT(FreeVars(program), ElementsAre(x, y));
}

TEST(FreeVarsTest, ClosuresCaptureWhatTheyUseButDoNotBind) {
  Var x = MakeVar("x"), y = MakeVar("y"), z = MakeVar("z"), f = MakeVar("f");
  // fn (%x) { let %f = fn (%z) { add(%z, %y) }; %f(%x) }
  Expr closure = Fn({z}, Add(z, y));
  Expr program = Fn({x}, Let(f, closure, Make<CallNode>(f, std::vector<Expr>{x})));
  EXPECT_THAT(FreeVars(closure), ElementsAre(y));
  EXPECT_THAT(FreeVars(program), ElementsAre(y));
  EXPECT_THAT(BoundVars(program), ElementsAre(x, f, z));
}

TEST(FreeVarsTest, OrderIsFirstOccurrence) {
  Var a = MakeVar("a"), b = MakeVar("b"), c = MakeVar("c"), bound = MakeVar("t");
  // let %t = (%c, %a); add(%t, add(%b, %c))
  Expr program = Let(bound, MakeTupleExpr({c, a}), Add(bound, Add(b, c)));
  EXPECT_THAT(FreeVars(program), ElementsAre(c, a, b));
  EXPECT_THAT(BoundVars(program), ElementsAre(bound));
}

TEST(FreeVarsTest, MatchClausesBindTheirPatternVariables) {
  ListAdt adt;
  Var list = MakeVar("l"), fallback = MakeVar("d");
  Expr match = HeadOr(adt, list, fallback);
  EXPECT_THAT(FreeVars(match), ElementsAre(list, fallback));
  ASSERT_EQ(BoundVars(match).size(), 1u);
  EXPECT_EQ(BoundVars(match)[0]->name_hint, "head");
}

TEST(FreeVarsTest, FreeTypeVarsSkipThoseAFunctionTypeBinds) {
  TypeVar a = Make<TypeVarNode>("A"), b = Make<TypeVarNode>("B"), c = Make<TypeVarNode>("C");
  Type func = Make<FuncTypeNode>(std::vector<TypeVar>{a}, std::vector<Type>{a, c, b}, c);
  EXPECT_THAT(FreeTypeVars(func), ElementsAre(c, b));
  EXPECT_THAT(FreeTypeVars(MakeTupleType({b, func, F32({2})})), ElementsAre(b, c));
  EXPECT_TRUE(FreeTypeVars(F32({Dim::Any()})).empty());
}

// fn (%x: Tensor[(?, 4), float32], %w: Tensor[(4, 3), float32], %b: Tensor[(?,), float32])
Function Dense() {
  Var x = MakeVar("x", F32({Dim::Any(), 4}));
  Var w = MakeVar("w", F32({4, 3}));
  Var b = MakeVar("b", F32({Dim::Any()}));
  return Fn({x, w, b}, Add(Call("dense", {x, w}), Add(b, w)));
}

std::vector<const ConstantNode*> ConstantsIn(const Expr& expr) {
  struct Collector : ExprVisitor {
    void VisitConstant(const ConstantNode* node) override { found.push_back(node); }
    std::vector<const ConstantNode*> found;
  } collector;
  collector.VisitExpr(expr);
  return collector.found;
}

std::string BindError(const std::map<std::string, Tensor>& params) {
  try {
    BindParamsByName(Dense(), params);
  } catch (const Error& error) {
    return error.what();
  }
  return "(no error)";
}

TEST(BindParamsTest, ReplacesNamedParametersByNamedConstants) {
  const Tensor weight = TensorNode::Empty({4, 3}, DataType::Float32());
  const Tensor bias = TensorNode::Empty({7}, DataType::Float32());
  const Tensor unrelated = TensorNode::Empty({1}, DataType::Int64());
  Function dense = Dense();
  Function bound = BindParamsByName(dense, {{"w", weight}, {"b", bias}, {"meta_0", unrelated}});
  ASSERT_EQ(bound->params.size(), 1u);
  EXPECT_EQ(bound->params[0], dense->params[0]);
  const auto constants = ConstantsIn(bound);
  ASSERT_EQ(constants.size(), 2u);  // %w's two uses share one constant
  EXPECT_EQ(constants[0]->name, "w");
  EXPECT_EQ(constants[0]->data, weight);
  EXPECT_EQ(constants[1]->name, "b");
  EXPECT_EQ(constants[1]->data, bias);
  EXPECT_TRUE(FreeVars(bound).empty());
  EXPECT_THAT(FreeVars(bound->body), ElementsAre(dense->params[0]));

  Var x = MakeVar("x", F32({Dim::Any(), 4}));
  Expr w = Make<ConstantNode>(weight, "w"), b = Make<ConstantNode>(bias, "b");
  ExpectEqualAndSameHash(bound, Fn({x}, Add(Call("dense", {x, w}), Add(b, w))));
}

TEST(BindParamsTest, ReturnsTheFunctionWhenNothingBinds) {
  Function dense = Dense();
  EXPECT_EQ(BindParamsByName(dense, {}), dense);
  EXPECT_EQ(BindParamsByName(dense, {{"unused", TensorNode::Empty({1}, DataType::Int8())}}), dense);
}

TEST(BindParamsTest, RejectsTensorsThatDoNotMatchTheAnnotation) {
  EXPECT_THAT(BindError({{"w", TensorNode::Empty({4, 2}, DataType::Float32())}}),
              HasSubstr("cannot bind parameter 'w' of type Tensor[(4, 3), float32] to a tensor of "
                        "type Tensor[(4, 2), float32]"));
  EXPECT_THAT(BindError({{"w", TensorNode::Empty({4, 3}, DataType::Float64())}}),
              HasSubstr("Tensor[(4, 3), float64]"));
  EXPECT_THAT(BindError({{"b", TensorNode::Empty({2, 2}, DataType::Float32())}}),
              HasSubstr("parameter 'b' of type Tensor[(?,), float32] to a tensor of type "
                        "Tensor[(2, 2), float32]"));
  EXPECT_THAT(BindError({{"b", TensorNode::Empty({}, DataType::Float32())}}),
              HasSubstr("Tensor[(), float32]"));

  Var pair = MakeVar("pair", MakeTupleType({F32({1}), F32({1})}));
  EXPECT_THROW(
      BindParamsByName(Fn({pair}, pair), {{"pair", TensorNode::Empty({1}, DataType::Float32())}}),
      Error);
  Var first = MakeVar("p"), second = MakeVar("p");
  try {
    BindParamsByName(Fn({first, second}, first),
                     {{"p", TensorNode::Empty({1}, DataType::Float32())}});
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_THAT(error.what(), HasSubstr("several parameters of that name"));
  }
}

TEST(BindParamsTest, UnannotatedParametersAcceptAnyTensor) {
  Var x = MakeVar("x"), y = MakeVar("y");
  Function bound = BindParamsByName(Fn({x, y}, Add(x, y)),
                                    {{"y", TensorNode::Empty({2, 5}, DataType::Int32())}});
  ASSERT_EQ(bound->params.size(), 1u);
  EXPECT_EQ(ConstantsIn(bound).size(), 1u);
}

}  // namespace
}  // namespace nimble::ir
