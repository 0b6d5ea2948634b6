// Memory manifestation, text in and text out: each case is a program in the
// normalised form of docs/memory-dialect.md §1 and the §2 form expected after
// the pass, compared up to alpha-renaming. Every output must type-check.
// The output is not run through the evaluator: the memory dialect has no
// reference kernels, only VM instructions.
#include "nimble/compiler/transform/manifest_alloc.h"

#include <gtest/gtest.h>

#include <string>

#include "nimble/compiler/ir/structural_equal.h"
#include "nimble/compiler/text/parser.h"
#include "nimble/compiler/text/printer.h"
#include "nimble/compiler/transform/allocation_stats.h"
#include "nimble/compiler/typing/type_infer.h"
#include "nimble/vm/error.h"

namespace nimble::transform {
namespace {

ir::IRModule Typed(const std::string& text, const text::ParamMap* params = nullptr) {
  ir::IRModule module = text::ParseModule(text, "test.relay", params);
  typing::InferTypes(module);
  return module;
}

// Runs the pass on `input`; the result must type-check and the input must
// stay as it was (compared with a second parse of it).
ir::IRModule Manifest(const std::string& input, const text::ParamMap* params = nullptr) {
  const ir::IRModule module = Typed(input, params);
  ir::IRModule result = ManifestAlloc(module);
  EXPECT_NO_THROW(typing::InferTypes(result)) << text::PrintModule(result);
  EXPECT_TRUE(ir::StructuralEqual(module, Typed(input, params))) << text::PrintModule(module);
  return result;
}

void ExpectManifest(const std::string& input, const std::string& expected,
                    const text::ParamMap* params = nullptr) {
  const ir::IRModule result = Manifest(input, params);
  const ir::IRModule want = Typed(expected, params);
  EXPECT_TRUE(ir::StructuralEqual(result, want)) << "got:\n"
                                                 << text::PrintModule(result) << "expected:\n"
                                                 << text::PrintModule(want);
}

void ExpectError(const std::string& input, const std::string& message) {
  const ir::IRModule module = Typed(input);
  try {
    ManifestAlloc(module);
    ADD_FAILURE() << "expected an error containing: " << message;
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find(message), std::string::npos) << error.what();
  }
}

// docs/memory-dialect.md §2, static output.
TEST(ManifestAllocTest, StaticOutput) {
  ExpectManifest(R"(
def @main(%x: Tensor[(4, 8), float32], %w: Tensor[(8, 8), float32]) {
  let %y = fn (%p0: Tensor[(4, 8), float32], %p1: Tensor[(8, 8), float32], Primitive=1) {
    nn.dense(%p0, %p1)
  }(%x, %w);
  %y
}
)",
                 R"(
def @main(%x: Tensor[(4, 8), float32], %w: Tensor[(8, 8), float32]) {
  %0 = fn (%p0: Tensor[(4, 8), float32], %p1: Tensor[(8, 8), float32], Primitive=1) {
    nn.dense(%p0, %p1)
  };
  let %s0: Storage = memory.alloc_storage(128i64, alignment=64, device="cpu", dtype="float32");
  let %y = memory.alloc_tensor(%s0, 0i64, dtype="float32", assert_shape=[4, 8]);
  let %u0: () = memory.invoke_mut(%0, (%x, %w), (%y,));
  %y
}
)");
}

