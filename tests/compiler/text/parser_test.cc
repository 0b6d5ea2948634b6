#include "nimble/compiler/text/parser.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "nimble/compiler/op/op.h"
#include "nimble/vm/error.h"

namespace nimble::text {
namespace {

using ::testing::HasSubstr;

template <typename T>
const T* As(const ir::Expr& expr) {
  const T* node = dynamic_cast<const T*>(expr.get());
  EXPECT_NE(node, nullptr);
  return node;
}

std::string ParseError(const std::string& text, const ParamMap* params = nullptr) {
  try {
    ParseModule(text, "prog.relay", params);
  } catch (const Error& error) {
    return error.what();
  }
  return "no error";
}

ir::TensorType AsTensor(const ir::Type& type) {
  ir::TensorType tensor = type.as<ir::TensorTypeNode>();
  EXPECT_NE(tensor, nullptr);
  return tensor;
}

TEST(ParseType, TensorTypesWithStaticAndAnyDims) {
  ir::TensorType tensor = AsTensor(ParseType("Tensor[(1, ?), float32]"));
  ASSERT_EQ(tensor->ndim(), 2u);
  EXPECT_EQ(tensor->shape[0], ir::Dim(1));
  EXPECT_TRUE(tensor->shape[1].is_any());
  EXPECT_EQ(tensor->dtype, DataType::Float32());

  ir::TensorType scalar = AsTensor(ParseType("Tensor[(), int64]"));
  EXPECT_EQ(scalar->ndim(), 0u);
  EXPECT_EQ(scalar->dtype, DataType::Int64());

  ir::TensorType bare = AsTensor(ParseType("float16"));
  EXPECT_EQ(bare->ndim(), 0u);
  EXPECT_EQ(bare->dtype, DataType::Float16());

  EXPECT_EQ(AsTensor(ParseType("Tensor[(3,), bool]"))->shape, std::vector<ir::Dim>{3});
}

TEST(ParseType, BoundedAnyDims) {
  ir::TensorType tensor = AsTensor(ParseType("Tensor[(1, ?<=512, ?), float32]"));
  ASSERT_EQ(tensor->ndim(), 3u);
  EXPECT_TRUE(tensor->shape[1].is_any());
  EXPECT_EQ(tensor->shape[1].upper_bound(), std::optional<int64_t>(512));
  EXPECT_EQ(tensor->shape[1], ir::Dim::Any(512));
  EXPECT_NE(tensor->shape[1], ir::Dim::Any());
  EXPECT_EQ(tensor->shape[2].upper_bound(), std::nullopt);
  EXPECT_EQ(tensor->shape[0].upper_bound(), std::optional<int64_t>(1));
  // Printed as written, so the text round-trips.
  EXPECT_EQ(ir::TypeToString(tensor), "Tensor[(1, ?<=512, ?), float32]");
  EXPECT_EQ(ir::TypeToString(ParseType(ir::TypeToString(tensor))), ir::TypeToString(tensor));
  EXPECT_THAT(ParseError("def @f(%x: Tensor[(?<=, 2), float32]) { %x }"),
              HasSubstr("prog.relay:1:23: expected a bound (a size) but found ','"));
  EXPECT_THAT(ParseError("def @f(%x: Tensor[(?<=-4,), float32]) { %x }"),
              HasSubstr("expected a bound (a size) but found '-4'"));
}

TEST(ParseType, TuplesFunctionsAndTypeParameters) {
  EXPECT_EQ(ir::TypeToString(ParseType("(Tensor[(2,), float32], int64)")),
            "(Tensor[(2,), float32], Tensor[(), int64])");
  EXPECT_EQ(ir::TypeToString(ParseType("(float32,)")), "(Tensor[(), float32],)");
  EXPECT_EQ(ir::TypeToString(ParseType("()")), "()");
  EXPECT_EQ(ir::TypeToString(ParseType("(float32)")), "Tensor[(), float32]");
  EXPECT_EQ(ir::TypeToString(ParseType("fn (float32, int32) -> bool")),
            "fn (Tensor[(), float32], Tensor[(), int32]) -> Tensor[(), bool]");

  ir::Type poly = ParseType("fn [A, B](A, fn (A) -> B) -> B");
  const auto* func = dynamic_cast<const ir::FuncTypeNode*>(poly.get());
  ASSERT_NE(func, nullptr);
  ASSERT_EQ(func->type_params.size(), 2u);
  // Names resolve to the declared type variables, by node.
  EXPECT_EQ(func->arg_types[0].get(), func->type_params[0].get());
  EXPECT_EQ(func->ret_type.get(), func->type_params[1].get());
  EXPECT_TRUE(ParseType("_").is<ir::IncompleteTypeNode>());
}

TEST(ParseType, Errors) {
  EXPECT_THROW(ParseType("Tensor[(2,), flaot32]"), Error);
  try {
    ParseType("Tensor[(2,), flaot32]");
  } catch (const Error& error) {
    EXPECT_THAT(error.what(), HasSubstr("<type>:1:14: unknown dtype 'flaot32'"));
  }
  try {
    ParseType("Foo");
  } catch (const Error& error) {
    EXPECT_THAT(error.what(), HasSubstr("1:1: unknown type 'Foo'"));
  }
  try {
    ParseType("Tensor[(-1,), float32]");
  } catch (const Error& error) {
    EXPECT_THAT(error.what(), HasSubstr("expected a dimension (a size or ?) but found '-1'"));
  }
  // A rank above kMaxRank (32): the fuzzer's 100,000 dimensions were accepted.
  std::string ones = "1";
  for (int d = 1; d < 33; ++d) ones += ", 1";
  EXPECT_NO_THROW(ParseType("Tensor[(" + ones.substr(3) + "), float32]"));
  try {
    ParseType("Tensor[(" + ones + "), float32]");
    ADD_FAILURE() << "a rank-33 tensor type parsed";
  } catch (const Error& error) {
    EXPECT_THAT(error.what(),
                HasSubstr("1:7: a tensor type of rank 33, above 32, the most a tensor may have"));
  }
}

struct LiteralCase {
  const char* text;
  DataType dtype;
  double value;
};

TEST(ParseExpr, ScalarLiterals) {
  const LiteralCase cases[] = {
      {"1f", DataType::Float32(), 1.0},
      {"1.5f", DataType::Float32(), 1.5},
      {"-2f", DataType::Float32(), -2.0},
      {"1.5", DataType::Float32(), 1.5},
      {"2.5e-3f", DataType::Float32(), 0.0025f},
      {"1f64", DataType::Float64(), 1.0},
      {"0.1f64", DataType::Float64(), 0.1},
      {"1f16", DataType::Float16(), 1.0},
      {"3", DataType::Int32(), 3},
      {"-7", DataType::Int32(), -7},
      {"3i64", DataType::Int64(), 3},
      {"3i8", DataType::Int8(), 3},
      {"200u8", {DataType::Code::kUInt, 8}, 200},
      {"True", DataType::Bool(), 1},
      {"False", DataType::Bool(), 0},
  };
  for (const LiteralCase& c : cases) {
    SCOPED_TRACE(c.text);
    ir::Expr expr = ParseExpr(c.text);
    const auto* constant = As<ir::ConstantNode>(expr);
    ASSERT_NE(constant, nullptr);
    EXPECT_TRUE(constant->is_scalar());
    EXPECT_TRUE(constant->name.empty());
    EXPECT_EQ(constant->data->dtype(), c.dtype);
    EXPECT_EQ(constant->data->GetAsDouble(0), c.value);
  }
  // int64 literals keep all their bits.
  ir::Expr big = ParseExpr("9007199254740993i64");
  EXPECT_EQ(As<ir::ConstantNode>(big)->data->GetAsInt64(0), 9007199254740993);
}

TEST(ParseExpr, LiteralErrors) {
  const std::pair<const char*, const char*> cases[] = {
      {"300i8", "<expr>:1:1: literal 300 is out of range for int8"},
      {"1.5i32", "has a fraction but an integer suffix"},
      {"3q", "bad literal suffix 'q'"},
      {"2f7", "bad literal suffix 'f7'"},
      {"99999999999999999999i64", "out of range"},
  };
  for (const auto& [text, message] : cases) {
    SCOPED_TRACE(text);
    try {
      ParseExpr(text);
      ADD_FAILURE() << "no error";
    } catch (const Error& error) {
      EXPECT_THAT(error.what(), HasSubstr(message));
    }
  }
}

TEST(ParseExpr, LetsScopeAndShadow) {
  ir::Expr expr = ParseExpr(R"(
    fn (%x: float32) {
      let %y = %x;
      let %x: float32 = 2f;  // shadows the parameter
      (%x, %y)
    })");
  const auto* function = As<ir::FunctionNode>(expr);
  ASSERT_EQ(function->params.size(), 1u);
  const ir::VarNode* param = function->params[0].get();
  const auto* first = As<ir::LetNode>(function->body);
  EXPECT_EQ(first->value.get(), param);
  const auto* second = As<ir::LetNode>(first->body);
  EXPECT_NE(second->var.get(), param);
  EXPECT_EQ(second->var->name_hint, "x");
  EXPECT_NE(second->var->type_annotation, nullptr);
  const auto* tuple = As<ir::TupleNode>(second->body);
  EXPECT_EQ(tuple->fields[0].get(), second->var.get());
  EXPECT_EQ(tuple->fields[1].get(), first->var.get());
}

TEST(ParseExpr, GraphBindingsShareOneNode) {
  ir::Expr expr = ParseExpr(R"(
    fn (%x) {
      %0 = (%x, %x);
      %1 = %0.1;
      (%0, %1, %0.0)
    })");
  const auto* function = As<ir::FunctionNode>(expr);
  // No Let nodes: the names stand for the expressions themselves.
  const auto* tuple = As<ir::TupleNode>(function->body);
  ASSERT_EQ(tuple->fields.size(), 3u);
  const auto* item = As<ir::TupleGetItemNode>(tuple->fields[1]);
  EXPECT_EQ(item->tuple.get(), tuple->fields[0].get());
  EXPECT_EQ(item->index, 1);
  EXPECT_EQ(As<ir::TupleGetItemNode>(tuple->fields[2])->tuple.get(), tuple->fields[0].get());
}

TEST(ParseExpr, TuplesProjectionsAndParentheses) {
  EXPECT_EQ(As<ir::TupleNode>(ParseExpr("()"))->fields.size(), 0u);
  EXPECT_EQ(As<ir::TupleNode>(ParseExpr("(1f,)"))->fields.size(), 1u);
  EXPECT_TRUE(ParseExpr("(1f)").is<ir::ConstantNode>());
  // `%t.0.1` is two projections, not `%t` and `0.1`.
  ir::Expr nested = ParseExpr("fn (%t) { %t.0.1 }");
  const auto* outer = As<ir::TupleGetItemNode>(As<ir::FunctionNode>(nested)->body);
  EXPECT_EQ(outer->index, 1);
  EXPECT_EQ(As<ir::TupleGetItemNode>(outer->tuple)->index, 0);
  EXPECT_EQ(As<ir::TupleGetItemNode>(ParseExpr("((1f, 2f)).1"))->index, 1);
}

TEST(ParseExpr, IfAndClosures) {
  ir::Expr expr = ParseExpr(R"(
    fn [A](%c: bool, %a: A) -> A {
      let %id = fn (%v: A) -> A { %v };
      if (%c) { %id(%a) } else { %a }
    })");
  const auto* function = As<ir::FunctionNode>(expr);
  ASSERT_EQ(function->type_params.size(), 1u);
  EXPECT_EQ(function->ret_type.get(), function->type_params[0].get());
  EXPECT_EQ(function->params[1]->type_annotation.get(), function->type_params[0].get());
  const auto* let = As<ir::LetNode>(function->body);
  const auto* closure = As<ir::FunctionNode>(let->value);
  EXPECT_EQ(closure->params[0]->type_annotation.get(), function->type_params[0].get());
  const auto* branch = As<ir::IfNode>(let->body);
  EXPECT_EQ(branch->cond.get(), function->params[0].get());
  const auto* call = As<ir::CallNode>(branch->then_branch);
  EXPECT_EQ(call->callee.get(), let->var.get());
  EXPECT_EQ(branch->else_branch.get(), function->params[1].get());
}

TEST(ParseExpr, SpansPointAtTheSource) {
  ir::Expr expr = ParseExpr("fn (%x) {\n  let %y = %x;\n  (%y, %x)\n}", "spans.relay");
  EXPECT_EQ(expr->span.ToString(), "1:1");
  const auto* function = As<ir::FunctionNode>(expr);
  EXPECT_EQ(function->params[0]->span.ToString(), "1:5");
  const auto* let = As<ir::LetNode>(function->body);
  EXPECT_EQ(let->span.ToString(), "2:3");
  EXPECT_EQ(let->var->span.ToString(), "2:7");
  EXPECT_EQ(let->body->span.ToString(), "3:3");
}

TEST(ParseExpr, CommentsAndHeader) {
  ir::Expr expr = ParseExpr(R"(#[version = "0.0.5"]
    // a line comment
    /* a block /* nested */ comment */ 1f)");
  EXPECT_TRUE(expr.is<ir::ConstantNode>());
}

TEST(ParseExpr, OpCallsWithAttributes) {
  ir::Expr softmax = ParseExpr("fn (%x: Tensor[(?, 4), float32]) { nn.softmax(%x, axis=-1) }");
  const auto* call = As<ir::CallNode>(As<ir::FunctionNode>(softmax)->body);
  EXPECT_EQ(As<ir::OpNode>(call->callee)->name, "nn.softmax");
  EXPECT_EQ(call->attrs.GetInt("axis"), -1);
  EXPECT_EQ(call->span.ToString(), "1:36");

  ir::Expr split = ParseExpr("fn (%x) { split(%x, indices_or_sections=2, axis=1) }");
  const auto* split_call = As<ir::CallNode>(As<ir::FunctionNode>(split)->body);
  EXPECT_EQ(std::get<int64_t>(*split_call->attrs.Find("indices_or_sections")), 2);
  EXPECT_EQ(split_call->attrs.GetInt("axis"), 1);

  // A list written with brackets or parentheses is an int list.
  ir::Expr indices = ParseExpr("fn (%x) { split(%x, indices_or_sections=(1, 3)) }");
  const auto* indices_call = As<ir::CallNode>(As<ir::FunctionNode>(indices)->body);
  EXPECT_EQ(indices_call->attrs.GetIntList("indices_or_sections"), (std::vector<int64_t>{1, 3}));

  ir::Expr add = ParseExpr("fn (%x, %y) { add(%x, %y) }");
  EXPECT_EQ(As<ir::OpNode>(As<ir::CallNode>(As<ir::FunctionNode>(add)->body)->callee),
            op::GetOp("add").get());
  // An operator name alone is the operator; calling it is an operator call.
  EXPECT_EQ(ParseExpr("multiply").get(), op::GetOp("multiply").get());
  EXPECT_THROW(ParseExpr("(multiply)(1f)"), Error);
  ir::Expr indirect = ParseExpr("(nn.softmax)(fn () { 1f }())");
  EXPECT_EQ(As<ir::CallNode>(indirect)->attrs.GetInt("axis"), -1);
}

TEST(ParseModule, AdtsMatchAndRecursion) {
  ir::IRModule module = ParseModule(R"(#[version = "0.0.5"]
def @length[A](%xs: List[A]) -> int32 {
  match (%xs) {
    Cons(_, %rest) => add(@length(%rest), 1),
    Nil => 0,
  }
}

type List[A] {
  Cons(A, List[A]),
  Nil,
}

def @main() -> int32 {
  @length(Cons(1, Cons(2, Nil)))
}
)",
                                    "list.relay");
  ir::TypeData list = module->LookupTypeDef("List");
  ASSERT_NE(list, nullptr);
  ASSERT_EQ(list->constructors.size(), 2u);
  EXPECT_EQ(list->constructors[0]->name, "Cons");
  EXPECT_EQ(list->constructors[0]->tag, 0);
  EXPECT_EQ(list->constructors[1]->tag, 1);
  EXPECT_EQ(list->constructors[0]->belong_to.get(), list->header.get());
  EXPECT_EQ(ir::TypeToString(list->constructors[0]->inputs[1]), "List[A]");
  EXPECT_EQ(list->constructors[0]->inputs[0].get(), list->type_vars[0].get());

