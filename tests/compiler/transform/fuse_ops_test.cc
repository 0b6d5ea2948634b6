// FuseOps: text in, text out. With fusion off, one primitive per operator
// call; with it on, the groups of TVM's partitioner. Then the whole
// normalisation (ToANormalForm, LambdaLift, FuseOps with fusion off and on)
// on the example programs and the evaluator's constructs, which must evaluate
// to the same values after it.
#include "nimble/compiler/transform/fuse_ops.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "nimble/compiler/op/vm_instructions.h"

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "nimble/compiler/backend/pipeline.h"
#include "nimble/compiler/ir/functor.h"
#include "nimble/compiler/transform/dead_code.h"
#include "nimble/compiler/transform/fold_constant.h"
#include "nimble/compiler/transform/lambda_lift.h"
#include "nimble/compiler/transform/pass_util.h"
#include "nimble/compiler/transform/to_anf.h"
#include "nimble/vm/adt.h"
#include "nimble/vm/npy.h"
#include "tests/compiler/transform/normalize_test_util.h"
#include "tests/error_of.h"

namespace nimble::transform {
namespace {

using ::testing::ElementsAre;
using testing::ExpectProgram;
using testing::ExpectSameResult;
using testing::F32;
using ::testing::HasSubstr;
using testing::I32;
using testing::kListPrelude;
using testing::ParseTyped;

// ---- Fusion off: a primitive per operator call ------------------------------

// FuseOps with fusion off; a limit of one op per group must give the same.
ir::IRModule Unfused(const ir::IRModule& module) {
  ir::IRModule off = FuseOps(module, {.enabled = false});
  EXPECT_TRUE(ir::StructuralEqual(FuseOps(module, {.max_group_ops = 1}), off));
  return off;
}

TEST(FuseOpsOff, EachOperatorCallBecomesAPrimitiveFunctionCall) {
  ir::IRModule module = ParseTyped(R"(
def @main(%x: Tensor[(?, 8), float32], %w: Tensor[(8, 8), float32]) -> Tensor[(?, 8), float32] {
  let %y = nn.dense(%x, %w);
  let %z = add(%y, 1f);
  %z
})");
  ExpectProgram(Unfused(module), R"(
def @main(%x: Tensor[(?, 8), float32], %w: Tensor[(8, 8), float32]) -> Tensor[(?, 8), float32] {
  let %y = fn (%p0: Tensor[(?, 8), float32], %p1: Tensor[(8, 8), float32], Primitive=1)
             -> Tensor[(?, 8), float32] { nn.dense(%p0, %p1) }(%x, %w);
  let %z = fn (%p0: Tensor[(?, 8), float32], %p1: Tensor[(), float32], Primitive=1)
             -> Tensor[(?, 8), float32] { add(%p0, %p1) }(%y, 1f);
  %z
})");
}

TEST(FuseOpsOff, AttributesStayOnTheOperatorCall) {
  ir::IRModule module = ParseTyped(R"(
def @main(%x: Tensor[(4, 6), float32]) {
  let %parts = split(%x, indices_or_sections=2, axis=1);
  let %s = sum(%parts.0, axis=[0], keepdims=True);
  %s
})");
  ExpectProgram(Unfused(module), R"(
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

TEST(FuseOpsOff, ATupleArgumentIsOneParameter) {
  ir::IRModule module = ParseTyped(R"(
def @main(%x: Tensor[(?, 2), float32], %y: Tensor[(1, 2), float32]) -> Tensor[(?, 2), float32] {
  let %t = (%x, %y);
  let %c = concatenate(%t);
  %c
})");
  ExpectProgram(Unfused(module), R"(
def @main(%x: Tensor[(?, 2), float32], %y: Tensor[(1, 2), float32]) -> Tensor[(?, 2), float32] {
  let %t = (%x, %y);
  let %c = fn (%p0: (Tensor[(?, 2), float32], Tensor[(1, 2), float32]), Primitive=1)
             -> Tensor[(?, 2), float32] { concatenate(%p0) }(%t);
  %c
})");
}

TEST(FuseOpsOff, ShapeOfAndScalarArithmeticAreInstructions) {
  ir::IRModule module = ParseTyped(R"(
def @main(%x: Tensor[(?, 2), float32], %i: int32) {
  let %a = shape_of(%x, dtype="int64");
  let %b = shape_of(%x);
  let %c = take(%b, 0);
  let %d = less(%i, %c);
  let %e = shape_of(%x, dtype="float32");
  let %f = add(%x, 1f);
  (%a, %d, %e, %f)
})");
  // A float shape and float arithmetic stay kernels.
  ExpectProgram(Unfused(module), R"(
def @main(%x: Tensor[(?, 2), float32], %i: int32) {
  let %a = shape_of(%x, dtype="int64");
  let %b = shape_of(%x);
  let %c = take(%b, 0);
  let %d = less(%i, %c);
  let %e = fn (%p0: Tensor[(?, 2), float32], Primitive=1) -> Tensor[(2,), float32] {
    shape_of(%p0, dtype="float32")
  }(%x);
  let %f = fn (%p01: Tensor[(?, 2), float32], %p1: float32, Primitive=1) -> Tensor[(?, 2), float32] {
    add(%p01, %p1)
  }(%x, 1f);
  (%a, %d, %e, %f)
})");
}

TEST(FuseOpsOff, MemoryDialectOpsStayInstructions) {
  ir::IRModule module = ParseTyped(R"(
def @main() {
  let %s = memory.alloc_storage(64i64, alignment=64, device="cpu", dtype="float32");
  let %t = memory.alloc_tensor(%s, 0i64, dtype="float32", assert_shape=[4, 4]);
  %t
})");
  ExpectProgram(Unfused(module), R"(
def @main() {
  let %s = memory.alloc_storage(64i64, alignment=64, device="cpu", dtype="float32");
  let %t = memory.alloc_tensor(%s, 0i64, dtype="float32", assert_shape=[4, 4]);
  %t
})");
}

TEST(FuseOpsOff, CallsInBranchesClausesAndFunctionsAndIsIdempotent) {
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
  ir::IRModule once = Unfused(module);
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
  EXPECT_TRUE(ir::StructuralEqual(Unfused(once), once));
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

TEST(FuseOpsOff, RejectsAnUntypedModule) {
  ir::IRModule module =
      text::ParseModule("def @main(%x: Tensor[(2,), float32]) { negative(%x) }", "test.relay");
  EXPECT_THAT(ErrorOf([&] { FuseOps(module, {.enabled = false}); }),
              HasSubstr("FuseOps: argument 0 of negative has no type"));
  EXPECT_THAT(ErrorOf([&] { FuseOps(module); }),
              HasSubstr("FuseOps: argument 0 of negative has no type"));
}

// ---- Fusion -----------------------------------------------------------------

// What each primitive of `module` computes, in program order: its Fused
// attribute, or the one op it calls.
std::vector<std::string> Primitives(const ir::IRModule& module) {
  class Collector : public ir::ExprVisitor {
   public:
    std::vector<std::string> names;
    void VisitFunction(const ir::FunctionNode* function) override {
      if (!HasFlag(function, kPrimitiveAttr)) return ir::ExprVisitor::VisitFunction(function);
      const ir::AttrValue* fused = function->attrs.Find(kFusedAttr);
      names.push_back(fused ? std::get<std::string>(*fused)
                            : std::string(CalledOpName(*function->body)));
    }
  };
  Collector collector;
  for (const ir::IRModuleNode::Definition& definition : module->functions()) {
    collector.VisitExpr(definition.function);
  }
  return collector.names;
}

TEST(FuseOps, AnElementwiseChainBecomesOnePrimitive) {
  ir::IRModule module = ParseTyped(R"(
def @main(%x: Tensor[(?, 4), float32]) -> Tensor[(?, 4), float32] {
  let %a = negative(%x);
  let %b = exp(%a);
  let %c = add(%b, 1f);
  let %d = tanh(%c);
  %d
})");
  ExpectProgram(FuseOps(module), R"(
def @main(%x: Tensor[(?, 4), float32]) -> Tensor[(?, 4), float32] {
  let %d = fn (%p0: Tensor[(?, 4), float32], Primitive=1, Fused="negative+exp+add+tanh")
             -> Tensor[(?, 4), float32] {
    let %a = negative(%p0);
    let %b = exp(%a);
    let %c = add(%b, 1f);
    tanh(%c)
  }(%x);
  %d
})");
}

// nn.dense is out-elementwise-fusable: it takes the bias, the activation and
// the residual add that follow it; its inputs are parameters, %x once.
TEST(FuseOps, DenseTakesItsBiasActivationAndResidualEpilogue) {
  ir::IRModule module = ParseTyped(R"(
def @main(%x: Tensor[(?, 8), float32], %w: Tensor[(8, 8), float32], %b: Tensor[(8,), float32]) {
  let %d = nn.dense(%x, %w);
  let %y = add(%d, %b);
  let %t = tanh(%y);
  let %r = add(%t, %x);
  %r
})");
  ExpectProgram(FuseOps(module), R"(
def @main(%x: Tensor[(?, 8), float32], %w: Tensor[(8, 8), float32], %b: Tensor[(8,), float32]) {
  let %r = fn (%p0: Tensor[(?, 8), float32], %p1: Tensor[(8, 8), float32],
               %p2: Tensor[(8,), float32], Primitive=1, Fused="nn.dense+add+tanh+add")
             -> Tensor[(?, 8), float32] {
    let %d = nn.dense(%p0, %p1);
    let %y = add(%d, %p2);
    let %t = tanh(%y);
    add(%t, %p0)
  }(%x, %w, %b);
  %r
})");
  ir::IRModule gelu = ParseTyped(R"(
def @main(%x: Tensor[(?, 8), float32], %w: Tensor[(8, 8), float32], %b: Tensor[(8,), float32]) {
  let %d = nn.dense(%x, %w);
  let %y = nn.bias_add(%d, %b, axis=-1);
  let %g = gelu(%y);
  %g
})");
  EXPECT_THAT(Primitives(FuseOps(gelu)), ElementsAre("nn.dense+nn.bias_add+gelu"));
}

// One anchor per group: the second dense keeps out of the first one's group,
// a dense's epilogue never reaches a reduction, and a reduction never joins a
// following dense.
TEST(FuseOps, TwoAnchorsNeverShareAGroup) {
  ir::IRModule parallel = ParseTyped(R"(
def @main(%x: Tensor[(?, 8), float32], %w1: Tensor[(8, 8), float32], %w2: Tensor[(8, 8), float32]) {
  let %d1 = nn.dense(%x, %w1);
  let %d2 = nn.dense(%x, %w2);
  let %s = add(%d1, %d2);
  %s
})");
  ExpectProgram(FuseOps(parallel), R"(
def @main(%x: Tensor[(?, 8), float32], %w1: Tensor[(8, 8), float32], %w2: Tensor[(8, 8), float32]) {
  let %d2 = fn (%p0: Tensor[(?, 8), float32], %p1: Tensor[(8, 8), float32], Primitive=1)
              -> Tensor[(?, 8), float32] { nn.dense(%p0, %p1) }(%x, %w2);
  let %s = fn (%p0: Tensor[(?, 8), float32], %p1: Tensor[(8, 8), float32],
               %p2: Tensor[(?, 8), float32], Primitive=1, Fused="nn.dense+add")
             -> Tensor[(?, 8), float32] {
    let %d1 = nn.dense(%p0, %p1);
    add(%d1, %p2)
  }(%x, %w1, %d2);
  %s
})");
  ir::IRModule stacked = ParseTyped(R"(
def @main(%x: Tensor[(?, 8), float32], %w1: Tensor[(8, 8), float32], %w2: Tensor[(8, 8), float32],
          %w3: Tensor[(8, 1), float32]) {
  let %d1 = nn.dense(%x, %w1);
  let %t = tanh(%d1);
  let %d2 = nn.dense(%t, %w2);
  let %e = exp(%d2);
  let %s = sum(%e, axis=[1], keepdims=True);
  let %d3 = nn.dense(%s, %w3);
  %d3
})");
  EXPECT_THAT(Primitives(FuseOps(stacked)),
              ElementsAre("nn.dense+tanh", "nn.dense+exp", "sum", "nn.dense"));
}

TEST(FuseOps, ADiamondFusesWhole) {
  ir::IRModule module = ParseTyped(R"(
def @main(%x: Tensor[(4,), float32]) {
  let %s = sigmoid(%x);
  let %a = exp(%s);
  let %b = negative(%s);
  let %c = add(%a, %b);
  %c
})");
  ExpectProgram(FuseOps(module), R"(
def @main(%x: Tensor[(4,), float32]) {
  let %c = fn (%p0: Tensor[(4,), float32], Primitive=1, Fused="sigmoid+exp+negative+add")
             -> Tensor[(4,), float32] {
    let %s = sigmoid(%p0);
    let %a = exp(%s);
    let %b = negative(%s);
    add(%a, %b)
  }(%x);
  %c
})");
}

// %b is also passed to a global and %c goes into a tuple: both end their
// group, so only the inside of a group disappears from the chain.
TEST(FuseOps, AValueUsedAfterItsGroupIsReturnedToo) {
  ir::IRModule module = ParseTyped(R"(
def @id(%v: Tensor[(4,), float32]) -> Tensor[(4,), float32] { %v }

def @main(%x: Tensor[(4,), float32]) {
  let %a = exp(%x);
  let %b = negative(%a);
  let %c = tanh(%b);
  let %d = @id(%b);
  let %t = (%c, %d);
  %t
})");
  ExpectProgram(FuseOps(module), R"(
def @id(%v: Tensor[(4,), float32]) -> Tensor[(4,), float32] { %v }

def @main(%x: Tensor[(4,), float32]) {
  let %outputs = fn (%p0: Tensor[(4,), float32], Primitive=1, Fused="exp+negative+tanh")
                   -> (Tensor[(4,), float32], Tensor[(4,), float32]) {
    let %a = exp(%p0);
    let %inner_b = negative(%a);
    (tanh(%inner_b), %inner_b)
  }(%x);
  let %c = %outputs.0;
  let %b = %outputs.1;
  let %d = @id(%b);
  let %t = (%c, %d);
  %t
})");
}

// A value used outside the graph before the group would end (here by a call
// whose result the group reads) must exist first: it ends its group.
TEST(FuseOps, AValueUsedOutsideBeforeTheGroupEndsEndsIt) {
  ir::IRModule module = ParseTyped(R"(
def @id(%v: Tensor[(4,), float32]) -> Tensor[(4,), float32] { %v }

def @main(%x: Tensor[(4,), float32]) {
  let %a = exp(%x);
  let %b = negative(%a);
  let %d = @id(%b);
  let %c = add(%b, %d);
  %c
})");
  ExpectProgram(FuseOps(module), R"(
def @id(%v: Tensor[(4,), float32]) -> Tensor[(4,), float32] { %v }

def @main(%x: Tensor[(4,), float32]) {
  let %b = fn (%p0: Tensor[(4,), float32], Primitive=1, Fused="exp+negative")
             -> Tensor[(4,), float32] {
    let %a = exp(%p0);
    negative(%a)
  }(%x);
  let %d = @id(%b);
  let %c = fn (%p0: Tensor[(4,), float32], %p1: Tensor[(4,), float32], Primitive=1)
             -> Tensor[(4,), float32] {
    add(%p0, %p1)
  }(%b, %d);
  %c
})");
}

// TVM's rule: elementwise producers fuse into a reduction, but a reduction
// never starts a fusion, so its consumer gets a primitive of its own.
TEST(FuseOps, ElementwiseOpsFuseIntoAReductionNotOutOfIt) {
  ir::IRModule module = ParseTyped(R"(
def @main(%x: Tensor[(?, 4), float32]) {
  let %a = exp(%x);
  let %s = sum(%a, axis=[1]);
  let %n = negative(%s);
  %n
})");
  ExpectProgram(FuseOps(module), R"(
def @main(%x: Tensor[(?, 4), float32]) {
  let %s = fn (%p0: Tensor[(?, 4), float32], Primitive=1, Fused="exp+sum")
             -> Tensor[(?,), float32] {
    let %a = exp(%p0);
    sum(%a, axis=[1])
  }(%x);
  let %n = fn (%p0: Tensor[(?,), float32], Primitive=1) -> Tensor[(?,), float32] {
    negative(%p0)
  }(%s);
  %n
})");
}

// Injective ops fuse in the second phase, with their producers and consumers;
// a dense's output never goes into an injective op's group.
TEST(FuseOps, InjectiveOpsFuseAfterTheAnchors) {
  ir::IRModule module = ParseTyped(R"(
def @main(%x: Tensor[(4, 6), float32], %w: Tensor[(4, 6), float32]) {
  let %a = exp(%x);
  let %t = transpose(%a);
  let %n = negative(%t);
  let %d = nn.dense(%x, %w);
  let %r = reshape(%d, newshape=[16]);
  let %e = exp(%r);
  (%n, %e)
})");
  EXPECT_THAT(Primitives(FuseOps(module)),
              ElementsAre("exp+transpose+negative", "nn.dense", "reshape+exp"));
}

// With anchors_take_injective an anchor's group also takes the injective ops
// after it and what they feed: an LSTM cell slicing its gates out of the
// product is one group with it, returning c' too; still never a second
// anchor, nor a reduction.
TEST(FuseOps, AnAnchorTakesItsInjectiveReadersWhenAsked) {
  ir::IRModule cell = ParseTyped(R"(
def @main(%h: Tensor[(1, 4), float32], %w: Tensor[(16, 4), float32], %c: Tensor[(1, 4), float32]) {
  let %gates = nn.dense(%h, %w);
  let %si = strided_slice(%gates, begin=[0], end=[4], axes=[1]);
  let %i = sigmoid(%si);
  let %sf = strided_slice(%gates, begin=[4], end=[8], axes=[1]);
  let %f = sigmoid(%sf);
  let %sg = strided_slice(%gates, begin=[8], end=[12], axes=[1]);
  let %g = tanh(%sg);
  let %so = strided_slice(%gates, begin=[12], end=[16], axes=[1]);
  let %o = sigmoid(%so);
  let %fc = multiply(%f, %c);
  let %ig = multiply(%i, %g);
  let %c2 = add(%fc, %ig);
  let %tc = tanh(%c2);
  let %h2 = multiply(%o, %tc);
  (%h2, %c2)
})");
  const std::string cell_ops =
      "strided_slice+sigmoid+strided_slice+sigmoid+strided_slice+tanh+strided_slice+sigmoid+"
      "multiply+multiply+add+tanh+multiply";
  EXPECT_THAT(Primitives(FuseOps(cell)), ElementsAre("nn.dense", cell_ops));
  EXPECT_THAT(Primitives(FuseOps(cell, {.anchors_take_injective = true})),
              ElementsAre("nn.dense+" + cell_ops));
  ir::IRModule anchors = ParseTyped(R"(
def @main(%x: Tensor[(8, 8), float32], %w1: Tensor[(8, 8), float32], %w2: Tensor[(8, 8), float32]) {
  let %d1 = nn.dense(%x, %w1);
  let %t1 = transpose(%d1);
  let %d2 = nn.dense(%t1, %w2);
  let %t2 = transpose(%d2);
  let %s = sum(%t2, axis=[1]);
  %s
})");
  EXPECT_THAT(Primitives(FuseOps(anchors, {.anchors_take_injective = true})),
              ElementsAre("nn.dense+transpose", "nn.dense+transpose", "sum"));
}

// With anchors_take_injective an injective op whose post-dominator is in an
// anchor's group joins it too: an LSTM step's take of its input row, added
// to the product, is one kernel with the product and the cell.
TEST(FuseOps, AnAnchorTakesAnInjectiveProducerOfItsEpilogueWhenAsked) {
  ir::IRModule step = ParseTyped(R"(
def @main(%rows: Tensor[(10, 16), float32], %t: Tensor[(), int32], %h: Tensor[(1, 4), float32],
          %w: Tensor[(16, 4), float32]) {
  let %x = take(%rows, %t, axis=0);
  let %d = nn.dense(%h, %w);
  let %a = add(%d, %x);
  let %s = sigmoid(%a);
  %s
})");
  EXPECT_THAT(Primitives(FuseOps(step)), ElementsAre("take", "nn.dense+add+sigmoid"));
  EXPECT_THAT(Primitives(FuseOps(step, {.anchors_take_injective = true})),
              ElementsAre("take+nn.dense+add+sigmoid"));
}

// A data-dependent shape function (dyn.reshape, arange) or an upper-bound one
// (argwhere) would read a fused intermediate: those ops keep a primitive of
// their own, neither taking their producer nor joining their consumer.
TEST(FuseOps, DataDependentAndUpperBoundOpsStayAlone) {
  ir::IRModule module = ParseTyped(R"(
def @main(%x: Tensor[(?, 4), float32], %shape: Tensor[(2,), int64], %k: Tensor[(), float32]) {
  let %a = exp(%x);
  let %r = dyn.reshape(%a, %shape);
  let %n = negative(%r);
  let %g = greater(%n, 0f);
  let %w = argwhere(%g);
  let %stop = add(%k, 1f);
  let %range = arange(0f, %stop, 1f);
  let %m = multiply(%range, 2f);
  (%w, %m)
})");
  EXPECT_THAT(Primitives(FuseOps(module)), ElementsAre("exp", "dyn.reshape", "negative+greater",
                                                       "argwhere", "add", "arange", "multiply"));
}

// Ops with tuple arguments or results keep their own primitive, and a value
// that goes into a tuple leaves the graph.
TEST(FuseOps, TupleOpsStayAlone) {
  ir::IRModule module = ParseTyped(R"(
def @main(%x: Tensor[(4, 6), float32]) {
  let %a = exp(%x);
  let %parts = split(%a, indices_or_sections=2, axis=1);
  let %first = %parts.0;
  let %second = %parts.1;
  let %n = negative(%first);
  let %t = (%n, %second);
  let %c = concatenate(%t, axis=1);
  let %e = tanh(%c);
  %e
})");
  EXPECT_TRUE(ir::StructuralEqual(FuseOps(module), Unfused(module)));
}

TEST(FuseOps, ScalarConstantsStayInsideTensorConstantsArePassed) {
  text::ParamMap params{{"w", F32({4}, {1, 2, 3, 4})}};
  ir::IRModule module = ParseTyped(R"(
def @main(%x: Tensor[(4,), float32]) {
  let %a = add(%x, meta[relay.Constant][w]);
  let %b = multiply(%a, 2f);
  let %c = add(%b, %x);
  %c
})",
                                   &params);
  ExpectProgram(FuseOps(module), R"(
def @main(%x: Tensor[(4,), float32]) {
  let %c = fn (%p0: Tensor[(4,), float32], %p1: Tensor[(4,), float32], Primitive=1,
               Fused="add+multiply+add") -> Tensor[(4,), float32] {
    let %a = add(%p0, %p1);
    let %b = multiply(%a, 2f);
    add(%b, %p0)
  }(%x, meta[relay.Constant][w]);
  %c
})",
                &params);
}

TEST(FuseOps, AGroupHoldsAtMostMaxGroupOps) {
  ir::IRModule module = ParseTyped(R"(
def @main(%x: Tensor[(4,), float32]) {
  let %a = negative(%x);
  let %b = exp(%a);
  let %c = tanh(%b);
  let %d = sigmoid(%c);
  let %e = abs(%d);
  %e
})");
  ExpectProgram(FuseOps(module, {.max_group_ops = 2}), R"(
def @main(%x: Tensor[(4,), float32]) {
  let %b = fn (%p0: Tensor[(4,), float32], Primitive=1, Fused="negative+exp")
             -> Tensor[(4,), float32] {
    let %a = negative(%p0);
    exp(%a)
  }(%x);
  let %d = fn (%p0: Tensor[(4,), float32], Primitive=1, Fused="tanh+sigmoid")
             -> Tensor[(4,), float32] {
    let %c = tanh(%p0);
    sigmoid(%c)
  }(%b);
  let %e = fn (%p0: Tensor[(4,), float32], Primitive=1) -> Tensor[(4,), float32] {
    abs(%p0)
  }(%d);
  %e
})");
  EXPECT_THAT(Primitives(FuseOps(module, {.max_group_ops = 3})),
              ElementsAre("negative+exp+tanh", "sigmoid+abs"));
  EXPECT_THAT(ErrorOf([&] { FuseOps(module, {.max_group_ops = 0}); }),
              HasSubstr("FuseOps: max_group_ops must be at least 1, got 0"));
}

// Each branch is a chain of its own; a value used in a branch leaves the
// enclosing chain's graph, so %a below keeps its own primitive.
TEST(FuseOps, BranchesFuseOnTheirOwn) {
  ir::IRModule module = ParseTyped(R"(
def @main(%c: Tensor[(), bool], %x: Tensor[(4,), float32]) -> Tensor[(4,), float32] {
  let %a = exp(%x);
  let %b = negative(%a);
  let %r = if (%c) {
    let %t = tanh(%b);
    let %u = add(%t, 1f);
    %u
  } else {
    let %s = sigmoid(%b);
    multiply(%s, %x)
  };
  %r
})");
  ExpectProgram(FuseOps(module), R"(
def @main(%c: Tensor[(), bool], %x: Tensor[(4,), float32]) -> Tensor[(4,), float32] {
  let %b = fn (%p0: Tensor[(4,), float32], Primitive=1, Fused="exp+negative")
             -> Tensor[(4,), float32] {
    let %a = exp(%p0);
    negative(%a)
  }(%x);
  let %r = if (%c) {
    let %u = fn (%p0: Tensor[(4,), float32], Primitive=1, Fused="tanh+add")
               -> Tensor[(4,), float32] {
      let %t = tanh(%p0);
      add(%t, 1f)
    }(%b);
    %u
  } else {
    fn (%p0: Tensor[(4,), float32], %p1: Tensor[(4,), float32], Primitive=1,
        Fused="sigmoid+multiply") -> Tensor[(4,), float32] {
      let %s = sigmoid(%p0);
      multiply(%s, %p1)
    }(%b, %x)
  };
  %r
})");
  ir::IRModule escaping = ParseTyped(R"(
def @main(%c: Tensor[(), bool], %x: Tensor[(4,), float32]) -> Tensor[(4,), float32] {
  let %a = exp(%x);
  let %b = negative(%a);
  let %r = if (%c) { %a } else { %b };
  %r
})");
  // Both values are used after the group's last node: one kernel returns both.
  EXPECT_THAT(Primitives(FuseOps(escaping)), ElementsAre("exp+negative"));
}

TEST(FuseOps, IsIdempotentAndDeterministic) {
  ir::IRModule module = ParseTyped(R"(
def @main(%x: Tensor[(?, 8), float32], %w: Tensor[(8, 8), float32]) {
  let %d = nn.dense(%x, %w);
  let %a = add(%d, 1f);
  let %s = sum(%a, axis=[1]);
  let %e = exp(%s);
  let %n = negative(%e);
  (%n, %s)
})");
  ir::IRModule once = FuseOps(module);
  EXPECT_THAT(Primitives(once), ElementsAre("nn.dense+add", "sum", "exp+negative"));
  EXPECT_TRUE(ir::StructuralEqual(FuseOps(once), once));
  EXPECT_EQ(text::PrintModule(FuseOps(module)), text::PrintModule(once));
}

// The pipeline's pass "fuse" fuses unless CompileOptions::fuse_ops is off,
// and only ops that will run generated kernels.
TEST(FuseOps, ThePipelinePassFusesWhenAsked) {
  ir::IRModule module = ParseTyped("def @main(%x: Tensor[(4,), float32]) { tanh(exp(%x)) }");
  EXPECT_THAT(Primitives(backend::RunPasses(module, {.fuse_ops = false}, "fuse")),
              ElementsAre("exp", "tanh"));
  EXPECT_THAT(Primitives(backend::RunPasses(module, {}, "fuse")), ElementsAre("exp+tanh"));
  EXPECT_THAT(Primitives(backend::RunPasses(module, {.kernels = "builtin"}, "fuse")),
              ElementsAre("exp", "tanh"));
}

// ---- The normalisation pipeline on whole programs --------------------------

ir::IRModule Normalize(const ir::IRModule& module, bool fuse) {
  return FuseOps(LambdaLift(ToANormalForm(module)), {.enabled = fuse});
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
        // Primitive: its body is the kernel.
        visited_.insert(call->callee.get());
        EXPECT_TRUE(IsPrimitive(call->callee.get()));
      } else if (call->callee->kind == ir::ExprKind::kOp) {
        EXPECT_TRUE(op::RunsAsVMInstruction(*call)) << "an operator call left unwrapped";
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

// Normalised, and also folded and cleaned around it as the compiler does;
// with fusion off and on.
void ExpectNormalisedSameResult(const ir::IRModule& module, const std::vector<Ref<Object>>& args,
                                const std::string& function = "main") {
  for (bool fuse : {false, true}) {
    SCOPED_TRACE(fuse ? "fused" : "unfused");
    ir::IRModule normalised = Normalize(module, fuse);
    ExpectNormalised(normalised);
    ExpectSameResult(module, normalised, args, function);
    ir::IRModule optimised = EliminateDeadCode(Normalize(FoldConstants(module), fuse));
    ExpectNormalised(optimised);
    ExpectSameResult(module, optimised, args, function);
  }
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
  ir::IRModule module = ParseTyped(kListPrelude + R"(
def @double(%x: Tensor[(), float32]) { multiply(%x, 2f) }

def @main(%x: Tensor[(), float32]) {
  let %xs = Cons(%x, Cons(2f, Cons(3f, Nil)));
  let %ys = @map(fn (%v) { multiply(%v, %x) }, %xs);
  let %wrapped = @map(Some, @map(@double, %ys));
  let %first = match (%wrapped) {
    Cons(Some(%first), _) => %first,
    _ => -1f,
  };
  (@foldr(fn (%v, %acc) { add(%acc, %v) }, 0f, %ys), %ys, %first)
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
