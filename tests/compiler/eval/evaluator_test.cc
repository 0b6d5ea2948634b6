#include "nimble/compiler/eval/evaluator.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "nimble/compiler/op/op.h"
#include "nimble/compiler/text/parser.h"
#include "nimble/compiler/typing/type_infer.h"
#include "nimble/vm/adt.h"
#include "nimble/vm/error.h"
#include "tests/error_of.h"

namespace nimble::eval {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

ir::IRModule Parse(const std::string& text) {
  return text::ParseModule(text, "test.relay");
}

Ref<Object> RunProgram(const std::string& text, const std::vector<Ref<Object>>& args,
                       const std::string& function = "main") {
  return Evaluate(Parse(text), function, args);
}

Tensor F32(const Shape& shape, const std::vector<float>& values) {
  return TensorNode::FromVector(shape, DataType::Float32(), values);
}

Tensor I32(int32_t value) {
  return TensorNode::Scalar(DataType::Int32(), value);
}

std::vector<double> Values(const Ref<Object>& value) {
  Tensor tensor = value.as<TensorNode>();
  EXPECT_TRUE(tensor) << "not a tensor";
  std::vector<double> values;
  for (int64_t i = 0; tensor && i < tensor->numel(); ++i) values.push_back(tensor->GetAsDouble(i));
  return values;
}

Shape ShapeOf(const Ref<Object>& value) {
  Tensor tensor = value.as<TensorNode>();
  EXPECT_TRUE(tensor) << "not a tensor";
  return tensor ? tensor->shape() : Shape{};
}

// A list value of tensors as the vector of their first elements.
std::vector<double> ListHeads(Ref<Object> list) {
  std::vector<double> heads;
  while (ADT cell = list.as<ADTNode>()) {
    if (cell->size() == 0) break;
    heads.push_back(Values(cell->field(0)).at(0));
    list = cell->field(1);
  }
  return heads;
}

constexpr const char* kListPrelude = R"(
type List[A] {
  Cons(A, List[A]),
  Nil,
}

def @map[A, B](%f: fn (A) -> B, %xs: List[A]) -> List[B] {
  match (%xs) {
    Cons(%head, %tail) => Cons(%f(%head), @map(%f, %tail)),
    Nil => Nil,
  }
}

def @foldl[A, B](%f: fn (A, B) -> A, %acc: A, %xs: List[B]) -> A {
  match (%xs) {
    Cons(%head, %tail) => @foldl(%f, %f(%acc, %head), %tail),
    Nil => %acc,
  }
}
)";

// ---- Basics -----------------------------------------------------------------

TEST(Evaluator, OperatorCallOnDynamicShapes) {
  const char* program = R"(
def @main(%x: Tensor[(?, 2), float32], %y: Tensor[(1, 2), float32]) -> Tensor[(?, 2), float32] {
  concatenate((%x, %y))
})";
  Ref<Object> out = RunProgram(program, {F32({2, 2}, {1, 2, 3, 4}), F32({1, 2}, {5, 6})});
  EXPECT_EQ(ShapeOf(out), (Shape{3, 2}));
  EXPECT_THAT(Values(out), ElementsAre(1, 2, 3, 4, 5, 6));
  // Any accepts any size, including zero rows.
  out = RunProgram(program, {F32({0, 2}, {}), F32({1, 2}, {5, 6})});
  EXPECT_EQ(ShapeOf(out), (Shape{1, 2}));
}

TEST(Evaluator, LetsAndScalars) {
  Ref<Object> out = RunProgram(R"(
def @main(%x: Tensor[(2,), float32]) {
  let %a = multiply(%x, 2f);
  let %b = add(%a, let %c = 1f; %c);
  subtract(%b, %x)
})",
                               {F32({2}, {1, 10})});
  EXPECT_THAT(Values(out), ElementsAre(2, 11));
}

TEST(Evaluator, GraphBindingsAreShared) {
  Ref<Object> out = RunProgram(R"(
def @main(%x: Tensor[(2,), float32]) {
  %0 = add(%x, %x);
  multiply(%0, %0)
})",
                               {F32({2}, {1, 2})});
  EXPECT_THAT(Values(out), ElementsAre(4, 16));
}

