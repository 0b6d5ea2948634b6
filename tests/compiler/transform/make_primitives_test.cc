// MakePrimitives: text in, text out; and the whole normalisation
// (ToANormalForm, LambdaLift, MakePrimitives) on the example programs and the
// evaluator's constructs, which must evaluate to the same values after it.
#include "nimble/compiler/transform/make_primitives.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "nimble/compiler/ir/functor.h"
#include "nimble/compiler/transform/dead_code.h"
#include "nimble/compiler/transform/fold_constant.h"
#include "nimble/compiler/transform/lambda_lift.h"
#include "nimble/compiler/transform/to_anf.h"
#include "nimble/vm/adt.h"
#include "nimble/vm/npy.h"
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

TEST(MakePrimitives, EachOperatorCallBecomesAPrimitiveFunctionCall) {
  ir::IRModule module = ParseTyped(R"(
def @main(%x: Tensor[(?, 8), float32], %w: Tensor[(8, 8), float32]) -> Tensor[(?, 8), float32] {
  let %y = nn.dense(%x, %w);
  let %z = add(%y, 1f);
  %z
})");
  ExpectProgram(MakePrimitives(module), R"(
def @main(%x: Tensor[(?, 8), float32], %w: Tensor[(8, 8), float32]) -> Tensor[(?, 8), float32] {
  let %y = fn (%p0: Tensor[(?, 8), float32], %p1: Tensor[(8, 8), float32], Primitive=1)
             -> Tensor[(?, 8), float32] { nn.dense(%p0, %p1) }(%x, %w);
  let %z = fn (%p0: Tensor[(?, 8), float32], %p1: Tensor[(), float32], Primitive=1)
             -> Tensor[(?, 8), float32] { add(%p0, %p1) }(%y, 1f);
  %z
})");
}

TEST(MakePrimitives, AttributesStayOnTheOperatorCall) {
  ir::IRModule module = ParseTyped(R"(
def @main(%x: Tensor[(4, 6), float32]) {
  let %parts = split(%x, indices_or_sections=2, axis=1);
  let %s = sum(%parts.0, axis=[0], keepdims=True);
  %s
})");
  ExpectProgram(MakePrimitives(module), R"(
def @main(%x: Tensor[(4, 6), float32]) {
  let %parts = fn (%p0: Tensor[(4, 6), float32], Primitive=1)
                 -> (Tensor[(4, 3), float32], Tensor[(4, 3), float32]) {
    split(%p0, indices_or_sections=2, axis=1)
  }(%x);
  let %s = fn (%p0: Tensor[(4, 3), float32], Primitive=1) -> Tensor[(1, 3), float32] {
    sum(%p0, axis=[0], keepdims=True)
  }(%parts.0);
  %s
})");
}

TEST(MakePrimitives, ATupleArgumentIsOneParameter) {
  ir::IRModule module = ParseTyped(R"(
def @main(%x: Tensor[(?, 2), float32], %y: Tensor[(1, 2), float32]) -> Tensor[(?, 2), float32] {
  let %t = (%x, %y);
  let %c = concatenate(%t);
  %c
})");
  ExpectProgram(MakePrimitives(module), R"(
def @main(%x: Tensor[(?, 2), float32], %y: Tensor[(1, 2), float32]) -> Tensor[(?, 2), float32] {
  let %t = (%x, %y);
  let %c = fn (%p0: (Tensor[(?, 2), float32], Tensor[(1, 2), float32]), Primitive=1)
             -> Tensor[(?, 2), float32] { concatenate(%p0) }(%t);
  %c
})");
}

TEST(MakePrimitives, Int64ShapeOfIsAnInstructionOtherShapeOfsAreKernels) {
  ir::IRModule module = ParseTyped(R"(
def @main(%x: Tensor[(?, 2), float32]) {
  let %a = shape_of(%x, dtype="int64");
  let %b = shape_of(%x);
  (%a, %b)
})");
  ExpectProgram(MakePrimitives(module), R"(
def @main(%x: Tensor[(?, 2), float32]) {
  let %a = shape_of(%x, dtype="int64");
  let %b = fn (%p0: Tensor[(?, 2), float32], Primitive=1) -> Tensor[(2,), int32] {
    shape_of(%p0)
  }(%x);
  (%a, %b)
})");
}

