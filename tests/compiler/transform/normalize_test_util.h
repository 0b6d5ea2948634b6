// Shared by the tests of the normalisation passes (ToANormalForm,
// LambdaLift, FuseOps, EliminateDeadCode, FoldConstants): programs in
// text, the pass's output compared with an expected program up to
// alpha-renaming, and evaluation before and after a pass compared value by
// value.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "nimble/compiler/eval/evaluator.h"
#include "nimble/compiler/ir/structural_equal.h"
#include "nimble/compiler/text/parser.h"
#include "nimble/compiler/text/printer.h"
#include "nimble/compiler/typing/type_infer.h"
#include "nimble/vm/adt.h"
#include "nimble/vm/tensor.h"

namespace nimble::transform::testing {

// List and Option with map and foldr, for programs that build lists.
inline const std::string kListPrelude = R"(
type List[A] {
  Cons(A, List[A]),
  Nil,
}

type Option[A] {
  Some(A),
  None,
}

def @map[A, B](%f: fn (A) -> B, %xs: List[A]) -> List[B] {
  match (%xs) {
    Cons(%head, %tail) => Cons(%f(%head), @map(%f, %tail)),
    Nil => Nil,
  }
}

def @foldr[A, B](%f: fn (A, B) -> B, %acc: B, %xs: List[A]) -> B {
  match (%xs) {
    Cons(%head, %tail) => %f(%head, @foldr(%f, %acc, %tail)),
    Nil => %acc,
  }
}
)";

// A parsed, type-checked program.
inline ir::IRModule ParseTyped(const std::string& text, const text::ParamMap* params = nullptr) {
  ir::IRModule module = text::ParseModule(text, "test.relay", params);
  typing::InferTypes(module);
  return module;
}

// A typed program already in A-normal form, with nothing to lift, sink or
// slice: lets, an `if` whose branches are let chains, a tuple and its field.
inline const std::string kNormalProgram = R"(
def @main(%x: Tensor[(2, 3), float32], %c: Tensor[(), bool]) {
  let %a = add(%x, %x);
  let %b = if (%c) { let %t = multiply(%a, %x); %t } else { %a };
  let %p = (%a, %b);
  let %q = %p.1;
  %q
})";

// Checks that `pass` gives back `module` itself, so that the pipeline does
// not type it again.
template <typename Pass>
void ExpectUnchanged(const ir::IRModule& module, Pass&& pass) {
  const ir::IRModule result = pass(module);
  EXPECT_EQ(result.get(), module.get()) << text::PrintModule(result);
}

// Checks that `actual` type-checks and equals the program `expected` up to
// alpha-renaming; on a mismatch prints both.
inline void ExpectProgram(const ir::IRModule& actual, const std::string& expected,
                          const text::ParamMap* params = nullptr) {
  ASSERT_NO_THROW(typing::InferTypes(actual)) << text::PrintModule(actual);
  ir::IRModule want = ParseTyped(expected, params);
  EXPECT_TRUE(ir::StructuralEqual(actual, want)) << "got:\n"
                                                 << text::PrintModule(actual) << "expected:\n"
                                                 << text::PrintModule(want);
}

inline Tensor F32(const Shape& shape, const std::vector<float>& values) {
  return TensorNode::FromVector(shape, DataType::Float32(), values);
}

// Small integers and halves, so that every order of summation is exact.
inline Tensor ExactValues(const Shape& shape, int seed) {
  std::vector<float> values(static_cast<size_t>(ShapeNumel(shape)));
  for (size_t i = 0; i < values.size(); ++i) {
    values[i] = static_cast<float>((i * 7 + seed) % 9) * 0.5f - 2;
  }
  return F32(shape, values);
}

inline Tensor I32(int32_t value) {
  return TensorNode::Scalar(DataType::Int32(), value);
}

// Tensors, tuples and constructor values compare by content; functions
// cannot be compared and only need to be functions on both sides.
inline void ExpectSameValue(const Ref<Object>& want, const Ref<Object>& got,
                            const std::string& where = "result") {
  if (Tensor tensor = want.as<TensorNode>()) {
    Tensor other = got.as<TensorNode>();
    ASSERT_TRUE(other) << where << ": not a tensor";
    ASSERT_EQ(tensor->TypeString(), other->TypeString()) << where;
    for (int64_t i = 0; i < tensor->numel(); ++i) {
      EXPECT_EQ(tensor->GetAsDouble(i), other->GetAsDouble(i)) << where << " element " << i;
    }
  } else if (ADT adt = want.as<ADTNode>()) {
    ADT other = got.as<ADTNode>();
    ASSERT_TRUE(other) << where << ": not an ADT";
    ASSERT_EQ(adt->tag(), other->tag()) << where;
    ASSERT_EQ(adt->size(), other->size()) << where;
    for (size_t i = 0; i < adt->size(); ++i) {
      ExpectSameValue(adt->field(i), other->field(i), where + "." + std::to_string(i));
    }
  } else {
    EXPECT_EQ(want.is<eval::ClosureNode>(), got.is<eval::ClosureNode>()) << where;
  }
}

// Evaluates `function` of both modules on `args` and compares the results.
inline void ExpectSameResult(const ir::IRModule& before, const ir::IRModule& after,
                             const std::vector<Ref<Object>>& args,
                             const std::string& function = "main") {
  Ref<Object> want = eval::Evaluate(before, function, args);
  Ref<Object> got;
  ASSERT_NO_THROW(got = eval::Evaluate(after, function, args)) << text::PrintModule(after);
  ExpectSameValue(want, got);
}

}  // namespace nimble::transform::testing
