// Tests of the VM compiler: hand-written programs in the memory dialect
// (docs/memory-dialect.md) are compiled and run in the VM, their values
// checked against the evaluator on the program before manifestation (or, for
// programs without operators, on the same program); small functions are
// checked instruction by instruction.
#include "nimble/compiler/backend/vm_compiler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "nimble/compiler/backend/pipeline.h"
#include "nimble/compiler/eval/evaluator.h"
#include "nimble/compiler/text/parser.h"
#include "nimble/compiler/typing/type_infer.h"
#include "nimble/vm/adt.h"
#include "nimble/vm/vm.h"
#include "tests/error_of.h"
#include "tests/opcode_count.h"

namespace nimble::backend {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

ir::IRModule Parse(const std::string& text, const text::ParamMap* params = nullptr) {
  ir::IRModule module = text::ParseModule(text, "test.relay", params);
  typing::InferTypes(module);
  return module;
}

// On the runtime's built-in kernels: these tests read the bytecode and the
// kernel table, which generated kernels would rename (primitive_kernels_test
// covers those).
vm::Executable Compile(const std::string& text, const text::ParamMap* params = nullptr,
                       const CompileOptions& options = {.kernels = "builtin"}) {
  return CompileToExecutable(Parse(text, params), options);
}

std::string Code(const vm::Executable& executable, const std::string& function) {
  return vm::FunctionToString(executable.functions[executable.FunctionIndex(function)]);
}

Ref<Object> RunVm(vm::Executable executable, const std::string& function,
                  const std::vector<Ref<Object>>& args) {
  vm::VirtualMachine machine(std::move(executable));
  return machine.Invoke(function, args);
}

Tensor F32(const Shape& shape, const std::vector<float>& values) {
  return TensorNode::FromVector<float>(shape, DataType::Float32(), values);
}
Tensor I32(int32_t value) {
  return TensorNode::Scalar<int32_t>(DataType::Int32(), value);
}
Tensor I64(int64_t value) {
  return TensorNode::Scalar<int64_t>(DataType::Int64(), value);
}
Tensor Bool(bool value) {
  return TensorNode::Scalar<bool>(DataType::Bool(), value);
}

// Tensors (floats to a relative 1e-5) and ADTs (tags and fields) alike.
void ExpectSameValue(const Ref<Object>& expected, const Ref<Object>& actual,
                     const std::string& path = "result") {
  ASSERT_TRUE(expected && actual) << path;
  if (const auto* tensor = dynamic_cast<const TensorNode*>(expected.get())) {
    const auto* got = dynamic_cast<const TensorNode*>(actual.get());
    ASSERT_NE(got, nullptr) << path << " should be a tensor";
    ASSERT_EQ(tensor->TypeString(), got->TypeString()) << path;
    for (int64_t i = 0; i < tensor->numel(); ++i) {
      if (tensor->dtype().is_float()) {
        const double want = tensor->GetAsDouble(i);
        EXPECT_NEAR(got->GetAsDouble(i), want, 1e-5 * std::max(1.0, std::fabs(want)))
            << path << "[" << i << "]";
      } else {
        EXPECT_EQ(got->GetAsInt64(i), tensor->GetAsInt64(i)) << path << "[" << i << "]";
      }
    }
    return;
  }
  const auto* adt = dynamic_cast<const ADTNode*>(expected.get());
  ASSERT_NE(adt, nullptr) << path << " is neither a tensor nor an ADT";
  const auto* got = dynamic_cast<const ADTNode*>(actual.get());
  ASSERT_NE(got, nullptr) << path << " should be an ADT";
  ASSERT_EQ(got->tag(), adt->tag()) << path;
  ASSERT_EQ(got->size(), adt->size()) << path;
  for (size_t i = 0; i < adt->size(); ++i) {
    ExpectSameValue(adt->field(i), got->field(i), path + "." + std::to_string(i));
  }
}

// A program without operators runs unchanged in the evaluator: both must agree.
void ExpectVmMatchesEvaluator(const std::string& text, const std::string& function,
                              const std::vector<Ref<Object>>& args,
                              const text::ParamMap* params = nullptr) {
  const ir::IRModule module = Parse(text, params);
  ExpectSameValue(eval::Evaluate(module, function, args),
                  RunVm(CompileToExecutable(module), function, args));
}

// ---- Operators through the memory dialect ----

constexpr const char* kDenseAddSource = R"(
def @main(%x: Tensor[(4, 8), float32], %b: Tensor[(8,), float32]) -> Tensor[(4, 8), float32] {
  add(nn.dense(%x, meta[relay.Constant][w]), %b)
}
)";

// After manifestation and planning: both outputs in one storage.
constexpr const char* kDenseAdd = R"(
def @main(%x: Tensor[(4, 8), float32], %b: Tensor[(8,), float32]) -> Tensor[(4, 8), float32] {
  let %s0 = memory.alloc_storage(256i64, alignment=64, device="cpu", dtype="float32");
  let %y = memory.alloc_tensor(%s0, 0i64, dtype="float32", assert_shape=[4, 8]);
  let %u0 = memory.invoke_mut(fn (%p0: Tensor[(4, 8), float32], %p1: Tensor[(8, 8), float32],
                                  Primitive=1) -> Tensor[(4, 8), float32] {
    nn.dense(%p0, %p1)
  }, (%x, meta[relay.Constant][w]), (%y,));
  let %z = memory.alloc_tensor(%s0, 128i64, dtype="float32", assert_shape=[4, 8]);
  let %u1 = memory.invoke_mut(fn (%p0: Tensor[(4, 8), float32], %p1: Tensor[(8,), float32],
                                  Primitive=1) -> Tensor[(4, 8), float32] {
    add(%p0, %p1)
  }, (%y, %b), (%z,));
  let %u2 = memory.kill(%y);
  %z
}
)";

std::vector<float> Iota(size_t count, float scale) {
  std::vector<float> values(count);
  for (size_t i = 0; i < count; ++i) values[i] = static_cast<float>(i) * scale - 1.0f;
  return values;
}