TEST(MakePrimitives, MemoryDialectOpsStayInstructions) {
  ir::IRModule module = ParseTyped(R"(
def @main() {
  let %s = memory.alloc_storage(64i64, alignment=64, device="cpu", dtype="float32");
  let %t = memory.alloc_tensor(%s, 0i64, dtype="float32", assert_shape=[4, 4]);
  %t
})");
  ExpectProgram(MakePrimitives(module), R"(
def @main() {
  let %s = memory.alloc_storage(64i64, alignment=64, device="cpu", dtype="float32");
  let %t = memory.alloc_tensor(%s, 0i64, dtype="float32", assert_shape=[4, 4]);
  %t
})");
}

TEST(MakePrimitives, CallsInBranchesClausesAndFunctionsAndIsIdempotent) {
  const std::string program = R"(
type List[A] {
  Cons(A, List[A]),
  Nil,
}

def @main(%c: Tensor[(), bool], %xs: List[Tensor[(2,), float32]]) -> Tensor[(2,), float32] {
  let %f = fn (%v: Tensor[(2,), float32]) -> Tensor[(2,), float32] {
    let %n = negative(%v);
    %n
  };
  let %r = if (%c) {
    let %m = match (%xs) {
      Cons(%h, _) => { let %e = exp(%h); %e },
      Nil => zeros(shape=[2], dtype="float32"),
    };
    %m
  } else {
    let %o = ones(shape=[2], dtype="float32");
    %o
  };
  let %y = %f(%r);
  %y
})";
  ir::IRModule module = ParseTyped(program);
  ir::IRModule once = MakePrimitives(module);
  ExpectProgram(once, R"(
type List[A] {
  Cons(A, List[A]),
  Nil,
}

def @main(%c: Tensor[(), bool], %xs: List[Tensor[(2,), float32]]) -> Tensor[(2,), float32] {
  let %f = fn (%v: Tensor[(2,), float32]) -> Tensor[(2,), float32] {
    let %n = fn (%p: Tensor[(2,), float32], Primitive=1) -> Tensor[(2,), float32] {
      negative(%p)
    }(%v);
    %n
  };
  let %r = if (%c) {
    let %m = match (%xs) {
      Cons(%h, _) => {
        let %e = fn (%p: Tensor[(2,), float32], Primitive=1) -> Tensor[(2,), float32] {
          exp(%p)
        }(%h);
        %e
      },
      Nil => fn (Primitive=1) -> Tensor[(2,), float32] { zeros(shape=[2], dtype="float32") }(),
    };
    %m
  } else {
    let %o = fn (Primitive=1) -> Tensor[(2,), float32] { ones(shape=[2], dtype="float32") }();
    %o
  };
  let %y = %f(%r);
  %y
})");
  EXPECT_TRUE(ir::StructuralEqual(MakePrimitives(once), once));
  ir::IRModule list_module = ParseTyped(program);
  ir::Constructor cons = list_module->LookupConstructor("Cons");
  ir::Constructor nil = list_module->LookupConstructor("Nil");
  Ref<Object> list = Make<ADTNode>(
      cons->tag, std::vector<Ref<Object>>{F32({2}, {0, 1}),
                                          Make<ADTNode>(nil->tag, std::vector<Ref<Object>>{})});
  for (bool c : {true, false}) {
    ExpectSameResult(module, once, {TensorNode::Scalar(DataType::Bool(), c), list});
  }
}

TEST(MakePrimitives, RejectsAnUntypedModule) {
  ir::IRModule module =
      text::ParseModule("def @main(%x: Tensor[(2,), float32]) { negative(%x) }", "test.relay");
  EXPECT_THAT(ErrorOf([&] { MakePrimitives(module); }),
              HasSubstr("MakePrimitives: argument 0 of negative has no type"));
}

// ---- The normalisation pipeline on whole programs --------------------------

ir::IRModule Normalize(const ir::IRModule& module) {
  return MakePrimitives(LambdaLift(ToANormalForm(module)));
}

