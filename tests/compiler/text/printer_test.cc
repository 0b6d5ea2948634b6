#include "nimble/compiler/text/printer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>

#include "nimble/compiler/ir/structural_equal.h"
#include "nimble/compiler/op/op.h"
#include "nimble/compiler/text/parser.h"
#include "nimble/vm/error.h"

namespace nimble::text {
namespace {

using ::testing::HasSubstr;

// Prints the parsed program, checks that the output parses back into the same
// program and prints again as the same text, and returns it.
std::string RoundTrip(const std::string& text, const ParamMap* params = nullptr) {
  ir::IRModule module = ParseModule(text, "in.relay", params);
  const std::string printed = PrintModule(module);
  ir::IRModule reparsed = ParseModule(printed, "printed.relay", params);
  EXPECT_TRUE(ir::StructuralEqual(module, reparsed));
  const std::string again = PrintModule(reparsed);
  EXPECT_TRUE(again == printed) << "printed:\n"
                                << printed.substr(0, 2000) << "\nreprinted:\n"
                                << again.substr(0, 2000);
  return printed;
}

TEST(Printer, ExactTextOfAFunction) {
  const std::string printed = RoundTrip(R"(
def @main(%x: Tensor[(?, 2), float32], %y: Tensor[(1, 2), float32]) -> Tensor[(?, 2), float32] {
  let %sum = add(%x, %y);   let %scaled = multiply(%sum, 0.5f);
  nn.softmax(%scaled, axis=0)
})");
  EXPECT_EQ(printed, R"(#[version = "0.0.5"]
def @main(%x: Tensor[(?, 2), float32], %y: Tensor[(1, 2), float32]) -> Tensor[(?, 2), float32] {
  let %sum = add(%x, %y);
  let %scaled = multiply(%sum, 0.5f);
  nn.softmax(%scaled, axis=0)
}
)");
}

TEST(Printer, ExactTextOfAdtsMatchAndClosures) {
  const std::string printed = RoundTrip(R"(
type List[A] { Cons(A, List[A]), Nil }
def @map[A, B](%f: fn (A) -> B, %xs: List[A]) -> List[B] {
  match (%xs) {
    Cons(%h, %t) => { let %y = %f(%h); Cons(%y, @map(%f, %t)) },
    Nil => Nil,
  }
}
def @main(%x: float32) {
  let %inc = fn (%v: float32) -> float32 { add(%v, 1f) };
  if (less(%x, 0f)) { @map(%inc, Cons(%x, Nil)) } else { Nil }
}
)");
  EXPECT_EQ(printed, R"(#[version = "0.0.5"]
type List[A] {
  Cons(A, List[A]),
  Nil,
}

def @map[A, B](%f: fn (A) -> B, %xs: List[A]) -> List[B] {
  match (%xs) {
    Cons(%h, %t) => {
      let %y = %f(%h);
      Cons(%y, @map(%f, %t))
    },
    Nil => Nil,
  }
}

def @main(%x: Tensor[(), float32]) {
  let %inc = fn (%v: Tensor[(), float32]) -> Tensor[(), float32] {
    add(%v, 1f)
  };
  if (less(%x, 0f)) {
    @map(%inc, Cons(%x, Nil))
  } else {
    Nil
  }
}
)");
}

TEST(Printer, MutualRecursionAndPolymorphicClosures) {
  const std::string printed = RoundTrip(R"(
// @even and @odd call each other before they are defined.
def @even(%n: Nat) -> bool { match (%n) { Z => True, S(%m) => @odd(%m) } }
def @odd(%n: Nat) -> bool { match? (%n) { S(%m) => @even(%m) } }
type Nat { Z, S(Nat) }
def @main() { let %id = fn [A](%v: A) -> A { %v }; (%id(@even(S(Z))), S) }
)");
  EXPECT_EQ(printed, R"(#[version = "0.0.5"]
type Nat {
  Z,
  S(Nat),
}

def @even(%n: Nat) -> Tensor[(), bool] {
  match (%n) {
    Z => True,
    S(%m) => @odd(%m),
  }
}

def @odd(%n: Nat) -> Tensor[(), bool] {
  match? (%n) {
    S(%m) => @even(%m),
  }
}

def @main() {
  let %id = fn [A](%v: A) -> A {
    %v
  };
  (%id(@even(S(Z))), S)
}
)");
}

TEST(Printer, SharedExpressionsBecomeGraphBindings) {
  const std::string printed = RoundTrip(R"(
def @main(%x: Tensor[(2, 2), float32]) {
  %0 = add(%x, %x);
  %1 = multiply(%0, %0);
  (%1, %0, %1)
})");
  EXPECT_EQ(printed, R"(#[version = "0.0.5"]
def @main(%x: Tensor[(2, 2), float32]) {
  %0 = add(%x, %x);
  %1 = multiply(%0, %0);
  (%1, %0, %1)
}
)");
  // The parsed program really shares the node.
  ir::IRModule module = ParseModule(printed, "p.relay");
  const auto* tuple = dynamic_cast<const ir::TupleNode*>(module->Lookup("main")->body.get());
  ASSERT_NE(tuple, nullptr);
  EXPECT_EQ(tuple->fields[0].get(), tuple->fields[2].get());
}

TEST(Printer, GraphBindingsGoToTheBlockEnclosingAllUses) {
  // Shared only inside the then-branch: bound there, after the let it uses.
  // Shared by both branches: bound before the if.
  const std::string printed = RoundTrip(R"(
def @main(%c: bool, %x: float32) {
  %0 = multiply(%x, %x);
  if (%c) {
    let %y = add(%x, 1f);
    %1 = add(%y, %y);
    (%1, %1, %0)
  } else {
    (%0, %0, %0)
  }
})");
  EXPECT_EQ(printed, R"(#[version = "0.0.5"]
def @main(%c: Tensor[(), bool], %x: Tensor[(), float32]) {
  %0 = multiply(%x, %x);
  if (%c) {
    let %y = add(%x, 1f);
    %1 = add(%y, %y);
    (%1, %1, %0)
  } else {
    (%0, %0, %0)
  }
}
)");
}

TEST(Printer, SharedNodeUsedOnlyInsideASharedNodeFollowsIt) {
  // %inner is used twice, but only by %outer, which both branches share: both
  // must be bound before the if.
  const std::string printed = RoundTrip(R"(
def @main(%c: bool, %x: float32) {
  %inner = add(%x, %x);
  %outer = multiply(%inner, %inner);
  if (%c) { %outer } else { (%outer,) }
})");
  EXPECT_THAT(printed, HasSubstr("  %0 = add(%x, %x);\n  %1 = multiply(%0, %0);\n  if (%c) {"));
}

TEST(Printer, DistinctVarsWithOneHintGetDistinctNames) {
  ir::Var a = ir::MakeVar("x");
  ir::Var b = ir::MakeVar("x");
  ir::Var c = ir::MakeVar("x1");
  ir::Expr body = ir::MakeTupleExpr({a, b, c});
  ir::Expr function = Make<ir::FunctionNode>(std::vector<ir::Var>{a, b, c}, body, nullptr,
                                             std::vector<ir::TypeVar>{});
  const std::string printed = PrintExpr(function);
  EXPECT_EQ(printed, "fn (%x, %x1, %x11) {\n  (%x, %x1, %x11)\n}");
  const std::string again = PrintExpr(ParseExpr(printed));
  EXPECT_EQ(again, printed);
}

TEST(Printer, ShadowedLetsAreRenamed) {
  const std::string printed = RoundTrip(R"(
def @main(%x: float32) {
  let %x = add(%x, 1f);
  let %x = add(%x, 2f);
  %x
})");
  EXPECT_THAT(printed, HasSubstr("let %x1 = add(%x, 1f);\n  let %x2 = add(%x1, 2f);\n  %x2\n"));
}

TEST(Printer, ScalarLiterals) {
  const std::pair<const char*, const char*> cases[] = {
      {"1f", "1f"},         {"1.0f", "1f"},           {"0.5f", "0.5f"},     {"-2f", "-2f"},
      {"1.5", "1.5f"},      {"0.1f", "0.1f"},         {"1e-05f", "1e-05f"}, {"1f64", "1f64"},
      {"0.1f64", "0.1f64"}, {"0.333f16", "0.333f16"}, {"3", "3"},           {"-3i64", "-3i64"},
      {"3i8", "3i8"},       {"255u8", "255u8"},       {"True", "True"},     {"False", "False"},
      {"3e+20f", "3e+20f"},
  };
  for (const auto& [text, expected] : cases) {
    SCOPED_TRACE(text);
    EXPECT_EQ(PrintExpr(ParseExpr(text)), expected);
  }
}

TEST(Printer, TuplesProjectionsAndParentheses) {
  const std::string printed = RoundTrip(R"(
def @main(%t: (float32, (int32,)), %f: fn (float32) -> float32) {
  let %a = (%t.1).0;
  let %b = ((1f, 2f)).1;
  let %c = (fn (%y: float32) { %f(%y) })(%t.0);
  let %d = (if (True) { %t } else { %t }).0;
  let %e = split(%a, indices_or_sections=2, axis=1).0;
  let %g = (let %z = %c; (%z, %z));
  (%a, %b, %c, %d, %e, %g, (), (%a,))
})");
  EXPECT_EQ(printed, R"(#[version = "0.0.5"]
def @main(%t: (Tensor[(), float32], (Tensor[(), int32],)), %f: fn (Tensor[(), float32]) -> Tensor[(), float32]) {
  let %a = %t.1.0;
  let %b = (1f, 2f).1;
  let %c = (fn (%y: Tensor[(), float32]) {
    %f(%y)
  })(%t.0);
  let %d = (if (True) {
    %t
  } else {
    %t
  }).0;
  let %e = split(%a, indices_or_sections=2, axis=1).0;
  let %g = (
    let %z = %c;
    (%z, %z)
  );
  (%a, %b, %c, %d, %e, %g, (), (%a,))
}
)");
}

TEST(Printer, AttributesOmitDefaultsAndKeepTheirKind) {
  const std::string printed = RoundTrip(R"(
def @main(%x: Tensor[(4, 6), float32]) {
  (nn.softmax(%x), nn.softmax(%x, axis=0), split(%x, indices_or_sections=[2], axis=1),
   split(%x, indices_or_sections=(1, 3), axis=-1), concatenate((%x, %x), axis=1))
})");
  EXPECT_THAT(printed, HasSubstr("(nn.softmax(%x), nn.softmax(%x, axis=0), "
                                 "split(%x, indices_or_sections=[2], axis=1), "
                                 "split(%x, indices_or_sections=[1, 3], axis=-1), "
                                 "concatenate((%x, %x), axis=1))"));
}

TEST(Printer, IncompleteMatchWildcardsAndTuplePatterns) {
  const std::string printed = RoundTrip(R"(
type Option[A] { Some(A), None }
def @main(%p: (Option[float32], float32)) {
  match? (%p) {
    (Some(%v), _) => %v,
    (None, %w: float32) => { %w },
  }
}
def @nothing() -> Option[float32] { None })");
  EXPECT_THAT(printed, HasSubstr(R"(  match? (%p) {
    (Some(%v), _) => %v,
    (None, %w: Tensor[(), float32]) => %w,
  })"));
  EXPECT_THAT(printed, HasSubstr("def @nothing() -> Option[Tensor[(), float32]] {\n  None\n}"));
}

TEST(Printer, ConstantsUseParamsAndFreshNames) {
  ParamMap params;
  params["w"] = TensorNode::FromVector<float>({2}, DataType::Float32(), {1, 2});
  const std::string printed =
      RoundTrip("def @main(%x) { add(%x, meta[relay.Constant][w]) }", &params);
  EXPECT_THAT(printed, HasSubstr("add(%x, meta[relay.Constant][w])"));

  // Unnamed constants get fresh names, which do not collide with named ones.
  Tensor data = TensorNode::FromVector<float>({2}, DataType::Float32(), {3, 4});
  ir::Constant unnamed = Make<ir::ConstantNode>(data, "");
  ir::Constant named = Make<ir::ConstantNode>(params["w"], "c0");
  ir::Constant infinite = ir::MakeScalar(DataType::Float32(), INFINITY);
  ir::Expr tuple = ir::MakeTupleExpr({unnamed, named, unnamed, infinite});
  EXPECT_EQ(PrintExpr(tuple),
            "(meta[relay.Constant][c1], meta[relay.Constant][c0], meta[relay.Constant][c1], "
            "meta[relay.Constant][c2])");
  ParamMap out;
  PrintOptions options;
  options.constants_out = &out;
  const std::string text = PrintExpr(tuple, options);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out["c1"].get(), data.get());
  EXPECT_EQ(out["c0"].get(), params["w"].get());
  // The text and the constants make a program again.
  ir::IRModule module = ParseModule("def @main() { " + text + " }", "c.relay", &out);
  EXPECT_EQ(PrintExpr(module->Lookup("main")->body), text);
}

TEST(Printer, ShowTypesPrintsCheckedTypes) {
  ir::IRModule module = ParseModule(R"(
def @main(%x, %y: float32) {
  let %z = add(%x, %y);
  %z
})",
                                    "t.relay");
  ir::Function main = module->Lookup("main");
  const ir::Type scalar = ir::MakeTensorType({}, DataType::Float32());
  main->params[0]->checked_type = ir::MakeTensorType({ir::Dim::Any()}, DataType::Float32());
  const auto* let = dynamic_cast<const ir::LetNode*>(main->body.get());
  let->var->checked_type = ir::MakeTensorType({ir::Dim::Any()}, DataType::Float32());
  main->checked_type = Make<ir::FuncTypeNode>(
      std::vector<ir::TypeVar>{}, std::vector<ir::Type>{main->params[0]->checked_type, scalar},
      let->var->checked_type);