TEST(VmCompilerTest, StaticDenseAdd) {
  const text::ParamMap params = {{"w", F32({8, 8}, Iota(64, 0.03f))}};
  const vm::Executable executable = Compile(kDenseAdd, &params);
  EXPECT_EQ(Code(executable, "main"),
            "def @main($0, $1) registers 6:\n"
            "  0: $2 = alloc_storage size 256 align 64 float32 device[0]\n"
            "  1: $3 = alloc_tensor $2 offset 0 [4, 8] float32\n"
            "  2: $4 = load_const const[0]\n"
            "  3: invoke_packed kernel[0](in: $0, $4; out: $3)\n"
            "  4: $5 = alloc_tensor $2 offset 128 [4, 8] float32\n"
            "  5: invoke_packed kernel[1](in: $3, $1; out: $5)\n"
            "  6: kill_register $3\n"
            "  7: ret $5\n");
  ASSERT_EQ(executable.primitives.size(), 2u);
  EXPECT_EQ(executable.primitives[0].name, "nn.dense");
  EXPECT_EQ(executable.primitives[1].name, "add");
  EXPECT_EQ(executable.target, "intel");

  const std::vector<Ref<Object>> args = {F32({4, 8}, Iota(32, 0.1f)), F32({8}, Iota(8, 0.5f))};
  ExpectSameValue(eval::Evaluate(Parse(kDenseAddSource, &params), "main", args),
                  RunVm(executable, "main", args));
}

TEST(VmCompilerTest, DynamicConcatenateThroughItsShapeFunction) {
  const std::string source = R"(
def @main(%a: Tensor[(?, 2), float32], %b: Tensor[(?, 2), float32]) -> Tensor[(?, 2), float32] {
  concatenate((%a, %b), axis=0)
}
)";
  const std::string compiled = R"(
def @main(%a: Tensor[(?, 2), float32], %b: Tensor[(?, 2), float32]) -> Tensor[(?, 2), float32] {
  let %t = (%a, %b);
  let %sh0 = shape_of(%a, dtype="int64");
  let %sh1 = shape_of(%b, dtype="int64");
  let %ss0 = memory.alloc_storage(16i64, alignment=64, device="cpu", dtype="int64");
  let %os0 = memory.alloc_tensor(%ss0, 0i64, dtype="int64", assert_shape=[2]);
  let %u0 = memory.shape_func(fn (%p0: (Tensor[(?, 2), float32], Tensor[(?, 2), float32]),
                                  Primitive=1) -> Tensor[(?, 2), float32] {
    concatenate(%p0, axis=0)
  }, (%sh0, %sh1), (%os0,));
  let %s1 = memory.alloc_storage(%os0, alignment=64, device="cpu", dtype="float32");
  let %y = memory.alloc_tensor(%s1, 0i64, %os0, dtype="float32", assert_shape=[-1, 2]);
  let %u1 = memory.invoke_mut(fn (%p0: (Tensor[(?, 2), float32], Tensor[(?, 2), float32]),
                                  Primitive=1) -> Tensor[(?, 2), float32] {
    concatenate(%p0, axis=0)
  }, (%t,), (%y,));
  %y
}
)";
  const vm::Executable executable = Compile(compiled);
  EXPECT_EQ(Code(executable, "main"),
            "def @main($0, $1) registers 11:\n"
            "   0: $2 = alloc_adt tag 0($0, $1)\n"
            "   1: $3 = shape_of $0 int64\n"
            "   2: $4 = shape_of $1 int64\n"
            "   3: $5 = alloc_storage size 16 align 64 int64 device[0]\n"
            "   4: $6 = alloc_tensor $5 offset 0 [2] int64\n"
            "   5: invoke_packed kernel[0](in: $3, $4; out: $6)\n"
            "   6: $7 = alloc_storage size $6 align 64 float32 device[0]\n"
            "   7: $8 = alloc_tensor_reg $7 offset 0 shape $6 float32\n"
            "   8: $9 = get_field $2[0]\n"
            "   9: $10 = get_field $2[1]\n"
            "  10: invoke_packed kernel[1](in: $9, $10; out: $8)\n"
            "  11: ret $8\n");
  ASSERT_EQ(executable.primitives.size(), 2u);
  EXPECT_EQ(executable.primitives[0].name, "shape_func.concatenate");
  EXPECT_EQ(executable.primitives[1].name, "concatenate");

  for (int64_t rows : {1, 3}) {
    const std::vector<Ref<Object>> args = {F32({rows, 2}, Iota(2 * rows, 1.0f)),
                                           F32({2, 2}, {7, 8, 9, 10})};
    ExpectSameValue(eval::Evaluate(Parse(source), "main", args), RunVm(executable, "main", args));
  }
}

TEST(VmCompilerTest, DynamicSplitHasOneOutputPerSection) {
  const std::string source = R"(
def @main(%x: Tensor[(?, 2), float32]) -> (Tensor[(?, 2), float32], Tensor[(?, 2), float32]) {
  split(%x, indices_or_sections=2)
}
)";
  const std::string compiled = R"(
def @main(%x: Tensor[(?, 2), float32]) -> (Tensor[(?, 2), float32], Tensor[(?, 2), float32]) {
  let %sh = shape_of(%x, dtype="int64");
  let %ss = memory.alloc_storage(32i64, alignment=64, device="cpu", dtype="int64");
  let %os0 = memory.alloc_tensor(%ss, 0i64, dtype="int64", assert_shape=[2]);
  let %os1 = memory.alloc_tensor(%ss, 16i64, dtype="int64", assert_shape=[2]);
  let %u0 = memory.shape_func(fn (%p0: Tensor[(?, 2), float32], Primitive=1)
                                  -> (Tensor[(?, 2), float32], Tensor[(?, 2), float32]) {
    split(%p0, indices_or_sections=2)
  }, (%sh,), (%os0, %os1));
  let %s0 = memory.alloc_storage(%os0, alignment=64, device="cpu", dtype="float32");
  let %o0 = memory.alloc_tensor(%s0, 0i64, %os0, dtype="float32", assert_shape=[-1, 2]);
  let %s1 = memory.alloc_storage(%os1, alignment=64, device="cpu", dtype="float32");
  let %o1 = memory.alloc_tensor(%s1, 0i64, %os1, dtype="float32", assert_shape=[-1, 2]);
  let %u1 = memory.invoke_mut(fn (%p0: Tensor[(?, 2), float32], Primitive=1)
                                  -> (Tensor[(?, 2), float32], Tensor[(?, 2), float32]) {
    split(%p0, indices_or_sections=2)
  }, (%x,), (%o0, %o1));
  (%o0, %o1)
}
)";
  const vm::Executable executable = Compile(compiled);
  EXPECT_THAT(Code(executable, "main"),
              HasSubstr("   9: invoke_packed kernel[1](in: $0; out: $6, $8)\n"
                        "  10: $9 = alloc_adt tag 0(move $6, move $8)\n"
                        "  11: ret $9\n"));
  const std::vector<Ref<Object>> args = {F32({6, 2}, Iota(12, 1.0f))};
  ExpectSameValue(eval::Evaluate(Parse(source), "main", args), RunVm(executable, "main", args));
}