// nn.dense over `rows` rows of 8, before manifestation, and after it with
// the output's storage sized by `storage_size` (a shape register or bytes).
std::string DenseProgram(const std::string& rows) {
  return "def @main(%x: Tensor[(" + rows + R"(, 8), float32], %w: Tensor[(8, 8), float32]) {
  let %y = fn (%p0: Tensor[()" +
         rows + R"(, 8), float32], %p1: Tensor[(8, 8), float32], Primitive=1) {
    nn.dense(%p0, %p1)
  }(%x, %w);
  %y
}
)";
}
std::string ManifestedDense(const std::string& rows, const std::string& storage_size) {
  return "def @main(%x: Tensor[(" + rows + R"(, 8), float32], %w: Tensor[(8, 8), float32]) {
  %0 = fn (%p0: Tensor[()" +
         rows + R"(, 8), float32], %p1: Tensor[(8, 8), float32], Primitive=1) {
    nn.dense(%p0, %p1)
  };
  let %sh0: Tensor[(2,), int64] = shape_of(%x, dtype="int64");
  let %sh1: Tensor[(2,), int64] = shape_of(%w, dtype="int64");
  let %ss0: Storage = memory.alloc_storage(16i64, alignment=64, device="cpu", dtype="int64");
  let %os0: Tensor[(2,), int64] = memory.alloc_tensor(%ss0, 0i64, dtype="int64", assert_shape=[2]);
  let %u0: () = memory.shape_func(%0, (%sh0, %sh1), (%os0,));
  let %s1: Storage = memory.alloc_storage()" +
         storage_size + R"(, alignment=64, device="cpu", dtype="float32");
  let %y = memory.alloc_tensor(%s1, 0i64, %os0, dtype="float32", assert_shape=[-1, 8]);
  let %u1: () = memory.invoke_mut(%0, (%x, %w), (%y,));
  %y
}
)";
}

// docs/memory-dialect.md §2, dynamic output.
TEST(ManifestAllocTest, DynamicOutputRunsTheShapeFunction) {
  ExpectManifest(DenseProgram("?"), ManifestedDense("?", "%os0"));
}

// A bounded `?` (`?<=16`): the shape function still gives the tensor its
// run-time shape, but the storage is of constant size, for the bound.
TEST(ManifestAllocTest, BoundedOutputGetsStorageForItsBound) {
  ExpectManifest(DenseProgram("?<=16"), ManifestedDense("?<=16", "512i64"));
}

// A call that is a function's result rather than let-bound gets a fresh,
// annotated variable for its output.
TEST(ManifestAllocTest, CallInTailPosition) {
  ExpectManifest(R"(
def @main(%x: Tensor[(3,), int32]) {
  fn (%p0: Tensor[(3,), int32], Primitive=1) { negative(%p0) }(%x)
}
)",
                 R"(
def @main(%x: Tensor[(3,), int32]) {
  let %s: Storage = memory.alloc_storage(12i64, dtype="int32");
  let %y: Tensor[(3,), int32] = memory.alloc_tensor(%s, 0i64, dtype="int32", assert_shape=[3]);
  let %u: () = memory.invoke_mut(fn (%p0: Tensor[(3,), int32], Primitive=1) { negative(%p0) },
                                 (%x,), (%y,));
  %y
}
)");
}

// arange is data-dependent: its shape function gets the scalars themselves,
// and the op reading its dynamic result gets the result's shape.
TEST(ManifestAllocTest, DataDependentOpFeedsLaterOp) {
  ExpectManifest(R"(
def @main(%n: float32) {
  let %r = fn (%p0: float32, %p1: float32, %p2: float32, Primitive=1) {
    arange(%p0, %p1, %p2)
  }(0f, %n, 1f);
  let %y = fn (%p0: Tensor[(?,), float32], Primitive=1) { exp(%p0) }(%r);
  %y
}
)",
                 R"(
def @main(%n: float32) {
  %0 = fn (%p0: float32, %p1: float32, %p2: float32, Primitive=1) { arange(%p0, %p1, %p2) };
  let %s0: Storage = memory.alloc_storage(8i64, dtype="int64");
  let %os0: Tensor[(1,), int64] = memory.alloc_tensor(%s0, 0i64, dtype="int64", assert_shape=[1]);
  let %u0: () = memory.shape_func(%0, (0f, %n, 1f), (%os0,));
  let %s1: Storage = memory.alloc_storage(%os0, dtype="float32");
  let %r = memory.alloc_tensor(%s1, 0i64, %os0, dtype="float32", assert_shape=[-1]);
  let %u1: () = memory.invoke_mut(%0, (0f, %n, 1f), (%r,));
  %1 = fn (%p0: Tensor[(?,), float32], Primitive=1) { exp(%p0) };
  let %sh: Tensor[(1,), int64] = shape_of(%r, dtype="int64");
  let %s2: Storage = memory.alloc_storage(8i64, dtype="int64");
  let %os1: Tensor[(1,), int64] = memory.alloc_tensor(%s2, 0i64, dtype="int64", assert_shape=[1]);
  let %u2: () = memory.shape_func(%1, (%sh,), (%os1,));
  let %s3: Storage = memory.alloc_storage(%os1, dtype="float32");
  let %y = memory.alloc_tensor(%s3, 0i64, %os1, dtype="float32", assert_shape=[-1]);
  let %u3: () = memory.invoke_mut(%1, (%r,), (%y,));
  %y
}
)");
}

