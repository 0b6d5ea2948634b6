// Memory planning, text in and text out: inputs are programs in the form
// docs/memory-dialect.md §1 gives (ManifestAlloc runs first, as in the
// pipeline), expected outputs the §3 form, compared up to alpha-renaming.
// Whole programs then run on the VM with and without planning and must agree.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "nimble/compiler/backend/pipeline.h"
#include "nimble/compiler/ir/structural_equal.h"
#include "nimble/compiler/text/parser.h"
#include "nimble/compiler/text/printer.h"
#include "nimble/compiler/transform/allocation_stats.h"
#include "nimble/compiler/transform/coalesce_storage.h"
#include "nimble/compiler/transform/insert_kills.h"
#include "nimble/compiler/transform/manifest_alloc.h"
#include "nimble/compiler/typing/type_infer.h"

namespace nimble::transform {
namespace {

// One op per kernel, so that the counts are those of the paper's
// comparison (fusion's own savings are measured separately).
const backend::CompileOptions kUnfused{.fuse_ops = false};

ir::IRModule Typed(const std::string& text) {
  ir::IRModule module = text::ParseModule(text, "test.relay");
  typing::InferTypes(module);
  return module;
}

void ExpectEqual(const ir::IRModule& got, const std::string& expected) {
  const ir::IRModule want = Typed(expected);
  EXPECT_TRUE(ir::StructuralEqual(got, want)) << "got:\n"
                                              << text::PrintModule(got) << "expected:\n"
                                              << text::PrintModule(want);
}

// ManifestAlloc, then `pass`; the result must type-check, and a second run
// of `pass` must change nothing.
template <typename Pass>
ir::IRModule Planned(const std::string& input, Pass pass) {
  const ir::IRModule result = pass(ManifestAlloc(Typed(input)));
  EXPECT_NO_THROW(typing::InferTypes(result)) << text::PrintModule(result);
  EXPECT_TRUE(ir::StructuralEqual(pass(result), result)) << text::PrintModule(pass(result));
  return result;
}

// A chain of four relus: a, b and c die as the chain goes on, d is returned.
const char* const kChain = R"(
def @main(%x: Tensor[(4, 8), float32]) {
  %0 = fn (%p0: Tensor[(4, 8), float32], Primitive=1) { nn.relu(%p0) };
  let %a = %0(%x);
  let %b = %0(%a);
  let %c = %0(%b);
  let %d = %0(%c);
  %d
}
)";

// ---- InsertKills ----

TEST(InsertKillsTest, KillsEachRegisterAfterItsLastUse) {
  ExpectEqual(Planned(kChain, InsertKills), R"(
def @main(%x: Tensor[(4, 8), float32]) {
  %0 = fn (%p0: Tensor[(4, 8), float32], Primitive=1) { nn.relu(%p0) };
  let %s0: Storage = memory.alloc_storage(128i64, dtype="float32");
  let %a = memory.alloc_tensor(%s0, 0i64, dtype="float32", assert_shape=[4, 8]);
  let %k0: () = memory.kill(%s0);
  let %u0: () = memory.invoke_mut(%0, (%x,), (%a,));
  let %k1: () = memory.kill(%x);
  let %s1: Storage = memory.alloc_storage(128i64, dtype="float32");
  let %b = memory.alloc_tensor(%s1, 0i64, dtype="float32", assert_shape=[4, 8]);
  let %k2: () = memory.kill(%s1);
  let %u1: () = memory.invoke_mut(%0, (%a,), (%b,));
  let %k3: () = memory.kill(%a);
  let %s2: Storage = memory.alloc_storage(128i64, dtype="float32");
  let %c = memory.alloc_tensor(%s2, 0i64, dtype="float32", assert_shape=[4, 8]);
  let %k4: () = memory.kill(%s2);
  let %u2: () = memory.invoke_mut(%0, (%b,), (%c,));
  let %k5: () = memory.kill(%b);
  let %s3: Storage = memory.alloc_storage(128i64, dtype="float32");
  let %d = memory.alloc_tensor(%s3, 0i64, dtype="float32", assert_shape=[4, 8]);
  let %k6: () = memory.kill(%s3);
  let %u3: () = memory.invoke_mut(%0, (%c,), (%d,));
  %d
}
)");
}

// `let %r = %a` shares %a's register: it dies at the last use of either name.
TEST(InsertKillsTest, RenamedVariableLivesUntilItsLastName) {
  ExpectEqual(Planned(R"(
def @main(%x: Tensor[(4, 8), float32]) {
  %0 = fn (%p0: Tensor[(4, 8), float32], Primitive=1) { nn.relu(%p0) };
  let %a = %0(%x);
  let %r = %a;
  let %b = %0(%r);
  let %c = %0(%b);
  %c
}
)",
                      InsertKills),
              R"(
def @main(%x: Tensor[(4, 8), float32]) {
  %0 = fn (%p0: Tensor[(4, 8), float32], Primitive=1) { nn.relu(%p0) };
  let %s0: Storage = memory.alloc_storage(128i64, dtype="float32");
  let %a = memory.alloc_tensor(%s0, 0i64, dtype="float32", assert_shape=[4, 8]);
  let %k0: () = memory.kill(%s0);
  let %u0: () = memory.invoke_mut(%0, (%x,), (%a,));
  let %k1: () = memory.kill(%x);
  let %r = %a;
  let %s1: Storage = memory.alloc_storage(128i64, dtype="float32");
  let %b = memory.alloc_tensor(%s1, 0i64, dtype="float32", assert_shape=[4, 8]);
  let %k2: () = memory.kill(%s1);
  let %u1: () = memory.invoke_mut(%0, (%r,), (%b,));
  let %k3: () = memory.kill(%a);
  let %s2: Storage = memory.alloc_storage(128i64, dtype="float32");
  let %c = memory.alloc_tensor(%s2, 0i64, dtype="float32", assert_shape=[4, 8]);
  let %k4: () = memory.kill(%s2);
  let %u2: () = memory.invoke_mut(%0, (%b,), (%c,));
  %c
}
)");
}

