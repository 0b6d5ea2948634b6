// Device placement, text in and text out: programs in the memory dialect
// (docs/memory-dialect.md §2, written out or lowered from source through the
// pipeline up to manifest-alloc) and the §4 form expected after the pass,
// compared up to alpha-renaming, or, where a whole text would hide the point,
// the device_copy calls and storage devices counted. Every output must
// type-check, print and parse back, leave its input alone, be a fixed point of
// the pass, and compile for nvidia. The evaluator cannot check values: the
// memory dialect has no reference kernels, only VM instructions, and no GPU
// runs them here.
#include "nimble/compiler/transform/plan_devices.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "nimble/compiler/backend/pipeline.h"
#include "nimble/compiler/backend/vm_compiler.h"
#include "nimble/compiler/ir/bind_params.h"
#include "nimble/compiler/ir/functor.h"
#include "nimble/compiler/ir/structural_equal.h"
#include "nimble/compiler/text/parser.h"
#include "nimble/compiler/text/printer.h"
#include "nimble/compiler/transform/pass_util.h"
#include "nimble/compiler/typing/type_infer.h"
#include "nimble/vm/error.h"
#include "nimble/vm/npy.h"
#include "tests/error_of.h"
#include "tests/programs/test_programs.h"

namespace nimble::transform {
namespace {

ir::IRModule Typed(const std::string& text, const text::ParamMap* params = nullptr) {
  ir::IRModule module = text::ParseModule(text, "test.relay", params);
  if (params) {
    if (ir::Function main = module->Lookup("main")) {
      module->Add(module->GetGlobalVar("main"), ir::BindParamsByName(main, *params));
    }
  }
  typing::InferTypes(module);
  return module;
}

// A source program lowered to what the pass takes (docs/memory-dialect.md §2),
// unfused so that the expected programs show every op's placement.
ir::IRModule Lowered(const std::string& source, const text::ParamMap* params = nullptr) {
  return backend::RunPasses(Typed(source, params), {.target = "nvidia", .fuse_ops = false},
                            "manifest-alloc");
}

// Runs the pass and checks what every output must satisfy.
ir::IRModule Plan(const ir::IRModule& module, const std::string& device = "cuda") {
  const std::string before = text::PrintModule(module);
  ir::IRModule result = PlanDevices(module, device);
  EXPECT_EQ(text::PrintModule(module), before) << "the pass changed its input";
  EXPECT_NO_THROW(typing::InferTypes(result)) << text::PrintModule(result);
  text::ParamMap constants;
  const std::string printed = text::PrintModule(result, {.constants_out = &constants});
  EXPECT_EQ(text::PrintModule(Typed(printed, &constants)), printed) << "does not print and parse";
  const ir::IRModule again = PlanDevices(result, device);
  EXPECT_TRUE(ir::StructuralEqual(again, result)) << "a second run changed:\n"
                                                  << text::PrintModule(again);
  return result;
}

void ExpectPlan(const ir::IRModule& input, const std::string& expected) {
  const ir::IRModule result = Plan(input);
  const ir::IRModule want = Typed(expected);
  EXPECT_TRUE(ir::StructuralEqual(result, want)) << "got:\n"
                                                 << text::PrintModule(result) << "expected:\n"
                                                 << text::PrintModule(want);
}

// The device_copy calls of a global (or of all, for ""), outside primitives.
struct Copies {
  int to_device = 0;
  int to_host = 0;
  int constants = 0;  // constants loaded on the device
  bool operator==(const Copies&) const = default;
};

std::ostream& operator<<(std::ostream& out, const Copies& copies) {
  return out << "{to_device " << copies.to_device << ", to_host " << copies.to_host
             << ", constants " << copies.constants << "}";
}

// Also counts the devices named by memory.alloc_storage.
class CopyCounter : public ir::ExprVisitor {
 public:
  Copies copies;
  std::map<std::string, int> storages;