// argwhere is an upper-bound op: allocated at the bound, the kernel reports
// the true shape into one more output, and the result is a view.
TEST(ManifestAllocTest, UpperBoundOpIsViewedAtItsTrueShape) {
  ExpectManifest(R"(
def @main(%c: Tensor[(?, 3), bool]) {
  let %y = fn (%p0: Tensor[(?, 3), bool], Primitive=1) { argwhere(%p0) }(%c);
  %y
}
)",
                 R"(
def @main(%c: Tensor[(?, 3), bool]) {
  %0 = fn (%p0: Tensor[(?, 3), bool], Primitive=1) { argwhere(%p0) };
  let %sh: Tensor[(2,), int64] = shape_of(%c, dtype="int64");
  let %s0: Storage = memory.alloc_storage(16i64, dtype="int64");
  let %os: Tensor[(2,), int64] = memory.alloc_tensor(%s0, 0i64, dtype="int64", assert_shape=[2]);
  let %u0: () = memory.shape_func(%0, (%sh,), (%os,));
  let %s1: Storage = memory.alloc_storage(%os, dtype="int32");
  let %b: Tensor[(?, 2), int32] = memory.alloc_tensor(%s1, 0i64, %os, dtype="int32", assert_shape=[-1, 2]);
  let %s2: Storage = memory.alloc_storage(16i64, dtype="int64");
  let %ts: Tensor[(2,), int64] = memory.alloc_tensor(%s2, 0i64, dtype="int64", assert_shape=[2]);
  let %u1: () = memory.invoke_mut(%0, (%c,), (%b, %ts));
  let %y = memory.reshape_tensor(%b, %ts, assert_shape=[-1, 2]);
  %y
}
)");
}

// Even a static condition has a data-dependent count of true elements.
TEST(ManifestAllocTest, UpperBoundOpOfStaticInputStillRunsTheShapeFunction) {
  const ir::IRModule result = Manifest(R"(
def @main(%c: Tensor[(4,), bool]) {
  let %y = fn (%p0: Tensor[(4,), bool], Primitive=1) { argwhere(%p0) }(%c);
  %y
}
)");
  const AllocationStats stats = CountAllocations(result);
  EXPECT_EQ(stats.allocations, 3);  // the bound's shape, the output, its true shape
  EXPECT_EQ(stats.dynamic_allocations, 1);
  EXPECT_EQ(stats.static_bytes, 32);
}

// split returns a tuple: one allocation per output, the result is their tuple.
TEST(ManifestAllocTest, MultiOutputPrimitiveStatic) {
  ExpectManifest(R"(
def @main(%x: Tensor[(4, 6), float32]) {
  let %t = fn (%p0: Tensor[(4, 6), float32], Primitive=1) {
    split(%p0, indices_or_sections=3, axis=1)
  }(%x);
  let %a = %t.1;
  %a
}
)",
                 R"(
def @main(%x: Tensor[(4, 6), float32]) {
  let %s0: Storage = memory.alloc_storage(32i64, dtype="float32");
  let %y0: Tensor[(4, 2), float32] = memory.alloc_tensor(%s0, 0i64, dtype="float32", assert_shape=[4, 2]);
  let %s1: Storage = memory.alloc_storage(32i64, dtype="float32");
  let %y1: Tensor[(4, 2), float32] = memory.alloc_tensor(%s1, 0i64, dtype="float32", assert_shape=[4, 2]);
  let %s2: Storage = memory.alloc_storage(32i64, dtype="float32");
  let %y2: Tensor[(4, 2), float32] = memory.alloc_tensor(%s2, 0i64, dtype="float32", assert_shape=[4, 2]);
  let %u: () = memory.invoke_mut(fn (%p0: Tensor[(4, 6), float32], Primitive=1) {
    split(%p0, indices_or_sections=3, axis=1)
  }, (%x,), (%y0, %y1, %y2));
  let %t = (%y0, %y1, %y2);
  let %a = %t.1;
  %a
}
)");
}

