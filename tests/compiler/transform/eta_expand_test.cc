// EtaExpandConstructors: text in, text out, and the same values after.
#include "nimble/compiler/transform/eta_expand.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "nimble/compiler/text/parser.h"
#include "tests/compiler/transform/normalize_test_util.h"
#include "tests/error_of.h"

namespace nimble::transform {
namespace {

using testing::ExpectProgram;
using testing::ExpectSameResult;
using testing::F32;
using ::testing::HasSubstr;
using testing::kListPrelude;
using testing::ParseTyped;

// Expands `program` (after the prelude), checks the result against
// `expected` and, when `main` takes no arguments, that it computes the same.
void ExpectExpansion(const std::string& program, const std::string& expected,
                     bool evaluate = true) {
  ir::IRModule module = ParseTyped(kListPrelude + program);
  ir::IRModule result = EtaExpandConstructors(module);
  ExpectProgram(result, kListPrelude + expected);
  if (evaluate) ExpectSameResult(module, result, {});
}

TEST(EtaExpandConstructors, LetBoundConstructor) {
  ExpectExpansion(R"(
def @main() {
  let %f = Cons;
  %f(1f, Cons(2f, Nil))
})",
                  R"(
def @main() {
  let %f = fn (%h: float32, %t: List[float32]) -> List[float32] { Cons(%h, %t) };
  %f(1f, Cons(2f, Nil))
})");
}

TEST(EtaExpandConstructors, PassedToPolymorphicGlobals) {
  // The instance comes from the other arguments of @map and @foldr.
  ExpectExpansion(R"(
def @main() {
  let %xs = Cons(1f, Cons(5f, Nil));
  let %wrapped = @map(Some, %xs);
  let %copy = @foldr(Cons, Nil, %wrapped);
  match (%copy) {
    Cons(Some(%first), _) => %first,
    _ => -1f,
  }
})",
                  R"(
def @main() {
  let %xs = Cons(1f, Cons(5f, Nil));
  let %wrapped = @map(fn (%x: float32) -> Option[float32] { Some(%x) }, %xs);
  let %copy = @foldr(
    fn (%h: Option[float32], %t: List[Option[float32]]) -> List[Option[float32]] { Cons(%h, %t) },
    Nil, %wrapped);
  match (%copy) {
    Cons(Some(%first), _) => %first,
    _ => -1f,
  }
})");
}

TEST(EtaExpandConstructors, InsideATupleWithDynamicShapes) {
  const std::string program = R"(
def @main(%x: Tensor[(?, 2), float32]) {
  let %t = (Some, %x);
  let %f = %t.0;
  %f(%t.1)
})";
  const std::string expected = R"(
def @main(%x: Tensor[(?, 2), float32]) {
  let %t = (fn (%v: Tensor[(?, 2), float32]) -> Option[Tensor[(?, 2), float32]] { Some(%v) }, %x);
  let %f = %t.0;
  %f(%t.1)
})";
  ExpectExpansion(program, expected, /*evaluate=*/false);
  ir::IRModule module = ParseTyped(kListPrelude + program);
  ExpectSameResult(module, EtaExpandConstructors(module), {F32({3, 2}, {1, 2, 3, 4, 5, 6})});
}

TEST(EtaExpandConstructors, EachUseGetsItsOwnInstance) {
  // One constructor node, three uses at three types.
  ExpectExpansion(R"(
def @main() {
  let %a = @map(Some, Cons(1f, Nil));
  let %b = @map(Some, Cons(2, Nil));
  let %c = @map(Some, %a);
  (%a, %b, %c)
})",
                  R"(
def @main() {
  let %a = @map(fn (%x: float32) -> Option[float32] { Some(%x) }, Cons(1f, Nil));
  let %b = @map(fn (%x: int32) -> Option[int32] { Some(%x) }, Cons(2, Nil));
  let %c = @map(fn (%x: Option[float32]) -> Option[Option[float32]] { Some(%x) }, %a);
  (%a, %b, %c)
})");
}