  void VisitCall(const ir::CallNode* node) override {
    if (node->callee->kind == ir::ExprKind::kOp) {
      const std::string& name = static_cast<const ir::OpNode&>(*node->callee).name;
      if (name == "device_copy") {
        if (node->args[0]->kind == ir::ExprKind::kConstant) {
          ++copies.constants;
        } else if (node->attrs.GetString("dst_device") == "cpu") {
          ++copies.to_host;
        } else {
          ++copies.to_device;
        }
      } else if (name == "memory.alloc_storage") {
        ++storages[node->attrs.GetString("device")];
      }
    }
    ir::ExprVisitor::VisitCall(node);
  }
  void VisitFunction(const ir::FunctionNode* node) override {
    if (!HasFlag(node, kPrimitiveAttr)) ir::ExprVisitor::VisitFunction(node);
  }
};

CopyCounter Count(const ir::IRModule& module, const std::string& global = "") {
  CopyCounter counter;
  for (const ir::IRModuleNode::Definition& definition : module->functions()) {
    if (global.empty() || definition.global->name == global) {
      counter.VisitExpr(definition.function);
    }
  }
  return counter;
}

// Compiles for nvidia and counts the DeviceCopy instructions.
int DeviceCopyInstructions(const ir::IRModule& module) {
  const vm::Executable executable = backend::CompileToExecutable(module, {.target = "nvidia"});
  int count = 0;
  for (const vm::VMFunction& function : executable.functions) {
    for (const vm::Instruction& instruction : function.instructions) {
      count += instruction.op == vm::Opcode::kDeviceCopy;
    }
  }
  return count;
}

void ExpectError(const ir::IRModule& module, const std::string& device,
                 const std::string& message) {
  try {
    PlanDevices(module, device);
    ADD_FAILURE() << "expected an error containing: " << message;
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find(message), std::string::npos) << error.what();
  }
}

std::string ReadExample(const std::string& name) {
  return test::ReadProgramFile(std::string(NIMBLE_SOURCE_DIR) + "/examples/" + name + ".relay");
}

text::ParamMap ReadParams(const std::string& npz) {
  text::ParamMap params;
  for (auto& [name, tensor] : ReadNpz(std::string(NIMBLE_SOURCE_DIR) + "/examples/data/" + npz)) {
    params[name] = std::move(tensor);
  }
  return params;
}

const char* const kStatic = R"(
def @main(%x: Tensor[(4, 8), float32], %w: Tensor[(8, 8), float32], %b: Tensor[(4, 8), float32]) {
  let %s0: Storage = memory.alloc_storage(128i64, alignment=64, device="cpu", dtype="float32");
  let %y: Tensor[(4, 8), float32] = memory.alloc_tensor(%s0, 0i64, dtype="float32", assert_shape=[4, 8]);
  let %u0: () = memory.invoke_mut(fn (%p0: Tensor[(4, 8), float32], %p1: Tensor[(8, 8), float32], Primitive=1) {
    nn.dense(%p0, %p1)
  }, (%x, %w), (%y,));
  let %s1: Storage = memory.alloc_storage(128i64, alignment=64, device="cpu", dtype="float32");
  let %z: Tensor[(4, 8), float32] = memory.alloc_tensor(%s1, 0i64, dtype="float32", assert_shape=[4, 8]);
  let %u1: () = memory.invoke_mut(fn (%p0: Tensor[(4, 8), float32], %p1: Tensor[(4, 8), float32], Primitive=1) {
    add(%p0, %p1)
  }, (%y, %b), (%z,));
  %z
}
)";

// A CPU target changes nothing: allocations already name the CPU.
TEST(PlanDevicesTest, CpuIsTheIdentity) {
  const ir::IRModule module = Typed(kStatic);
  EXPECT_TRUE(ir::StructuralEqual(Plan(module, "cpu"), module));
  for (const std::string name : {"dynamic_concat", "grow_loop", "list_fold"}) {
    const ir::IRModule lowered = Lowered(ReadExample(name));
    EXPECT_TRUE(ir::StructuralEqual(Plan(lowered, "cpu"), lowered)) << name;
  }
}

TEST(PlanDevicesTest, CpuMovesEveryAllocationToTheCpu) {
  const ir::IRModule result = Plan(Typed(R"(
def @main() {
  let %s: Storage = memory.alloc_storage(16i64, device="cuda", dtype="float32");
  memory.alloc_tensor(%s, 0i64, dtype="float32", assert_shape=[4])
}
)"),
                                   "cpu");
  EXPECT_EQ(Count(result).storages, (std::map<std::string, int>{{"cpu", 1}}));
}