  EXPECT_EQ(PrintModule(module), R"(#[version = "0.0.5"]
def @main(%x, %y: Tensor[(), float32]) {
  let %z = add(%x, %y);
  %z
}
)");
  PrintOptions options;
  options.show_types = true;
  const std::string typed = PrintModule(module, options);
  EXPECT_EQ(typed, R"(#[version = "0.0.5"]
def @main(%x: Tensor[(?,), float32], %y: Tensor[(), float32]) -> Tensor[(?,), float32] {
  let %z: Tensor[(?,), float32] = add(%x, %y);
  %z
}
)");
  EXPECT_EQ(PrintModule(ParseModule(typed, "typed.relay")), typed);
}

TEST(Printer, FunctionAttributes) {
  const std::string printed = RoundTrip(R"(
def @main(%x: float32) {
  let %f = fn (%p: float32, Primitive=1) { add(%p, %p) };
  %f(%x)
})");
  EXPECT_THAT(printed, HasSubstr("let %f = fn (%p: Tensor[(), float32], Primitive=1) {"));
}

TEST(Printer, GraphBindingNamesAvoidVarNames) {
  const std::string printed = RoundTrip(R"(
def @main(%0: float32) {
  %1 = add(%0, %0);
  (%1, %1)
})");
  EXPECT_THAT(printed, HasSubstr("def @main(%0: Tensor[(), float32]) {\n  %1 = add(%0, %0);"));
}