// A branch whose value is used afterwards kills its own temporaries before
// it ends. An outer value used last in the `if` dies inside each branch when
// every branch can kill it (the condition, here, on entry); one that is a
// branch's value (%x) dies after the `if`.
TEST(InsertKillsTest, BranchNotInTailPositionKillsItsTemporaries) {
  ExpectEqual(Planned(R"(
def @main(%c: bool, %x: Tensor[(2, 4), float32]) {
  %0 = fn (%p0: Tensor[(2, 4), float32], Primitive=1) { nn.relu(%p0) };
  let %r = if (%c) {
    let %y = %0(%x);
    let %z = %0(%y);
    %z
  } else {
    %x
  };
  let %w = %0(%r);
  %w
}
)",
                      InsertKills),
              R"(
def @main(%c: bool, %x: Tensor[(2, 4), float32]) {
  %0 = fn (%p0: Tensor[(2, 4), float32], Primitive=1) { nn.relu(%p0) };
  let %r = if (%c) {
    let %kc0: () = memory.kill(%c);
    let %s0: Storage = memory.alloc_storage(32i64, dtype="float32");
    let %y = memory.alloc_tensor(%s0, 0i64, dtype="float32", assert_shape=[2, 4]);
    let %k0: () = memory.kill(%s0);
    let %u0: () = memory.invoke_mut(%0, (%x,), (%y,));
    let %s1: Storage = memory.alloc_storage(32i64, dtype="float32");
    let %z = memory.alloc_tensor(%s1, 0i64, dtype="float32", assert_shape=[2, 4]);
    let %k1: () = memory.kill(%s1);
    let %u1: () = memory.invoke_mut(%0, (%y,), (%z,));
    let %k2: () = memory.kill(%y);
    %z
  } else {
    let %kc1: () = memory.kill(%c);
    %x
  };
  let %k4: () = memory.kill(%x);
  let %s2: Storage = memory.alloc_storage(32i64, dtype="float32");
  let %w = memory.alloc_tensor(%s2, 0i64, dtype="float32", assert_shape=[2, 4]);
  let %k5: () = memory.kill(%s2);
  let %u2: () = memory.invoke_mut(%0, (%r,), (%w,));
  %w
}
)");
}