  ir::Function length = module->Lookup("length");
  ASSERT_NE(length, nullptr);
  const auto* match = As<ir::MatchNode>(length->body);
  EXPECT_TRUE(match->complete);
  ASSERT_EQ(match->clauses.size(), 2u);
  const auto* cons = dynamic_cast<const ir::PatternConstructorNode*>(match->clauses[0].lhs.get());
  ASSERT_NE(cons, nullptr);
  EXPECT_EQ(cons->constructor.get(), list->constructors[0].get());
  EXPECT_EQ(cons->patterns[0]->kind, ir::PatternKind::kWildcard);
  const auto* rest = dynamic_cast<const ir::PatternVarNode*>(cons->patterns[1].get());
  ASSERT_NE(rest, nullptr);
  // The recursive call refers to the module's global, defined before or after.
  const auto* add = As<ir::CallNode>(match->clauses[0].rhs);
  const auto* recursive = As<ir::CallNode>(add->args[0]);
  EXPECT_EQ(recursive->callee.get(), module->GetGlobalVar("length").get());
  EXPECT_EQ(recursive->args[0].get(), rest->var.get());

  // `Nil` alone is the nullary constructor applied to nothing.
  const auto* main_call = As<ir::CallNode>(module->Lookup("main")->body);
  const auto* outer = As<ir::CallNode>(main_call->args[0]);
  const auto* nil = As<ir::CallNode>(As<ir::CallNode>(outer->args[1])->args[1]);
  EXPECT_EQ(nil->callee.get(), list->constructors[1].get());
  EXPECT_TRUE(nil->args.empty());
}

TEST(ParseModule, MutualRecursionIncompleteMatchAndConstructorValues) {
  ir::IRModule module = ParseModule(R"(
type Nat { Z, S(Nat) }
def @even(%n: Nat) -> bool { match (%n) { Z => True, S(%m) => @odd(%m) } }
def @odd(%n: Nat) -> bool { match? (%n) { S(%m) => @even(%m) } }
def @succ() { S }
def @zero() { Z() }
)",
                                    "nat.relay");
  const auto* odd = As<ir::MatchNode>(module->Lookup("odd")->body);
  EXPECT_FALSE(odd->complete);
  EXPECT_EQ(As<ir::CallNode>(odd->clauses[0].rhs)->callee.get(),
            module->GetGlobalVar("even").get());
  // A constructor with inputs named without arguments is the constructor itself.
  EXPECT_EQ(module->Lookup("succ")->body.get(), module->LookupConstructor("S").get());
  const auto* zero = As<ir::CallNode>(module->Lookup("zero")->body);
  EXPECT_TRUE(zero->args.empty());
  EXPECT_EQ(ir::TypeToString(module->Lookup("even")->params[0]->type_annotation), "Nat");
}