TEST(VmCompilerTest, UpperBoundArgwhereIsTrimmedByReshapeTensor) {
  const std::string source = R"(
def @main(%c: Tensor[(?, 3), bool]) -> Tensor[(?, 2), int32] {
  argwhere(%c)
}
)";
  const std::string compiled = R"(
def @main(%c: Tensor[(?, 3), bool]) -> Tensor[(?, 2), int32] {
  let %sh = shape_of(%c, dtype="int64");
  let %ss = memory.alloc_storage(32i64, alignment=64, device="cpu", dtype="int64");
  let %os = memory.alloc_tensor(%ss, 0i64, dtype="int64", assert_shape=[2]);
  let %u0 = memory.shape_func(fn (%p0: Tensor[(?, 3), bool], Primitive=1)
                                  -> Tensor[(?, 2), int32] {
    argwhere(%p0)
  }, (%sh,), (%os,));
  let %s1 = memory.alloc_storage(%os, alignment=64, device="cpu", dtype="int32");
  let %b = memory.alloc_tensor(%s1, 0i64, %os, dtype="int32", assert_shape=[-1, 2]);
  let %ts = memory.alloc_tensor(%ss, 16i64, dtype="int64", assert_shape=[2]);
  let %u1 = memory.invoke_mut(fn (%p0: Tensor[(?, 3), bool], Primitive=1)
                                  -> Tensor[(?, 2), int32] {
    argwhere(%p0)
  }, (%c,), (%b, %ts));
  memory.reshape_tensor(%b, %ts, assert_shape=[-1, 2])
}
)";
  const vm::Executable executable = Compile(compiled);
  EXPECT_THAT(Code(executable, "main"),
              HasSubstr("   7: invoke_packed kernel[1](in: $0; out: $5, $6)\n"
                        "   8: $7 = reshape_tensor $5 shape $6\n"
                        "   9: ret $7\n"));
  const Tensor condition = TensorNode::FromVector<bool>({2, 3}, DataType::Bool(),
                                                        {true, false, false, false, true, true});
  const std::vector<Ref<Object>> args = {condition};
  const Ref<Object> result = RunVm(executable, "main", args);
  EXPECT_EQ(result.as<TensorNode>()->shape(), Shape({3, 2}));
  ExpectSameValue(eval::Evaluate(Parse(source), "main", args), result);
}

// A loop as tail recursion: memory for the counter and the sum, `less` for the test.
constexpr const char* kLoop = R"(
def @loop(%i: Tensor[(), int64], %n: Tensor[(), int64], %acc: Tensor[(), int64]) -> Tensor[(), int64] {
  let %s0 = memory.alloc_storage(1i64, alignment=64, device="cpu", dtype="bool");
  let %c = memory.alloc_tensor(%s0, 0i64, dtype="bool", assert_shape=[]);
  let %u0 = memory.invoke_mut(fn (%p0: Tensor[(), int64], %p1: Tensor[(), int64], Primitive=1)
                                  -> Tensor[(), bool] {
    less(%p0, %p1)
  }, (%i, %n), (%c,));
  if (%c) {
    let %s1 = memory.alloc_storage(16i64, alignment=64, device="cpu", dtype="int64");
    let %i1 = memory.alloc_tensor(%s1, 0i64, dtype="int64", assert_shape=[]);
    let %u1 = memory.invoke_mut(fn (%p0: Tensor[(), int64], %p1: Tensor[(), int64], Primitive=1)
                                    -> Tensor[(), int64] {
      add(%p0, %p1)
    }, (%i, 1i64), (%i1,));
    let %acc1 = memory.alloc_tensor(%s1, 8i64, dtype="int64", assert_shape=[]);
    let %u2 = memory.invoke_mut(fn (%p0: Tensor[(), int64], %p1: Tensor[(), int64], Primitive=1)
                                    -> Tensor[(), int64] {
      add(%p0, %p1)
    }, (%acc, %i), (%acc1,));
    let %r = @loop(%i1, %n, %acc1);
    %r
  } else {
    %acc
  }
}

def @main(%n: Tensor[(), int64]) -> Tensor[(), int64] {
  @loop(0i64, %n, 0i64)
}
)";

TEST(VmCompilerTest, TailRecursiveLoopRunsInConstantFrames) {
  const vm::Executable executable = Compile(kLoop);
  // Identical primitives share one kernel entry; the recursive call is Invoke then Ret.
  ASSERT_EQ(executable.primitives.size(), 2u);
  EXPECT_EQ(executable.primitives[0].name, "less");
  EXPECT_EQ(executable.primitives[1].name, "add");
  EXPECT_THAT(Code(executable, "loop"),
              HasSubstr("   3: if $4 == 1 then +1 (pc 4) else +9 (pc 12)\n"));
  EXPECT_THAT(Code(executable, "loop"),
              HasSubstr("  10: $9 = invoke func[0](move $6, move $1, move $8)\n"
                        "  11: ret $9\n"
                        "  12: ret $2\n"));
  EXPECT_EQ(Code(executable, "main"),
            "def @main($0) registers 4:\n"
            "  0: $1 = load_consti 0\n"
            "  1: $2 = load_consti 0\n"
            "  2: $3 = invoke func[0](move $1, move $0, move $2)\n"
            "  3: ret $3\n");

  vm::VirtualMachine machine(executable);
  const int64_t n = 100000;
  const Ref<Object> result = machine.Invoke("main", {I64(n)});
  EXPECT_EQ(result.as<TensorNode>()->GetAsInt64(0), n * (n - 1) / 2);
  EXPECT_EQ(machine.peak_call_depth(), 1u);

  const std::string source = R"(
def @loop(%i: int64, %n: int64, %acc: int64) -> int64 {
  if (less(%i, %n)) { @loop(add(%i, 1i64), %n, add(%acc, %i)) } else { %acc }
}
def @main(%n: int64) -> int64 { @loop(0i64, %n, 0i64) }
)";
  ExpectSameValue(eval::Evaluate(Parse(source), "main", {I64(100)}),
                  machine.Invoke("main", {I64(100)}));
}

// ---- Programs without operators: the evaluator runs them as they are ----

