// InlineFunctions: text in, text out, and the same values after.
#include "nimble/compiler/transform/inline_functions.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <unordered_set>

#include "nimble/compiler/ir/functor.h"
#include "nimble/compiler/transform/dead_code.h"
#include "tests/compiler/transform/normalize_test_util.h"

namespace nimble::transform {
namespace {

using testing::ExpectProgram;
using testing::ExpectSameResult;
using testing::F32;
using testing::I32;
using testing::ParseTyped;

// How many lets of `function` bind a variable that another let binds too:
// variables are unique nodes, and a shared one would be one value.
int RebindingLets(const ir::Function& function) {
  class Binders : public ir::ExprVisitor {
   public:
    void VisitLet(const ir::LetNode* let) override {
      if (!bound.insert(let->var.get()).second) ++rebound;
      ir::ExprVisitor::VisitLet(let);
    }
    std::unordered_set<const ir::VarNode*> bound;
    int rebound = 0;
  } binders;
  binders.VisitExpr(function);
  return binders.rebound;
}

// A loop over the rows of %xs whose body is a call of @step, as the LSTM's.
constexpr const char* kStep = R"(
def @step(%x: Tensor[(4,), float32], %h: Tensor[(4,), float32]) -> (Tensor[(4,), float32], Tensor[(4,), float32]) {
  let %a = add(%x, %h);
  (tanh(%a), sigmoid(%a))
}
)";

// Nothing to inline: the module comes back as it was, types and all, rather
// than inferred again (Retyped in pass_util.h).
TEST(InlineFunctions, AModuleWithoutRecursionComesBackUnchanged) {
  const ir::IRModule module = ParseTyped(std::string(kStep) + R"(
def @main(%x: Tensor[(4,), float32]) -> Tensor[(4,), float32] {
  let %next = @step(%x, %x);
  %next.0
})");
  EXPECT_EQ(InlineFunctions(module), module);
}

TEST(InlineFunctions, ACallInARecursionBecomesTheCalleesBody) {
  const std::string program = std::string(kStep) + R"(
def @loop(%xs: Tensor[(?, 4), float32], %t: int32, %h: Tensor[(4,), float32]) -> Tensor[(4,), float32] {
  if (less(%t, take(shape_of(%xs), 0))) {
    let %next = @step(take(%xs, %t, axis=0), %h);
    @loop(%xs, add(%t, 1), multiply(%next.0, %next.1))
  } else {
    %h
  }
}

def @main(%xs: Tensor[(?, 4), float32]) -> Tensor[(4,), float32] {
  @loop(%xs, 0, zeros(shape=[4], dtype="float32"))
})";
  const ir::IRModule module = ParseTyped(program);
  const ir::IRModule inlined = InlineFunctions(module);
  // The argument that is not a variable is bound first; %h stands for itself.
  const std::string loop = R"(
def @loop(%xs: Tensor[(?, 4), float32], %t: int32, %h: Tensor[(4,), float32]) -> Tensor[(4,), float32] {
  if (less(%t, take(shape_of(%xs), 0))) {
    let %next = (let %x: Tensor[(4,), float32] = take(%xs, %t, axis=0);
                 let %a = add(%x, %h);
                 (tanh(%a), sigmoid(%a)));
    @loop(%xs, add(%t, 1), multiply(%next.0, %next.1))
  } else {
    %h
  }
}

def @main(%xs: Tensor[(?, 4), float32]) -> Tensor[(4,), float32] {
  @loop(%xs, 0, zeros(shape=[4], dtype="float32"))
})";
  ExpectProgram(inlined, std::string(kStep) + loop);
  ExpectSameResult(module, inlined,
                   {F32({3, 4}, {0.5f, -1, 2, 0, 1, 1, -0.5f, 3, 0.25f, 0, -2, 1})});
  // Nothing calls @step any more.
  ExpectProgram(EliminateDeadCode(inlined), loop);
}

