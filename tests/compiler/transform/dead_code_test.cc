// EliminateDeadCode: text in, text out, and the same values after.
#include "nimble/compiler/transform/dead_code.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

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

TEST(EliminateDeadCode, UnusedPureBindingsGoAndTakeTheirOnlyUsersWithThem) {
  ir::IRModule module = ParseTyped(R"(
def @main(%x: Tensor[(?, 2), float32]) -> Tensor[(?, 2), float32] {
  let %a = negative(%x);
  let %b = add(%a, 1f);
  let %t = (%b, %a);
  let %c = %t.0;
  let %keep = exp(%x);
  let %unused_closure = fn (%y: Tensor[(), float32]) { %y };
  %keep
})");
  ExpectProgram(EliminateDeadCode(module), R"(
def @main(%x: Tensor[(?, 2), float32]) -> Tensor[(?, 2), float32] {
  let %keep = exp(%x);
  %keep
})");
  ExpectSameResult(module, EliminateDeadCode(module), {F32({1, 2}, {1, 2})});
}

TEST(EliminateDeadCode, CallsOfGlobalsAndClosuresAndPartialMatchesAreKept) {
  ir::IRModule module = ParseTyped(R"(
type List[A] {
  Cons(A, List[A]),
  Nil,
}

def @check(%x: Tensor[(), float32]) -> Tensor[(), float32] { %x }

def @main(%x: Tensor[(), float32], %xs: List[Tensor[(), float32]]) -> Tensor[(), float32] {
  let %f = fn (%y: Tensor[(), float32]) { %y };
  let %a = @check(%x);
  let %b = %f(%x);
  let %h = match? (%xs) { Cons(%v, _) => %v };
  let %total = match (%xs) { Cons(%v, _) => %v, Nil => 0f };
  %x
})");
  ExpectProgram(EliminateDeadCode(module), R"(
type List[A] {
  Cons(A, List[A]),
  Nil,
}

def @check(%x: Tensor[(), float32]) -> Tensor[(), float32] { %x }

def @main(%x: Tensor[(), float32], %xs: List[Tensor[(), float32]]) -> Tensor[(), float32] {
  let %f = fn (%y: Tensor[(), float32]) { %y };
  let %a = @check(%x);
  let %b = %f(%x);
  let %h = match? (%xs) { Cons(%v, _) => %v };
  %x
})");
}

TEST(EliminateDeadCode, MemoryOpsThatWriteAreKept) {
  const char* program = R"(
def @main() {
  let %s = memory.alloc_storage(64i64, alignment=64, device="cpu", dtype="float32");
  let %t = memory.alloc_tensor(%s, 0i64, dtype="float32", assert_shape=[4, 4]);
  let %unused = memory.alloc_tensor(%s, 0i64, dtype="float32", assert_shape=[2, 2]);
  let %k = memory.kill(%s);
  %t
})";
  ExpectProgram(EliminateDeadCode(ParseTyped(program)), R"(
def @main() {
  let %s = memory.alloc_storage(64i64, alignment=64, device="cpu", dtype="float32");
  let %t = memory.alloc_tensor(%s, 0i64, dtype="float32", assert_shape=[4, 4]);
  let %k = memory.kill(%s);
  %t
})");
}

TEST(EliminateDeadCode, InsideBranchesClausesAndFunctionsAndPrimitives) {
  ir::IRModule module = ParseTyped(R"(
def @main(%c: Tensor[(), bool], %x: Tensor[(2,), float32]) {
  let %f = fn (%y: Tensor[(2,), float32]) {
    let %dead = exp(%y);
    %y
  };
  let %r = if (%c) {
    let %dead = fn (%p: Tensor[(2,), float32], Primitive=1) -> Tensor[(2,), float32] {
      negative(%p)
    }(%x);
    let %live = %f(%x);
    %live
  } else {
    let %dead_if = if (%c) { exp(%x) } else { %x };
    %x
  };
  %r
})");
  ExpectProgram(EliminateDeadCode(module), R"(
def @main(%c: Tensor[(), bool], %x: Tensor[(2,), float32]) {
  let %f = fn (%y: Tensor[(2,), float32]) { %y };
  let %r = if (%c) {
    let %live = %f(%x);
    %live
  } else {
    %x
  };
  %r
})");
  for (bool c : {true, false}) {
    ExpectSameResult(module, EliminateDeadCode(module),
                     {TensorNode::Scalar(DataType::Bool(), c), F32({2}, {1, 2})});
  }
}