constexpr const char* kList = R"(
type List[A] {
  Cons(A, List[A]),
  Nil,
}

def @map[A, B](%f: fn (A) -> B, %xs: List[A]) -> List[B] {
  match (%xs) {
    Cons(%h, %t) => {
      let %y = %f(%h);
      let %r = @map(%f, %t);
      Cons(%y, %r)
    },
    Nil => Nil,
  }
}

def @foldl[A, B](%f: fn (B, A) -> B, %acc: B, %xs: List[A]) -> B {
  match (%xs) {
    Cons(%h, %t) => {
      let %a = %f(%acc, %h);
      @foldl(%f, %a, %t)
    },
    Nil => %acc,
  }
}

def @snoc(%acc: List[(int32, int32)], %p: (int32, int32)) -> List[(int32, int32)] {
  Cons(%p, %acc)
}

def @main_lambda_0(%n: int32, Closure=1) -> fn (int32) -> (int32, int32) {
  fn (%x: int32) -> (int32, int32) { (%x, %n) }
}

def @main(%n: int32, %a: int32, %b: int32, %c: int32) -> List[(int32, int32)] {
  let %l0 = Cons(%c, Nil);
  let %l1 = Cons(%b, %l0);
  let %xs = Cons(%a, %l1);
  let %f = @main_lambda_0(%n);
  let %ys = @map(%f, %xs);
  @foldl(@snoc, Nil, %ys)
}
)";

TEST(VmCompilerTest, ListMapAndFoldWithClosures) {
  const std::vector<Ref<Object>> args = {I32(9), I32(1), I32(2), I32(3)};
  ExpectVmMatchesEvaluator(kList, "main", args);

  const vm::Executable executable = Compile(kList);
  // The fold's list is reversed: its head pairs the last element with the captured 9.
  const Ref<Object> result = RunVm(executable, "main", args);
  const ADTNode& head = *result.as<ADTNode>();
  ASSERT_EQ(head.tag(), 0);
  const ADTNode& pair = *head.field(0).as<ADTNode>();
  EXPECT_EQ(pair.field(0).as<TensorNode>()->GetAsInt64(0), 3);
  EXPECT_EQ(pair.field(1).as<TensorNode>()->GetAsInt64(0), 9);

  // Captured values first, then the parameter; a global as a value is a closure
  // capturing nothing; the fold's recursive call is a tail call.
  EXPECT_EQ(Code(executable, "main_lambda_0"),
            "def @main_lambda_0($0, $1) registers 3:\n"
            "  0: $2 = alloc_adt tag 0(move $1, move $0)\n"
            "  1: ret $2\n");
  EXPECT_THAT(Code(executable, "main"), HasSubstr("$8 = alloc_closure func[3]($0)\n"));
  EXPECT_THAT(Code(executable, "main"),
              HasSubstr("   6: $10 = alloc_closure func[2]()\n"
                        "   7: $11 = alloc_adt tag 1()\n"
                        "   8: $12 = invoke func[1](move $10, move $11, move $9)\n"
                        "   9: ret $12\n"));
  EXPECT_EQ(Code(executable, "foldl"),
            "def @foldl($0, $1, $2) registers 8:\n"
            "  0: $3 = get_tag $2\n"
            "  1: if $3 == 0 then +1 (pc 2) else +6 (pc 7)\n"
            "  2: $4 = get_field $2[0]\n"
            "  3: $5 = get_field $2[1]\n"
            "  4: $6 = invoke_closure $0($1, $4)\n"
            "  5: $7 = invoke func[1](move $0, move $6, move $5)\n"
            "  6: ret $7\n"
            "  7: ret $1\n");
}

TEST(VmCompilerTest, ClosuresCaptureValues) {
  const std::string program = R"(
def @triple_lambda(%a: int32, %b: int32, Closure=1) -> fn (int32) -> (int32, int32, int32) {
  fn (%x: int32) -> (int32, int32, int32) { (%a, %b, %x) }
}

def @make(%a: int32, %b: int32) -> fn (int32) -> (int32, int32, int32) {
  @triple_lambda(%a, %b)
}

def @main(%a: int32, %b: int32, %x: int32) -> ((int32, int32, int32), (int32, int32, int32)) {
  let %f = @make(%a, %b);
  let %g = @make(%x, %a);
  let %r0 = %f(%x);
  let %r1 = %g(%b);
  (%r0, %r1)
}
)";
  ExpectVmMatchesEvaluator(program, "main", {I32(1), I32(2), I32(3)});
  const vm::Executable executable = Compile(program);
  EXPECT_EQ(Code(executable, "make"),
            "def @make($0, $1) registers 3:\n"
            "  0: $2 = alloc_closure func[0](move $0, move $1)\n"
            "  1: ret $2\n");
  EXPECT_THAT(Code(executable, "main"), HasSubstr("$5 = invoke_closure $3($2)\n"));
}

// A kill directly after the instruction that reads the register last is
// folded into it as a move; one after anything else stays a kill_register.
// Before `ret`, the instruction computing the result moves all it reads.
TEST(VmCompilerTest, AKillAfterTheLastReadBecomesAMove) {
  const std::string functions = R"(
def @id(%x: int32) -> int32 {
  %x
}

def @first(%p: (int32, int32)) -> int32 {
  %p.0
}
)";
  const std::string kills = R"(
def @main(%a: int32, %b: int32, %c: int32) -> (int32, int32) {
  let %r = @id(%a);
  let %k0 = memory.kill(%a);
  let %t = (%r, %b);
  let %k1 = memory.kill(%b);
  let %k2 = memory.kill(%r);
  let %f = @first(%t);
  let %d = @id(%c);
  let %k3 = memory.kill(%t);
  (%f, %d)
}
)";
  const std::string same_without_kills = R"(
def @main(%a: int32, %b: int32, %c: int32) -> (int32, int32) {
  let %r = @id(%a);
  let %t = (%r, %b);
  let %f = @first(%t);
  let %d = @id(%c);
  (%f, %d)
}
)";
  const vm::Executable executable = Compile(functions + kills);
  EXPECT_EQ(Code(executable, "main"),
            "def @main($0, $1, $2) registers 8:\n"
            "  0: $3 = invoke func[0](move $0)\n"
            "  1: $4 = alloc_adt tag 0(move $3, move $1)\n"
            "  2: $5 = invoke func[1]($4)\n"
            "  3: $6 = invoke func[0]($2)\n"
            "  4: kill_register $4\n"
            "  5: $7 = alloc_adt tag 0(move $5, move $6)\n"
            "  6: ret $7\n");
  const std::vector<Ref<Object>> args = {I32(1), I32(2), I32(3)};
  ExpectSameValue(eval::Evaluate(Parse(functions + same_without_kills), "main", args),
                  RunVm(executable, "main", args));
}