// Two copies of one callee in one function bind distinct variables, and a
// callee's own calls are inlined into it first.
TEST(InlineFunctions, EachCallGetsItsOwnCopyWithNestedCallsInlined) {
  const std::string program = R"(
def @scale(%v: Tensor[(2,), float32]) -> Tensor[(2,), float32] {
  let %twice = multiply(%v, 2f);
  add(%twice, 1f)
}

def @cell(%v: Tensor[(2,), float32]) -> Tensor[(2,), float32] {
  let %s = @scale(%v);
  negative(%s)
}

def @loop(%n: int32, %v: Tensor[(2,), float32]) -> Tensor[(2,), float32] {
  if (less(%n, 3)) {
    let %u = @cell(%v);
    let %w = @cell(%u);
    @loop(add(%n, 1), %w)
  } else {
    %v
  }
}

def @main(%v: Tensor[(2,), float32]) -> Tensor[(2,), float32] {
  @loop(0, %v)
})";
  const ir::IRModule module = ParseTyped(program);
  const ir::IRModule inlined = EliminateDeadCode(InlineFunctions(module));
  EXPECT_EQ(RebindingLets(inlined->Lookup("loop")), 0);
  ExpectProgram(inlined, R"(
def @loop(%n: int32, %v: Tensor[(2,), float32]) -> Tensor[(2,), float32] {
  if (less(%n, 3)) {
    let %u = (let %s = (let %twice = multiply(%v, 2f); add(%twice, 1f)); negative(%s));
    let %w = (let %s1 = (let %twice1 = multiply(%u, 2f); add(%twice1, 1f)); negative(%s1));
    @loop(add(%n, 1), %w)
  } else {
    %v
  }
}

def @main(%v: Tensor[(2,), float32]) -> Tensor[(2,), float32] {
  @loop(0, %v)
})");
  ExpectSameResult(module, inlined, {F32({2}, {0.5f, -3})});
}

// Calls that run once an inference, calls of recursive functions (mutually
// recursive ones too), of generic ones and of ones with a `match?`, whose
// failure names the function, stay calls.
TEST(InlineFunctions, OnlyCallsInARecursionOfSmallPlainCalleesAreInlined) {
  const std::string program = R"(
type List[A] {
  Cons(A, List[A]),
  Nil,
}

def @id[A](%x: A) -> A { %x }

def @first(%xs: List[int32]) -> int32 {
  match? (%xs) { Cons(%head, _) => %head }
}

def @even(%n: int32) -> bool {
  if (equal(%n, 0)) { True } else { @odd(subtract(%n, 1)) }
}

def @odd(%n: int32) -> bool {
  if (equal(%n, 0)) { False } else { @even(subtract(%n, 1)) }
}

def @bump(%n: int32) -> int32 { add(%n, 1) }

def @count(%n: int32, %xs: List[int32]) -> int32 {
  if (@even(%n)) {
    @first(%xs)
  } else {
    @count(@id(@bump(%n)), %xs)
  }
}

def @main(%n: int32) -> int32 {
  @count(@bump(%n), Cons(7, Nil))
})";
  const ir::IRModule module = ParseTyped(program);
  const ir::IRModule inlined = InlineFunctions(module);
  ExpectProgram(inlined, std::string(program.substr(0, program.find("def @count"))) + R"(
def @count(%n: int32, %xs: List[int32]) -> int32 {
  if (@even(%n)) {
    @first(%xs)
  } else {
    @count(@id(add(%n, 1)), %xs)
  }
}

def @main(%n: int32) -> int32 {
  @count(@bump(%n), Cons(7, Nil))
})");
  ExpectSameResult(module, inlined, {I32(4)});
}

TEST(InlineFunctions, ACalleeOverTheSizeLimitStaysACall) {
  std::string body = "%x";
  for (int i = 0; i < kMaxInlinedNodes; ++i) body = "add(" + body + ", 1f)";
  const std::string program = R"(
def @big(%x: Tensor[(), float32]) -> Tensor[(), float32] { )" +
                              body + R"( }

def @small(%x: Tensor[(), float32]) -> Tensor[(), float32] { add(%x, 1f) }

def @loop(%n: int32, %x: Tensor[(), float32]) -> Tensor[(), float32] {
  if (less(%n, 2)) { @loop(add(%n, 1), @small(@big(%x))) } else { %x }
}

def @main(%x: Tensor[(), float32]) -> Tensor[(), float32] { @loop(0, %x) })";
  const ir::IRModule module = ParseTyped(program);
  const ir::IRModule inlined = InlineFunctions(module);
  ExpectProgram(inlined, program.substr(0, program.find("def @loop")) + R"(
def @loop(%n: int32, %x: Tensor[(), float32]) -> Tensor[(), float32] {
  if (less(%n, 2)) {
    @loop(add(%n, 1), (let %x1: Tensor[(), float32] = @big(%x); add(%x1, 1f)))
  } else {
    %x
  }
}

def @main(%x: Tensor[(), float32]) -> Tensor[(), float32] { @loop(0, %x) })");
  ExpectSameResult(module, inlined, {F32({}, {0.5f})});
}

}  // namespace
}  // namespace nimble::transform