// A value an `if` computes and nothing reads dies right after the `if`, not
// inside its branches, where it does not exist yet.
TEST(InsertKillsTest, AnUnusedBranchValueDiesAfterTheBranch) {
  const std::string planned = text::PrintModule(Planned(R"(
def @main(%c: bool, %x: Tensor[(2, 4), float32]) {
  %0 = fn (%p0: Tensor[(2, 4), float32], Primitive=1) { nn.relu(%p0) };
  let %r = if (%c) {
    %0(%x)
  } else {
    %x
  };
  let %w = %0(%x);
  %w
}
)",
                                                        InsertKills));
  const size_t end_of_if = planned.find("  };");
  const size_t kill = planned.find("memory.kill(%r)");
  ASSERT_NE(kill, std::string::npos) << planned;
  EXPECT_GT(kill, end_of_if) << planned;
  EXPECT_EQ(planned.find("memory.kill(%r)", kill + 1), std::string::npos) << planned;
}

// The primitives of the recursive functions below: a counter's test and
// step, and some work on a tensor.
constexpr const char* kCounterPrimitives = R"(
  %0 = fn (%p0: int32, %p1: int32, Primitive=1) -> bool { less(%p0, %p1) };
  %1 = fn (%p0: int32, %p1: int32, Primitive=1) -> int32 { add(%p0, %p1) };
  %2 = fn (%p0: Tensor[(4, 8), float32], Primitive=1) { nn.relu(%p0) };)";

// Nothing is killed after a call in tail position (here a recursive loop),
// so it stays a tail call and the loop runs at constant call depth.
TEST(InsertKillsTest, TailCallStaysATailCall) {
  const std::string program = R"(
def @count(%i: int32, %x: Tensor[(4, 8), float32]) -> Tensor[(4, 8), float32] {)" +
                              std::string(kCounterPrimitives) + R"(
  let %c = %0(%i, 100000);
  let %r = if (%c) {
    let %y = %2(%x);
    let %j = %1(%i, 1);
    let %t = @count(%j, %y);
    %t
  } else {
    %x
  };
  %r
}
)";
  ExpectEqual(Planned(program, InsertKills), R"(
def @count(%i: int32, %x: Tensor[(4, 8), float32]) -> Tensor[(4, 8), float32] {)" +
                                                 std::string(kCounterPrimitives) + R"(
  let %s0: Storage = memory.alloc_storage(1i64, dtype="bool");
  let %c = memory.alloc_tensor(%s0, 0i64, dtype="bool", assert_shape=[]);
  let %k0: () = memory.kill(%s0);
  let %u0: () = memory.invoke_mut(%0, (%i, 100000), (%c,));
  let %r = if (%c) {
    let %s1: Storage = memory.alloc_storage(128i64, dtype="float32");
    let %y = memory.alloc_tensor(%s1, 0i64, dtype="float32", assert_shape=[4, 8]);
    let %k1: () = memory.kill(%s1);
    let %u1: () = memory.invoke_mut(%2, (%x,), (%y,));
    let %s2: Storage = memory.alloc_storage(4i64, dtype="int32");
    let %j = memory.alloc_tensor(%s2, 0i64, dtype="int32", assert_shape=[]);
    let %k2: () = memory.kill(%s2);
    let %u2: () = memory.invoke_mut(%1, (%i, 1), (%j,));
    let %t = @count(%j, %y);
    %t
  } else {
    %x
  };
  %r
}
)");
}

// A recursion that is not a tail call keeps its frame while the callee
// runs: what the branch no longer needs (the condition, the counter) dies
// before the call, inside the branch, and what the call reads last (%x, %j)
// right after it, which the VM compiler makes moves into the call. %t, read
// by the statement before the result, and the else branch's values are left
// to the frame's end: nothing calls back into this frame after them.
TEST(InsertKillsTest, RecursionKillsWhatItNoLongerNeedsBeforeTheCall) {
  ExpectEqual(Planned(R"(
def @depth(%i: int32, %x: Tensor[(4, 8), float32]) -> Tensor[(4, 8), float32] {)" +
                          std::string(kCounterPrimitives) + R"(
  let %c = %0(%i, 100);
  let %r = if (%c) {
    let %j = %1(%i, 1);
    let %t = @depth(%j, %x);
    let %y = %2(%t);
    %y
  } else {
    %x
  };
  %r
}
)",
                      InsertKills),
              R"(
