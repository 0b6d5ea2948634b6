#include "nimble/vm/bytecode.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "nimble/vm/executable.h"

namespace nimble::vm {
namespace {

using I = Instruction;

TEST(BytecodeTest, OpcodeNamesAreTheInstructionSetsNames) {
  const char* const expected[] = {"move",
                                  "ret",
                                  "invoke",
                                  "invoke_closure",
                                  "invoke_packed",
                                  "alloc_storage",
                                  "alloc_tensor",
                                  "alloc_tensor_reg",
                                  "alloc_adt",
                                  "alloc_closure",
                                  "get_field",
                                  "get_tag",
                                  "if",
                                  "goto",
                                  "load_const",
                                  "load_consti",
                                  "device_copy",
                                  "shape_of",
                                  "reshape_tensor",
                                  "fatal",
                                  "kill_register",
                                  "scalar",
                                  "tree_schedule"};
  ASSERT_EQ(std::size(expected), static_cast<size_t>(kNumOpcodes));
  for (int op = 0; op < kNumOpcodes; ++op) {
    EXPECT_STREQ(OpcodeName(static_cast<Opcode>(op)), expected[op]);
  }
}

TEST(BytecodeTest, ScalarInstructionsTakeARegisterOrAnImmediate) {
  const I less = I::Scalar(ScalarOperator::kLess, 7, 2, 0, DataType::Int32(), 9);
  EXPECT_EQ(less.op, Opcode::kScalar);
  EXPECT_EQ(less.index, static_cast<int64_t>(ScalarOperator::kLess));
  EXPECT_EQ(less.src, 7);
  EXPECT_EQ(less.operand, 2);
  EXPECT_EQ(less.dst, 9);
  EXPECT_EQ(InstructionToString(less), "$9 = scalar less $7, $2 int32");

  const I add = I::Scalar(ScalarOperator::kAdd, 2, kNoRegister, 1, DataType::Int64(), 3);
  EXPECT_EQ(add.operand, kNoRegister);
  EXPECT_EQ(add.immediate, 1);
  EXPECT_EQ(InstructionToString(add), "$3 = scalar add $2, 1 int64");

  // A unary operator keeps no second operand, whatever it was given.
  const I cast = I::Scalar(ScalarOperator::kCast, 4, 6, 9, DataType::Int64(), 5);
  EXPECT_EQ(cast.operand, kNoRegister);
  EXPECT_EQ(cast.immediate, 0);
  EXPECT_EQ(InstructionToString(cast), "$5 = scalar cast $4 int64");
  EXPECT_EQ(InstructionToString(
                I::Scalar(ScalarOperator::kTakeWrap, 1, kNoRegister, -1, DataType::Int32(), 2)),
            "$2 = scalar take.wrap $1, -1 int32");

  EXPECT_STREQ(ScalarOperatorName(ScalarOperator::kGreaterEqual), "greater_equal");
  EXPECT_STREQ(ScalarOperatorName(ScalarOperator::kTakeFast), "take.fast");
  EXPECT_TRUE(IsBinaryScalarOperator(ScalarOperator::kLogicalOr));
  EXPECT_FALSE(IsBinaryScalarOperator(ScalarOperator::kLogicalNot));
}

TEST(BytecodeTest, MoveRetAndRegisterToRegisterOps) {
  const I move = I::Move(1, 2);
  EXPECT_EQ(move.op, Opcode::kMove);
  EXPECT_EQ(move.src, 1);
  EXPECT_EQ(move.dst, 2);
  EXPECT_EQ(InstructionToString(move), "$2 = move $1");

  const I ret = I::Ret(3);
  EXPECT_EQ(ret.op, Opcode::kRet);
  EXPECT_EQ(ret.src, 3);
  EXPECT_EQ(ret.dst, kNoRegister);
  EXPECT_EQ(InstructionToString(ret), "ret $3");

  const I get_tag = I::GetTag(12, 14);
  EXPECT_EQ(get_tag.op, Opcode::kGetTag);
  EXPECT_EQ(get_tag.src, 12);
  EXPECT_EQ(get_tag.dst, 14);
  EXPECT_EQ(InstructionToString(get_tag), "$14 = get_tag $12");

  const I shape_of = I::ShapeOf(6, DataType::Int32(), 8);
  EXPECT_EQ(shape_of.op, Opcode::kShapeOf);
  EXPECT_EQ(shape_of.src, 6);
  EXPECT_EQ(shape_of.dtype, DataType::Int32());
  EXPECT_EQ(shape_of.dst, 8);
  EXPECT_EQ(InstructionToString(shape_of), "$8 = shape_of $6 int32");

  const I reshape = I::ReshapeTensor(6, 8, 10);
  EXPECT_EQ(reshape.op, Opcode::kReshapeTensor);
  EXPECT_EQ(reshape.src, 6);
  EXPECT_EQ(reshape.operand, 8);
  EXPECT_EQ(reshape.dst, 10);
  EXPECT_EQ(InstructionToString(reshape), "$10 = reshape_tensor $6 shape $8");

  // The payload layout as EncodeTreeScheduleLayout writes it: tag 0, field
  // 0, int32 (code 0, 32 bits), rank 0.
  const I schedule = I::TreeSchedule(3, 2, {0, 0, 0, 32, 0}, 4);
  EXPECT_EQ(schedule.op, Opcode::kTreeSchedule);
  EXPECT_EQ(schedule.src, 3);
  EXPECT_EQ(schedule.index, 2);
  EXPECT_EQ(schedule.shape, (Shape{0, 0, 0, 32, 0}));
  EXPECT_EQ(schedule.dst, 4);
  EXPECT_EQ(InstructionToString(schedule),
            "$4 = tree_schedule $3 children 2 layout [0, 0, 0, 32, 0]");

  const I kill = I::KillRegister(13);
  EXPECT_EQ(kill.op, Opcode::kKillRegister);
  EXPECT_EQ(kill.dst, 13);
  EXPECT_EQ(InstructionToString(kill), "kill_register $13");
}

TEST(BytecodeTest, Calls) {
  const I invoke = I::Invoke(4, {0, 1}, 5);
  EXPECT_EQ(invoke.op, Opcode::kInvoke);
  EXPECT_EQ(invoke.index, 4);
  EXPECT_EQ(invoke.args, (std::vector<RegName>{0, 1}));
  EXPECT_EQ(invoke.dst, 5);
  EXPECT_EQ(InstructionToString(invoke), "$5 = invoke func[4]($0, $1)");
  EXPECT_EQ(InstructionToString(I::Invoke(0, {}, 1)), "$1 = invoke func[0]()");

  I moving = I::Invoke(4, {0, 1, 0}, 5);
  EXPECT_TRUE(moving.SetMoves(1));
  EXPECT_FALSE(moving.SetMoves(0)) << "$0 is read twice";
  EXPECT_FALSE(moving.SetMoves(3)) << "there is no fourth argument";
  EXPECT_TRUE(moving.Moves(1));
  EXPECT_FALSE(moving.Moves(0));
  EXPECT_EQ(InstructionToString(moving), "$5 = invoke func[4]($0, move $1, $0)");
  I packed_call = I::InvokePacked(0, {0}, {1});
  EXPECT_FALSE(packed_call.SetMoves(0)) << "a kernel's arguments never move";

  const I closure_call = I::InvokeClosure(2, {0}, 3);
  EXPECT_EQ(closure_call.op, Opcode::kInvokeClosure);
  EXPECT_EQ(closure_call.src, 2);
  EXPECT_EQ(closure_call.args, (std::vector<RegName>{0}));
  EXPECT_EQ(closure_call.dst, 3);
  EXPECT_EQ(InstructionToString(closure_call), "$3 = invoke_closure $2($0)");
  I moving_closure = I::InvokeClosure(2, {2, 0}, 3);
  EXPECT_FALSE(moving_closure.SetMoves(0)) << "the closure itself is read after the arguments";
  EXPECT_TRUE(moving_closure.SetMoves(1));
  EXPECT_EQ(InstructionToString(moving_closure), "$3 = invoke_closure $2($2, move $0)");

  const I packed = I::InvokePacked(2, {0, 1}, {3, 4});
  EXPECT_EQ(packed.op, Opcode::kInvokePacked);
  EXPECT_EQ(packed.index, 2);
  EXPECT_EQ(packed.immediate, 2);
  EXPECT_EQ(packed.args, (std::vector<RegName>{0, 1, 3, 4}));
  EXPECT_EQ(packed.dst, kNoRegister);
  EXPECT_EQ(InstructionToString(packed), "invoke_packed kernel[2](in: $0, $1; out: $3, $4)");
  EXPECT_EQ(InstructionToString(I::InvokePacked(0, {}, {1})),
            "invoke_packed kernel[0](in: ; out: $1)");
}

TEST(BytecodeTest, InvokePackedWithAMalformedOutputCountStillPrints) {
  I packed = I::InvokePacked(1, {0}, {1});
  packed.immediate = 9;
  EXPECT_EQ(InstructionToString(packed), "invoke_packed kernel[1](in: ; out: $0, $1)");
  packed.immediate = -1;
  EXPECT_EQ(InstructionToString(packed), "invoke_packed kernel[1](in: $0, $1; out: )");
}

TEST(BytecodeTest, Allocations) {
  const I storage = I::AllocStorage(kNoRegister, 1024, 64, DataType::Float32(), 1, 4);
  EXPECT_EQ(storage.op, Opcode::kAllocStorage);
  EXPECT_EQ(storage.src, kNoRegister);
  EXPECT_EQ(storage.immediate, 1024);
  EXPECT_EQ(storage.alignment, 64);
  EXPECT_EQ(storage.dtype, DataType::Float32());
  EXPECT_EQ(storage.device_index, 1);
  EXPECT_EQ(storage.dst, 4);
  EXPECT_EQ(InstructionToString(storage),
            "$4 = alloc_storage size 1024 align 64 float32 device[1]");
  EXPECT_EQ(InstructionToString(I::AllocStorage(3, 0, 128, DataType::Int64(), 0, 5)),
            "$5 = alloc_storage size $3 align 128 int64 device[0]");

  const I tensor = I::AllocTensor(4, kNoRegister, 16, {2, 3}, DataType::Float32(), 6);
  EXPECT_EQ(tensor.op, Opcode::kAllocTensor);
  EXPECT_EQ(tensor.src, 4);
  EXPECT_EQ(tensor.operand, kNoRegister);
  EXPECT_EQ(tensor.immediate, 16);
  EXPECT_EQ(tensor.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(tensor.dtype, DataType::Float32());
  EXPECT_EQ(tensor.dst, 6);
  EXPECT_EQ(InstructionToString(tensor), "$6 = alloc_tensor $4 offset 16 [2, 3] float32");
  EXPECT_EQ(InstructionToString(I::AllocTensor(4, 3, 0, {}, DataType::Int64(), 7)),
            "$7 = alloc_tensor $4 offset $3 [] int64");

  const I tensor_reg = I::AllocTensorReg(4, 64, 8, DataType::Float16(), 9);
  EXPECT_EQ(tensor_reg.op, Opcode::kAllocTensorReg);
  EXPECT_EQ(tensor_reg.src, 4);
  EXPECT_EQ(tensor_reg.immediate, 64);
  EXPECT_EQ(tensor_reg.operand, 8);
  EXPECT_EQ(tensor_reg.dtype, DataType::Float16());
  EXPECT_EQ(tensor_reg.dst, 9);
  EXPECT_EQ(InstructionToString(tensor_reg), "$9 = alloc_tensor_reg $4 offset 64 shape $8 float16");

  const I adt = I::AllocADT(1, {6, 9}, 12);
  EXPECT_EQ(adt.op, Opcode::kAllocADT);
  EXPECT_EQ(adt.index, 1);
  EXPECT_EQ(adt.args, (std::vector<RegName>{6, 9}));
  EXPECT_EQ(adt.dst, 12);
  EXPECT_EQ(InstructionToString(adt), "$12 = alloc_adt tag 1($6, $9)");
  EXPECT_EQ(InstructionToString(I::AllocADT(0, {}, 1)), "$1 = alloc_adt tag 0()");

  const I closure = I::AllocClosure(2, {13}, 15);
  EXPECT_EQ(closure.op, Opcode::kAllocClosure);
  EXPECT_EQ(closure.index, 2);
  EXPECT_EQ(closure.args, (std::vector<RegName>{13}));
  EXPECT_EQ(closure.dst, 15);
  EXPECT_EQ(InstructionToString(closure), "$15 = alloc_closure func[2]($13)");
}

TEST(BytecodeTest, DataAccessAndConstants) {
  const I field = I::GetField(12, 1, 13);
  EXPECT_EQ(field.op, Opcode::kGetField);
  EXPECT_EQ(field.src, 12);
  EXPECT_EQ(field.index, 1);
  EXPECT_EQ(field.dst, 13);
  EXPECT_EQ(InstructionToString(field), "$13 = get_field $12[1]");

  const I constant = I::LoadConst(3, 2);
  EXPECT_EQ(constant.op, Opcode::kLoadConst);
  EXPECT_EQ(constant.index, 3);
  EXPECT_EQ(constant.dst, 2);
  EXPECT_EQ(InstructionToString(constant), "$2 = load_const const[3]");

  const I consti = I::LoadConsti(-5, 3);
  EXPECT_EQ(consti.op, Opcode::kLoadConsti);
  EXPECT_EQ(consti.immediate, -5);
  EXPECT_EQ(consti.dst, 3);
  EXPECT_EQ(InstructionToString(consti), "$3 = load_consti -5");

  const I copy = I::DeviceCopy(10, 0, 1, 11);
  EXPECT_EQ(copy.op, Opcode::kDeviceCopy);
  EXPECT_EQ(copy.src, 10);
  EXPECT_EQ(copy.source_device_index, 0);
  EXPECT_EQ(copy.device_index, 1);
  EXPECT_EQ(copy.dst, 11);
  EXPECT_EQ(InstructionToString(copy), "$11 = device_copy $10 device[0] -> device[1]");
}

TEST(BytecodeTest, ControlFlow) {
  const I if_immediate = I::If(3, kNoRegister, 1, 1, 2);
  EXPECT_EQ(if_immediate.op, Opcode::kIf);
  EXPECT_EQ(if_immediate.src, 3);
  EXPECT_EQ(if_immediate.operand, kNoRegister);
  EXPECT_EQ(if_immediate.immediate, 1);
  EXPECT_EQ(if_immediate.true_offset, 1);
  EXPECT_EQ(if_immediate.false_offset, 2);
  EXPECT_EQ(InstructionToString(if_immediate), "if $3 == 1 then +1 else +2");
  EXPECT_EQ(InstructionToString(I::If(3, 4, 0, 2, -3)), "if $3 == $4 then +2 else -3");

  const I jump = I::Goto(-4);
  EXPECT_EQ(jump.op, Opcode::kGoto);
  EXPECT_EQ(jump.true_offset, -4);
  EXPECT_EQ(InstructionToString(jump), "goto -4");

  const I fatal = I::Fatal(2);
  EXPECT_EQ(fatal.op, Opcode::kFatal);
  EXPECT_EQ(fatal.index, 2);
  EXPECT_EQ(InstructionToString(fatal), "fatal message[2]");
}

TEST(BytecodeTest, ConstructorsLeaveUnusedFieldsAtTheirDefaults) {
  const I defaults;
  const I consti = I::LoadConsti(7, 1);
  EXPECT_EQ(consti.src, defaults.src);
  EXPECT_EQ(consti.operand, defaults.operand);
  EXPECT_EQ(consti.index, defaults.index);
  EXPECT_EQ(consti.args, defaults.args);
  EXPECT_EQ(consti.shape, defaults.shape);
  EXPECT_EQ(consti.dtype, defaults.dtype);
  EXPECT_EQ(I::Goto(3), I::Goto(3));
  EXPECT_NE(I::Goto(3), I::Goto(4));
}

TEST(BytecodeTest, FunctionToStringNumbersLinesAndResolvesJumps) {
  const VMFunction loop{
      "loop", 1, 3, {I::LoadConsti(0, 1), I::If(0, 1, 0, 2, 1), I::Goto(-2), I::Ret(0)}};
  EXPECT_EQ(FunctionToString(loop),
            "def @loop($0) registers 3:\n"
            "  0: $1 = load_consti 0\n"
            "  1: if $0 == $1 then +2 (pc 3) else +1 (pc 2)\n"
            "  2: goto -2 (pc 0)\n"
            "  3: ret $0\n");

  VMFunction long_function{"long", 0, 1, std::vector<I>(11, I::LoadConsti(1, 0))};
  long_function.instructions.push_back(I::Ret(0));
  const std::string text = FunctionToString(long_function);
  EXPECT_THAT(text, ::testing::StartsWith("def @long() registers 1:\n   0: $0 = load_consti 1\n"));
  EXPECT_THAT(text, ::testing::EndsWith("\n  11: ret $0\n"));

  const VMFunction many_params{"many", 100, 100, {I::Ret(99)}};
  EXPECT_EQ(FunctionToString(many_params),
            "def @many($0, $1, $2, $3, $4, $5, $6, $7, ..., $99) registers 100:\n  0: ret $99\n");
}

}  // namespace
}  // namespace nimble::vm
