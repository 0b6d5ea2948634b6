// LambdaLift: text in, text out (docs/memory-dialect.md §1), and the
// evaluator runs the lifted program, closures included, to the same values.
#include "nimble/compiler/transform/lambda_lift.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "nimble/compiler/op/op.h"
#include "tests/compiler/transform/normalize_test_util.h"
#include "tests/error_of.h"

namespace nimble::transform {
namespace {

using testing::ExpectProgram;
using testing::ExpectSameResult;
using testing::F32;
using ::testing::HasSubstr;
using testing::I32;
using testing::ParseTyped;

TEST(LambdaLift, AProgramWithoutFunctionLiteralsComesBackAsItWas) {
  testing::ExpectUnchanged(ParseTyped(testing::kNormalProgram), LambdaLift);
}

TEST(LambdaLift, AClosureBecomesAClosureGlobalCalledOnTheCapturedValues) {
  ir::IRModule module = ParseTyped(R"(
def @main(%n: Tensor[(), int32], %v: Tensor[(), int32]) -> Tensor[(), int32] {
  let %f = fn (%x: Tensor[(), int32]) -> Tensor[(), int32] { add(%x, %n) };
  let %r = %f(%v);
  %r
})");
  ExpectProgram(LambdaLift(module), R"(
def @main(%n: Tensor[(), int32], %v: Tensor[(), int32]) -> Tensor[(), int32] {
  let %f = @main_lambda_0(%n);
  let %r = %f(%v);
  %r
}

def @main_lambda_0(%n: Tensor[(), int32], Closure=1) -> fn (Tensor[(), int32]) -> Tensor[(), int32] {
  fn (%x: Tensor[(), int32]) -> Tensor[(), int32] { add(%x, %n) }
})");
  ExpectSameResult(module, LambdaLift(module), {I32(3), I32(4)});
}

TEST(LambdaLift, ALiteralCapturingNothingBecomesAPlainGlobalWithAnnotatedParameters) {
  ir::IRModule module = ParseTyped(R"(
def @main(%x: Tensor[(?, 2), float32]) {
  let %twice = fn (%f, %y) { let %a = %f(%y); let %b = %f(%a); %b };
  let %neg = fn (%z: Tensor[(?, 2), float32]) { negative(%z) };
  let %r = %twice(%neg, %x);
  %r
})");
  ExpectProgram(LambdaLift(module), R"(
def @main(%x: Tensor[(?, 2), float32]) {
  let %twice = @main_lambda_0;
  let %neg = @main_lambda_1;
  let %r = %twice(%neg, %x);
  %r
}

def @main_lambda_0(%f: fn (Tensor[(?, 2), float32]) -> Tensor[(?, 2), float32],
                   %y: Tensor[(?, 2), float32]) -> Tensor[(?, 2), float32] {
  let %a = %f(%y);
  let %b = %f(%a);
  %b
}

def @main_lambda_1(%z: Tensor[(?, 2), float32]) -> Tensor[(?, 2), float32] {
  negative(%z)
})");
  ExpectSameResult(module, LambdaLift(module), {F32({3, 2}, {1, 2, 3, 4, 5, 6})});
}

TEST(LambdaLift, NestedClosuresAreLiftedInnermostFirst) {
  ir::IRModule module = ParseTyped(R"(
def @main(%k: Tensor[(), float32], %x: Tensor[(), float32]) -> Tensor[(), float32] {
  let %outer = fn (%a: Tensor[(), float32]) -> fn (Tensor[(), float32]) -> Tensor[(), float32] {
    let %inner = fn (%b: Tensor[(), float32]) -> Tensor[(), float32] {
      let %s = add(%a, %b);
      let %t = multiply(%s, %k);
      %t
    };
    %inner
  };
  let %g = %outer(%x);
  let %r = %g(2f);
  %r
})");
  ExpectProgram(LambdaLift(module), R"(
def @main(%k: Tensor[(), float32], %x: Tensor[(), float32]) -> Tensor[(), float32] {
  let %outer = @main_lambda_1(%k);
  let %g = %outer(%x);
  let %r = %g(2f);
  %r
}

def @main_lambda_0(%a: Tensor[(), float32], %k: Tensor[(), float32], Closure=1)
    -> fn (Tensor[(), float32]) -> Tensor[(), float32] {
  fn (%b: Tensor[(), float32]) -> Tensor[(), float32] {
    let %s = add(%a, %b);
    let %t = multiply(%s, %k);
    %t
  }
}

def @main_lambda_1(%k: Tensor[(), float32], Closure=1)
    -> fn (Tensor[(), float32]) -> fn (Tensor[(), float32]) -> Tensor[(), float32] {
  fn (%a: Tensor[(), float32]) -> fn (Tensor[(), float32]) -> Tensor[(), float32] {
    let %inner = @main_lambda_0(%a, %k);
    %inner
  }
})");
  ExpectSameResult(module, LambdaLift(module), {F32({}, {3}), F32({}, {1})});
}

TEST(LambdaLift, ClosuresInsidePolymorphicGlobalsBindTheTypeVariables) {
  ir::IRModule module = ParseTyped(R"(
def @compose[A, B, C](%f: fn (A) -> B, %g: fn (B) -> C) -> fn (A) -> C {
  let %h = fn (%x: A) -> C { let %y = %f(%x); let %z = %g(%y); %z };
  %h
}

def @main(%x: Tensor[(2,), float32]) -> Tensor[(2,), float32] {
  let %neg = fn (%a: Tensor[(2,), float32]) -> Tensor[(2,), float32] { negative(%a) };
  let %exp = fn (%b: Tensor[(2,), float32]) -> Tensor[(2,), float32] { exp(%b) };
  let %both = @compose(%neg, %exp);
  let %r = %both(%x);
  %r
})");
  ExpectProgram(LambdaLift(module), R"(
def @compose[A, B, C](%f: fn (A) -> B, %g: fn (B) -> C) -> fn (A) -> C {
  let %h = @compose_lambda_0(%f, %g);
  %h
}

def @compose_lambda_0[A, B, C](%f: fn (A) -> B, %g: fn (B) -> C, Closure=1) -> fn (A) -> C {
  fn (%x: A) -> C { let %y = %f(%x); let %z = %g(%y); %z }
}

def @main(%x: Tensor[(2,), float32]) -> Tensor[(2,), float32] {
  let %neg = @main_lambda_0;
  let %exp = @main_lambda_1;
  let %both = @compose(%neg, %exp);
  let %r = %both(%x);
  %r
}

def @main_lambda_0(%a: Tensor[(2,), float32]) -> Tensor[(2,), float32] { negative(%a) }

def @main_lambda_1(%b: Tensor[(2,), float32]) -> Tensor[(2,), float32] { exp(%b) }
)");
  ExpectSameResult(module, LambdaLift(module), {F32({2}, {0, 1})});
}

TEST(LambdaLift, ClosuresInBranchesAndClauses) {
  ir::IRModule module = ParseTyped(R"(
type List[A] {
  Cons(A, List[A]),
  Nil,
}

def @main(%c: Tensor[(), bool], %xs: List[Tensor[(), float32]], %k: Tensor[(), float32]) {
  let %f = if (%c) {
    let %m = match (%xs) {
      Cons(%h, _) => { let %p = fn (%v: Tensor[(), float32]) { add(%v, %h) }; %p },
      Nil => { let %q = fn (%v: Tensor[(), float32]) { %v }; %q },
    };
    %m
  } else {
    let %s = fn (%v: Tensor[(), float32]) { multiply(%v, %k) };
    %s
  };
  let %r = %f(%k);
  %r
})");
  ExpectProgram(LambdaLift(module), R"(
type List[A] {
  Cons(A, List[A]),
  Nil,
}

def @main(%c: Tensor[(), bool], %xs: List[Tensor[(), float32]], %k: Tensor[(), float32]) {
  let %f = if (%c) {
    let %m = match (%xs) {
      Cons(%h, _) => { let %p = @main_lambda_0(%h); %p },
      Nil => { let %q = @main_lambda_1; %q },
    };
    %m
  } else {
    let %s = @main_lambda_2(%k);
    %s
  };
  let %r = %f(%k);
  %r
}

def @main_lambda_0(%h: Tensor[(), float32], Closure=1) -> fn (Tensor[(), float32]) -> Tensor[(), float32] {
  fn (%v: Tensor[(), float32]) -> Tensor[(), float32] { add(%v, %h) }
}

def @main_lambda_1(%v: Tensor[(), float32]) -> Tensor[(), float32] { %v }

def @main_lambda_2(%k: Tensor[(), float32], Closure=1) -> fn (Tensor[(), float32]) -> Tensor[(), float32] {
  fn (%v: Tensor[(), float32]) -> Tensor[(), float32] { multiply(%v, %k) }
})");
  ir::Constructor cons = module->LookupConstructor("Cons");
  ir::Constructor nil = module->LookupConstructor("Nil");
  Ref<Object> empty = Make<ADTNode>(nil->tag, std::vector<Ref<Object>>{});
  Ref<Object> list = Make<ADTNode>(cons->tag, std::vector<Ref<Object>>{F32({}, {5}), empty});
  for (const Ref<Object>& xs : {list, empty}) {
    for (bool c : {true, false}) {
      ExpectSameResult(module, LambdaLift(module),
                       {TensorNode::Scalar(DataType::Bool(), c), xs, F32({}, {3})});
    }
  }
}

TEST(LambdaLift, GeneratedNamesAvoidExistingGlobals) {
  ir::IRModule module = ParseTyped(R"(
def @main_lambda_0(%x: Tensor[(), float32]) -> Tensor[(), float32] { %x }

def @main(%x: Tensor[(), float32]) -> Tensor[(), float32] {
  let %f = fn (%y: Tensor[(), float32]) -> Tensor[(), float32] { @main_lambda_0(%y) };
  let %r = %f(%x);
  %r
})");
  ExpectProgram(LambdaLift(module), R"(
def @main_lambda_0(%x: Tensor[(), float32]) -> Tensor[(), float32] { %x }

def @main(%x: Tensor[(), float32]) -> Tensor[(), float32] {
  let %f = @main_lambda_1;
  let %r = %f(%x);
  %r
}

def @main_lambda_1(%y: Tensor[(), float32]) -> Tensor[(), float32] { @main_lambda_0(%y) }
)");
}

// let %loop = fn (%i, %acc) { if (less(%i, %n)) { %loop(add(%i, 1), multiply(%acc, 2)) } else
// { %acc } }; %loop(0, 1) -- built in memory (the text format has no recursive let), in ANF.
ir::IRModule RecursiveLetModule(bool captures_n) {
  ir::IRModule module = ir::MakeModule();
  const ir::Type scalar = ir::MakeTensorType({}, DataType::Int32());
  ir::Var n = ir::MakeVar("n", scalar);
  ir::Var loop = ir::MakeVar("loop");
  ir::Var i = ir::MakeVar("i", scalar);
  ir::Var acc = ir::MakeVar("acc", scalar);
  auto let = [](ir::Var var, ir::Expr value, ir::Expr body) {
    return Make<ir::LetNode>(std::move(var), std::move(value), std::move(body));
  };
  auto call = [](ir::Expr callee, std::vector<ir::Expr> args) {
    return Make<ir::CallNode>(std::move(callee), std::move(args));
  };
  auto constant = [](int value) { return ir::MakeScalar(DataType::Int32(), value); };
  ir::Var cond = ir::MakeVar("cond"), next_i = ir::MakeVar("next_i"),
          next_acc = ir::MakeVar("next_acc"), rec = ir::MakeVar("rec"), out = ir::MakeVar("out");
  ir::Expr bound = captures_n ? ir::Expr(n) : constant(10);
  ir::Expr then_branch = let(next_i, op::MakeOpCall("add", {i, constant(1)}),
                             let(next_acc, op::MakeOpCall("multiply", {acc, constant(2)}),
                                 let(rec, call(loop, {next_i, next_acc}), rec)));
  ir::Expr body = let(cond, op::MakeOpCall("less", {i, bound}),
                      let(out, Make<ir::IfNode>(cond, then_branch, acc), out));
  ir::Expr function = Make<ir::FunctionNode>(std::vector<ir::Var>{i, acc}, body, scalar,
                                             std::vector<ir::TypeVar>{});
  ir::Var result = ir::MakeVar("result");
  ir::Expr main_body =
      let(loop, function, let(result, call(loop, {constant(0), constant(1)}), result));
  module->Add(module->GetGlobalVar("main"),
              Make<ir::FunctionNode>(std::vector<ir::Var>{n}, main_body, scalar,
                                     std::vector<ir::TypeVar>{}));
  typing::InferTypes(module);
  return module;
}

TEST(LambdaLift, ARecursiveClosureRebuildsItselfFromItsGlobal) {
  ir::IRModule module = RecursiveLetModule(/*captures_n=*/true);
  ExpectProgram(LambdaLift(module), R"(
def @main(%n: Tensor[(), int32]) -> Tensor[(), int32] {
  let %loop = @main_lambda_0(%n);
  let %result = %loop(0, 1);
  %result
}

def @main_lambda_0(%n: Tensor[(), int32], Closure=1)
    -> fn (Tensor[(), int32], Tensor[(), int32]) -> Tensor[(), int32] {
  fn (%i: Tensor[(), int32], %acc: Tensor[(), int32]) -> Tensor[(), int32] {
    let %loop: fn (Tensor[(), int32], Tensor[(), int32]) -> Tensor[(), int32] = @main_lambda_0(%n);
    let %cond = less(%i, %n);
    let %out = if (%cond) {
      let %next_i = add(%i, 1);
      let %next_acc = multiply(%acc, 2);
      let %rec = %loop(%next_i, %next_acc);
      %rec
    } else {
      %acc
    };
    %out
  }
})");
  ExpectSameResult(module, LambdaLift(module), {I32(10)});
}

TEST(LambdaLift, ARecursiveLiteralCapturingNothingCallsItsGlobal) {
  ir::IRModule module = RecursiveLetModule(/*captures_n=*/false);
  ExpectProgram(LambdaLift(module), R"(
def @main(%n: Tensor[(), int32]) -> Tensor[(), int32] {
  let %loop = @main_lambda_0;
  let %result = %loop(0, 1);
  %result
}

def @main_lambda_0(%i: Tensor[(), int32], %acc: Tensor[(), int32]) -> Tensor[(), int32] {
  let %cond = less(%i, 10);
  let %out = if (%cond) {
    let %next_i = add(%i, 1);
    let %next_acc = multiply(%acc, 2);
    let %rec = @main_lambda_0(%next_i, %next_acc);
    %rec
  } else {
    %acc
  };
  %out
})");
  ExpectSameResult(module, LambdaLift(module), {I32(0)});
}

TEST(LambdaLift, PrimitiveFunctionsStayInPlace) {
  const char* program = R"(
def @main(%x: Tensor[(2,), float32]) -> Tensor[(2,), float32] {
  let %y = fn (%p: Tensor[(2,), float32], Primitive=1) -> Tensor[(2,), float32] { negative(%p) }(%x);
  %y
})";
  ExpectProgram(LambdaLift(ParseTyped(program)), program);
}

TEST(LambdaLift, RejectsAnUntypedModule) {
  ir::IRModule module = text::ParseModule(R"(
def @main(%k: Tensor[(), float32]) {
  let %f = fn (%x: Tensor[(), float32]) { add(%x, %k) };
  %f
})",
                                          "test.relay");
  EXPECT_THAT(ErrorOf([&] { LambdaLift(module); }),
              HasSubstr("LambdaLift: an expression has no type (at 3:12)"));
}

}  // namespace
}  // namespace nimble::transform