std::string ReadFile(const std::string& path) {
  std::ifstream file(path);
  EXPECT_TRUE(file) << "cannot open " << path;
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

// Every function literal left is primitive, called where it stands.
void ExpectNormalised(const ir::IRModule& module) {
  class Checker : public ir::ExprVisitor {
   public:
    void VisitCall(const ir::CallNode* call) override {
      if (call->callee->kind == ir::ExprKind::kFunction) {
        // Primitive: its body is one op call on its parameters.
        visited_.insert(call->callee.get());
        EXPECT_TRUE(IsPrimitive(call->callee.get()));
      } else {
        EXPECT_NE(call->callee->kind, ir::ExprKind::kOp) << "an operator call left unwrapped";
      }
      ir::ExprVisitor::VisitCall(call);
    }
    void VisitFunction(const ir::FunctionNode* function) override {
      ADD_FAILURE() << "a function literal left inside a function";
      ir::ExprVisitor::VisitFunction(function);
    }
    static bool IsPrimitive(const ir::ExprNode* node) {
      return static_cast<const ir::FunctionNode*>(node)->attrs.Has("Primitive");
    }
  };
  for (const ir::IRModuleNode::Definition& definition : module->functions()) {
    ir::Expr body = definition.function->body;
    if (definition.function->attrs.Has("Closure")) {
      ASSERT_EQ(body->kind, ir::ExprKind::kFunction) << definition.global->name;
      body = static_cast<const ir::FunctionNode*>(body.get())->body;
    }
    Checker().VisitExpr(body);
  }
}

// Normalised, and also folded and cleaned around it as the compiler does.
void ExpectNormalisedSameResult(const ir::IRModule& module, const std::vector<Ref<Object>>& args,
                                const std::string& function = "main") {
  ir::IRModule normalised = Normalize(module);
  ExpectNormalised(normalised);
  ExpectSameResult(module, normalised, args, function);
  ir::IRModule optimised = EliminateDeadCode(Normalize(FoldConstants(module)));
  ExpectNormalised(optimised);
  ExpectSameResult(module, optimised, args, function);
}

TEST(Normalisation, DynamicConcatExample) {
  ir::IRModule module = ParseTyped(ReadFile(NIMBLE_SOURCE_DIR "/examples/dynamic_concat.relay"));
  ExpectNormalisedSameResult(module, {F32({2, 2}, {1, 2, 3, 4}), F32({1, 2}, {5, 6})});
  ExpectNormalisedSameResult(module, {F32({0, 2}, {}), F32({1, 2}, {5, 6})});
}

TEST(Normalisation, GrowLoopExample) {
  ir::IRModule module = ParseTyped(ReadFile(NIMBLE_SOURCE_DIR "/examples/grow_loop.relay"));
  ExpectNormalisedSameResult(module, {F32({1, 2}, {1, 2})});
}

TEST(Normalisation, ListFoldExampleWithClosures) {
  ir::IRModule module = ParseTyped(ReadFile(NIMBLE_SOURCE_DIR "/examples/list_fold.relay"));
  ExpectNormalisedSameResult(
      module, {F32({3, 4}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}), F32({}, {0.5f})});
}

TEST(Normalisation, LstmExample) {
  text::ParamMap params;
  for (auto& [name, tensor] : ReadNpz(NIMBLE_SOURCE_DIR "/examples/data/lstm_cell.npz")) {
    params.emplace(name, tensor);
  }
  ir::IRModule module =
      ParseTyped(ReadFile(NIMBLE_SOURCE_DIR "/examples/lstm_cell.relay"), &params);
  std::vector<float> sequence(3 * 8);
  for (size_t i = 0; i < sequence.size(); ++i) sequence[i] = 0.1f * static_cast<float>(i % 7);
  ExpectNormalisedSameResult(module, {F32({3, 8}, sequence), params.at("b_ih"), params.at("b_hh")});
}