def @depth(%i: int32, %x: Tensor[(4, 8), float32]) -> Tensor[(4, 8), float32] {)" +
                  std::string(kCounterPrimitives) + R"(
  let %s0: Storage = memory.alloc_storage(1i64, dtype="bool");
  let %c = memory.alloc_tensor(%s0, 0i64, dtype="bool", assert_shape=[]);
  let %k0: () = memory.kill(%s0);
  let %u0: () = memory.invoke_mut(%0, (%i, 100), (%c,));
  let %r = if (%c) {
    let %k1: () = memory.kill(%c);
    let %s1: Storage = memory.alloc_storage(4i64, dtype="int32");
    let %j = memory.alloc_tensor(%s1, 0i64, dtype="int32", assert_shape=[]);
    let %k2: () = memory.kill(%s1);
    let %u1: () = memory.invoke_mut(%1, (%i, 1), (%j,));
    let %k3: () = memory.kill(%i);
    let %t = @depth(%j, %x);
    let %k4: () = memory.kill(%x);
    let %k5: () = memory.kill(%j);
    let %s2: Storage = memory.alloc_storage(128i64, dtype="float32");
    let %y = memory.alloc_tensor(%s2, 0i64, dtype="float32", assert_shape=[4, 8]);
    let %k6: () = memory.kill(%s2);
    let %u2: () = memory.invoke_mut(%2, (%t,), (%y,));
    %y
  } else {
    %x
  };
  %r
}
)");
}

// A clause's field variables have registers of their own and die after
// their last use; the matched list dies on entry to the clause that goes on
// to call, so a list consumed as it is mapped frees each node as it goes.
// A variable naming the whole value shares its register and keeps it alive.
TEST(InsertKillsTest, ClauseFieldsAndTheMatchedValueDieInTheClause) {
  const std::string map = R"(
type List[A] {
  Cons(A, List[A]),
  Nil,
}

def @map(%f: fn (Tensor[(4,), float32]) -> Tensor[(4,), float32], %xs: List[Tensor[(4,), float32]]) -> List[Tensor[(4,), float32]] {
  match (%xs) {)";
  ExpectEqual(Planned(map + R"(
    Cons(%h, %t) => {
      let %y = %f(%h);
      let %r = @map(%f, %t);
      Cons(%y, %r)
    },
    %other => {
      let %n = @map(%f, %other);
      let %m = @map(%f, %n);
      %m
    },
  }
}
)",
                      InsertKills),
              map + R"(
    Cons(%h, %t) => {
      let %k0: () = memory.kill(%xs);
      let %y = %f(%h);
      let %k1: () = memory.kill(%h);
      let %r = @map(%f, %t);
      let %k2: () = memory.kill(%f);
      let %k3: () = memory.kill(%t);
      Cons(%y, %r)
    },
    %other => {
      let %n = @map(%f, %other);
      let %k4: () = memory.kill(%xs);
      let %m = @map(%f, %n);
      %m
    },
  }
}
)");
}

// A clause that calls nothing leaves its fields and the matched value to the
// frame's end: killing them would cost instructions and free nothing sooner.
TEST(InsertKillsTest, AClauseThatCallsNothingLeavesItsFieldsToTheFrame) {
  const std::string sum = R"(
type Pair[A] {
  MkPair(A, A),
}

def @sum(%p: Pair[Tensor[(4, 8), float32]]) -> Tensor[(4, 8), float32] {
  %0 = fn (%p0: Tensor[(4, 8), float32], %p1: Tensor[(4, 8), float32], Primitive=1) {
    add(%p0, %p1)
  };
  match (%p) {
    MkPair(%a, %b) => {)";
  ExpectEqual(Planned(sum + R"(
      let %s = %0(%a, %b);
      let %t = %0(%s, %a);
      %t
    },
  }
}
)",
                      InsertKills),
              sum + R"(
      let %s0: Storage = memory.alloc_storage(128i64, dtype="float32");
      let %s = memory.alloc_tensor(%s0, 0i64, dtype="float32", assert_shape=[4, 8]);
      let %k0: () = memory.kill(%s0);
      let %u0: () = memory.invoke_mut(%0, (%a, %b), (%s,));
      let %s1: Storage = memory.alloc_storage(128i64, dtype="float32");
      let %t = memory.alloc_tensor(%s1, 0i64, dtype="float32", assert_shape=[4, 8]);
      let %k1: () = memory.kill(%s1);
      let %u1: () = memory.invoke_mut(%0, (%s, %a), (%t,));
      %t
    },
  }
}
)");
}