TEST(ManifestAllocTest, MultiOutputPrimitiveDynamic) {
  ExpectManifest(R"(
def @main(%x: Tensor[(?, 4), float32]) {
  let %t = fn (%p0: Tensor[(?, 4), float32], Primitive=1) {
    split(%p0, indices_or_sections=2, axis=1)
  }(%x);
  %t
}
)",
                 R"(
def @main(%x: Tensor[(?, 4), float32]) {
  %0 = fn (%p0: Tensor[(?, 4), float32], Primitive=1) { split(%p0, indices_or_sections=2, axis=1) };
  let %sh: Tensor[(2,), int64] = shape_of(%x, dtype="int64");
  let %s0: Storage = memory.alloc_storage(16i64, dtype="int64");
  let %os0: Tensor[(2,), int64] = memory.alloc_tensor(%s0, 0i64, dtype="int64", assert_shape=[2]);
  let %s1: Storage = memory.alloc_storage(16i64, dtype="int64");
  let %os1: Tensor[(2,), int64] = memory.alloc_tensor(%s1, 0i64, dtype="int64", assert_shape=[2]);
  let %u0: () = memory.shape_func(%0, (%sh,), (%os0, %os1));
  let %s2: Storage = memory.alloc_storage(%os0, dtype="float32");
  let %y0: Tensor[(?, 2), float32] = memory.alloc_tensor(%s2, 0i64, %os0, dtype="float32", assert_shape=[-1, 2]);
  let %s3: Storage = memory.alloc_storage(%os1, dtype="float32");
  let %y1: Tensor[(?, 2), float32] = memory.alloc_tensor(%s3, 0i64, %os1, dtype="float32", assert_shape=[-1, 2]);
  let %u1: () = memory.invoke_mut(%0, (%x,), (%y0, %y1));
  let %t = (%y0, %y1);
  %t
}
)");
}

// Outputs of static type keep their constant-size storage even when another
// output of the call needs the shape function.
TEST(ManifestAllocTest, MultiOutputPrimitiveMixed) {
  ExpectManifest(R"(
def @main(%x: Tensor[(?, 4), float32]) {
  let %t = fn (%p0: Tensor[(?, 4), float32], Primitive=1) {
    split(%p0, indices_or_sections=[1], axis=0)
  }(%x);
  %t
}
)",
                 R"(
def @main(%x: Tensor[(?, 4), float32]) {
  %0 = fn (%p0: Tensor[(?, 4), float32], Primitive=1) {
    split(%p0, indices_or_sections=[1], axis=0)
  };
  let %sh: Tensor[(2,), int64] = shape_of(%x, dtype="int64");
  let %s0: Storage = memory.alloc_storage(16i64, dtype="int64");
  let %os0: Tensor[(2,), int64] = memory.alloc_tensor(%s0, 0i64, dtype="int64", assert_shape=[2]);
  let %s1: Storage = memory.alloc_storage(16i64, dtype="int64");
  let %os1: Tensor[(2,), int64] = memory.alloc_tensor(%s1, 0i64, dtype="int64", assert_shape=[2]);
  let %u0: () = memory.shape_func(%0, (%sh,), (%os0, %os1));
  let %s2: Storage = memory.alloc_storage(16i64, dtype="float32");
  let %y0: Tensor[(1, 4), float32] = memory.alloc_tensor(%s2, 0i64, dtype="float32", assert_shape=[1, 4]);
  let %s3: Storage = memory.alloc_storage(%os1, dtype="float32");
  let %y1: Tensor[(?, 4), float32] = memory.alloc_tensor(%s3, 0i64, %os1, dtype="float32", assert_shape=[-1, 4]);
  let %u1: () = memory.invoke_mut(%0, (%x,), (%y0, %y1));
  let %t = (%y0, %y1);
  %t
}
)");
}