TEST(ParseModule, TupleAndVarPatterns) {
  ir::IRModule module = ParseModule(R"(
def @swap(%p: (float32, int32)) {
  match (%p) {
    (%a, _) => %a,
    %whole => %whole.0,
  }
}
)",
                                    "p.relay");
  const auto* match = As<ir::MatchNode>(module->Lookup("swap")->body);
  const auto* tuple = dynamic_cast<const ir::PatternTupleNode*>(match->clauses[0].lhs.get());
  ASSERT_NE(tuple, nullptr);
  EXPECT_EQ(tuple->patterns.size(), 2u);
  const auto* a = dynamic_cast<const ir::PatternVarNode*>(tuple->patterns[0].get());
  EXPECT_EQ(match->clauses[0].rhs.get(), a->var.get());
  EXPECT_EQ(match->clauses[1].lhs->kind, ir::PatternKind::kVar);
}

TEST(ParseModule, ConstantsComeFromParams) {
  ParamMap params;
  params["weight"] = TensorNode::FromVector<float>({2, 2}, DataType::Float32(), {1, 2, 3, 4});
  params["0"] = TensorNode::FromVector<float>({2}, DataType::Float32(), {5, 6});
  ir::IRModule module = ParseModule(R"(
def @main(%x: Tensor[(2, 2), float32]) {
  (meta[relay.Constant][weight], meta[relay.Constant][0], meta[relay.Constant][weight])
}
)",
                                    "c.relay", &params);
  const auto* tuple = As<ir::TupleNode>(module->Lookup("main")->body);
  const auto* weight = As<ir::ConstantNode>(tuple->fields[0]);
  EXPECT_EQ(weight->name, "weight");
  EXPECT_EQ(weight->data.get(), params["weight"].get());
  EXPECT_EQ(As<ir::ConstantNode>(tuple->fields[1])->name, "0");
  EXPECT_EQ(tuple->fields[2].get(), tuple->fields[0].get());
  EXPECT_EQ(weight->span.ToString(), "3:4");
}