TEST(Evaluator, SharedSubexpressionsAreEvaluatedOnce) {
  // Each binding is used twice: evaluated per path, this would take 2^60 adds.
  std::string program = "def @main(%x: Tensor[(), float64]) {\n  %0 = add(%x, %x);\n";
  for (int i = 1; i < 60; ++i) {
    program += "  %" + std::to_string(i) + " = add(%" + std::to_string(i - 1) + ", %" +
               std::to_string(i - 1) + ");\n";
  }
  program += "  %59\n}\n";
  const Tensor one = TensorNode::Scalar(DataType::Float64(), 1.0);
  EXPECT_THAT(Values(RunProgram(program, {one})), ElementsAre(std::ldexp(1.0, 60)));
}

TEST(Evaluator, TenThousandDeepGraphBindings) {
  std::string program = "def @main(%x: Tensor[(), float32]) {\n  %0 = add(%x, 1f);\n";
  for (int i = 1; i < 10000; ++i) {
    program += "  %" + std::to_string(i) + " = add(%" + std::to_string(i - 1) + ", 1f);\n";
  }
  program += "  %9999\n}\n";
  EXPECT_THAT(Values(RunProgram(program, {F32({}, {0.5f})})), ElementsAre(10000.5));
}

TEST(Evaluator, DoesNotNeedTypeInferenceButAgreesWithIt) {
  const char* program = R"(
def @main(%x: Tensor[(?, 3), float32]) {
  let %s = split(%x, indices_or_sections=3, axis=1);
  (%s.2, add(%s.0, %s.1))
})";
  ir::IRModule module = Parse(program);
  const Tensor x = F32({2, 3}, {1, 2, 3, 4, 5, 6});
  auto check = [&](const Ref<Object>& out) {
    ADT tuple = out.as<ADTNode>();
    ASSERT_TRUE(tuple);
    ASSERT_EQ(tuple->size(), 2u);
    EXPECT_EQ(ShapeOf(tuple->field(0)), (Shape{2, 1}));
    EXPECT_THAT(Values(tuple->field(0)), ElementsAre(3, 6));
    EXPECT_THAT(Values(tuple->field(1)), ElementsAre(3, 9));
  };
  check(Evaluate(module, "main", {x}));
  EXPECT_FALSE(module->Lookup("main")->body->checked_type);
  typing::InferTypes(module);
  check(Evaluate(module, "main", {x}));
}

// ---- Control flow ---------------------------------------------------------

TEST(Evaluator, IfBranchesMayReturnDifferentShapes) {
  const char* program = R"(
def @main(%flag: Tensor[(), bool]) -> Tensor[(?, 3), float32] {
  if (%flag) {
    zeros(shape=[2, 3], dtype="float32")
  } else {
    ones(shape=[4, 3], dtype="float32")
  }
})";
  ir::IRModule module = Parse(program);
  Ref<Object> yes = Evaluate(module, "main", {TensorNode::Scalar(DataType::Bool(), true)});
  Ref<Object> no = Evaluate(module, "main", {TensorNode::Scalar(DataType::Bool(), false)});
  EXPECT_EQ(ShapeOf(yes), (Shape{2, 3}));
  EXPECT_EQ(Values(yes).front(), 0);
  EXPECT_EQ(ShapeOf(no), (Shape{4, 3}));
  EXPECT_EQ(Values(no).front(), 1);
}

TEST(Evaluator, IfConditionMustBeBoolScalar) {
  const char* program = R"(
def @main(%c) {
  if (%c) { 1f } else { 2f }
})";
  EXPECT_THAT(ErrorOf([&] { RunProgram(program, {I32(1)}); }),
              AllOf(HasSubstr("3:3: if:"), HasSubstr("bool scalar"), HasSubstr("int32")));
  Tensor vector = TensorNode::FromVector<int>({2}, DataType::Bool(), {1, 0});
  EXPECT_THAT(ErrorOf([&] { RunProgram(program, {vector}); }), HasSubstr("Tensor[(2,), bool]"));
}