// Every kernel on the device, with its storage; @main's arguments copied in
// at entry, its result out at exit, nothing in between.
TEST(PlanDevicesTest, StaticProgram) {
  ExpectPlan(Typed(kStatic), R"(
def @main(%x: Tensor[(4, 8), float32], %w: Tensor[(8, 8), float32], %b: Tensor[(4, 8), float32]) {
  let %xd: Tensor[(4, 8), float32] = device_copy(%x, src_device="cpu", dst_device="cuda");
  let %wd: Tensor[(8, 8), float32] = device_copy(%w, src_device="cpu", dst_device="cuda");
  let %bd: Tensor[(4, 8), float32] = device_copy(%b, src_device="cpu", dst_device="cuda");
  let %s0: Storage = memory.alloc_storage(128i64, alignment=64, device="cuda", dtype="float32");
  let %y: Tensor[(4, 8), float32] = memory.alloc_tensor(%s0, 0i64, dtype="float32", assert_shape=[4, 8]);
  let %u0: () = memory.invoke_mut(fn (%p0: Tensor[(4, 8), float32], %p1: Tensor[(8, 8), float32], Primitive=1) {
    nn.dense(%p0, %p1)
  }, (%xd, %wd), (%y,));
  let %s1: Storage = memory.alloc_storage(128i64, alignment=64, device="cuda", dtype="float32");
  let %z: Tensor[(4, 8), float32] = memory.alloc_tensor(%s1, 0i64, dtype="float32", assert_shape=[4, 8]);
  let %u1: () = memory.invoke_mut(fn (%p0: Tensor[(4, 8), float32], %p1: Tensor[(4, 8), float32], Primitive=1) {
    add(%p0, %p1)
  }, (%y, %bd), (%z,));
  let %zh: Tensor[(4, 8), float32] = device_copy(%z, src_device="cuda", dst_device="cpu");
  %zh
}
)");
}

// Shapes, the shape function and its output stay on the CPU (shape_of reads
// the CPU copy of %x: no copy for shapes); the kernel and its output go to
// the device.
TEST(PlanDevicesTest, DynamicProgram) {
  ExpectPlan(Lowered(R"(
def @main(%x: Tensor[(?, 2), float32], %w: Tensor[(2, 2), float32]) {
  nn.dense(%x, %w)
}
)"),
             R"(
def @main(%x: Tensor[(?, 2), float32], %w: Tensor[(2, 2), float32]) {
  let %xd: Tensor[(?, 2), float32] = device_copy(%x, src_device="cpu", dst_device="cuda");
  let %wd: Tensor[(2, 2), float32] = device_copy(%w, src_device="cpu", dst_device="cuda");
  let %sh: Tensor[(2,), int64] = shape_of(%x, dtype="int64");
  let %sh1: Tensor[(2,), int64] = shape_of(%w, dtype="int64");
  let %s: Storage = memory.alloc_storage(16i64, device="cpu", dtype="int64");
  let %os: Tensor[(2,), int64] = memory.alloc_tensor(%s, 0i64, dtype="int64", assert_shape=[2]);
  %0 = fn (%p0: Tensor[(?, 2), float32], %p1: Tensor[(2, 2), float32], Primitive=1) -> Tensor[(?, 2), float32] {
    nn.dense(%p0, %p1)
  };
  let %u: () = memory.shape_func(%0, (%sh, %sh1), (%os,));
  let %s1: Storage = memory.alloc_storage(%os, device="cuda", dtype="float32");
  let %y: Tensor[(?, 2), float32] = memory.alloc_tensor(%s1, 0i64, %os, dtype="float32", assert_shape=[-1, 2]);
  let %u1: () = memory.invoke_mut(%0, (%xd, %wd), (%y,));
  let %yh: Tensor[(?, 2), float32] = device_copy(%y, src_device="cuda", dst_device="cpu");
  %yh
}
)");
}

