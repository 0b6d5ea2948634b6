// adt.tree_schedule: its type, the checks on its attributes, its text form,
// MakeTreeScheduleCall, and a program that returns a tree's schedule run on
// the VM (TreeSchedule) against the expected tables and the reference
// evaluator, with constant folding leaving the call alone.
#include "nimble/compiler/op/tree_schedule.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "nimble/compiler/backend/pipeline.h"
#include "nimble/compiler/eval/evaluator.h"
#include "nimble/compiler/ir/structural_equal.h"
#include "nimble/compiler/text/parser.h"
#include "nimble/compiler/text/printer.h"
#include "nimble/compiler/transform/fold_constant.h"
#include "nimble/compiler/typing/type_infer.h"
#include "nimble/vm/adt.h"
#include "nimble/vm/vm.h"
#include "tests/error_of.h"
#include "tests/opcode_count.h"
#include "tests/vm/tree_schedule_example.h"

namespace nimble::op {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using namespace tree_schedule_example;

const std::string kTreeType = R"(
type Tree {
  Leaf(Tensor[(), int32]),
  Node(Tree, Tree),
}
)";

// @main returns the schedule of its tree with `attrs` (the call's text).
std::string ScheduleProgram(const std::string& attrs) {
  return kTreeType + "def @main(%tree: Tree) {\n  adt.tree_schedule(%tree, " + attrs + ")\n}\n";
}

const std::string kLeafRows =
    "max_children=2, payload_tags=[0], payload_fields=[0], payload_ranks=[0], "
    "payload_shapes=[], payload_dtypes=\"int32\"";

ir::IRModule ParseTyped(const std::string& text) {
  ir::IRModule module = text::ParseModule(text, "test.relay");
  typing::InferTypes(module);
  return module;
}

std::string ResultType(const std::string& text) {
  return ir::TypeToString(ParseTyped(text)->Lookup("main")->body->checked_type);
}

TEST(TreeScheduleOp, TypeIsATupleOfTables) {
  EXPECT_EQ(ResultType(ScheduleProgram(kLeafRows)),
            "(Tensor[(?, 4), int32], Tensor[(?, 2), int32], Tensor[(?,), int32])");
  EXPECT_EQ(ResultType(ScheduleProgram(
                "max_children=0, payload_tags=[1, 0], payload_fields=[0, 2], "
                "payload_ranks=[2, 0], payload_shapes=[1, 300], payload_dtypes=\"float32,int64\"")),
            "(Tensor[(?, 4), int32], Tensor[(?, 0), int32], Tensor[(?, 1, 300), float32], "
            "Tensor[(?,), int64])");
  // No payloads: the attributes but max_children default to empty.
  EXPECT_EQ(ResultType(ScheduleProgram("max_children=2")),
            "(Tensor[(?, 4), int32], Tensor[(?, 2), int32])");
}

TEST(TreeScheduleOp, RefusesATensorAndInconsistentAttributes) {
  EXPECT_THAT(
      ErrorOf([] {
        ParseTyped("def @main(%x: Tensor[(), int32]) { adt.tree_schedule(%x, " + kLeafRows + ") }");
      }),
      HasSubstr("adt.tree_schedule takes a value of an ADT, got Tensor[(), int32]"));
  const auto error = [](const std::string& attrs) {
    return ErrorOf([&] { ParseTyped(ScheduleProgram(attrs)); });
  };
  EXPECT_THAT(error("payload_tags=[0]"), HasSubstr("max_children"));
  EXPECT_THAT(error("max_children=2, payload_tags=[0], payload_fields=[0], payload_ranks=[0], "
                    "payload_dtypes=\"int32,float32\""),
              HasSubstr("must name as many payloads, got 1, 1, 1 and 2"));
  EXPECT_THAT(error("max_children=2, payload_tags=[0], payload_fields=[0], payload_ranks=[2], "
                    "payload_shapes=[3], payload_dtypes=\"int32\""),
              HasSubstr("payload_ranks need 2 dims of payload_shapes, which has 1"));
  EXPECT_THAT(error("max_children=2, payload_tags=[0], payload_fields=[0], payload_ranks=[0], "
                    "payload_shapes=[3], payload_dtypes=\"int32\""),
              HasSubstr("payload_shapes has 1 dims, the ranks 0"));
  EXPECT_THAT(error("max_children=2, payload_tags=[0], payload_fields=[0], payload_ranks=[1], "
                    "payload_shapes=[-2], payload_dtypes=\"int32\""),
              HasSubstr("dimension is negative"));
  EXPECT_THAT(error("max_children=-1"), HasSubstr("max_children must be in [0, 2^31)"));
  EXPECT_THAT(error("max_children=2, payload_tags=[0], payload_fields=[0], payload_ranks=[0], "
                    "payload_dtypes=\"int33\""),
              HasSubstr("int33"));
}