TEST(Evaluator, LoopByTailRecursion) {
  const char* program = R"(
def @loop(%i: Tensor[(), int32], %n: Tensor[(), int32], %acc: Tensor[(), float32]) -> Tensor[(), float32] {
  if (less(%i, %n)) {
    @loop(add(%i, 1), %n, add(%acc, 0.5f))
  } else {
    %acc
  }
}

def @main(%n: Tensor[(), int32]) -> Tensor[(), float32] {
  @loop(0, %n, 0f)
})";
  EXPECT_THAT(Values(RunProgram(program, {I32(10000)})), ElementsAre(5000));
  EXPECT_THAT(Values(RunProgram(program, {I32(0)})), ElementsAre(0));
}

TEST(Evaluator, LoopGrowingATensor) {
  const char* program = R"(
def @grow(%i: Tensor[(), int32], %acc: Tensor[(?, 2), float32]) -> Tensor[(?, 2), float32] {
  if (less(%i, 3)) {
    @grow(add(%i, 1), concatenate((%acc, multiply(ones(shape=[1, 2], dtype="float32"), cast(%i, dtype="float32")))))
  } else {
    %acc
  }
}

def @main(%start: Tensor[(1, 2), float32]) -> Tensor[(?, 2), float32] {
  @grow(0, %start)
})";
  Ref<Object> out = RunProgram(program, {F32({1, 2}, {9, 9})});
  EXPECT_EQ(ShapeOf(out), (Shape{4, 2}));
  EXPECT_THAT(Values(out), ElementsAre(9, 9, 0, 0, 1, 1, 2, 2));
}

TEST(Evaluator, NonTailRecursionTenThousandDeep) {
  const char* program = R"(
def @count(%n: Tensor[(), int32]) -> Tensor[(), int32] {
  if (equal(%n, 0)) {
    0
  } else {
    add(@count(subtract(%n, 1)), 1)
  }
})";
  EXPECT_THAT(Values(RunProgram(program, {I32(10000)}, "count")), ElementsAre(10000));
}

TEST(Evaluator, MutualRecursion) {
  const char* program = R"(
def @even(%n: Tensor[(), int32]) -> Tensor[(), bool] {
  if (equal(%n, 0)) { True } else { @odd(subtract(%n, 1)) }
}

def @odd(%n: Tensor[(), int32]) -> Tensor[(), bool] {
  if (equal(%n, 0)) { False } else { @even(subtract(%n, 1)) }
})";
  ir::IRModule module = Parse(program);
  EXPECT_THAT(Values(Evaluate(module, "even", {I32(10)})), ElementsAre(1));
  EXPECT_THAT(Values(Evaluate(module, "even", {I32(7)})), ElementsAre(0));
  EXPECT_THAT(Values(Evaluate(module, "odd", {I32(10001)})), ElementsAre(1));
}

TEST(Evaluator, TenThousandLets) {
  std::string program = "def @main(%x: Tensor[(), float32]) {\n  let %v0 = %x;\n";
  for (int i = 1; i <= 10000; ++i) {
    program += "  let %v" + std::to_string(i) + " = add(%v" + std::to_string(i - 1) + ", %x);\n";
  }
  program += "  %v10000\n}\n";
  EXPECT_THAT(Values(RunProgram(program, {F32({}, {0.5f})})), ElementsAre(5000.5));
}

// ---- Closures ---------------------------------------------------------------

TEST(Evaluator, ClosuresCaptureVariables) {
  const char* program = R"(
def @make_adder(%k: Tensor[(), float32]) {
  fn (%x: Tensor[(), float32]) { add(%x, %k) }
}

def @main(%x: Tensor[(), float32]) {
  let %add_two = @make_adder(2f);
  let %add_ten = @make_adder(10f);
  let %twice = fn (%f, %y) { %f(%f(%y)) };
  (%add_two(%x), %twice(%add_ten, %x))
})";
  ADT out = RunProgram(program, {F32({}, {1})}).as<ADTNode>();
  ASSERT_TRUE(out);
  EXPECT_THAT(Values(out->field(0)), ElementsAre(3));
  EXPECT_THAT(Values(out->field(1)), ElementsAre(21));
}

TEST(Evaluator, ReturnsClosures) {
  Ref<Object> out = RunProgram("def @main() { fn (%x) { %x } }", {});
  Closure closure = out.as<ClosureNode>();
  ASSERT_TRUE(closure);
  EXPECT_EQ(closure->function->params.size(), 1u);
}