// A tuple argument is passed whole; its shape-function inputs are the shapes
// of its fields, in order.
TEST(ManifestAllocTest, TupleArgument) {
  ExpectManifest(R"(
def @main(%a: Tensor[(?, 2), float32], %b: Tensor[(3, 2), float32]) {
  let %t = (%a, %b);
  let %y = fn (%p0: (Tensor[(?, 2), float32], Tensor[(3, 2), float32]), Primitive=1) {
    concatenate(%p0)
  }(%t);
  %y
}
)",
                 R"(
def @main(%a: Tensor[(?, 2), float32], %b: Tensor[(3, 2), float32]) {
  let %t = (%a, %b);
  %0 = fn (%p0: (Tensor[(?, 2), float32], Tensor[(3, 2), float32]), Primitive=1) {
    concatenate(%p0)
  };
  let %f0: Tensor[(?, 2), float32] = %t.0;
  let %sh0: Tensor[(2,), int64] = shape_of(%f0, dtype="int64");
  let %f1: Tensor[(3, 2), float32] = %t.1;
  let %sh1: Tensor[(2,), int64] = shape_of(%f1, dtype="int64");
  let %s0: Storage = memory.alloc_storage(16i64, dtype="int64");
  let %os: Tensor[(2,), int64] = memory.alloc_tensor(%s0, 0i64, dtype="int64", assert_shape=[2]);
  let %u0: () = memory.shape_func(%0, (%sh0, %sh1), (%os,));
  let %s1: Storage = memory.alloc_storage(%os, dtype="float32");
  let %y = memory.alloc_tensor(%s1, 0i64, %os, dtype="float32", assert_shape=[-1, 2]);
  let %u1: () = memory.invoke_mut(%0, (%t,), (%y,));
  %y
}
)");
}

// Constants (a params tensor, an inline scalar) and parameters are inputs
// like any variable.
TEST(ManifestAllocTest, ConstantsAndParametersAsInputs) {
  const text::ParamMap params = {
      {"w", TensorNode::FromVector<float>({3}, DataType::Float32(), {1, 2, 3})}};
  ExpectManifest(R"(
def @main(%x: Tensor[(?, 3), float32]) {
  let %y = fn (%p0: Tensor[(?, 3), float32], %p1: Tensor[(3,), float32], Primitive=1) {
    add(%p0, %p1)
  }(%x, meta[relay.Constant][w]);
  let %z = fn (%p0: Tensor[(3,), float32], %p1: float32, Primitive=1) {
    multiply(%p0, %p1)
  }(meta[relay.Constant][w], 2f);
  (%y, %z)
}
)",
                 R"(
def @main(%x: Tensor[(?, 3), float32]) {
  %0 = fn (%p0: Tensor[(?, 3), float32], %p1: Tensor[(3,), float32], Primitive=1) {
    add(%p0, %p1)
  };
  let %sh0: Tensor[(2,), int64] = shape_of(%x, dtype="int64");
  let %sh1: Tensor[(1,), int64] = shape_of(meta[relay.Constant][w], dtype="int64");
  let %s0: Storage = memory.alloc_storage(16i64, dtype="int64");
  let %os: Tensor[(2,), int64] = memory.alloc_tensor(%s0, 0i64, dtype="int64", assert_shape=[2]);
  let %u0: () = memory.shape_func(%0, (%sh0, %sh1), (%os,));
  let %s1: Storage = memory.alloc_storage(%os, dtype="float32");
  let %y = memory.alloc_tensor(%s1, 0i64, %os, dtype="float32", assert_shape=[-1, 3]);
  let %u1: () = memory.invoke_mut(%0, (%x, meta[relay.Constant][w]), (%y,));
  let %s2: Storage = memory.alloc_storage(12i64, dtype="float32");
  let %z = memory.alloc_tensor(%s2, 0i64, dtype="float32", assert_shape=[3]);
  let %u2: () = memory.invoke_mut(fn (%p0: Tensor[(3,), float32], %p1: float32, Primitive=1) {
    multiply(%p0, %p1)
  }, (meta[relay.Constant][w], 2f), (%z,));
  (%y, %z)
}
)",
                 &params);
}