TEST(InsertKillsTest, ParameterNeverUsedDiesOnEntry) {
  ExpectEqual(Planned(R"(
def @main(%x: Tensor[(4, 8), float32], %unused: Tensor[(4, 8), float32]) {
  %0 = fn (%p0: Tensor[(4, 8), float32], Primitive=1) { nn.relu(%p0) };
  let %a = %0(%x);
  %a
}
)",
                      InsertKills),
              R"(
def @main(%x: Tensor[(4, 8), float32], %unused: Tensor[(4, 8), float32]) {
  %0 = fn (%p0: Tensor[(4, 8), float32], Primitive=1) { nn.relu(%p0) };
  let %k0: () = memory.kill(%unused);
  let %s0: Storage = memory.alloc_storage(128i64, dtype="float32");
  let %a = memory.alloc_tensor(%s0, 0i64, dtype="float32", assert_shape=[4, 8]);
  let %k1: () = memory.kill(%s0);
  let %u0: () = memory.invoke_mut(%0, (%x,), (%a,));
  %a
}
)");
}

// ---- CoalesceStorage ----

// a, b and c share one region; a and c, never live together, share bytes;
// d is returned and keeps its own storage.
TEST(CoalesceStorageTest, ChainSharesOneRegion) {
  ExpectEqual(Planned(kChain, CoalesceStorage), R"(
def @main(%x: Tensor[(4, 8), float32]) {
  %0 = fn (%p0: Tensor[(4, 8), float32], Primitive=1) { nn.relu(%p0) };
  let %region: Storage = memory.alloc_storage(256i64, alignment=64, device="cpu", dtype="float32");
  let %a = memory.alloc_tensor(%region, 0i64, dtype="float32", assert_shape=[4, 8]);
  let %u0: () = memory.invoke_mut(%0, (%x,), (%a,));
  let %b = memory.alloc_tensor(%region, 128i64, dtype="float32", assert_shape=[4, 8]);
  let %u1: () = memory.invoke_mut(%0, (%a,), (%b,));
  let %c = memory.alloc_tensor(%region, 0i64, dtype="float32", assert_shape=[4, 8]);
  let %u2: () = memory.invoke_mut(%0, (%b,), (%c,));
  let %s3: Storage = memory.alloc_storage(128i64, dtype="float32");
  let %d = memory.alloc_tensor(%s3, 0i64, dtype="float32", assert_shape=[4, 8]);
  let %u3: () = memory.invoke_mut(%0, (%c,), (%d,));
  %d
}
)");
}

// %a is read again through a tuple and through a call's result after c is
// allocated, so c may not take a's bytes: every slice is distinct.
TEST(CoalesceStorageTest, AliasesThroughTuplesAndCallsExtendLifetimes) {
  for (const char* alias : {"let %t = (%a, %x); let %e = %t.0;", "let %e = @id(%a);"}) {
    const std::string program = std::string(R"(
def @id(%v: Tensor[(4, 8), float32]) { %v }
def @main(%x: Tensor[(4, 8), float32]) {
  %0 = fn (%p0: Tensor[(4, 8), float32], Primitive=1) { nn.relu(%p0) };
  %1 = fn (%p0: Tensor[(4, 8), float32], %p1: Tensor[(4, 8), float32], Primitive=1) {
    add(%p0, %p1)
  };
  let %a = %0(%x);
  )") + alias + R"(
  let %b = %0(%x);
  let %c = %0(%b);
  let %d = %1(%e, %c);
  %d
}
)";
    const ir::IRModule planned = Planned(program, CoalesceStorage);
    const std::string text = text::PrintModule(planned);
    EXPECT_NE(text.find("memory.alloc_storage(384i64"), std::string::npos) << alias << "\n" << text;
    EXPECT_NE(text.find("(%region, 256i64"), std::string::npos) << alias << "\n" << text;
  }
}