TEST(Evaluator, RecursiveLetBoundClosure) {
  // let %loop = fn (%i, %acc) { if (%i < %n) %loop(%i + 1, %acc * 2) else %acc };
  // %loop(0, 1)  -- built in memory, since the text format has no recursive let.
  ir::IRModule module = ir::MakeModule();
  const ir::Type scalar_i32 = ir::MakeTensorType({}, DataType::Int32());
  ir::Var n = ir::MakeVar("n", scalar_i32);
  ir::Var loop = ir::MakeVar("loop");
  ir::Var i = ir::MakeVar("i");
  ir::Var acc = ir::MakeVar("acc");
  auto call = [](ir::Expr callee, std::vector<ir::Expr> args) {
    return Make<ir::CallNode>(std::move(callee), std::move(args));
  };
  ir::Expr body = Make<ir::IfNode>(
      op::MakeOpCall("less", {i, n}),
      call(loop, {op::MakeOpCall("add", {i, ir::MakeScalar(DataType::Int32(), 1)}),
                  op::MakeOpCall("multiply", {acc, ir::MakeScalar(DataType::Int32(), 2)})}),
      acc);
  ir::Expr function = Make<ir::FunctionNode>(std::vector<ir::Var>{i, acc}, body, nullptr,
                                             std::vector<ir::TypeVar>{});
  ir::Expr main_body = Make<ir::LetNode>(
      loop, function,
      call(loop, {ir::MakeScalar(DataType::Int32(), 0), ir::MakeScalar(DataType::Int32(), 1)}));
  module->Add(module->GetGlobalVar("main"),
              Make<ir::FunctionNode>(std::vector<ir::Var>{n}, main_body, nullptr,
                                     std::vector<ir::TypeVar>{}));
  EXPECT_THAT(Values(Evaluate(module, "main", {I32(10)})), ElementsAre(1024));
}

// ---- ADTs and match -----------------------------------------------------------

TEST(Evaluator, ListMapAndFoldWithClosures) {
  const std::string program = std::string(kListPrelude) + R"(
def @main(%x: Tensor[(), float32]) {
  let %xs = Cons(%x, Cons(2f, Cons(3f, Nil)));
  let %ys = @map(fn (%v) { multiply(%v, %x) }, %xs);
  (@foldl(fn (%acc, %v) { add(%acc, %v) }, 0f, %ys), %ys)
})";
  ADT out = RunProgram(program, {F32({}, {10})}).as<ADTNode>();
  ASSERT_TRUE(out);
  EXPECT_THAT(Values(out->field(0)), ElementsAre(100 + 20 + 30));
  EXPECT_THAT(ListHeads(out->field(1)), ElementsAre(100, 20, 30));
}

TEST(Evaluator, ListOfTenThousand) {
  const std::string program = std::string(kListPrelude) + R"(
def @range(%i: Tensor[(), int32], %n: Tensor[(), int32], %acc: List[Tensor[(), int32]]) -> List[Tensor[(), int32]] {
  if (less(%i, %n)) { @range(add(%i, 1), %n, Cons(%i, %acc)) } else { %acc }
}

def @main(%n: Tensor[(), int32]) {
  @foldl(fn (%a, %b) { add(%a, %b) }, 0, @map(fn (%v) { multiply(%v, 2) }, @range(0, %n, Nil)))
})";
  EXPECT_THAT(Values(RunProgram(program, {I32(10000)})), ElementsAre(10000 * 9999));
}

TEST(Evaluator, ConstructorValuesCarryTheirTag) {
  const char* program = R"(
type Shape {
  Circle(Tensor[(), float32]),
  Square(Tensor[(), float32]),
  Empty,
}

def @main(%r: Tensor[(), float32]) {
  (Circle(%r), Square(%r), Empty)
})";
  ADT out = RunProgram(program, {F32({}, {2})}).as<ADTNode>();
  ASSERT_TRUE(out);
  EXPECT_EQ(out->field(0).as<ADTNode>()->tag(), 0);
  EXPECT_EQ(out->field(1).as<ADTNode>()->tag(), 1);
  EXPECT_EQ(out->field(2).as<ADTNode>()->tag(), 2);
  EXPECT_EQ(out->field(2).as<ADTNode>()->size(), 0u);
  EXPECT_THAT(Values(out->field(1).as<ADTNode>()->field(0)), ElementsAre(2));
}