TEST(Normalisation, ClosuresCapturingAndReturned) {
  ir::IRModule module = ParseTyped(R"(
def @make_adder(%k: Tensor[(), float32]) {
  fn (%x: Tensor[(), float32]) { add(%x, %k) }
}

def @main(%x: Tensor[(), float32]) {
  let %add_two = @make_adder(2f);
  let %add_ten = @make_adder(10f);
  let %twice = fn (%f, %y) { %f(%f(%y)) };
  (%add_two(%x), %twice(%add_ten, %x))
})");
  ExpectNormalisedSameResult(module, {F32({}, {1})});
}

TEST(Normalisation, ListMapFoldAndConstructorsAsValues) {
  ir::IRModule module = ParseTyped(R"(
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

def @foldl[A, B](%f: fn (A, B) -> A, %acc: A, %xs: List[B]) -> A {
  match (%xs) {
    Cons(%head, %tail) => @foldl(%f, %f(%acc, %head), %tail),
    Nil => %acc,
  }
}

def @double(%x: Tensor[(), float32]) { multiply(%x, 2f) }

def @main(%x: Tensor[(), float32]) {
  let %xs = Cons(%x, Cons(2f, Cons(3f, Nil)));
  let %ys = @map(fn (%v) { multiply(%v, %x) }, %xs);
  let %wrapped = @map(Some, @map(@double, %ys));
  let %first = match (%wrapped) {
    Cons(Some(%first), _) => %first,
    _ => -1f,
  };
  (@foldl(fn (%acc, %v) { add(%acc, %v) }, 0f, %ys), %ys, %first)
})");
  ExpectNormalisedSameResult(module, {F32({}, {10})});
}

TEST(Normalisation, RecursionLoopsAndMatchPatterns) {
  ir::IRModule module = ParseTyped(R"(
type List[A] {
  Cons(A, List[A]),
  Nil,
}

def @count(%n: Tensor[(), int32]) -> Tensor[(), int32] {
  if (equal(%n, 0)) { 0 } else { add(@count(subtract(%n, 1)), 1) }
}

def @even(%n: Tensor[(), int32]) -> Tensor[(), bool] {
  if (equal(%n, 0)) { True } else { @odd(subtract(%n, 1)) }
}

def @odd(%n: Tensor[(), int32]) -> Tensor[(), bool] {
  if (equal(%n, 0)) { False } else { @even(subtract(%n, 1)) }
}

def @classify(%xs: List[(Tensor[(), int32], Tensor[(), int32])]) -> Tensor[(), int32] {
  match (%xs) {
    Nil => 0,
    Cons((%a, _), Nil) => %a,
    Cons((_, %b), Cons(_, Nil)) => add(%b, 100),
    Cons(%pair, _) => add(%pair.1, 1000),
  }
}

def @main(%n: Tensor[(), int32]) {
  let %pairs = Cons((1, 2), Cons((3, 4), Nil));
  (@count(%n), @even(%n), @classify(%pairs), @classify(Cons((7, 8), Nil)))
})");
  ExpectNormalisedSameResult(module, {I32(100)});
  ExpectNormalisedSameResult(module, {I32(7)});
}

TEST(Normalisation, TenThousandIterationLoop) {
  ir::IRModule module = ParseTyped(R"(
def @loop(%i: Tensor[(), int32], %n: Tensor[(), int32], %acc: Tensor[(), float32]) -> Tensor[(), float32] {
  if (less(%i, %n)) {
    @loop(add(%i, 1), %n, add(%acc, 0.5f))
  } else {
    %acc
  }
}

def @main(%n: Tensor[(), int32]) -> Tensor[(), float32] {
  @loop(0, %n, 0f)
})");
  ExpectNormalisedSameResult(module, {I32(10000)});
}

TEST(Normalisation, TuplesAndProjections) {
  ir::IRModule module = ParseTyped(R"(
def @swap(%p: (Tensor[(), float32], Tensor[(2,), float32])) {
  (%p.1, %p.0)
}

def @main(%a: Tensor[(), float32], %b: Tensor[(2,), float32]) {
  let %nested = ((%a, %b), @swap((%a, %b)));
  (%nested.1.0, %nested.0.0, ())
})");
  ExpectNormalisedSameResult(module, {F32({}, {1}), F32({2}, {2, 3})});
}

}  // namespace
}  // namespace nimble::transform