// Sized at run time from a shape register: a later buffer of provably the
// same shape (ShapeNumbering: relu keeps its input's shape) takes a dead
// one's storage; the shape functions' static outputs coalesce as usual.
TEST(CoalesceStorageTest, DynamicBuffersOfTheSameShapeReuseDeadStorage) {
  const std::string program = R"(
def @main(%x: Tensor[(?, 8), float32]) {
  %0 = fn (%p0: Tensor[(?, 8), float32], Primitive=1) { nn.relu(%p0) };
  let %a = %0(%x);
  let %b = %0(%a);
  let %c = %0(%b);
  %c
}
)";
  const AllocationStats before = CountAllocations(ManifestAlloc(Typed(program)));
  const ir::IRModule planned = Planned(program, CoalesceStorage);
  const AllocationStats after = CountAllocations(planned);
  EXPECT_EQ(before.allocations, 6);  // three shape registers, three outputs
  EXPECT_EQ(before.dynamic_allocations, 3);
  EXPECT_EQ(after.allocations, 3);  // one region of shape registers, two buffers
  EXPECT_EQ(after.dynamic_allocations, 2);
  // %c lives in %a's storage.
  const std::string text = text::PrintModule(planned);
  EXPECT_NE(text.find("%c = memory.alloc_tensor(%s, 0i64, %os2"), std::string::npos) << text;
}

// A transpose changes the shape: nothing proves %c the size of %a.
TEST(CoalesceStorageTest, DynamicBuffersOfOtherShapesKeepTheirOwn) {
  const std::string program = R"(
def @main(%x: Tensor[(?, 8), float32]) {
  let %a = fn (%p0: Tensor[(?, 8), float32], Primitive=1) { nn.relu(%p0) }(%x);
  let %b = fn (%p0: Tensor[(?, 8), float32], Primitive=1) { transpose(%p0) }(%a);
  let %c = fn (%p0: Tensor[(8, ?), float32], Primitive=1) { nn.relu(%p0) }(%b);
  %c
}
)";
  EXPECT_EQ(CountAllocations(Planned(program, CoalesceStorage)).dynamic_allocations, 3);
}

// One region per device; a single allocation is left as it is.
TEST(CoalesceStorageTest, OneRegionPerDevice) {
  ExpectEqual(Planned(R"(
def @main() {
  let %s0: Storage = memory.alloc_storage(100i64, device="cuda", dtype="float32");
  let %a = memory.alloc_tensor(%s0, 0i64, dtype="float32", assert_shape=[25]);
  let %s1: Storage = memory.alloc_storage(8i64, device="cpu", dtype="int64");
  let %b = memory.alloc_tensor(%s1, 0i64, dtype="int64", assert_shape=[1]);
  let %s2: Storage = memory.alloc_storage(40i64, alignment=128, device="cuda", dtype="int32");
  let %c = memory.alloc_tensor(%s2, 0i64, dtype="int32", assert_shape=[10]);
  let %t = (%a, %b, %c);
  let %k: () = memory.kill(%t);
  let %s3: Storage = memory.alloc_storage(4i64, device="cpu", dtype="float32");
  memory.alloc_tensor(%s3, 0i64, dtype="float32", assert_shape=[1])
}
)",
                      CoalesceStorage),
              R"(
def @main() {
  let %region: Storage = memory.alloc_storage(168i64, alignment=128, device="cuda", dtype="uint8");
  let %a = memory.alloc_tensor(%region, 0i64, dtype="float32", assert_shape=[25]);
  let %s1: Storage = memory.alloc_storage(8i64, device="cpu", dtype="int64");
  let %b = memory.alloc_tensor(%s1, 0i64, dtype="int64", assert_shape=[1]);
  let %c = memory.alloc_tensor(%region, 128i64, dtype="int32", assert_shape=[10]);
  let %t = (%a, %b, %c);
  let %k: () = memory.kill(%t);
  let %s3: Storage = memory.alloc_storage(4i64, device="cpu", dtype="float32");
  memory.alloc_tensor(%s3, 0i64, dtype="float32", assert_shape=[1])
}
)");
}