TEST(Evaluator, ConstructorsAndGlobalsAsValues) {
  const std::string program = std::string(kListPrelude) + R"(
type Option[A] {
  Some(A),
  None,
}

def @double(%x: Tensor[(), float32]) { multiply(%x, 2f) }

def @main() {
  let %wrapped = @map(Some, @map(@double, Cons(1f, Cons(5f, Nil))));
  match (%wrapped) {
    Cons(Some(%first), _) => %first,
    _ => -1f,
  }
})";
  EXPECT_THAT(Values(RunProgram(program, {})), ElementsAre(2));
}

TEST(Evaluator, MatchAllPatternKinds) {
  const std::string program = std::string(kListPrelude) + R"(
def @classify(%xs: List[(Tensor[(), int32], Tensor[(), int32])]) -> Tensor[(), int32] {
  match (%xs) {
    Nil => 0,
    Cons((%a, _), Nil) => %a,
    Cons((_, %b), Cons(_, Nil)) => add(%b, 100),
    Cons(%pair, _) => add(%pair.1, 1000),
  }
})";
  ir::IRModule module = Parse(program);
  ir::Constructor cons = module->LookupConstructor("Cons");
  ir::Constructor nil = module->LookupConstructor("Nil");
  auto list = [&](const std::vector<std::pair<int, int>>& pairs) {
    Ref<Object> result = Make<ADTNode>(nil->tag, std::vector<Ref<Object>>{});
    for (auto it = pairs.rbegin(); it != pairs.rend(); ++it) {
      Ref<Object> pair = MakeTuple({I32(it->first), I32(it->second)});
      result = Make<ADTNode>(cons->tag, std::vector<Ref<Object>>{pair, result});
    }
    return result;
  };
  auto classify = [&](const std::vector<std::pair<int, int>>& pairs) {
    return Values(Evaluate(module, "classify", {list(pairs)}));
  };
  EXPECT_THAT(classify({}), ElementsAre(0));
  EXPECT_THAT(classify({{7, 8}}), ElementsAre(7));
  EXPECT_THAT(classify({{7, 8}, {1, 2}}), ElementsAre(108));
  EXPECT_THAT(classify({{7, 8}, {1, 2}, {3, 4}}), ElementsAre(1008));
}

TEST(Evaluator, IncompleteMatchThatFindsNoClause) {
  const char* program = R"(
type List[A] {
  Cons(A, List[A]),
  Nil,
}

def @head(%xs: List[Tensor[(), float32]]) -> Tensor[(), float32] {
  match? (%xs) {
    Cons(%x, _) => %x,
  }
}

def @main(%x: Tensor[(), float32]) {
  (@head(Cons(%x, Nil)), @head(Nil))
})";
  EXPECT_THAT(ErrorOf([&] { RunProgram(program, {F32({}, {1})}); }),
              HasSubstr("8:3: match: no clause matches value of constructor Nil"));
}

TEST(Evaluator, TuplesAndProjections) {
  Ref<Object> out = RunProgram(R"(
def @swap(%p: (Tensor[(), float32], Tensor[(2,), float32])) {
  (%p.1, %p.0)
}

def @main(%a: Tensor[(), float32], %b: Tensor[(2,), float32]) {
  let %nested = ((%a, %b), @swap((%a, %b)));
  (%nested.1.0, %nested.0.0, ())
})",
                               {F32({}, {1}), F32({2}, {2, 3})});
  ADT tuple = out.as<ADTNode>();
  ASSERT_TRUE(tuple);
  EXPECT_EQ(tuple->tag(), 0);
  ASSERT_EQ(tuple->size(), 3u);
  EXPECT_THAT(Values(tuple->field(0)), ElementsAre(2, 3));
  EXPECT_THAT(Values(tuple->field(1)), ElementsAre(1));
  EXPECT_EQ(tuple->field(2).as<ADTNode>()->size(), 0u);
}

// ---- Errors -----------------------------------------------------------------