constexpr const char* kPatterns = R"(
type List[A] {
  Cons(A, List[A]),
  Nil,
}

def @classify(%xs: List[int32], %p: (int32, int32)) -> int32 {
  let %pair = (%xs, %p);
  match (%pair) {
    (Cons(_, Cons(%b, _)), _) => %b,
    (Cons(%a, Nil), (%x, _)) => %x,
    (Nil, %q) => %q.1,
  }
}

def @main(%n: int32, %x: int32, %y: int32) -> (int32, int32, int32) {
  let %l0 = Nil;
  let %l1 = Cons(%n, %l0);
  let %l2 = Cons(%y, %l1);
  let %p = (%x, %y);
  let %r0 = @classify(%l0, %p);
  let %r1 = @classify(%l1, %p);
  let %r2 = @classify(%l2, %p);
  (%r0, %r1, %r2)
}
)";

TEST(VmCompilerTest, NestedTupleWildcardAndVarPatterns) {
  ExpectVmMatchesEvaluator(kPatterns, "main", {I32(5), I32(6), I32(7)});
  const vm::Executable executable = Compile(kPatterns);
  const Ref<Object> result = RunVm(executable, "main", {I32(5), I32(6), I32(7)});
  const ADTNode& values = *result.as<ADTNode>();
  EXPECT_EQ(values.field(0).as<TensorNode>()->GetAsInt64(0), 7);  // (Nil, %q) => %q.1
  EXPECT_EQ(values.field(1).as<TensorNode>()->GetAsInt64(0), 6);  // (Cons(%a, Nil), (%x, _))
  EXPECT_EQ(values.field(2).as<TensorNode>()->GetAsInt64(0), 5);  // second element
  // The match is exhaustive: every path ends in a clause, none in Fatal.
  EXPECT_THAT(Code(executable, "classify"), Not(HasSubstr("fatal")));
  EXPECT_TRUE(executable.messages.empty());
}

TEST(VmCompilerTest, SharedClauseBodiesAreEmittedOnce) {
  // `_ => %d` is reached both when %xs is Nil and when its tail is not Nil.
  const std::string program = R"(
type List[A] {
  Cons(A, List[A]),
  Nil,
}

def @single(%xs: List[int32], %d: int32) -> int32 {
  match (%xs) {
    Cons(%h, Nil) => %h,
    _ => %d,
  }
}
)";
  const vm::Executable executable = Compile(program);
  EXPECT_EQ(Code(executable, "single"),
            "def @single($0, $1) registers 6:\n"
            "  0: $2 = get_tag $0\n"
            "  1: if $2 == 0 then +1 (pc 2) else +7 (pc 8)\n"
            "  2: $3 = get_field $0[0]\n"
            "  3: $4 = get_field $0[1]\n"
            "  4: $5 = get_tag $4\n"
            "  5: if $5 == 1 then +1 (pc 6) else +2 (pc 7)\n"
            "  6: ret $3\n"
            "  7: ret $1\n"
            "  8: goto -1 (pc 7)\n");
  for (const char* list : {"Nil", "Cons(4, Nil)", "Cons(4, Cons(5, Nil))"}) {
    const std::string with_main = program + "def @main() -> int32 { @single(" + list + ", 9) }\n";
    ExpectVmMatchesEvaluator(with_main, "main", {});
  }
}

TEST(VmCompilerTest, MatchInValuePositionMovesIntoOneRegister) {
  // Once Cons is ruled out, Nil needs no test.
  const std::string program = R"(
type List[A] {
  Cons(A, List[A]),
  Nil,
}

def @first_or(%xs: List[int32], %d: int32) -> (int32, int32) {
  let %r = match (%xs) {
    Cons(%h, _) => %h,
    Nil => %d,
  };
  (%r, %d)
}
)";
  const vm::Executable executable = Compile(program);
  EXPECT_EQ(Code(executable, "first_or"),
            "def @first_or($0, $1) registers 6:\n"
            "  0: $3 = get_tag $0\n"
            "  1: if $3 == 0 then +1 (pc 2) else +4 (pc 5)\n"
            "  2: $4 = get_field $0[0]\n"
            "  3: $2 = move $4\n"
            "  4: goto +2 (pc 6)\n"
            "  5: $2 = move $1\n"
            "  6: $5 = alloc_adt tag 0(move $2, move $1)\n"
            "  7: ret $5\n");
  for (const char* list : {"Nil", "Cons(4, Nil)"}) {
    const std::string with_main =
        program + "def @main() -> (int32, int32) { @first_or(" + list + ", 9) }\n";
    ExpectVmMatchesEvaluator(with_main, "main", {});
  }
}

TEST(VmCompilerTest, NonExhaustiveMatchReachesFatal) {
  const std::string program = R"(
type List[A] {
  Cons(A, List[A]),
  Nil,
}

def @head(%xs: List[int32]) -> int32 {
  match? (%xs) {
    Cons(%h, _) => %h,
  }
}

def @main(%x: int32) -> (int32, int32) {
  let %l1 = Cons(%x, Nil);
  let %h1 = @head(%l1);
  let %h0 = @head(Nil);
  (%h1, %h0)
}
)";
  const vm::Executable executable = Compile(program, nullptr, {.source_name = "test.relay"});
  EXPECT_EQ(Code(executable, "head"),
            "def @head($0) registers 3:\n"
            "  0: $1 = get_tag $0\n"
            "  1: if $1 == 0 then +1 (pc 2) else +3 (pc 4)\n"
            "  2: $2 = get_field $0[0]\n"
            "  3: ret $2\n"
            "  4: fatal message[0]\n");
  ASSERT_EQ(executable.messages.size(), 1u);
  // The source map places the Fatal at the match.
  EXPECT_EQ(executable.messages[0], "non-exhaustive match in @head");
  EXPECT_THAT(ErrorOf([&] { RunVm(executable, "main", {I32(1)}); }),
              ::testing::StartsWith("test.relay:8:3: non-exhaustive match in @head\n"));
  EXPECT_THAT(ErrorOf([&] { eval::Evaluate(Parse(program), "main", {I32(1)}); }),
              HasSubstr("match"));
}

