// ToANormalForm: text in, text out, and the evaluator gives the same values
// before and after.
#include "nimble/compiler/transform/to_anf.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "nimble/vm/error.h"
#include "tests/compiler/transform/normalize_test_util.h"
#include "tests/error_of.h"

namespace nimble::transform {
namespace {

using testing::ExpectProgram;
using testing::ExpectSameResult;
using testing::F32;
using ::testing::HasSubstr;
using testing::ParseTyped;

TEST(ToANormalForm, AProgramInANormalFormComesBackAsItWas) {
  testing::ExpectUnchanged(ParseTyped(testing::kNormalProgram), ToANormalForm);
}

TEST(ToANormalForm, NestedCallsAreLetBoundInEvaluationOrder) {
  ir::IRModule module = ParseTyped(R"(
def @main(%x: Tensor[(2, 3), float32], %y: Tensor[(3,), float32]) -> Tensor[(2, 3), float32] {
  add(multiply(%x, 2f), negative(%y))
})");
  ExpectProgram(ToANormalForm(module), R"(
def @main(%x: Tensor[(2, 3), float32], %y: Tensor[(3,), float32]) -> Tensor[(2, 3), float32] {
  let %a: Tensor[(2, 3), float32] = multiply(%x, 2f);
  let %b: Tensor[(3,), float32] = negative(%y);
  let %c: Tensor[(2, 3), float32] = add(%a, %b);
  %c
})");
  ExpectSameResult(module, ToANormalForm(module),
                   {F32({2, 3}, {1, 2, 3, 4, 5, 6}), F32({3}, {1, 1, 2})});
}

TEST(ToANormalForm, UserLetsKeepTheirBindersAndNestedLetsAreFlattened) {
  ir::IRModule module = ParseTyped(R"(
def @main(%x: Tensor[(2,), float32]) {
  let %a = multiply(%x, 2f);
  let %b = add(%a, let %c = 1f; %c);
  subtract(%b, %x)
})");
  ExpectProgram(ToANormalForm(module), R"(
def @main(%x: Tensor[(2,), float32]) {
  let %a = multiply(%x, 2f);
  let %c = 1f;
  let %b = add(%a, %c);
  let %d: Tensor[(2,), float32] = subtract(%b, %x);
  %d
})");
  ExpectSameResult(module, ToANormalForm(module), {F32({2}, {1, 10})});
}

TEST(ToANormalForm, DynamicShapesAndBranchesBindInsideTheirBranch) {
  ir::IRModule module = ParseTyped(R"(
def @grow(%i: Tensor[(), int32], %acc: Tensor[(?, 2), float32]) -> Tensor[(?, 2), float32] {
  if (less(%i, 3)) {
    @grow(add(%i, 1), concatenate((%acc, ones(shape=[1, 2], dtype="float32"))))
  } else {
    %acc
  }
}

def @main(%start: Tensor[(?, 2), float32]) -> Tensor[(?, 2), float32] {
  @grow(0, %start)
})");
  ExpectProgram(ToANormalForm(module), R"(
def @grow(%i: Tensor[(), int32], %acc: Tensor[(?, 2), float32]) -> Tensor[(?, 2), float32] {
  let %c: Tensor[(), bool] = less(%i, 3);
  let %r: Tensor[(?, 2), float32] = if (%c) {
    let %n: Tensor[(), int32] = add(%i, 1);
    let %o: Tensor[(1, 2), float32] = ones(shape=[1, 2], dtype="float32");
    let %t: (Tensor[(?, 2), float32], Tensor[(1, 2), float32]) = (%acc, %o);
    let %g: Tensor[(?, 2), float32] = concatenate(%t);
    let %rec: Tensor[(?, 2), float32] = @grow(%n, %g);
    %rec
  } else {
    %acc
  };
  %r
}

def @main(%start: Tensor[(?, 2), float32]) -> Tensor[(?, 2), float32] {
  let %r: Tensor[(?, 2), float32] = @grow(0, %start);
  %r
})");
  ExpectSameResult(module, ToANormalForm(module), {F32({1, 2}, {9, 9})});
  ExpectSameResult(module, ToANormalForm(module), {F32({0, 2}, {})});
}

constexpr const char* kList = R"(
type List[A] {
  Cons(A, List[A]),
  Nil,
}
)";

TEST(ToANormalForm, MatchClausesAndConstructors) {
  ir::IRModule module = ParseTyped(std::string(kList) + R"(
def @sum(%xs: List[Tensor[(), float32]]) -> Tensor[(), float32] {
  match (%xs) {
    Cons(%head, %tail) => add(%head, @sum(%tail)),
    Nil => 0f,
  }
}

def @main(%x: Tensor[(), float32]) -> Tensor[(), float32] {
  @sum(Cons(%x, Cons(2f, Nil)))
})");
  ExpectProgram(ToANormalForm(module), std::string(kList) + R"(
def @sum(%xs: List[Tensor[(), float32]]) -> Tensor[(), float32] {
  let %m: Tensor[(), float32] = match (%xs) {
    Cons(%head, %tail) => {
      let %s: Tensor[(), float32] = @sum(%tail);
      let %a: Tensor[(), float32] = add(%head, %s);
      %a
    },
    Nil => 0f,
  };
  %m
}

def @main(%x: Tensor[(), float32]) -> Tensor[(), float32] {
  // A nullary constructor is a call too.
  let %l0: List[Tensor[(), float32]] = Nil;
  let %l1: List[Tensor[(), float32]] = Cons(2f, %l0);
  let %l2: List[Tensor[(), float32]] = Cons(%x, %l1);
  let %r: Tensor[(), float32] = @sum(%l2);
  %r
})");
  ExpectSameResult(module, ToANormalForm(module), {F32({}, {5})});
}

TEST(ToANormalForm, TuplesAndProjections) {
  ir::IRModule module = ParseTyped(R"(
def @main(%a: Tensor[(), float32], %b: Tensor[(2,), float32]) {
  let %nested = ((%a, %b), (%b, %a));
  (%nested.1.0, %nested.0.0, ())
})");
  ExpectProgram(ToANormalForm(module), R"(
def @main(%a: Tensor[(), float32], %b: Tensor[(2,), float32]) {
  let %t0: (Tensor[(), float32], Tensor[(2,), float32]) = (%a, %b);
  let %t1: (Tensor[(2,), float32], Tensor[(), float32]) = (%b, %a);
  let %nested = (%t0, %t1);
  let %p1: (Tensor[(2,), float32], Tensor[(), float32]) = %nested.1;
  let %p10: Tensor[(2,), float32] = %p1.0;
  let %p0: (Tensor[(), float32], Tensor[(2,), float32]) = %nested.0;
  let %p00: Tensor[(), float32] = %p0.0;
  let %u: () = ();
  let %r: (Tensor[(2,), float32], Tensor[(), float32], ()) = (%p10, %p00, %u);
  %r
})");
  ExpectSameResult(module, ToANormalForm(module), {F32({}, {1}), F32({2}, {2, 3})});
}

TEST(ToANormalForm, FunctionLiteralsAreBoundAndTheirBodiesNormalised) {
  ir::IRModule module = ParseTyped(R"(
def @apply(%f: fn (Tensor[(), float32]) -> Tensor[(), float32], %x: Tensor[(), float32]) -> Tensor[(), float32] {
  %f(%f(%x))
}

def @main(%x: Tensor[(), float32], %k: Tensor[(), float32]) -> Tensor[(), float32] {
  let %g = fn (%y: Tensor[(), float32]) -> Tensor[(), float32] { add(multiply(%y, %k), 1f) };
  add(@apply(fn (%z: Tensor[(), float32]) -> Tensor[(), float32] { negative(%z) }, %x), %g(%x))
})");
  ExpectProgram(ToANormalForm(module), R"(
def @apply(%f: fn (Tensor[(), float32]) -> Tensor[(), float32], %x: Tensor[(), float32]) -> Tensor[(), float32] {
  let %a: Tensor[(), float32] = %f(%x);
  let %b: Tensor[(), float32] = %f(%a);
  %b
}

def @main(%x: Tensor[(), float32], %k: Tensor[(), float32]) -> Tensor[(), float32] {
  let %g = fn (%y: Tensor[(), float32]) -> Tensor[(), float32] {
    let %m: Tensor[(), float32] = multiply(%y, %k);
    let %s: Tensor[(), float32] = add(%m, 1f);
    %s
  };
  let %h: fn (Tensor[(), float32]) -> Tensor[(), float32] = fn (%z: Tensor[(), float32]) -> Tensor[(), float32] {
    let %n: Tensor[(), float32] = negative(%z);
    %n
  };
  let %c: Tensor[(), float32] = @apply(%h, %x);
  let %d: Tensor[(), float32] = %g(%x);
  let %e: Tensor[(), float32] = add(%c, %d);
  %e
})");
  ExpectSameResult(module, ToANormalForm(module), {F32({}, {3}), F32({}, {2})});
}

TEST(ToANormalForm, ACalledFunctionLiteralIsBoundButAPrimitiveOneStaysInPlace) {
  ir::IRModule module = ParseTyped(R"(
def @main(%x: Tensor[(2,), float32]) -> Tensor[(2,), float32] {
  add(fn (%y: Tensor[(2,), float32]) -> Tensor[(2,), float32] { %y }(%x),
      fn (%p: Tensor[(2,), float32], Primitive=1) -> Tensor[(2,), float32] { negative(%p) }(%x))
})");
  ExpectProgram(ToANormalForm(module), R"(
def @main(%x: Tensor[(2,), float32]) -> Tensor[(2,), float32] {
  let %f: fn (Tensor[(2,), float32]) -> Tensor[(2,), float32] = fn (%y: Tensor[(2,), float32]) -> Tensor[(2,), float32] { %y };
  let %a: Tensor[(2,), float32] = %f(%x);
  let %b: Tensor[(2,), float32] =
      fn (%p: Tensor[(2,), float32], Primitive=1) -> Tensor[(2,), float32] { negative(%p) }(%x);
  let %c: Tensor[(2,), float32] = add(%a, %b);
  %c
})");
  ExpectSameResult(module, ToANormalForm(module), {F32({2}, {1, 2})});
}

TEST(ToANormalForm, SharedSubexpressionsAreBoundOnce) {
  ir::IRModule module = ParseTyped(R"(
def @main(%x: Tensor[(2,), float32]) {
  %0 = add(%x, %x);
  multiply(%0, %0)
})");
  ExpectProgram(ToANormalForm(module), R"(
def @main(%x: Tensor[(2,), float32]) {
  let %a: Tensor[(2,), float32] = add(%x, %x);
  let %m: Tensor[(2,), float32] = multiply(%a, %a);
  %m
})");
}

TEST(ToANormalForm, ASharedExpressionFirstMetInABranchIsBoundAgainOutsideIt) {
  ir::IRModule module = ParseTyped(R"(
def @main(%x: Tensor[(2,), float32], %c: Tensor[(), bool]) {
  %0 = add(%x, %x);
  %1 = if (%c) { %0 } else { %x };
  multiply(%1, %0)
})");
  ExpectProgram(ToANormalForm(module), R"(
def @main(%x: Tensor[(2,), float32], %c: Tensor[(), bool]) {
  let %i: Tensor[(2,), float32] = if (%c) {
    let %a: Tensor[(2,), float32] = add(%x, %x);
    %a
  } else {
    %x
  };
  let %b: Tensor[(2,), float32] = add(%x, %x);
  let %m: Tensor[(2,), float32] = multiply(%i, %b);
  %m
})");
  ExpectSameResult(ParseTyped(R"(
def @main(%x: Tensor[(2,), float32], %c: Tensor[(), bool]) {
  %0 = add(%x, %x);
  %1 = if (%c) { %0 } else { %x };
  multiply(%1, %0)
})"),
                   ToANormalForm(module),
                   {F32({2}, {1, 2}), TensorNode::Scalar(DataType::Bool(), 1)});
}

TEST(ToANormalForm, IsIdempotent) {
  ir::IRModule module = ParseTyped(std::string(kList) + R"(
def @main(%x: Tensor[(?, 2), float32], %k: Tensor[(), float32]) {
  let %f = fn (%v: Tensor[(?, 2), float32]) { multiply(%v, %k) };
  match (Cons(%x, Nil)) {
    Cons(%h, _) => (%f(%h), shape_of(%h)),
    Nil => (%x, shape_of(%x)),
  }
})");
  ir::IRModule once = ToANormalForm(module);
  EXPECT_TRUE(ir::StructuralEqual(ToANormalForm(once), once));
  ExpectSameResult(module, once, {F32({1, 2}, {1, 2}), F32({}, {3})});
}

TEST(ToANormalForm, LeavesTheInputUnchanged) {
  const char* program = R"(
def @main(%x: Tensor[(2,), float32]) {
  add(negative(%x), %x)
})";
  ir::IRModule module = ParseTyped(program);
  ToANormalForm(module);
  EXPECT_TRUE(ir::StructuralEqual(module, ParseTyped(program)));
}