TEST(Evaluator, EntryChecksArguments) {
  const char* program = R"(
def @main(%x: Tensor[(?, 2), float32], %n: Tensor[(), int32]) {
  %x
})";
  ir::IRModule module = Parse(program);
  EXPECT_THAT(ErrorOf([&] {
                Evaluate(module, "main", {F32({3, 2}, {})});
              }),
              HasSubstr("@main expects 2 arguments, got 1"));
  EXPECT_THAT(ErrorOf([&] {
                Evaluate(module, "main", {F32({3, 3}, {}), I32(1)});
              }),
              HasSubstr("@main: parameter %x expects Tensor[(?, 2), float32], got "
                        "Tensor[(3, 3), float32]"));
  EXPECT_THAT(ErrorOf([&] {
                Evaluate(module, "main", {F32({2}, {}), I32(1)});
              }),
              HasSubstr("parameter %x expects Tensor[(?, 2), float32], got Tensor[(2,), float32]"));
  EXPECT_THAT(ErrorOf([&] {
                Evaluate(module, "main", {F32({3, 2}, {}), F32({}, {1})});
              }),
              HasSubstr("parameter %n expects Tensor[(), int32], got Tensor[(), float32]"));
  EXPECT_THAT(ErrorOf([&] {
                Evaluate(module, "main", {MakeTuple({}), I32(1)});
              }),
              HasSubstr("parameter %x expects Tensor[(?, 2), float32], got ()"));
  EXPECT_THAT(ErrorOf([&] { Evaluate(module, "missing", {}); }),
              HasSubstr("undefined global @missing"));
  EXPECT_NO_THROW(Evaluate(module, "main", {F32({7, 2}, {}), I32(1)}));
}

TEST(Evaluator, CallsCheckParameterAnnotations) {
  const char* program = R"(
def @f(%x: Tensor[(2,), float32]) { %x }

def @main(%x: Tensor[(?,), float32]) {
  @f(%x)
})";
  EXPECT_THAT(ErrorOf([&] { RunProgram(program, {F32({3}, {})}); }),
              HasSubstr("5:3: @f: parameter %x expects Tensor[(2,), float32], got "
                        "Tensor[(3,), float32]"));
}

TEST(Evaluator, RuntimeOperatorErrorsNameOpShapesAndLocation) {
  const char* program = R"(
def @main(%x: Tensor[(?, 2), float32], %y: Tensor[(?, 2), float32]) {
  let %z = multiply(%x, 2f);
  add(%z, %y)
})";
  const std::string error = ErrorOf([&] {
    RunProgram(program, {F32({3, 2}, {}), F32({4, 2}, {})});
  });
  EXPECT_THAT(error, AllOf(HasSubstr("4:3: add"), HasSubstr("3"), HasSubstr("4")));
}

TEST(Evaluator, ErrorsInsideCalledFunctionsPointAtTheFailingOp) {
  const char* program = R"(
def @inner(%a: Tensor[(?,), float32], %b: Tensor[(?,), float32]) {
  subtract(%a, %b)
}

def @main(%a: Tensor[(?,), float32], %b: Tensor[(?,), float32]) {
  @inner(%a, %b)
})";
  EXPECT_THAT(ErrorOf([&] {
                RunProgram(program, {F32({2}, {}), F32({3}, {})});
              }),
              HasSubstr("3:3: subtract"));
}

TEST(Evaluator, OperatorArgumentsMustBeTensors) {
  EXPECT_THAT(ErrorOf([&] { RunProgram("def @main() {\n  add(fn (%x) { %x }, 1f)\n}", {}); }),
              HasSubstr("2:3: add: "));
}

TEST(Evaluator, CallingANonFunctionFails) {
  EXPECT_THAT(ErrorOf([&] { RunProgram("def @main(%x) { %x(1f) }", {F32({}, {1})}); }),
              HasSubstr("1:17: cannot call Tensor[(), float32]"));
  EXPECT_THAT(ErrorOf([&] {
                RunProgram("def @main(%f) { %f(1f, 2f) }",
                           {RunProgram("def @main() { fn (%x) { %x } }", {})});
              }),
              HasSubstr("expects 1 argument, got 2"));
}

}  // namespace
}  // namespace nimble::eval