// Each branch allocates for itself, inside the branch.
TEST(ManifestAllocTest, InsideIfBranches) {
  ExpectManifest(R"(
def @main(%c: bool, %x: Tensor[(2, 4), float32]) {
  let %r = if (%c) {
    let %y = fn (%p0: Tensor[(2, 4), float32], Primitive=1) { nn.relu(%p0) }(%x);
    %y
  } else {
    let %z = fn (%p0: Tensor[(2, 4), float32], Primitive=1) { negative(%p0) }(%x);
    %z
  };
  %r
}
)",
                 R"(
def @main(%c: bool, %x: Tensor[(2, 4), float32]) {
  let %r = if (%c) {
    let %s0: Storage = memory.alloc_storage(32i64, dtype="float32");
    let %y = memory.alloc_tensor(%s0, 0i64, dtype="float32", assert_shape=[2, 4]);
    let %u0: () = memory.invoke_mut(fn (%p0: Tensor[(2, 4), float32], Primitive=1) {
      nn.relu(%p0)
    }, (%x,), (%y,));
    %y
  } else {
    let %s1: Storage = memory.alloc_storage(32i64, dtype="float32");
    let %z = memory.alloc_tensor(%s1, 0i64, dtype="float32", assert_shape=[2, 4]);
    let %u1: () = memory.invoke_mut(fn (%p0: Tensor[(2, 4), float32], Primitive=1) {
      negative(%p0)
    }, (%x,), (%z,));
    %z
  };
  %r
}
)");
}

// Match arms and a recursive function; a primitive without inputs (zeros).
TEST(ManifestAllocTest, InsideMatchArmsOfRecursiveFunction) {
  ExpectManifest(R"(
type List[A] { Cons(A, List[A]), Nil }
def @sum(%xs: List[Tensor[(2,), float32]]) -> Tensor[(2,), float32] {
  let %r = match (%xs) {
    Cons(%h, %t) => {
      let %rest = @sum(%t);
      let %y = fn (%p0: Tensor[(2,), float32], %p1: Tensor[(2,), float32], Primitive=1) {
        add(%p0, %p1)
      }(%h, %rest);
      %y
    },
    Nil => {
      let %z = fn (Primitive=1) -> Tensor[(2,), float32] { zeros(shape=[2]) }();
      %z
    },
  };
  %r
}
)",
                 R"(
type List[A] { Cons(A, List[A]), Nil }
def @sum(%xs: List[Tensor[(2,), float32]]) -> Tensor[(2,), float32] {
  let %r = match (%xs) {
    Cons(%h, %t) => {
      let %rest = @sum(%t);
      let %s0: Storage = memory.alloc_storage(8i64, dtype="float32");
      let %y = memory.alloc_tensor(%s0, 0i64, dtype="float32", assert_shape=[2]);
      let %u0: () = memory.invoke_mut(
        fn (%p0: Tensor[(2,), float32], %p1: Tensor[(2,), float32], Primitive=1) {
          add(%p0, %p1)
        }, (%h, %rest), (%y,));
      %y
    },
    Nil => {
      let %s1: Storage = memory.alloc_storage(8i64, dtype="float32");
      let %z = memory.alloc_tensor(%s1, 0i64, dtype="float32", assert_shape=[2]);
      let %u1: () = memory.invoke_mut(fn (Primitive=1) -> Tensor[(2,), float32] {
        zeros(shape=[2])
      }, (), (%z,));
      %z
    },
  };
  %r
}
)");
}