// What the scope returns (an LSTM step's h and c) shares a region of its own,
// slices side by side though %b dies before %c is made: the caller keeps
// both. The temporaries %a and %t share the other region's bytes.
TEST(CoalesceStorageTest, EscapingStorageHasARegionOfItsOwn) {
  ExpectEqual(Planned(R"(
def @main(%x: Tensor[(4, 8), float32]) {
  %0 = fn (%p0: Tensor[(4, 8), float32], Primitive=1) { nn.relu(%p0) };
  let %a = %0(%x);
  let %b = %0(%a);
  let %t = %0(%x);
  let %c = %0(%t);
  (%b, %c)
}
)",
                      CoalesceStorage),
              R"(
def @main(%x: Tensor[(4, 8), float32]) {
  %0 = fn (%p0: Tensor[(4, 8), float32], Primitive=1) { nn.relu(%p0) };
  let %region: Storage = memory.alloc_storage(128i64, alignment=64, device="cpu", dtype="float32");
  let %escaping: Storage = memory.alloc_storage(256i64, alignment=64, device="cpu", dtype="float32");
  let %a = memory.alloc_tensor(%region, 0i64, dtype="float32", assert_shape=[4, 8]);
  let %u0: () = memory.invoke_mut(%0, (%x,), (%a,));
  let %b = memory.alloc_tensor(%escaping, 0i64, dtype="float32", assert_shape=[4, 8]);
  let %u1: () = memory.invoke_mut(%0, (%a,), (%b,));
  let %t = memory.alloc_tensor(%region, 0i64, dtype="float32", assert_shape=[4, 8]);
  let %u2: () = memory.invoke_mut(%0, (%x,), (%t,));
  let %c = memory.alloc_tensor(%escaping, 128i64, dtype="float32", assert_shape=[4, 8]);
  let %u3: () = memory.invoke_mut(%0, (%t,), (%c,));
  (%b, %c)
}
)");
}

// ---- The whole pipeline on test programs ----

ir::IRModule ProgramFile(const std::string& name) {
  std::ifstream file(std::string(NIMBLE_SOURCE_DIR) + "/tests/programs/" + name + ".relay");
  std::stringstream text;
  text << file.rdbuf();
  return Typed(text.str());
}

int CountKills(const ir::IRModule& module) {
  const std::string text = text::PrintModule(module);
  int kills = 0;
  for (size_t at = text.find("memory.kill("); at != std::string::npos;
       at = text.find("memory.kill(", at + 1)) {
    ++kills;
  }
  return kills;
}

// A loop that grows a tensor each iteration: the grown accumulator goes to
// the next iteration (a tail call), so its run-time sized storage escapes and
// keeps its own allocation; the iteration's static temporaries share one
// region; nothing follows the tail call.
TEST(MemoryPlanningTest, LoopGrowingATensor) {
  const ir::IRModule module = ProgramFile("grow_tensor_loop");
  const ir::IRModule manifested = backend::RunPasses(module, kUnfused, "manifest-alloc");
  const ir::IRModule planned = backend::RunPasses(module, kUnfused);
  const AllocationStats before = CountAllocations(manifested);
  const AllocationStats after = CountAllocations(planned);
  EXPECT_EQ(before.allocations, 5);
  EXPECT_EQ(after.allocations, 2);
  EXPECT_EQ(before.dynamic_allocations, 1);
  EXPECT_EQ(after.dynamic_allocations, 1);
  EXPECT_GT(CountKills(planned), 0);
  // The recursive call is the branch's last statement: its result follows.
  const std::string text = text::PrintModule(planned);
  const size_t call = text.find("= @grow(");
  ASSERT_NE(call, std::string::npos) << text;
  const size_t next = text.find('\n', call) + 1;
  const std::string next_line = text.substr(next, text.find('\n', next) - next);
  EXPECT_EQ(next_line.find("let "), std::string::npos) << text;
}

// Dynamic shapes through static, dynamic, tuple-aliased, data-dependent and
// branching code (tests/programs/storage_reuse.relay, which the differential
// test runs on both engines).
TEST(MemoryPlanningTest, StorageReuseProgram) {
  const ir::IRModule module = ProgramFile("storage_reuse");
  const AllocationStats before =
      CountAllocations(backend::RunPasses(module, kUnfused, "manifest-alloc"));
  const ir::IRModule planned = backend::RunPasses(module, kUnfused);
  const AllocationStats after = CountAllocations(planned);
  EXPECT_EQ(before.allocations, 35);
  EXPECT_EQ(before.dynamic_allocations, 16);
  // share-shapes leaves a repeated shape function out, and its shared shape
  // registers show more buffers to be of equal size.
  EXPECT_EQ(after.allocations, 13);
  EXPECT_EQ(after.dynamic_allocations, 11);
  EXPECT_LT(after.static_bytes, before.static_bytes);
  EXPECT_GT(CountKills(planned), 20);
}

}  // namespace
}  // namespace nimble::transform