TEST(ParseExpr, ResolvesNamesInAGivenModule) {
  ir::IRModule module = ParseModule("type Nat { Z, S(Nat) }\ndef @one() { S(Z) }", "m.relay");
  ir::Expr expr = ParseExpr("S(@one())", "<expr>", module);
  const auto* call = As<ir::CallNode>(expr);
  EXPECT_EQ(call->callee.get(), module->LookupConstructor("S").get());
  EXPECT_EQ(As<ir::CallNode>(call->args[0])->callee.get(), module->GetGlobalVar("one").get());
  try {
    ParseExpr("@two()", "e.relay", module);
    ADD_FAILURE() << "no error";
  } catch (const Error& error) {
    EXPECT_THAT(error.what(), HasSubstr("e.relay:1:1: undefined global @two"));
  }
}

TEST(ParseErrors, NameLineColumnAndExpectation) {
  ParamMap params;
  const std::pair<std::string, std::string> cases[] = {
      // missing paren
      {"def @main(%x) {\n  let %y = add(%x, %x;\n  %y\n}",
       "prog.relay:2:22: expected ')' but found ';'"},
      {"def @main(%x) {\n  %y\n}", "prog.relay:2:3: undefined variable %y"},
      {"def @main(%x) {\n  frobnicate(%x)\n}",
       "prog.relay:2:3: unknown operator or constructor 'frobnicate'"},
      {"def @main(%x) {\n  nn.softmax(%x, axes=1)\n}",
       "prog.relay:2:3: operator 'nn.softmax' has no attribute 'axes'"},
      {"def @main(%x) {\n  add(%x)\n}",
       "prog.relay:2:3: operator 'add' takes 2 argument(s), got 1"},
      {"def @main() {\n  meta[relay.Constant][w]\n}",
       "prog.relay:2:24: unknown constant 'w' (not in the params)"},
      {"def @main(%x: Tensor[(2,), flaot32]) {\n  %x\n}",
       "prog.relay:1:28: unknown dtype 'flaot32'"},
      {"def @main(%x) {\n  %x $ %x\n}", "prog.relay:2:6: unexpected character '$'"},
      {"def @main(%x: Foo) { %x }", "prog.relay:1:15: unknown type 'Foo'"},
      {"def @main(%x) { @missing(%x) }", "prog.relay:1:17: undefined global @missing"},
      {"def @f(%a, %b) { %a }\ndef @main(%x) { @f(%x) }",
       "prog.relay:2:17: @f takes 2 argument(s), got 1"},
      {"def @f() { 1f }\ndef @f() { 2f }", "prog.relay:2:5: global @f is defined twice"},
      {"type L { C(float32) }\ndef @main(%x) { C(%x, %x) }",
       "prog.relay:2:17: constructor C takes 1 argument(s), got 2"},
      {"type L { C(float32) }\ndef @main(%x) { match (%x) { D(%y) => %y } }",
       "prog.relay:2:30: unknown constructor 'D'"},
      {"type L[A] { C(A) }\ndef @main(%x: L) { %x }",
       "prog.relay:2:15: type L takes 1 type argument(s), got 0"},
      {"def @main(%x) { if (%x) { 1f } 2f }", "prog.relay:1:32: expected 'else' but found '2f'"},
      {"def @main(%x) { %x", "prog.relay:1:19: expected '}' but found end of input"},
      {"def @main(%x) { add(%x, %x, axis=1, %x) }",
       "prog.relay:1:37: expected an attribute 'name=value' after the attributes but found '%x'"},
      {"def @main(%x) { @main(%x, foo=1) }",
       "prog.relay:1:27: only operator calls take attributes"},
      {"#[version = \"0.0.4\"]\n", "prog.relay:1:13: unsupported text format version \"0.0.4\""},
      {"/* never closed", "prog.relay:1:1: unterminated comment"},
      {"%x = 1f;", "prog.relay:1:1: expected 'def' or 'type' but found '%x'"},
      {"def @main() { \"str }", "prog.relay:1:15: unterminated string"},
  };
  for (const auto& [text, message] : cases) {
    SCOPED_TRACE(text);
    EXPECT_THAT(ParseError(text, &params), HasSubstr(message));
  }
  EXPECT_THAT(ParseError("def @main() {\n  meta[relay.Constant][w]\n}"),
              HasSubstr("prog.relay:2:24: unknown constant 'w': no params were given"));
}

TEST(ParseErrors, SplitAttributeKinds) {
  EXPECT_THAT(ParseError("def @main(%x) { split(%x, indices_or_sections=\"two\") }"),
              HasSubstr("prog.relay:1:17: operator 'split': attribute 'indices_or_sections'"));
}

}  // namespace
}  // namespace nimble::text