// A loop that grows a tensor each iteration: concatenate in a recursive
// function, whose state has a dynamic first dimension.
TEST(ManifestAllocTest, LoopGrowingATensor) {
  ExpectManifest(R"(
def @grow(%i: int32, %acc: Tensor[(?, 2), float32], %row: Tensor[(1, 2), float32])
    -> Tensor[(?, 2), float32] {
  let %c = fn (%p0: int32, %p1: int32, Primitive=1) -> bool { less(%p0, %p1) }(%i, 10);
  let %r = if (%c) {
    let %t = (%acc, %row);
    let %next = fn (%p0: (Tensor[(?, 2), float32], Tensor[(1, 2), float32]), Primitive=1)
        -> Tensor[(?, 2), float32] { concatenate(%p0) }(%t);
    let %j = fn (%p0: int32, %p1: int32, Primitive=1) -> int32 { add(%p0, %p1) }(%i, 1);
    let %rec = @grow(%j, %next, %row);
    %rec
  } else {
    %acc
  };
  %r
}
def @main(%row: Tensor[(1, 2), float32]) -> Tensor[(?, 2), float32] {
  let %out = @grow(0, %row, %row);
  %out
}
)",
                 R"(
def @grow(%i: int32, %acc: Tensor[(?, 2), float32], %row: Tensor[(1, 2), float32])
    -> Tensor[(?, 2), float32] {
  let %s0: Storage = memory.alloc_storage(1i64, dtype="bool");
  let %c = memory.alloc_tensor(%s0, 0i64, dtype="bool", assert_shape=[]);
  let %u0: () = memory.invoke_mut(fn (%p0: int32, %p1: int32, Primitive=1) -> bool {
    less(%p0, %p1)
  }, (%i, 10), (%c,));
  let %r = if (%c) {
    let %t = (%acc, %row);
    %0 = fn (%p0: (Tensor[(?, 2), float32], Tensor[(1, 2), float32]), Primitive=1)
        -> Tensor[(?, 2), float32] { concatenate(%p0) };
    let %f0: Tensor[(?, 2), float32] = %t.0;
    let %sh0: Tensor[(2,), int64] = shape_of(%f0, dtype="int64");
    let %f1: Tensor[(1, 2), float32] = %t.1;
    let %sh1: Tensor[(2,), int64] = shape_of(%f1, dtype="int64");
    let %s1: Storage = memory.alloc_storage(16i64, dtype="int64");
    let %os: Tensor[(2,), int64] = memory.alloc_tensor(%s1, 0i64, dtype="int64", assert_shape=[2]);
    let %u1: () = memory.shape_func(%0, (%sh0, %sh1), (%os,));
    let %s2: Storage = memory.alloc_storage(%os, dtype="float32");
    let %next = memory.alloc_tensor(%s2, 0i64, %os, dtype="float32", assert_shape=[-1, 2]);
    let %u2: () = memory.invoke_mut(%0, (%t,), (%next,));
    let %s3: Storage = memory.alloc_storage(4i64, dtype="int32");
    let %j = memory.alloc_tensor(%s3, 0i64, dtype="int32", assert_shape=[]);
    let %u3: () = memory.invoke_mut(fn (%p0: int32, %p1: int32, Primitive=1) -> int32 {
      add(%p0, %p1)
    }, (%i, 1), (%j,));
    let %rec = @grow(%j, %next, %row);
    %rec
  } else {
    %acc
  };
  %r
}
def @main(%row: Tensor[(1, 2), float32]) -> Tensor[(?, 2), float32] {
  let %out = @grow(0, %row, %row);
  %out
}
)");
}

// A lifted closure: the inner function's body is rewritten like any other.
TEST(ManifestAllocTest, InsideClosure) {
  ExpectManifest(R"(
def @main_lambda_0(%n: float32, Closure=1) -> fn (float32) -> float32 {
  fn (%x: float32) -> float32 {
    let %y = fn (%p0: float32, %p1: float32, Primitive=1) { add(%p0, %p1) }(%x, %n);
    %y
  }
}
def @main(%a: float32, %b: float32) {
  let %f = @main_lambda_0(%a);
  let %r = %f(%b);
  %r
}
)",
                 R"(
def @main_lambda_0(%n: float32, Closure=1) -> fn (float32) -> float32 {
  fn (%x: float32) -> float32 {
    let %s: Storage = memory.alloc_storage(4i64, dtype="float32");
    let %y = memory.alloc_tensor(%s, 0i64, dtype="float32", assert_shape=[]);
    let %u: () = memory.invoke_mut(fn (%p0: float32, %p1: float32, Primitive=1) {
      add(%p0, %p1)
    }, (%x, %n), (%y,));
    %y
  }
}
def @main(%a: float32, %b: float32) {
  let %f = @main_lambda_0(%a);
  let %r = %f(%b);
  %r
}
)");
}

TEST(ManifestAllocTest, RunningAgainChangesNothing) {
  const ir::IRModule once = Manifest(R"(
def @main(%x: Tensor[(?, 8), float32], %c: Tensor[(?,), bool]) {
  let %y = fn (%p0: Tensor[(?, 8), float32], Primitive=1) { nn.relu(%p0) }(%x);
  let %z = fn (%p0: Tensor[(?,), bool], Primitive=1) { argwhere(%p0) }(%c);
  (%y, %z)
}
)");
  const ir::IRModule twice = ManifestAlloc(once);
  EXPECT_TRUE(ir::StructuralEqual(once, twice)) << text::PrintModule(twice);
}