TEST(VmCompilerTest, IfMovesBothBranchesIntoOneRegister) {
  const std::string program = R"(
def @main(%c: bool, %a: int32, %b: int32) -> (int32, int32) {
  let %r = if (%c) { %a } else { %b };
  (%r, %a)
}

def @pick(%c: bool, %a: int32, %b: int32) -> int32 {
  if (%c) { %a } else { %b }
}
)";
  const vm::Executable executable = Compile(program);
  EXPECT_EQ(Code(executable, "main"),
            "def @main($0, $1, $2) registers 5:\n"
            "  0: if $0 == 1 then +1 (pc 1) else +3 (pc 3)\n"
            "  1: $3 = move $1\n"
            "  2: goto +2 (pc 4)\n"
            "  3: $3 = move $2\n"
            "  4: $4 = alloc_adt tag 0(move $3, move $1)\n"
            "  5: ret $4\n");
  // In tail position each branch returns by itself.
  EXPECT_EQ(Code(executable, "pick"),
            "def @pick($0, $1, $2) registers 3:\n"
            "  0: if $0 == 1 then +1 (pc 1) else +2 (pc 2)\n"
            "  1: ret $1\n"
            "  2: ret $2\n");
  for (bool c : {true, false}) {
    ExpectVmMatchesEvaluator(program, "main", {Bool(c), I32(1), I32(2)});
    ExpectVmMatchesEvaluator(program, "pick", {Bool(c), I32(1), I32(2)});
  }
}

// ---- Tables of the executable ----

TEST(VmCompilerTest, ConstantsAreStoredOnce) {
  // w twice is one node; v has w's bytes; u differs; 2i64 is an immediate.
  const std::string program = R"(
def @main() -> (Tensor[(2,), float32], Tensor[(2,), float32], Tensor[(2,), float32],
                Tensor[(2,), float32], int64) {
  let %a = meta[relay.Constant][w];
  let %b = meta[relay.Constant][w];
  let %c = meta[relay.Constant][v];
  let %d = meta[relay.Constant][u];
  (%a, %b, %c, %d, 2i64)
}
)";
  const text::ParamMap params = {
      {"w", F32({2}, {1, 2})}, {"v", F32({2}, {1, 2})}, {"u", F32({2}, {1, 3})}};
  const vm::Executable executable = Compile(program, &params);
  ASSERT_EQ(executable.constants.size(), 2u);
  EXPECT_EQ(Code(executable, "main"),
            "def @main() registers 6:\n"
            "  0: $0 = load_const const[0]\n"
            "  1: $1 = load_const const[0]\n"
            "  2: $2 = load_const const[0]\n"
            "  3: $3 = load_const const[1]\n"
            "  4: $4 = load_consti 2\n"
            "  5: $5 = alloc_adt tag 0(move $0, move $1, move $2, move $3, move $4)\n"
            "  6: ret $5\n");
  ExpectVmMatchesEvaluator(program, "main", {}, &params);
}

TEST(VmCompilerTest, PrimitivesAreSharedByNameAndAttributes) {
  const std::string program = R"(
def @main(%x: Tensor[(2, 3), float32]) -> (Tensor[(3,), float32], Tensor[(3,), float32],
                                            Tensor[(2,), float32]) {
  let %s = memory.alloc_storage(64i64, alignment=64, device="cpu", dtype="float32");
  let %a = memory.alloc_tensor(%s, 0i64, dtype="float32", assert_shape=[3]);
  let %b = memory.alloc_tensor(%s, 16i64, dtype="float32", assert_shape=[3]);
  let %c = memory.alloc_tensor(%s, 32i64, dtype="float32", assert_shape=[2]);
  let %u0 = memory.invoke_mut(fn (%p0: Tensor[(2, 3), float32], Primitive=1) -> Tensor[(3,), float32] {
    sum(%p0, axis=[0])
  }, (%x,), (%a,));
  let %u1 = memory.invoke_mut(fn (%p0: Tensor[(2, 3), float32], Primitive=1) -> Tensor[(3,), float32] {
    sum(%p0, axis=[0])
  }, (%x,), (%b,));
  let %u2 = memory.invoke_mut(fn (%p0: Tensor[(2, 3), float32], Primitive=1) -> Tensor[(2,), float32] {
    sum(%p0, axis=[1])
  }, (%x,), (%c,));
  (%a, %b, %c)
}
)";
  const vm::Executable executable = Compile(program);
  ASSERT_EQ(executable.primitives.size(), 2u);
  EXPECT_EQ(executable.primitives[0].name, "sum");
  EXPECT_EQ(executable.primitives[0].attrs.GetIntList("axis"), std::vector<int64_t>{0});
  EXPECT_EQ(executable.primitives[1].attrs.GetIntList("axis"), std::vector<int64_t>{1});
  const Ref<Object> result = RunVm(executable, "main", {F32({2, 3}, {1, 2, 3, 4, 5, 6})});
  const ADTNode& sums = *result.as<ADTNode>();
  EXPECT_EQ(sums.field(1).as<TensorNode>()->GetAsDouble(2), 9.0);
  EXPECT_EQ(sums.field(2).as<TensorNode>()->GetAsDouble(1), 15.0);
}

TEST(VmCompilerTest, ValidatesAndRoundTripsThroughTheFileFormat) {
  const text::ParamMap params = {{"w", F32({8, 8}, Iota(64, 0.03f))}};
  for (const vm::Executable& executable :
       {Compile(kDenseAdd, &params), Compile(kList), Compile(kLoop), Compile(kPatterns)}) {
    EXPECT_NO_THROW(executable.Validate());
    const vm::Executable loaded = vm::Executable::Load(executable.Save());
    EXPECT_EQ(vm::ExecutableToString(loaded, true), vm::ExecutableToString(executable, true));
    ASSERT_EQ(loaded.functions.size(), executable.functions.size());
    for (size_t i = 0; i < loaded.functions.size(); ++i) {
      EXPECT_EQ(loaded.functions[i], executable.functions[i]);
    }
  }
  const vm::Executable loop = vm::Executable::Load(Compile(kLoop).Save());
  EXPECT_EQ(RunVm(loop, "main", {I64(10)}).as<TensorNode>()->GetAsInt64(0), 45);
}