// The counter, its bound and the test stay on the CPU (a host parameter: every
// call passes a host value); indexing the device tensor copies %i once per
// iteration, at entry.
TEST(PlanDevicesTest, LoopCounterStaysOnTheHost) {
  ExpectPlan(Lowered(R"(
def @loop(%xs: Tensor[(?, 4), float32], %i: Tensor[(), int32], %acc: Tensor[(4,), float32]) -> Tensor[(4,), float32] {
  if (less(%i, take(shape_of(%xs), 0))) {
    @loop(%xs, add(%i, 1), add(%acc, take(%xs, %i, axis=0)))
  } else {
    %acc
  }
}
def @main(%xs: Tensor[(?, 4), float32]) -> Tensor[(4,), float32] {
  @loop(%xs, 0, zeros(shape=[4]))
}
)"),
             R"(
def @loop(%xs: Tensor[(?, 4), float32], %i: Tensor[(), int32], %acc: Tensor[(4,), float32]) -> Tensor[(4,), float32] {
  let %id: Tensor[(), int32] = device_copy(%i, src_device="cpu", dst_device="cuda");
  let %x: Tensor[(2,), int32] = shape_of(%xs);
  let %x1: Tensor[(), int32] = take(%x, 0);
  let %x2: Tensor[(), bool] = less(%i, %x1);
  let %x3: Tensor[(4,), float32] = if (%x2) {
    let %x4: Tensor[(), int32] = add(%i, 1);
    let %s4: Storage = memory.alloc_storage(16i64, device="cuda", dtype="float32");
    let %x5: Tensor[(4,), float32] = memory.alloc_tensor(%s4, 0i64, dtype="float32", assert_shape=[4]);
    let %u4: () = memory.invoke_mut(fn (%p04: Tensor[(?, 4), float32], %p13: Tensor[(), int32], Primitive=1) -> Tensor[(4,), float32] {
      take(%p04, %p13, axis=0)
    }, (%xs, %id), (%x5,));
    let %s5: Storage = memory.alloc_storage(16i64, device="cuda", dtype="float32");
    let %x6: Tensor[(4,), float32] = memory.alloc_tensor(%s5, 0i64, dtype="float32", assert_shape=[4]);
    let %u5: () = memory.invoke_mut(fn (%p05: Tensor[(4,), float32], %p14: Tensor[(4,), float32], Primitive=1) -> Tensor[(4,), float32] {
      add(%p05, %p14)
    }, (%acc, %x5), (%x6,));
    let %x7: Tensor[(4,), float32] = @loop(%xs, %x4, %x6);
    %x7
  } else {
    %acc
  };
  %x3
}

def @main(%xs: Tensor[(?, 4), float32]) -> Tensor[(4,), float32] {
  let %xsd: Tensor[(?, 4), float32] = device_copy(%xs, src_device="cpu", dst_device="cuda");
  let %s: Storage = memory.alloc_storage(16i64, device="cuda", dtype="float32");
  let %x: Tensor[(4,), float32] = memory.alloc_tensor(%s, 0i64, dtype="float32", assert_shape=[4]);
  let %u: () = memory.invoke_mut(fn (Primitive=1) -> Tensor[(4,), float32] {
    zeros(shape=[4])
  }, (), (%x,));
  let %r: Tensor[(4,), float32] = @loop(%xsd, 0, %x);
  let %rh: Tensor[(4,), float32] = device_copy(%r, src_device="cuda", dst_device="cpu");
  %rh
}
)");
}