TEST(ManifestAllocTest, CountsAllocations) {
  const ir::IRModule result = Manifest(R"(
def @main(%x: Tensor[(?, 8), float32], %w: Tensor[(8, 8), float32], %v: Tensor[(4, 8), float32]) {
  let %y = fn (%p0: Tensor[(?, 8), float32], %p1: Tensor[(8, 8), float32], Primitive=1) {
    nn.dense(%p0, %p1)
  }(%x, %w);
  let %z = fn (%p0: Tensor[(4, 8), float32], %p1: Tensor[(8, 8), float32], Primitive=1) {
    nn.dense(%p0, %p1)
  }(%v, %w);
  let %t = fn (%p0: Tensor[(4, 8), float32], Primitive=1) { split(%p0, indices_or_sections=2) }(%z);
  (%y, %t)
}
)");
  const AllocationStats stats = CountAllocations(result);
  // dense (?): its shape and its output; dense (4, 8); split: two (2, 8).
  EXPECT_EQ(stats.allocations, 5);
  EXPECT_EQ(stats.dynamic_allocations, 1);
  EXPECT_EQ(stats.static_bytes, 16 + 128 + 64 + 64);
  EXPECT_EQ(CountAllocations(Typed("def @main(%x: float32) { %x }")).allocations, 0);
}

TEST(ManifestAllocTest, DeepProgram) {
  constexpr int kDepth = 10000;
  std::string text = "def @main(%x0: Tensor[(?,), float32]) {\n";
  for (int i = 1; i <= kDepth; ++i) {
    text += "  let %x" + std::to_string(i) +
            " = fn (%p: Tensor[(?,), float32], Primitive=1) { nn.relu(%p) }(%x" +
            std::to_string(i - 1) + ");\n";
  }
  text += "  %x" + std::to_string(kDepth) + "\n}\n";
  const ir::IRModule result = Manifest(text);
  const AllocationStats stats = CountAllocations(result);
  EXPECT_EQ(stats.allocations, 2 * kDepth);
  EXPECT_EQ(stats.dynamic_allocations, kDepth);
}

TEST(ManifestAllocTest, OperatorOutsidePrimitiveIsAnError) {
  ExpectError("def @main(%x: float32) { let %y = add(%x, %x); %y }",
              "ManifestAlloc: operator 'add' at 1:35 is called outside a primitive function");
}

// A static output of more bytes than int64 holds is refused rather than
// given a wrapped-around size; a bound that large is no help and the
// storage is sized at run time instead.
TEST(ManifestAllocTest, AStaticOutputTooLargeToSizeIsAnError) {
  const auto program = [](const std::string& rows) {
    return "def @main(%x: Tensor[(" + rows + ", 4), float32]) {\n  let %y = fn (%p0: Tensor[(" +
           rows + ", 4), float32], Primitive=1) { negative(%p0) }(%x);\n  %y\n}\n";
  };
  ExpectError(program("4611686018427387904"),
              "storage for shape (4611686018427387904, 4) of float32 overflows");
  const AllocationStats stats = CountAllocations(Manifest(program("?<=4611686018427387904")));
  EXPECT_EQ(stats.dynamic_allocations, 1);
}

TEST(ManifestAllocTest, PrimitiveAsValueIsAnError) {
  ExpectError(R"(
def @main(%x: float32) {
  let %f = fn (%p0: float32, Primitive=1) { negative(%p0) };
  let %y = %f(%x);
  %y
})",
              "ManifestAlloc: primitive function at 3:12 is used as a value");
}

TEST(ManifestAllocTest, UntypedModuleIsAnError) {
  const ir::IRModule module = text::ParseModule(
      "def @main(%x: float32) { fn (%p0: float32, Primitive=1) { negative(%p0) }(%x) }", "t");
  EXPECT_THROW(
      {
        try {
          ManifestAlloc(module);
        } catch (const Error& error) {
          EXPECT_NE(std::string(error.what()).find("has no type; run InferTypes first"),
                    std::string::npos)
              << error.what();
          throw;
        }
      },
      Error);
}

}  // namespace
}  // namespace nimble::transform