TEST(VmCompilerTest, DevicesTargetAndDeviceCopies) {
  const std::string program = R"(
def @main(%x: Tensor[(2,), float32]) -> (Tensor[(2,), float32], Tensor[(2,), float32]) {
  let %s = memory.alloc_storage(8i64, alignment=64, device="cuda", dtype="float32");
  let %g = memory.alloc_tensor(%s, 0i64, dtype="float32", assert_shape=[2]);
  let %xg = device_copy(%x, src_device="cpu", dst_device="cuda");
  let %wg = device_copy(meta[relay.Constant][w], src_device="cpu", dst_device="cuda");
  let %u0 = memory.invoke_mut(fn (%p0: Tensor[(2,), float32], %p1: Tensor[(2,), float32],
                                  Primitive=1) -> Tensor[(2,), float32] {
    add(%p0, %p1)
  }, (%xg, %wg), (%g,));
  let %y = device_copy(%g, src_device="cuda", dst_device="cpu");
  let %same = device_copy(%y, src_device="cpu", dst_device="cpu");
  (%y, %same)
}
)";
  const text::ParamMap params = {{"w", F32({2}, {1, 2})}};
  const vm::Executable executable = Compile(program, &params, {.target = "nvidia"});
  EXPECT_EQ(executable.target, "nvidia");
  ASSERT_EQ(executable.devices.size(), 2u);
  EXPECT_EQ(executable.devices[1], (Device{DeviceType::kCUDA, 0}));
  ASSERT_EQ(executable.constants.size(), 1u);
  EXPECT_EQ(executable.constants[0].device_index, 1);
  EXPECT_EQ(Code(executable, "main"),
            "def @main($0) registers 7:\n"
            "  0: $1 = alloc_storage size 8 align 64 float32 device[1]\n"
            "  1: $2 = alloc_tensor $1 offset 0 [2] float32\n"
            "  2: $3 = device_copy $0 device[0] -> device[1]\n"
            "  3: $4 = load_const const[0]\n"
            "  4: invoke_packed kernel[0](in: $3, $4; out: $2)\n"
            "  5: $5 = device_copy $2 device[1] -> device[0]\n"
            "  6: $6 = alloc_adt tag 0($5, $5)\n"
            "  7: ret $6\n");
  EXPECT_THAT(ErrorOf([&] { Compile(program, &params); }),
              HasSubstr("device \"cuda\" needs target nvidia, not intel"));
}

// A loop's counter, bound and test are Scalar and ShapeOf instructions: no
// kernel and no allocation.
TEST(VmCompilerTest, ScalarControlArithmeticIsInstructions) {
  const vm::Executable executable = Compile(R"(
def @count(%x: Tensor[(?, 3), float32], %i: Tensor[(), int32]) -> Tensor[(), int32] {
  let %shape = shape_of(%x, dtype="int32");
  let %rows = take(%shape, 0);
  let %more = less(%i, %rows);
  if (%more) {
    let %next = add(%i, 1);
    @count(%x, %next)
  } else {
    %i
  }
}
def @main(%x: Tensor[(?, 3), float32]) -> Tensor[(), int32] { @count(%x, 0) }
)");
  EXPECT_TRUE(executable.primitives.empty());
  EXPECT_THAT(Code(executable, "count"), HasSubstr("  0: $2 = shape_of $0 int32\n"
                                                   "  1: $3 = scalar take.clip $2, 0 int32\n"
                                                   "  2: $4 = scalar less $1, $3 int32\n"));
  EXPECT_THAT(Code(executable, "count"), HasSubstr("= scalar add $1, 1 int32\n"));
  const Ref<Object> rows = RunVm(executable, "main", {F32({5, 3}, std::vector<float>(15))});
  EXPECT_EQ(rows.as<TensorNode>()->GetAsInt64(0), 5);
}

TEST(VmCompilerTest, RejectsProgramsOutsideTheMemoryDialect) {
  EXPECT_THAT(ErrorOf([&] { Compile("def @main(%x: float32) -> float32 {\n  add(%x, %x)\n}\n"); }),
              HasSubstr("2:3: operator add called outside a primitive function"));
  EXPECT_THAT(ErrorOf([&] {
                Compile("def @main(%x: float32) -> fn () -> float32 {\n  fn () { %x }\n}\n");
              }),
              HasSubstr("2:3: nested function literal"));
  EXPECT_THAT(ErrorOf([&] {
                Compile("def @main(%x: float32) -> float32 { %x }", nullptr, {.target = "tpu"});
              }),
              HasSubstr("unknown target 'tpu' (expected intel, arm or nvidia)"));
  EXPECT_THAT(ErrorOf([&] {
                Compile(R"(def @main() -> Storage {
  memory.alloc_storage(8i64, device="gpu")
})");
              }),
              HasSubstr("2:3: unknown device \"gpu\" (expected \"cpu\" or \"cuda\")"));
}

TEST(VmCompilerTest, DeepLetChainsCompile) {
  std::string program = "def @main(%x: int32) -> int32 {\n";
  for (int i = 0; i < 10000; ++i) program += "  let %v" + std::to_string(i) + " = (%x,);\n";
  program += "  %x\n}\n";
  const vm::Executable executable = Compile(program);
  EXPECT_EQ(executable.functions[0].instructions.size(), 10001u);
  EXPECT_EQ(RunVm(executable, "main", {I32(4)}).as<TensorNode>()->GetAsInt64(0), 4);
}

// Each if in the else branch of the one before, through every pass: those
// that ask each scope for its free variables, liveness and calls must not
// walk the scopes nested in it again (bench/compile_depth_bench.cc times it).
TEST(VmCompilerTest, DeepNestedIfsCompile) {
  constexpr int kDepth = 3000;
  std::string program = "def @main(%x: float32) -> float32 {\n";
  for (int i = 0; i < kDepth; ++i) {
    program += "if (less(%x, " + std::to_string(i) + "f)) { add(%x, " + std::to_string(i) +
               "f) } else {\n";
  }
  program += "%x\n" + std::string(kDepth, '}') + "\n}\n";
  const vm::Executable executable = backend::Compile(Parse(program), {.kernels = "builtin"});
  EXPECT_EQ(RunVm(executable, "main", {F32({}, {2.f})}).as<TensorNode>()->GetAsInt64(0), 5);
  EXPECT_EQ(RunVm(executable, "main", {F32({}, {5000.f})}).as<TensorNode>()->GetAsInt64(0), 5000);
}

// ---- Signatures and source positions ----