// Compares without gtest's diff, which is slow on 100 KB texts.
void ExpectSameText(const std::string& actual, const std::string& expected) {
  const size_t mismatch = static_cast<size_t>(
      std::mismatch(actual.begin(), actual.end(), expected.begin(), expected.end()).first -
      actual.begin());
  EXPECT_TRUE(actual == expected) << "first difference at " << mismatch << ": "
                                  << actual.substr(mismatch, 80) << " vs "
                                  << expected.substr(mismatch, 80);
}

TEST(Printer, DeepLetChainsAndCalls) {
  constexpr int kDepth = 10000;
  std::string lets = "def @main(%x: Tensor[(), float32]) {\n";
  for (int i = 0; i < kDepth; ++i) {
    lets += "  let %v" + std::to_string(i) + " = add(" +
            (i ? "%v" + std::to_string(i - 1) : std::string("%x")) + ", 1f);\n";
  }
  lets += "  %v" + std::to_string(kDepth - 1) + "\n}\n";
  ExpectSameText(RoundTrip(lets), "#[version = \"0.0.5\"]\n" + lets);

  std::string calls = "%x";
  for (int i = 0; i < kDepth; ++i) calls = "add(" + calls + ", %x)";
  const std::string nested = "def @main(%x: Tensor[(), float32]) {\n  " + calls + "\n}\n";
  ExpectSameText(RoundTrip(nested), "#[version = \"0.0.5\"]\n" + nested);

  std::string naturals = "Z";
  for (int i = 0; i < kDepth; ++i) naturals = "S(" + naturals + ")";
  RoundTrip("type Nat { Z, S(Nat) }\ndef @main() { " + naturals + " }");
}

// Each line is indented by its depth up to 160 spaces, so the text of n
// nested blocks is linear in n (20,000 nested `if`s were 800 MB of spaces,
// and `nimble check` failed with std::bad_alloc); it still parses back.
TEST(Printer, IndentationStopsAtADepth) {
  constexpr int kDepth = 300;
  std::string branches = "%x";
  for (int i = 0; i < kDepth; ++i) branches = "if (%c) { " + branches + " } else { %x }";
  const std::string printed =
      RoundTrip("def @main(%x: Tensor[(), float32], %c: Tensor[(), bool]) { " + branches + " }");
  size_t widest = 0;
  std::istringstream lines(printed);
  for (std::string line; std::getline(lines, line);) {
    widest = std::max(widest, line.find_first_not_of(' '));
  }
  EXPECT_EQ(widest, 160u);
}

TEST(Printer, NullExpressionIsAnError) {
  EXPECT_THROW(PrintExpr(nullptr), Error);
}

}  // namespace
}  // namespace nimble::text
