// ShareShapes on programs through the pipeline (one op per kernel, so that
// each op's shape rule shows): the shape computations left in the memory
// dialect, and the VM's results against the reference evaluator.
#include "nimble/compiler/transform/share_shapes.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "nimble/compiler/backend/pipeline.h"
#include "nimble/compiler/eval/evaluator.h"
#include "nimble/compiler/text/parser.h"
#include "nimble/compiler/text/printer.h"
#include "nimble/compiler/typing/type_infer.h"
#include "nimble/vm/adt.h"
#include "nimble/vm/vm.h"
#include "tests/error_of.h"

namespace nimble::transform {
namespace {

const backend::CompileOptions kUnfused{.fuse_ops = false, .kernels = "builtin"};

ir::IRModule Typed(const std::string& text) {
  ir::IRModule module = text::ParseModule(text, "test.relay");
  typing::InferTypes(module);
  return module;
}

// The program after the pass, printed.
std::string Shared(const ir::IRModule& module) {
  return text::PrintModule(backend::RunPasses(module, kUnfused, "share-shapes"));
}

int Count(const std::string& text, const std::string& what) {
  int count = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++count;
  return count;
}

Tensor Iota(const Shape& shape) {
  int64_t count = 1;
  for (const int64_t dim : shape) count *= dim;
  std::vector<float> values(static_cast<size_t>(count));
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 7) - 3.0f;
  return TensorNode::FromVector<float>(shape, DataType::Float32(), values);
}

// The compiled program's result equals the evaluator's.
void ExpectRunsLikeTheEvaluator(const ir::IRModule& module, const std::vector<Ref<Object>>& args) {
  vm::VirtualMachine machine(backend::Compile(module, kUnfused));
  const Tensor got = machine.Invoke("main", args).as<TensorNode>();
  const Tensor want = eval::Evaluate(module, "main", args).as<TensorNode>();
  ASSERT_TRUE(got && want);
  ASSERT_EQ(got->shape(), want->shape());
  for (int64_t i = 0; i < want->numel(); ++i) {
    EXPECT_NEAR(got->GetAsDouble(i), want->GetAsDouble(i), 1e-5) << "element " << i;
  }
}

// relu keeps its input's shape and add of two equal shapes is that shape:
// %x's shape is read once and no shape function runs.
TEST(ShareShapesTest, ShapeKeepingOpsReadTheirInputsShape) {
  const ir::IRModule module = Typed(R"(
def @main(%x: Tensor[(?, 8), float32]) {
  let %a = nn.relu(%x);
  let %b = nn.relu(%a);
  add(%a, %b)
})");
  const std::string before =
      text::PrintModule(backend::RunPasses(module, kUnfused, "forward-tuple-fields"));
  EXPECT_EQ(Count(before, "memory.shape_func("), 3) << before;
  EXPECT_EQ(Count(before, "shape_of("), 4) << before;
  const std::string after = Shared(module);
  EXPECT_EQ(Count(after, "memory.shape_func("), 0) << after;
  EXPECT_EQ(Count(after, "shape_of("), 1) << after;
  EXPECT_EQ(Count(after, "shape_of(%x"), 1) << after;
  for (const int64_t rows : {0, 1, 5}) ExpectRunsLikeTheEvaluator(module, {Iota({rows, 8})});
}

// The same shape function on the same shapes runs once; a static shape is
// read once for all constants of that shape.
TEST(ShareShapesTest, ARepeatedShapeFunctionCallRunsOnce) {
  const ir::IRModule module = Typed(R"(
def @main(%x: Tensor[(?, 8), float32], %y: Tensor[(?, 8), float32]) {
  let %a = transpose(%x);
  let %b = transpose(%x);
  let %c = transpose(%y);
  concatenate((%a, %b, %c), axis=0)
})");
  const std::string after = Shared(module);
  // %x's transpose once, %y's (another shape) once, concatenate once.
  EXPECT_EQ(Count(after, "memory.shape_func("), 3) << after;
  ExpectRunsLikeTheEvaluator(module, {Iota({3, 8}), Iota({3, 8})});
}

// Shapes are compared by their dimensions: a dense keeps its input's rows
// (its shape rule), a transpose moves a dimension (its composition says
// which), so two transposes give back their input's shape and the second
// dense repeats the first's call; the add of equal shapes copies it.
// Two aranges from the same constant start and step to different run-time
// lengths: their shape functions' constant arguments are no shape registers,
// so the calls are not numbered alike (they were, and the second range took
// the first one's length).
TEST(ShareShapesTest, DataDependentShapesWithConstantArgumentsStayApart) {
  const ir::IRModule module = Typed(R"(#[version = "0.0.5"]
def @main(%n: float32) -> (Tensor[(?,), float32], Tensor[(?,), float32]) {
  (arange(0f, multiply(%n, 2f), 1f), arange(0f, multiply(%n, 0.5f), 1f))
}
)");
  vm::VirtualMachine machine(backend::Compile(module, kUnfused));
  const Ref<Object> result =
      machine.Invoke("main", {TensorNode::Scalar<float>(DataType::Float32(), 4.0f)});
  const ADT ranges = result.as<ADTNode>();
  ASSERT_TRUE(ranges);
  EXPECT_EQ(ranges->fields()[0].as<TensorNode>()->shape(), Shape{8});
  EXPECT_EQ(ranges->fields()[1].as<TensorNode>()->shape(), Shape{2});
}

TEST(ShareShapesTest, ShapesAreComparedByTheirDimensions) {
  const ir::IRModule module = Typed(R"(
def @main(%x: Tensor[(?, 8), float32], %w: Tensor[(8, 8), float32]) {
  let %y = nn.dense(%x, %w);
  let %z = transpose(transpose(%y));
  let %v = nn.dense(%z, %w);
  add(%v, %x)
})");
  const std::string after = Shared(module);
  // The first dense and both transposes.
  EXPECT_EQ(Count(after, "memory.shape_func("), 3) << after;
  EXPECT_EQ(Count(after, "nn.dense(%p"), 2) << after;  // both kernels still run
  for (const int64_t rows : {0, 2, 7}) {
    ExpectRunsLikeTheEvaluator(module, {Iota({rows, 8}), Iota({8, 8})});
  }
}

// layer_norm's shape function checks the scale's length against the last
// dimension, which is only known at run time: the call stays and still
// fails, though its output reads as the input's shape.
TEST(ShareShapesTest, AShapeFunctionThatChecksStays) {
  const ir::IRModule module = Typed(R"(
def @main(%x: Tensor[(2, ?), float32], %g: Tensor[(4,), float32], %b: Tensor[(4,), float32]) {
  let %y = nn.layer_norm(%x, %g, %b);
  nn.relu(%y)
})");
  const std::string after = Shared(module);
  EXPECT_EQ(Count(after, "memory.shape_func("), 1) << after;
  ExpectRunsLikeTheEvaluator(module, {Iota({2, 4}), Iota({4}), Iota({4})});
  vm::VirtualMachine machine(backend::Compile(module, kUnfused));
  const std::string error = ErrorOf([&] {
    machine.Invoke("main", {Iota({2, 5}), Iota({4}), Iota({4})});
  });
  EXPECT_NE(error.find("layer_norm"), std::string::npos) << error;
}

// A shape computed in one branch is not there in the other, nor after the
// `if`: each branch computes its own, and the one before the `if` serves all.
// The `if`'s result has a shape of its own, read after it.
TEST(ShareShapesTest, ABranchKeepsItsShapesToItself) {
  const ir::IRModule module = Typed(R"(
def @main(%c: bool, %x: Tensor[(?, 8), float32]) {
  let %a = nn.relu(%x);
  let %t = if (%c) { transpose(%a) } else { nn.relu(transpose(%x)) };
  let %u = transpose(%x);
  add(%t, %u)
})");
  const std::string after = Shared(module);
  // A transpose shape function in each branch and one after the `if`; add's.
  EXPECT_EQ(Count(after, "memory.shape_func("), 4) << after;
  EXPECT_EQ(Count(after, "shape_of(%x, dtype=\"int64\")"), 1) << after;
  EXPECT_EQ(Count(after, "shape_of(%t, dtype=\"int64\")"), 1) << after;
  for (const bool c : {false, true}) {
    ExpectRunsLikeTheEvaluator(module, {TensorNode::Scalar(DataType::Bool(), c), Iota({3, 8})});
  }
}

// An int32 shape_of is the program's data, not a shape register.
TEST(ShareShapesTest, AnInt32ShapeIsNotAShapeRegister) {
  const ir::IRModule module = Typed(R"(
def @main(%x: Tensor[(?, 8), float32]) {
  let %a = nn.relu(%x);
  let %s = shape_of(%x, dtype="int32");
  let %n = cast(%s, dtype="float32");
  add(sum(%a), sum(%n))
})");
  const std::string after = Shared(module);
  EXPECT_EQ(Count(after, "shape_of(%x)"), 1) << after;  // int32, the default
  EXPECT_EQ(Count(after, "shape_of(%x, dtype=\"int64\")"), 1) << after;
  ExpectRunsLikeTheEvaluator(module, {Iota({3, 8})});
}

}  // namespace
}  // namespace nimble::transform