// A data-dependent shape function reads its input on the CPU, and so does the
// kernel of an operator the GPU cannot run (unique, argwhere: their output
// sizes depend on their values). unique's input, computed on the device, is
// copied to the CPU once for both, and its result stays there. argwhere of a
// CPU argument, and the add of its result, are host work: no copy at all.
TEST(PlanDevicesTest, DataDependentShapes) {
  const ir::IRModule unique = Plan(Lowered(R"(
def @main(%x: Tensor[(?,), float32], %y: Tensor[(?,), float32]) {
  unique(add(%x, %y))
}
)"));
  EXPECT_EQ(Count(unique).copies, (Copies{.to_device = 2, .to_host = 1, .constants = 0}));
  const ir::IRModule argwhere = Plan(Lowered(R"(
def @main(%c: Tensor[(?, 3), float32]) {
  add(argwhere(%c), 1)
}
)"));
  EXPECT_EQ(Count(argwhere).copies, (Copies{.to_device = 0, .to_host = 0, .constants = 0}));
  // Both compile for the GPU: the add's kernel generated for the GPU between
  // the copies of x and y in and of its sum out, unique the CPU's built-in.
  EXPECT_EQ(DeviceCopyInstructions(unique), 3);
  EXPECT_EQ(DeviceCopyInstructions(argwhere), 0);
  EXPECT_THAT(vm::KernelTableToString(backend::CompileToExecutable(unique, {.target = "nvidia"})),
              ::testing::HasSubstr("] unique: built-in\n"));
}

// An operator whose compute definition declines the call (float16 here) has
// neither a generated kernel nor a library one on the GPU: the compile names
// the operator and where it is, rather than reading GPU memory on the CPU.
TEST(PlanDevicesTest, AKernelCodeGenerationDeclinesFailsTheGpuCompile) {
  const ir::IRModule half = Plan(Lowered(R"(
def @main(%x: Tensor[(4,), float16]) {
  add(%x, %x)
}
)"));
  EXPECT_THAT(ErrorOf([&] { DeviceCopyInstructions(half); }),
              ::testing::HasSubstr("operator add runs on the GPU here, and it has no GPU kernel"));
}

// `if` tests a condition computed on the device: one copy to the CPU. The
// branches join on the device, so the result is copied out once.
TEST(PlanDevicesTest, DeviceConditionIsCopiedToTheHost) {
  const ir::IRModule result = Plan(Lowered(R"(
def @main(%x: Tensor[(?, 4), float32]) {
  if (less(sum(%x), 0f)) { negative(%x) } else { %x }
}
)"));
  EXPECT_EQ(Count(result).copies, (Copies{.to_device = 1, .to_host = 2, .constants = 1}));
  EXPECT_EQ(DeviceCopyInstructions(result), 3);
}

// A device_copy already there is kept and fixes both its sides: the kernel
// reads it, no other copy of %x appears.
TEST(PlanDevicesTest, ExistingDeviceCopyIsKept) {
  ExpectPlan(Typed(R"(
def @main(%x: Tensor[(4,), float32]) {
  let %xd = device_copy(%x, src_device="cpu", dst_device="cuda");
  let %s: Storage = memory.alloc_storage(16i64, device="cpu", dtype="float32");
  let %y: Tensor[(4,), float32] = memory.alloc_tensor(%s, 0i64, dtype="float32", assert_shape=[4]);
  let %u: () = memory.invoke_mut(fn (%p: Tensor[(4,), float32], Primitive=1) { negative(%p) }, (%xd,), (%y,));
  %y
}
)"),
             R"(
def @main(%x: Tensor[(4,), float32]) {
  let %xd = device_copy(%x, src_device="cpu", dst_device="cuda");
  let %s: Storage = memory.alloc_storage(16i64, device="cuda", dtype="float32");
  let %y: Tensor[(4,), float32] = memory.alloc_tensor(%s, 0i64, dtype="float32", assert_shape=[4]);
  let %u: () = memory.invoke_mut(fn (%p: Tensor[(4,), float32], Primitive=1) { negative(%p) }, (%xd,), (%y,));
  let %yh: Tensor[(4,), float32] = device_copy(%y, src_device="cuda", dst_device="cpu");
  %yh
}
)");
}

// Tuple fields keep their own place: a projection of @main's argument is
// copied in only where a kernel reads it, the result tuple is rebuilt from
// CPU copies of its device fields, and a field that is already on the CPU is
// not copied.
TEST(PlanDevicesTest, TupleFieldsKeepTheirPlace) {
  const ir::IRModule result = Plan(Lowered(R"(
def @main(%p: (Tensor[(4,), float32], Tensor[(), int32])) {
  let %y = negative(%p.0);
  (%y, %p.1)
}
)"));
  EXPECT_EQ(Count(result).copies, (Copies{.to_device = 1, .to_host = 1, .constants = 0}));
  EXPECT_EQ(DeviceCopyInstructions(result), 2);
}

// ADTs and closures: list rows are taken on the device and stored in Cons
// cells as they are; closures take and return device values; @rows' counter
// is copied once per call.
TEST(PlanDevicesTest, ClosuresAndAdts) {
  const ir::IRModule result = Plan(Lowered(ReadExample("list_fold")));
  EXPECT_EQ(Count(result, "rows").copies, (Copies{.to_device = 1, .to_host = 0, .constants = 0}));
  EXPECT_EQ(Count(result, "main").copies, (Copies{.to_device = 2, .to_host = 1, .constants = 0}));
  EXPECT_EQ(Count(result, "main_lambda_0").copies, Copies{});
  EXPECT_EQ(Count(result, "main_lambda_1").copies, Copies{});
  // The counter, its bound and its test are instructions: no CPU storage.
  EXPECT_EQ(Count(result, "rows").storages, (std::map<std::string, int>{{"cuda", 1}}));
}

// adt.tree_schedule is an instruction that returns new CPU tensors: a table
// read by a kernel on the device is copied there (as is %x), one read only by
// host work is not, and the tree stays where it is.
TEST(PlanDevicesTest, TreeScheduleTablesAreOnTheHost) {
  const ir::IRModule result = Plan(Lowered(R"(
type Tree {
  Leaf(Tensor[(), float32]),
  Node(Tree, Tree),
}

def @main(%tree: Tree, %x: Tensor[(1,), float32]) {
  let %schedule = adt.tree_schedule(%tree, max_children=2, payload_tags=[0], payload_fields=[0],
                                    payload_ranks=[0], payload_dtypes="float32");
  (add(%schedule.2, %x), negative(%schedule.2))
}
)"));
  EXPECT_EQ(Count(result).copies, (Copies{.to_device = 2, .to_host = 1, .constants = 0}));
  EXPECT_EQ(DeviceCopyInstructions(result), 3);
}

// Every example compiles for nvidia after the pass, with the copies the
// comments count.
TEST(PlanDevicesTest, ExamplesCompileForNvidia) {
  // %x and %y in, the result out.
  EXPECT_EQ(DeviceCopyInstructions(Plan(Lowered(ReadExample("dynamic_concat")))), 3);
  // %row in, the result out; counter and bound are host parameters.
  EXPECT_EQ(DeviceCopyInstructions(Plan(Lowered(ReadExample("grow_loop")))), 2);
  // %x and %scale in, the sum out, @rows' counter once per row.
  EXPECT_EQ(DeviceCopyInstructions(Plan(Lowered(ReadExample("list_fold")))), 4);
  // %xs in, the state out, @loop's counter once per step; the weights are
  // constants loaded on the device.
  const text::ParamMap params = ReadParams("lstm_cell.npz");
  const ir::IRModule lstm = Plan(Lowered(ReadExample("lstm_cell"), &params));
  EXPECT_EQ(DeviceCopyInstructions(lstm), 3);
  EXPECT_EQ(Count(lstm).copies, (Copies{.to_device = 2, .to_host = 1, .constants = 3}));
}

TEST(PlanDevicesTest, TestProgramsCompileForNvidia) {
  for (const std::string name :
       {"closures_capture", "concat_dynamic_rows", "constructor_tags", "graph_bindings",
        "grow_tensor_loop", "if_branch_shapes", "incomplete_match", "lets_and_scalars",
        "list_map_fold", "list_range_sum", "match_pattern_kinds", "mutual_recursion",
        "non_tail_recursion", "return_typed_closure", "split_and_project", "tail_recursive_loop",
        "tuples_and_projections"}) {
    SCOPED_TRACE(name);
    EXPECT_NO_THROW(DeviceCopyInstructions(Plan(Lowered(test::ReadTestProgram(name)))));
  }
}

TEST(PlanDevicesTest, Errors) {
  const ir::IRModule module = Typed(kStatic);
  ExpectError(module, "tpu", "unknown device 'tpu'");
  ExpectError(Typed(R"(
def @main(%x: Tensor[(4,), float32]) { negative(%x) }
)"),
              "cuda", "operator 'negative'");
  const ir::IRModule primitives = backend::RunPasses(
      Typed("def @main(%x: Tensor[(4,), float32]) { negative(%x) }"), {}, "dead-code");
  ExpectError(primitives, "cuda", "call of a primitive function");
  ExpectError(primitives, "cpu", "not in the memory dialect");
}

}  // namespace
}  // namespace nimble::transform