TEST(EtaExpandConstructors, InBranchesClausesAndClosures) {
  ExpectExpansion(R"(
def @pick(%c: bool, %o: Option[float32]) -> fn (float32) -> Option[float32] {
  let %g = fn (%y: float32) -> Option[float32] { None };
  let %k = fn (%xs: List[float32]) { @map(Some, %xs) };
  if (%c) {
    Some
  } else {
    match (%o) {
      Some(_) => %g,
      None => Some,
    }
  }
}

def @main() {
  let %f = @pick(True, None);
  let %h = @pick(False, None);
  (%f(1f), %h(2f))
})",
                  R"(
def @pick(%c: bool, %o: Option[float32]) -> fn (float32) -> Option[float32] {
  let %g = fn (%y: float32) -> Option[float32] { None };
  let %k = fn (%xs: List[float32]) {
    @map(fn (%x: float32) -> Option[float32] { Some(%x) }, %xs)
  };
  if (%c) {
    fn (%x: float32) -> Option[float32] { Some(%x) }
  } else {
    match (%o) {
      Some(_) => %g,
      None => fn (%x: float32) -> Option[float32] { Some(%x) },
    }
  }
}

def @main() {
  let %f = @pick(True, None);
  let %h = @pick(False, None);
  (%f(1f), %h(2f))
})");
}

TEST(EtaExpandConstructors, InsidePolymorphicAndRecursiveGlobals) {
  // The instance mentions the global's own type parameter.
  ExpectExpansion(R"(
def @wrap_all[A](%xs: List[A], %n: int32) -> List[Option[A]] {
  if (equal(%n, 0)) {
    @map(Some, %xs)
  } else {
    @wrap_all(%xs, subtract(%n, 1))
  }
}

def @main() {
  @wrap_all(Cons(1f, Cons(2f, Nil)), 3)
})",
                  R"(
def @wrap_all[A](%xs: List[A], %n: int32) -> List[Option[A]] {
  if (equal(%n, 0)) {
    @map(fn (%x: A) -> Option[A] { Some(%x) }, %xs)
  } else {
    @wrap_all(%xs, subtract(%n, 1))
  }
}

def @main() {
  @wrap_all(Cons(1f, Cons(2f, Nil)), 3)
})");
}

TEST(EtaExpandConstructors, CalleesAndNullaryConstructorsAreUntouched) {
  const std::string program = R"(
def @main(%x: Tensor[(?,), float32]) {
  let %none = None;
  let %xs = Cons(Some(%x), Cons(%none, Nil));
  (%xs, Cons(%none, Nil))
})";
  ir::IRModule module = ParseTyped(kListPrelude + program);
  ir::IRModule result = EtaExpandConstructors(module);
  ExpectProgram(result, kListPrelude + program);
  EXPECT_TRUE(result->Lookup("main") == module->Lookup("main"));
}

TEST(EtaExpandConstructors, ConstructorAsArgumentOfAConstructor) {
  // `Some(Some)`: the callee stays, the argument is expanded.
  ExpectExpansion(R"(
def @main() {
  match (Some(Some)) {
    Some(%f) => %f(3f),
    None => None,
  }
})",
                  R"(
def @main() {
  match (Some(fn (%x: float32) -> Option[float32] { Some(%x) })) {
    Some(%f) => %f(3f),
    None => None,
  }
})");
}

TEST(EtaExpandConstructors, Idempotent) {
  ir::IRModule once = EtaExpandConstructors(ParseTyped(kListPrelude + R"(
def @main() {
  let %f = Cons;
  @foldr(%f, Nil, @map(Some, Cons(1f, Nil)))
})"));
  ir::IRModule twice = EtaExpandConstructors(once);
  EXPECT_TRUE(ir::StructuralEqual(once, twice)) << text::PrintModule(twice);
}

TEST(EtaExpandConstructors, IllTypedInputIsAnError) {
  ir::IRModule module = text::ParseModule(kListPrelude + R"(
def @main() {
  let %f = Some;
  %f(1f, 2f)
})",
                                          "test.relay");
  EXPECT_THAT(ErrorOf([&] { EtaExpandConstructors(module); }), HasSubstr("takes 1 argument"));
}

TEST(EtaExpandConstructors, TenThousandLets) {
  std::string program = "def @main(%x: float32) {\n  let %v0 = Some;\n";
  for (int i = 1; i <= 10000; ++i) {
    program += "  let %v" + std::to_string(i) + " = %v" + std::to_string(i - 1) + ";\n";
  }
  program += "  %v10000(%x)\n}\n";
  ir::IRModule module = ParseTyped(kListPrelude + program);
  ir::IRModule result = EtaExpandConstructors(module);
  const auto* first = static_cast<const ir::LetNode*>(result->Lookup("main")->body.get());
  EXPECT_EQ(first->value->kind, ir::ExprKind::kFunction);
  ExpectSameResult(module, result, {F32({}, {0.5f})});
}

}  // namespace
}  // namespace nimble::transform
