#include "nimble/vm/bytecode.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "nimble/vm/attrs.h"
#include "nimble/vm/executable.h"

namespace nimble::vm {

const char* OpcodeName(Opcode op) {
  switch (op) {
    case Opcode::kMove:
      return "move";
    case Opcode::kRet:
      return "ret";
    case Opcode::kInvoke:
      return "invoke";
    case Opcode::kInvokeClosure:
      return "invoke_closure";
    case Opcode::kInvokePacked:
      return "invoke_packed";
    case Opcode::kAllocStorage:
      return "alloc_storage";
    case Opcode::kAllocTensor:
      return "alloc_tensor";
    case Opcode::kAllocTensorReg:
      return "alloc_tensor_reg";
    case Opcode::kAllocADT:
      return "alloc_adt";
    case Opcode::kAllocClosure:
      return "alloc_closure";
    case Opcode::kGetField:
      return "get_field";
    case Opcode::kGetTag:
      return "get_tag";
    case Opcode::kIf:
      return "if";
    case Opcode::kGoto:
      return "goto";
    case Opcode::kLoadConst:
      return "load_const";
    case Opcode::kLoadConsti:
      return "load_consti";
    case Opcode::kDeviceCopy:
      return "device_copy";
    case Opcode::kShapeOf:
      return "shape_of";
    case Opcode::kReshapeTensor:
      return "reshape_tensor";
    case Opcode::kFatal:
      return "fatal";
    case Opcode::kKillRegister:
      return "kill_register";
    case Opcode::kScalar:
      return "scalar";
    case Opcode::kTreeSchedule:
      return "tree_schedule";
  }
  return "unknown";
}

const char* ScalarOperatorName(ScalarOperator op) {
  switch (op) {
    case ScalarOperator::kAdd:
      return "add";
    case ScalarOperator::kSubtract:
      return "subtract";
    case ScalarOperator::kMultiply:
      return "multiply";
    case ScalarOperator::kDivide:
      return "divide";
    case ScalarOperator::kMaximum:
      return "maximum";
    case ScalarOperator::kMinimum:
      return "minimum";
    case ScalarOperator::kEqual:
      return "equal";
    case ScalarOperator::kNotEqual:
      return "not_equal";
    case ScalarOperator::kLess:
      return "less";
    case ScalarOperator::kLessEqual:
      return "less_equal";
    case ScalarOperator::kGreater:
      return "greater";
    case ScalarOperator::kGreaterEqual:
      return "greater_equal";
    case ScalarOperator::kLogicalAnd:
      return "logical_and";
    case ScalarOperator::kLogicalOr:
      return "logical_or";
    case ScalarOperator::kNegative:
      return "negative";
    case ScalarOperator::kLogicalNot:
      return "logical_not";
    case ScalarOperator::kCast:
      return "cast";
    case ScalarOperator::kTakeClip:
      return "take.clip";
    case ScalarOperator::kTakeWrap:
      return "take.wrap";
    case ScalarOperator::kTakeFast:
      return "take.fast";
  }
  return "unknown";
}

bool IsScalarDType(DataType dtype) {
  return dtype == DataType::Bool() || dtype == DataType::Int8() || dtype == DataType::Int32() ||
         dtype == DataType::Int64();
}

bool IsBinaryScalarOperator(ScalarOperator op) {
  return op != ScalarOperator::kNegative && op != ScalarOperator::kLogicalNot &&
         op != ScalarOperator::kCast;
}

Instruction Instruction::Move(RegName from, RegName dst) {
  Instruction instruction;
  instruction.op = Opcode::kMove;
  instruction.src = from;
  instruction.dst = dst;
  return instruction;
}

Instruction Instruction::Ret(RegName result) {
  Instruction instruction;
  instruction.op = Opcode::kRet;
  instruction.src = result;
  return instruction;
}

Instruction Instruction::Invoke(int64_t function, std::vector<RegName> args, RegName dst) {
  Instruction instruction;
  instruction.op = Opcode::kInvoke;
  instruction.index = function;
  instruction.args = std::move(args);
  instruction.dst = dst;
  return instruction;
}

Instruction Instruction::InvokeClosure(RegName closure, std::vector<RegName> args, RegName dst) {
  Instruction instruction;
  instruction.op = Opcode::kInvokeClosure;
  instruction.src = closure;
  instruction.args = std::move(args);
  instruction.dst = dst;
  return instruction;
}

Instruction Instruction::InvokePacked(int64_t kernel, std::vector<RegName> inputs,
                                      std::vector<RegName> outputs) {
  Instruction instruction;
  instruction.op = Opcode::kInvokePacked;
  instruction.index = kernel;
  instruction.immediate = static_cast<int64_t>(outputs.size());
  instruction.args = std::move(inputs);
  instruction.args.insert(instruction.args.end(), outputs.begin(), outputs.end());
  return instruction;
}

Instruction Instruction::AllocStorage(RegName size_reg, int64_t size_bytes, int32_t alignment,
                                      DataType dtype_hint, int32_t device_index, RegName dst) {
  Instruction instruction;
  instruction.op = Opcode::kAllocStorage;
  instruction.src = size_reg;
  instruction.immediate = size_bytes;
  instruction.alignment = alignment;
  instruction.dtype = dtype_hint;
  instruction.device_index = device_index;
  instruction.dst = dst;
  return instruction;
}

Instruction Instruction::AllocTensor(RegName storage, RegName offset_reg, int64_t offset_bytes,
                                     std::vector<int64_t> shape, DataType dtype, RegName dst) {
  Instruction instruction;
  instruction.op = Opcode::kAllocTensor;
  instruction.src = storage;
  instruction.operand = offset_reg;
  instruction.immediate = offset_bytes;
  instruction.shape = std::move(shape);
  instruction.dtype = dtype;
  instruction.dst = dst;
  return instruction;
}

Instruction Instruction::AllocTensorReg(RegName storage, int64_t offset_bytes, RegName shape_reg,
                                        DataType dtype, RegName dst) {
  Instruction instruction;
  instruction.op = Opcode::kAllocTensorReg;
  instruction.src = storage;
  instruction.immediate = offset_bytes;
  instruction.operand = shape_reg;
  instruction.dtype = dtype;
  instruction.dst = dst;
  return instruction;
}

Instruction Instruction::AllocADT(int64_t tag, std::vector<RegName> fields, RegName dst) {
  Instruction instruction;
  instruction.op = Opcode::kAllocADT;
  instruction.index = tag;
  instruction.args = std::move(fields);
  instruction.dst = dst;
  return instruction;
}

Instruction Instruction::AllocClosure(int64_t function, std::vector<RegName> captured,
                                      RegName dst) {
  Instruction instruction;
  instruction.op = Opcode::kAllocClosure;
  instruction.index = function;
  instruction.args = std::move(captured);
  instruction.dst = dst;
  return instruction;
}

bool CanMoveArgs(Opcode op) {
  return op == Opcode::kInvoke || op == Opcode::kInvokeClosure || op == Opcode::kAllocADT ||
         op == Opcode::kAllocClosure;
}

bool Instruction::SetMoves(size_t i) {
  if (!CanMoveArgs(op) || i >= 64 || i >= args.size()) return false;
  const RegName reg = args[i];
  if (std::count(args.begin(), args.end(), reg) != 1) return false;
  if (op == Opcode::kInvokeClosure && reg == src) return false;
  immediate = static_cast<int64_t>(static_cast<uint64_t>(immediate) | uint64_t{1} << i);
  return true;
}

Instruction Instruction::GetField(RegName object, int64_t field, RegName dst) {
  Instruction instruction;
  instruction.op = Opcode::kGetField;
  instruction.src = object;
  instruction.index = field;
  instruction.dst = dst;
  return instruction;
}

Instruction Instruction::GetTag(RegName object, RegName dst) {
  Instruction instruction;
  instruction.op = Opcode::kGetTag;
  instruction.src = object;
  instruction.dst = dst;
  return instruction;
}

Instruction Instruction::If(RegName test, RegName target, int64_t target_value, int32_t true_offset,
                            int32_t false_offset) {
  Instruction instruction;
  instruction.op = Opcode::kIf;
  instruction.src = test;
  instruction.operand = target;
  instruction.immediate = target_value;
  instruction.true_offset = true_offset;
  instruction.false_offset = false_offset;
  return instruction;
}

Instruction Instruction::Goto(int32_t offset) {
  Instruction instruction;
  instruction.op = Opcode::kGoto;
  instruction.true_offset = offset;
  return instruction;
}

Instruction Instruction::LoadConst(int64_t constant, RegName dst) {
  Instruction instruction;
  instruction.op = Opcode::kLoadConst;
  instruction.index = constant;
  instruction.dst = dst;
  return instruction;
}

Instruction Instruction::LoadConsti(int64_t value, RegName dst) {
  Instruction instruction;
  instruction.op = Opcode::kLoadConsti;
  instruction.immediate = value;
  instruction.dst = dst;
  return instruction;
}

Instruction Instruction::DeviceCopy(RegName source, int32_t source_device_index,
                                    int32_t device_index, RegName dst) {
  Instruction instruction;
  instruction.op = Opcode::kDeviceCopy;
  instruction.src = source;
  instruction.source_device_index = source_device_index;
  instruction.device_index = device_index;
  instruction.dst = dst;
  return instruction;
}

Instruction Instruction::TreeSchedule(RegName tree, int64_t max_children, Shape layout,
                                      RegName dst) {
  Instruction instruction;
  instruction.op = Opcode::kTreeSchedule;
  instruction.src = tree;
  instruction.index = max_children;
  instruction.shape = std::move(layout);
  instruction.dst = dst;
  return instruction;
}

Instruction Instruction::ShapeOf(RegName tensor, DataType dtype, RegName dst) {
  Instruction instruction;
  instruction.op = Opcode::kShapeOf;
  instruction.dtype = dtype;
  instruction.src = tensor;
  instruction.dst = dst;
  return instruction;
}

Instruction Instruction::ReshapeTensor(RegName tensor, RegName shape_reg, RegName dst) {
  Instruction instruction;
  instruction.op = Opcode::kReshapeTensor;
  instruction.src = tensor;
  instruction.operand = shape_reg;
  instruction.dst = dst;
  return instruction;
}

Instruction Instruction::Fatal(int64_t message) {
  Instruction instruction;
  instruction.op = Opcode::kFatal;
  instruction.index = message;
  return instruction;
}

Instruction Instruction::KillRegister(RegName reg) {
  Instruction instruction;
  instruction.op = Opcode::kKillRegister;
  instruction.dst = reg;
  return instruction;
}

Instruction Instruction::Scalar(ScalarOperator op, RegName lhs, RegName rhs, int64_t rhs_value,
                                DataType dtype, RegName dst) {
  Instruction instruction;
  instruction.op = Opcode::kScalar;
  instruction.index = static_cast<int64_t>(op);
  instruction.src = lhs;
  const bool binary = IsBinaryScalarOperator(op);
  instruction.operand = binary ? rhs : kNoRegister;
  instruction.immediate = binary && rhs == kNoRegister ? rhs_value : 0;
  instruction.dtype = dtype;
  instruction.dst = dst;
  return instruction;
}

namespace {

std::string Reg(RegName reg) {
  return "$" + std::to_string(reg);
}

std::string RegList(const std::vector<RegName>& regs, size_t begin, size_t end) {
  std::string text;
  for (size_t i = begin; i < end; ++i) {
    if (i > begin) text += ", ";
    text += Reg(regs[i]);
  }
  return text;
}

// The args of an instruction that may move them, "move $5" for a moved one.
std::string ArgList(const Instruction& in) {
  std::string text;
  for (size_t i = 0; i < in.args.size(); ++i) {
    if (i > 0) text += ", ";
    text += (in.Moves(i) ? "move " : "") + Reg(in.args[i]);
  }
  return text;
}

std::string RegOrImmediate(RegName reg, int64_t immediate) {
  return reg == kNoRegister ? std::to_string(immediate) : Reg(reg);
}

std::string Indexed(const char* table, int64_t index) {
  return std::string(table) + "[" + std::to_string(index) + "]";
}

// "+3", or "+3 (pc 10)" when the jumping instruction's pc is known.
std::string Jump(int32_t offset, std::optional<int64_t> pc) {
  std::string text = (offset >= 0 ? "+" : "") + std::to_string(offset);
  if (pc) text += " (pc " + std::to_string(*pc + offset) + ")";
  return text;
}

// The operands after the opcode name; `pc` resolves jump targets.
std::string Operands(const Instruction& in, std::optional<int64_t> pc) {
  switch (in.op) {
    case Opcode::kMove:
    case Opcode::kRet:
    case Opcode::kGetTag:
      return Reg(in.src);
    case Opcode::kShapeOf:
      return Reg(in.src) + " " + in.dtype.name();
    case Opcode::kTreeSchedule:
      return Reg(in.src) + " children " + std::to_string(in.index) + " layout " +
             AttrValueToString(in.shape);
    case Opcode::kScalar: {
      // Clamped so that a malformed operator still prints.
      if (in.index < 0 || in.index >= kNumScalarOperators) {
        return "operator " + std::to_string(in.index) + " " + Reg(in.src);
      }
      const auto op = static_cast<ScalarOperator>(in.index);
      const std::string rhs =
          IsBinaryScalarOperator(op) ? ", " + RegOrImmediate(in.operand, in.immediate) : "";
      return std::string(ScalarOperatorName(op)) + " " + Reg(in.src) + rhs + " " + in.dtype.name();
    }
    case Opcode::kInvoke:
    case Opcode::kAllocClosure:
      return Indexed("func", in.index) + "(" + ArgList(in) + ")";
    case Opcode::kInvokeClosure:
      return Reg(in.src) + "(" + ArgList(in) + ")";
    case Opcode::kInvokePacked: {
      // Clamped so that a malformed output count still prints.
      const size_t inputs =
          in.args.size() - std::min<size_t>(in.args.size(), std::max<int64_t>(in.immediate, 0));
      return Indexed("kernel", in.index) + "(in: " + RegList(in.args, 0, inputs) +
             "; out: " + RegList(in.args, inputs, in.args.size()) + ")";
    }
    case Opcode::kAllocStorage:
      return "size " + RegOrImmediate(in.src, in.immediate) + " align " +
             std::to_string(in.alignment) + " " + in.dtype.name() + " " +
             Indexed("device", in.device_index);
    case Opcode::kAllocTensor:
      return Reg(in.src) + " offset " + RegOrImmediate(in.operand, in.immediate) + " " +
             AttrValueToString(in.shape) + " " + in.dtype.name();
    case Opcode::kAllocTensorReg:
      return Reg(in.src) + " offset " + std::to_string(in.immediate) + " shape " + Reg(in.operand) +
             " " + in.dtype.name();
    case Opcode::kAllocADT:
      return "tag " + std::to_string(in.index) + "(" + ArgList(in) + ")";
    case Opcode::kGetField:
      return Reg(in.src) + "[" + std::to_string(in.index) + "]";
    case Opcode::kIf:
      return Reg(in.src) + " == " + RegOrImmediate(in.operand, in.immediate) + " then " +
             Jump(in.true_offset, pc) + " else " + Jump(in.false_offset, pc);
    case Opcode::kGoto:
      return Jump(in.true_offset, pc);
    case Opcode::kLoadConst:
      return Indexed("const", in.index);
    case Opcode::kLoadConsti:
      return std::to_string(in.immediate);
    case Opcode::kDeviceCopy:
      return Reg(in.src) + " " + Indexed("device", in.source_device_index) + " -> " +
             Indexed("device", in.device_index);
    case Opcode::kReshapeTensor:
      return Reg(in.src) + " shape " + Reg(in.operand);
    case Opcode::kFatal:
      return Indexed("message", in.index);
    case Opcode::kKillRegister:
      return Reg(in.dst);
  }
  return "";
}

// Opcodes whose `dst` is a result written by the instruction (KillRegister's
// `dst` is its operand).
bool WritesDst(Opcode op) {
  switch (op) {
    case Opcode::kRet:
    case Opcode::kInvokePacked:
    case Opcode::kIf:
    case Opcode::kGoto:
    case Opcode::kFatal:
    case Opcode::kKillRegister:
      return false;
    default:
      return true;
  }
}

std::string InstructionText(const Instruction& instruction, std::optional<int64_t> pc) {
  std::string text;
  if (WritesDst(instruction.op)) text = Reg(instruction.dst) + " = ";
  return text + OpcodeName(instruction.op) + " " + Operands(instruction, pc);
}

}  // namespace

std::string InstructionToString(const Instruction& instruction) {
  return InstructionText(instruction, std::nullopt);
}

std::string FunctionToString(const VMFunction& function) {
  // Long parameter lists are elided: "$0, $1, ..., $99".
  constexpr RegName kListedParams = 8;
  std::string params;
  for (RegName i = 0; i < std::min(function.num_params, kListedParams); ++i) {
    params += (i ? ", " : "") + Reg(i);
  }
  if (function.num_params > kListedParams) params += ", ..., " + Reg(function.num_params - 1);
  std::string text = "def @" + function.name + "(" + params + ") registers " +
                     std::to_string(function.register_file_size) + ":\n";
  const int width = static_cast<int>(std::to_string(function.instructions.size()).size());
  for (size_t pc = 0; pc < function.instructions.size(); ++pc) {
    const std::string number = std::to_string(pc);
    text += std::string(2 + width - number.size(), ' ') + number + ": " +
            InstructionText(function.instructions[pc], static_cast<int64_t>(pc)) + "\n";
  }
  return text;
}

}  // namespace nimble::vm