TEST(VmCompilerTest, SignaturesComeFromParameterTypes) {
  const vm::Executable executable = Compile(R"(
type List[A] {
  Cons(A, List[A]),
  Nil,
}

def @main(%x: Tensor[(?, 2), float32], %n: int32,
          %p: (Tensor[(3,), int64], List[float32])) -> Tensor[(?, 2), float32] {
  %x
}

def @untyped(%c) {
  if (%c) { 1f } else { 2f }
}

def @apply(%f: fn (float32) -> float32, %v: float32) -> float32 {
  %f(%v)
}
)");
  EXPECT_EQ(vm::SignatureToString(executable.functions[executable.FunctionIndex("main")]),
            "@main(%x: Tensor[(?, 2), float32], %n: Tensor[(), int32], %p: (Tensor[(3,), int64], "
            "List[Tensor[(), float32]]))");
  // An unannotated parameter gets its inferred type.
  EXPECT_EQ(vm::SignatureToString(executable.functions[executable.FunctionIndex("untyped")]),
            "@untyped(%c: Tensor[(), bool])");
  const vm::VMFunction& apply = executable.functions[executable.FunctionIndex("apply")];
  ASSERT_EQ(apply.params.size(), 2u);
  EXPECT_EQ(apply.params[0].type.kind, vm::ParamType::Kind::kOther);
  EXPECT_EQ(apply.params[1].type, vm::ParamType::Tensor(DataType::Float32(), {}));

  EXPECT_THAT(ErrorOf([&] { RunVm(executable, "untyped", {I32(1)}); }),
              HasSubstr("@untyped: argument 0 (%c): expected Tensor[(), bool], got Tensor[(), "
                        "int32]"));
  EXPECT_THAT(ErrorOf([&] {
                RunVm(executable, "main", {F32({1, 3}, {1, 2, 3}), I32(1), I32(1)});
              }),
              HasSubstr("@main: argument 0 (%x): expected Tensor[(?, 2), float32], got "
                        "Tensor[(1, 3), float32]"));
}

// A bounded `?` through the whole pipeline: every intermediate's storage is
// sized for the bound, so memory planning leaves one region and the
// output's storage, executed once per call whatever the length; results
// match the unbounded program's; a length past the bound is refused at
// entry, by the signature.
TEST(VmCompilerTest, BoundedDimsAllocateOnceForTheBound) {
  const auto program = [](const std::string& rows) {
    return "def @main(%x: Tensor[(" + rows +
           ", 4), float32], %w: Tensor[(3, 4), float32]) {\n"
           "  let %y = nn.relu(nn.dense(%x, %w));\n"
           "  let %z = reshape(multiply(%y, 2f), newshape=[-1]);\n"
           "  add(%z, 1f)\n"
           "}\n";
  };
  const vm::Executable bounded = backend::Compile(Parse(program("?<=8")), {.kernels = "builtin"});
  const vm::Executable unbounded = backend::Compile(Parse(program("?")), {.kernels = "builtin"});
  const auto storage_allocations = [](const vm::Executable& executable) {
    return OpcodeCount(executable, "main", vm::Opcode::kAllocStorage);
  };
  EXPECT_EQ(storage_allocations(bounded), 2);
  EXPECT_GT(storage_allocations(unbounded), 2);
  EXPECT_EQ(vm::SignatureToString(bounded.functions[bounded.FunctionIndex("main")]),
            "@main(%x: Tensor[(?<=8, 4), float32], %w: Tensor[(3, 4), float32])");
  const Tensor w = F32({3, 4}, {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, -1, 1});
  for (int64_t rows : {0, 1, 5, 8}) {
    std::vector<float> values(static_cast<size_t>(rows * 4));
    for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 7) - 2.5f;
    const Tensor x = F32({rows, 4}, values);
    ExpectSameValue(RunVm(unbounded, "main", {x, w}), RunVm(bounded, "main", {x, w}),
                    "rows " + std::to_string(rows));
  }
  EXPECT_EQ(ErrorOf([&] {
              RunVm(bounded, "main", {F32({9, 4}, std::vector<float>(36)), w});
            }),
            "@main: argument 0 (%x): expected Tensor[(?<=8, 4), float32], got Tensor[(9, 4), "
            "float32]");
}

// The whole pipeline: the allocations, the shape function and the kernel
// that implement an operator call all carry its position.
TEST(VmCompilerTest, InstructionsCarryThePositionOfTheirCall) {
  const std::string program = R"(
def @main(%x: Tensor[(?, 2), float32], %y: Tensor[(?, 2), float32]) {
  let %z = multiply(%x, 2f);
  add(%z, %y)
}
)";
  const vm::Executable executable =
      backend::Compile(Parse(program), {.source_name = "prog.relay", .kernels = "builtin"});
  EXPECT_EQ(executable.source_name, "prog.relay");
  const vm::VMFunction& main = executable.functions[executable.FunctionIndex("main")];
  ASSERT_EQ(main.positions.size(), main.instructions.size());
  std::vector<std::string> kernel_positions;
  for (size_t pc = 0; pc < main.instructions.size(); ++pc) {
    const vm::Instruction& instruction = main.instructions[pc];
    // Returns and kills come from no call; a storage of constant size may be
    // shared by several calls' tensors (coalesce-storage).
    if (instruction.op == vm::Opcode::kRet || instruction.op == vm::Opcode::kKillRegister ||
        (instruction.op == vm::Opcode::kAllocStorage && instruction.src == vm::kNoRegister)) {
      continue;
    }
    EXPECT_TRUE(main.positions[pc].valid())
        << "pc " << pc << ": " << vm::InstructionToString(instruction);
    if (instruction.op == vm::Opcode::kInvokePacked) {
      kernel_positions.push_back(main.positions[pc].ToString());
    }
  }
  // Shape function and kernel of multiply, then of add.
  EXPECT_EQ(kernel_positions, (std::vector<std::string>{"3:12", "3:12", "4:3", "4:3"}));
  EXPECT_THAT(vm::ExecutableToString(executable, false),
              HasSubstr("invoke_packed kernel[3](in: $8, $1; out: $13)  ; 4:3\n"));

  const std::string error = ErrorOf([&] {
    RunVm(executable, "main", {F32({3, 2}, std::vector<float>(6)), F32({2, 2}, {1, 2, 3, 4})});
  });
  EXPECT_THAT(error, ::testing::StartsWith("prog.relay:4:3: "));
  EXPECT_THAT(error, HasSubstr("at @main pc "));
}

}  // namespace
}  // namespace nimble::backend