TEST(ToANormalForm, TenThousandDeepNesting) {
  std::string program = "def @main(%x: Tensor[(), float32]) {\n  ";
  for (int i = 0; i < 10000; ++i) program += "add(";
  program += "%x";
  for (int i = 0; i < 10000; ++i) program += ", 1f)";
  program += "\n}\n";
  ir::IRModule module = ParseTyped(program);
  ir::IRModule anf = ToANormalForm(module);
  // 10,000 lets, then the result.
  int lets = 0;
  ir::Expr body = anf->Lookup("main")->body;
  while (body->kind == ir::ExprKind::kLet) {
    ++lets;
    body = static_cast<const ir::LetNode*>(body.get())->body;
  }
  EXPECT_EQ(lets, 10000);
  EXPECT_EQ(body->kind, ir::ExprKind::kVar);
  ExpectSameResult(module, anf, {F32({}, {0.5f})});
}

TEST(ToANormalForm, RejectsAnUntypedModule) {
  ir::IRModule module = text::ParseModule(R"(
def @main(%x: Tensor[(2,), float32]) {
  add(negative(%x), %x)
})",
                                          "test.relay");
  EXPECT_THAT(ErrorOf([&] { ToANormalForm(module); }),
              HasSubstr("ToANormalForm: an expression has no type (at 3:3)"));
}

}  // namespace
}  // namespace nimble::transform