TEST(TreeScheduleOp, PrintsAndParsesBack) {
  const ir::IRModule module = ParseTyped(ScheduleProgram(kLeafRows));
  const std::string printed = text::PrintModule(module);
  // Attributes at their defaults (here payload_shapes=[]) are not printed.
  EXPECT_THAT(printed,
              HasSubstr("adt.tree_schedule(%tree, max_children=2, payload_tags=[0], "
                        "payload_fields=[0], payload_ranks=[0], payload_dtypes=\"int32\")"));
  const ir::IRModule again = ParseTyped(printed);
  EXPECT_TRUE(ir::StructuralEqual(again, module)) << printed;
  EXPECT_EQ(text::PrintModule(again), printed);
}

TEST(TreeScheduleOp, MakeTreeScheduleCallWritesTheLayout) {
  const vm::TreeScheduleLayout layout{
      .max_children = 3,
      .payloads = {{.tag = 2, .field = 1, .dtype = DataType::Float32(), .shape = {1, 300}},
                   {.tag = 0, .field = 0, .dtype = DataType::Int64(), .shape = {}}}};
  const ir::Call call = MakeTreeScheduleCall(ir::MakeVar("tree"), layout);
  EXPECT_EQ(TreeScheduleLayoutOf(call->attrs), layout);
  EXPECT_EQ(call->attrs.GetString("payload_dtypes"), "float32,int64");
  EXPECT_EQ(call->attrs.GetIntList("payload_shapes"), (std::vector<int64_t>{1, 300}));
  const vm::TreeScheduleLayout no_payloads{.max_children = 2, .payloads = {}};
  const ir::Call bare = MakeTreeScheduleCall(ir::MakeVar("tree"), no_payloads);
  EXPECT_EQ(TreeScheduleLayoutOf(bare->attrs), no_payloads);
}

// Compiled through every pass (fusion, memory manifestation and planning
// leave the call alone) to one TreeSchedule instruction; the VM and the
// evaluator both give the example's schedule.
TEST(TreeScheduleOp, RunsOnTheVmAsTheEvaluatorDoes) {
  const ir::IRModule module = ParseTyped(ScheduleProgram(kLeafRows));
  const Ref<Object> tree = Node(Node(Leaf(0), Leaf(1)), Leaf(2));
  vm::Executable executable = backend::Compile(module);
  EXPECT_EQ(OpcodeCount(executable, "main", vm::Opcode::kTreeSchedule), 1);
  EXPECT_EQ(OpcodeCount(executable, "main", vm::Opcode::kInvokePacked), 0);
  vm::VirtualMachine machine(std::move(executable));
  ExpectExampleSchedule(machine.Invoke("main", {tree}), "the VM");
  ExpectExampleSchedule(eval::Evaluate(module, "main", {tree}), "the evaluator");
  // A node the layout does not allow fails the run with the schedule's error.
  const Ref<Object> bad = Node(
      Leaf(0),
      Make<ADTNode>(0, std::vector<Ref<Object>>{TensorNode::Scalar(DataType::Float32(), 1.0f)}));
  EXPECT_THAT(ErrorOf([&] { machine.Invoke("main", {bad}); }),
              HasSubstr("tree_schedule: node with tag 0 has field 0 of type Tensor[(), float32]"));
}

// A schedule read by a kernel: the table is the kernel's input like any
// tensor, and the tree built in the program is scheduled where it is built.
TEST(TreeScheduleOp, TablesFeedKernels) {
  const ir::IRModule module = ParseTyped(kTreeType + R"(
def @main(%x: Tensor[(), int32]) {
  let %tree = Node(Node(Leaf(%x), Leaf(1)), Leaf(2));
  let %schedule = adt.tree_schedule(%tree, )" +
                                         kLeafRows + R"();
  add(%schedule.2, %x)
}
)");
  const Tensor x = TensorNode::Scalar(DataType::Int32(), 10);
  vm::VirtualMachine machine(backend::Compile(module));
  const Tensor got = machine.Invoke("main", {x}).as<TensorNode>();
  const Tensor want = eval::Evaluate(module, "main", {x}).as<TensorNode>();
  ASSERT_EQ(got->shape(), (Shape{3}));
  EXPECT_THAT(std::vector<int32_t>(got->data<int32_t>(), got->data<int32_t>() + 3),
              ElementsAreArray({20, 11, 12}));
  EXPECT_THAT(std::vector<int32_t>(want->data<int32_t>(), want->data<int32_t>() + 3),
              ElementsAreArray({20, 11, 12}));
}

// A tree of constants is still no constant to fold: the call stays.
TEST(TreeScheduleOp, ConstantFoldingLeavesTheCall) {
  const ir::IRModule module = ParseTyped(kTreeType + "def @main() {\n  adt.tree_schedule(" +
                                         "Node(Leaf(0), Leaf(1)), " + kLeafRows + ")\n}\n");
  const ir::IRModule folded = transform::FoldConstants(module);
  EXPECT_THAT(text::PrintModule(folded), HasSubstr("adt.tree_schedule("));
  Shape shape;
  EXPECT_THAT(Values(eval::Evaluate(folded, "main", {}), 1, &shape),
              ElementsAreArray({-1, -1, -1, -1, 0, 1}));
}

}  // namespace
}  // namespace nimble::op