TEST(EliminateDeadCode, GlobalsMainCannotReachAreDropped) {
  ir::IRModule module = ParseTyped(R"(
def @unused(%x: Tensor[(), int32]) -> Tensor[(), int32] { @also_unused(%x) }

def @also_unused(%x: Tensor[(), int32]) -> Tensor[(), int32] { @unused(%x) }

def @only_in_dead_code(%x: Tensor[(), int32]) -> Tensor[(), int32] { %x }

def @as_value(%x: Tensor[(), int32]) -> Tensor[(), int32] { add(%x, 1) }

def @called(%f: fn (Tensor[(), int32]) -> Tensor[(), int32], %x: Tensor[(), int32]) -> Tensor[(), int32] {
  %f(%x)
}

def @main(%x: Tensor[(), int32]) -> Tensor[(), int32] {
  let %dead = @only_in_dead_code;
  @called(@as_value, %x)
})");
  ExpectProgram(EliminateDeadCode(module), R"(
def @as_value(%x: Tensor[(), int32]) -> Tensor[(), int32] { add(%x, 1) }

def @called(%f: fn (Tensor[(), int32]) -> Tensor[(), int32], %x: Tensor[(), int32]) -> Tensor[(), int32] {
  %f(%x)
}

def @main(%x: Tensor[(), int32]) -> Tensor[(), int32] {
  @called(@as_value, %x)
})");
  ExpectSameResult(module, EliminateDeadCode(module), {I32(4)});
}

TEST(EliminateDeadCode, TenThousandLets) {
  std::string program = "def @main(%x: Tensor[(), float32]) {\n  let %v0 = %x;\n";
  for (int i = 1; i <= 10000; ++i) {
    program += "  let %v" + std::to_string(i) + " = add(%v" + std::to_string(i - 1) + ", %x);\n";
    program += "  let %d" + std::to_string(i) + " = exp(%v" + std::to_string(i) + ");\n";
  }
  program += "  %v10000\n}\n";
  ir::IRModule module = ParseTyped(program);
  ir::IRModule result = EliminateDeadCode(module);
  int lets = 0;
  for (ir::Expr body = result->Lookup("main")->body; body->kind == ir::ExprKind::kLet;
       body = static_cast<const ir::LetNode*>(body.get())->body) {
    ++lets;
  }
  EXPECT_EQ(lets, 10001);
  ExpectSameResult(module, result, {F32({}, {0.5f})});
}

TEST(EliminateDeadCode, KeepsEveryGlobalOfALibrary) {
  ir::IRModule module = ParseTyped(R"(
def @f(%x: Tensor[(), float32]) { let %dead = add(%x, %x); %x }
def @g(%x: Tensor[(), float32]) { %x }
)");
  ir::IRModule result = EliminateDeadCode(module);
  ASSERT_TRUE(result->Contains("f"));
  EXPECT_TRUE(result->Contains("g"));
  EXPECT_EQ(result->Lookup("f")->body->kind, ir::ExprKind::kVar);
}

TEST(EliminateDeadCode, EntryFunctionsChooseTheGlobalsKept) {
  const std::string program = R"(
def @helper(%x: Tensor[(), int32]) -> Tensor[(), int32] { add(%x, 1) }

def @f(%x: Tensor[(), int32]) -> Tensor[(), int32] {
  let %dead = multiply(%x, %x);
  @helper(%x)
}

def @g(%x: Tensor[(), int32]) -> Tensor[(), int32] { negative(%x) }

def @main(%x: Tensor[(), int32]) -> Tensor[(), int32] { @g(%x) }
)";
  ir::IRModule module = ParseTyped(program);
  ir::IRModule only_f = EliminateDeadCode(module, {"f"});
  ExpectProgram(only_f, R"(
def @helper(%x: Tensor[(), int32]) -> Tensor[(), int32] { add(%x, 1) }

def @f(%x: Tensor[(), int32]) -> Tensor[(), int32] { @helper(%x) }
)");
  ExpectSameResult(module, only_f, {I32(4)}, "f");
  ExpectProgram(EliminateDeadCode(module, {"g", "helper"}), R"(
def @helper(%x: Tensor[(), int32]) -> Tensor[(), int32] { add(%x, 1) }

def @g(%x: Tensor[(), int32]) -> Tensor[(), int32] { negative(%x) }
)");
  // @main among the roots is kept like any other.
  ir::IRModule with_main = EliminateDeadCode(module, {"main", "f"});
  for (const char* name : {"main", "g", "f", "helper"}) {
    EXPECT_TRUE(with_main->Contains(name)) << name;
  }
}

TEST(EliminateDeadCode, UnknownEntryFunctionIsAnError) {
  ir::IRModule module = ParseTyped(R"(
def @main(%x: Tensor[(), float32]) { %x }
)");
  EXPECT_THAT(ErrorOf([&] {
                EliminateDeadCode(module, {"main", "nope"});
              }),
              HasSubstr("entry function @nope is not defined"));
}

}  // namespace
}  // namespace nimble::transform
