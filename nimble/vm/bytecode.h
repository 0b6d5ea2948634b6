// The VM's instruction set [paper 5, Table A.1]: a register machine with an
// unbounded register file per frame and CISC-style instructions. Kernels are
// reached only through InvokePacked; everything else (allocation, control
// flow, data structures) is an instruction, so the compiler can plan it.
//
// Deliberate differences from TVM's Relay VM: AllocTensor's offset and
// AllocStorage's size are an immediate or a register (TVM declared an
// immediate and read a register); If compares against an immediate or a
// register (TVM needed a LoadConsti first); InvokePacked never skips a kernel
// because an output is empty; Fatal carries a message; KillRegister drops a
// register's value at its last use; Scalar does a program's scalar control
// arithmetic (loop counters, comparisons, shape reads) in the VM, where TVM
// called a kernel and allocated a tensor for each step; ShapeOf gives int32
// or int64.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nimble/vm/dtype.h"
#include "nimble/vm/shape.h"

namespace nimble::vm {

using RegName = int32_t;
inline constexpr RegName kNoRegister = -1;

enum class Opcode : uint8_t {
  kMove,
  kRet,
  kInvoke,
  kInvokeClosure,
  kInvokePacked,
  kAllocStorage,
  kAllocTensor,
  kAllocTensorReg,
  kAllocADT,
  kAllocClosure,
  kGetField,
  kGetTag,
  kIf,
  kGoto,
  kLoadConst,
  kLoadConsti,
  kDeviceCopy,
  kShapeOf,
  kReshapeTensor,
  kFatal,
  kKillRegister,
  kScalar,
  kTreeSchedule,
};
inline constexpr int kNumOpcodes = static_cast<int>(Opcode::kTreeSchedule) + 1;

// The text name of an opcode ("invoke_packed").
const char* OpcodeName(Opcode op);

// What a Scalar instruction computes, with the semantics of the operator of
// the same name on rank-0 tensors (integers wrap; divide truncates and fails
// on a zero divisor). Unary operators read only `src`; take reads element
// `rhs` of the 1-D tensor `src`, its index clipped, wrapped, or (fast) checked.
enum class ScalarOperator : uint8_t {
  kAdd,
  kSubtract,
  kMultiply,
  kDivide,
  kMaximum,
  kMinimum,
  kEqual,
  kNotEqual,
  kLess,
  kLessEqual,
  kGreater,
  kGreaterEqual,
  kLogicalAnd,
  kLogicalOr,
  kNegative,
  kLogicalNot,
  kCast,
  kTakeClip,
  kTakeWrap,
  kTakeFast,
};
inline constexpr int kNumScalarOperators = static_cast<int>(ScalarOperator::kTakeFast) + 1;

// The operator's name: the Relay op's ("less"), or "take.clip" and so on.
const char* ScalarOperatorName(ScalarOperator op);
// Whether the operator reads a second operand (register or immediate).
bool IsBinaryScalarOperator(ScalarOperator op);
// The dtypes of Scalar's operands: int8, int32, int64 and bool.
bool IsScalarDType(DataType dtype);

// One instruction. Fields not listed for an opcode stay at their defaults;
// build instructions with the named constructors below.
// clang-format off
//   opcode          dst  src            operand          index     immediate      other fields
//   Move            dst  from
//   Ret                  result
//   Invoke          dst                                  function  moved args     args
//   InvokeClosure   dst  closure                                   moved args     args
//   InvokePacked                                         kernel    num outputs    args (inputs, then outputs)
//   AllocStorage    dst  size reg|none                             size bytes     alignment, dtype, device_index
//   AllocTensor     dst  storage        offset reg|none            offset bytes   shape, dtype
//   AllocTensorReg  dst  storage        shape reg                  offset bytes   dtype
//   AllocADT        dst                                  tag       moved args     args (fields)
//   AllocClosure    dst                                  function  moved args     args (captured values)
//   GetField        dst  object                          field
//   GetTag          dst  object
//   If                   test           target reg|none            target value   true_offset, false_offset
//   Goto                                                                          true_offset (the jump)
//   LoadConst       dst                                  constant
//   LoadConsti      dst                                            value
//   DeviceCopy      dst  source                                                   device_index, source_device_index
//   ShapeOf         dst  tensor                                                   dtype (int32|int64)
//   ReshapeTensor   dst  tensor         shape reg
//   Fatal                                                message
//   KillRegister    dst
//   Scalar          dst  lhs            rhs reg|none     operator  rhs value      dtype
//   TreeSchedule    dst  tree                            max children             shape (the payload layout)
// clang-format on
//
// Scalar's operands are rank-0 tensors of `dtype` (int8, int32, int64 or bool;
// take's `lhs` is 1-D and its index any integer); its result is a rank-0
// tensor of `dtype`, or bool for comparisons. Cast converts `lhs`, of any
// integer or bool dtype, to `dtype`.
//
// AllocStorage's size register holds the size in bytes (a scalar) or the
// shape of the tensor to be stored (a 1-D int64 tensor; bytes = elements x
// the size of dtype).
//
// Moved args: bit i set means this is the last read of args[i]'s register,
// so its reference moves into the callee, object or closure and the register
// is left empty, instead of being copied and dropped by a later
// KillRegister. A list consumed as it is mapped then frees each node while
// its lines are in the cache, rather than all of them, cold, at the end; the
// compiler folds a kill that directly follows the instruction into it.
// Only the first 64 args can move, and a register read twice by one
// instruction (or that is also InvokeClosure's closure) cannot.
//
// TreeSchedule's shape holds the payload layout of its tree as
// EncodeTreeScheduleLayout writes it (tree_schedule.h); its result is
// ScheduleTree's tuple.
//
// Jump offsets are relative to the jumping instruction. Scalars in registers
// (sizes, offsets, tests, shapes) are integer or bool tensors on the CPU.
//
// An instruction is two whole cache lines, the fields most opcodes read in
// the first: between two calls of a large kernel (an LSTM's 4 MB matrix) the
// bytecode falls out of the caches, and a 120-byte instruction straddled up
// to three lines (the adjacent-line prefetcher brings an aligned pair
// together). Measured, the gain is small: a few percent on a deep list.
struct alignas(128) Instruction {
  Opcode op = Opcode::kFatal;
  RegName dst = kNoRegister;
  RegName src = kNoRegister;
  RegName operand = kNoRegister;
  std::vector<RegName> args;
  int64_t index = 0;
  int64_t immediate = 0;
  DataType dtype;
  int32_t true_offset = 0;
  int32_t false_offset = 0;
  int32_t alignment = 0;
  int32_t device_index = 0;
  int32_t source_device_index = 0;
  Shape shape;

  bool operator==(const Instruction&) const = default;

  static Instruction Move(RegName from, RegName dst);
  static Instruction Ret(RegName result);
  static Instruction Invoke(int64_t function, std::vector<RegName> args, RegName dst);
  static Instruction InvokeClosure(RegName closure, std::vector<RegName> args, RegName dst);
  static Instruction InvokePacked(int64_t kernel, std::vector<RegName> inputs,
                                  std::vector<RegName> outputs);
  // Size from a register (`size_reg`) or, with kNoRegister, the immediate `size_bytes`.
  static Instruction AllocStorage(RegName size_reg, int64_t size_bytes, int32_t alignment,
                                  DataType dtype_hint, int32_t device_index, RegName dst);
  // Offset from a register (`offset_reg`) or, with kNoRegister, the immediate `offset_bytes`.
  static Instruction AllocTensor(RegName storage, RegName offset_reg, int64_t offset_bytes,
                                 std::vector<int64_t> shape, DataType dtype, RegName dst);
  static Instruction AllocTensorReg(RegName storage, int64_t offset_bytes, RegName shape_reg,
                                    DataType dtype, RegName dst);
  static Instruction AllocADT(int64_t tag, std::vector<RegName> fields, RegName dst);
  static Instruction AllocClosure(int64_t function, std::vector<RegName> captured, RegName dst);
  static Instruction GetField(RegName object, int64_t field, RegName dst);
  static Instruction GetTag(RegName object, RegName dst);
  // Jumps by `true_offset` when register `test` equals register `target`
  // (or, with kNoRegister, the immediate `target_value`), else by `false_offset`.
  static Instruction If(RegName test, RegName target, int64_t target_value, int32_t true_offset,
                        int32_t false_offset);
  static Instruction Goto(int32_t offset);
  static Instruction LoadConst(int64_t constant, RegName dst);
  static Instruction LoadConsti(int64_t value, RegName dst);
  static Instruction DeviceCopy(RegName source, int32_t source_device_index, int32_t device_index,
                                RegName dst);
  static Instruction ShapeOf(RegName tensor, DataType dtype, RegName dst);
  static Instruction ReshapeTensor(RegName tensor, RegName shape_reg, RegName dst);
  static Instruction Fatal(int64_t message);
  static Instruction KillRegister(RegName reg);
  // `rhs` from a register or, with kNoRegister, the immediate `rhs_value`;
  // both ignored by a unary operator.
  static Instruction Scalar(ScalarOperator op, RegName lhs, RegName rhs, int64_t rhs_value,
                            DataType dtype, RegName dst);
  static Instruction TreeSchedule(RegName tree, int64_t max_children, Shape layout, RegName dst);

  // Of Invoke, InvokeClosure, AllocADT and AllocClosure: whether args[i]'s
  // reference moves (see "Moved args" above).
  bool Moves(size_t i) const { return i < 64 && (static_cast<uint64_t>(immediate) >> i) & 1; }
  // Marks args[i] as moved; false, changing nothing, when it cannot move.
  bool SetMoves(size_t i);
};

// Whether `op` reads its args as values it may take over (see "Moved args").
bool CanMoveArgs(Opcode op);

// One line of text: the written register first ("$3 = "), the opcode name,
// then its operands; registers as $N, table entries as func[i], kernel[i],
// const[i], device[i], message[i], immediates plain, shapes as [2, 3], dtypes
// by name, jump offsets signed. For example
//   "$2 = move $1"   "ret $2"   "$5 = invoke func[4]($0, $1)"   "$6 = alloc_adt tag 0($4, move $5)"
//   "invoke_packed kernel[2](in: $0, $1; out: $3)"
//   "$4 = alloc_storage size 1024 align 64 float32 device[1]"  (or "size $3")
//   "$6 = alloc_tensor $4 offset 16 [2, 3] float32"   "$13 = get_field $12[1]"
//   "if $3 == 1 then +1 else +2"   "goto -4"   "fatal message[0]"
//   "$7 = shape_of $0 int32"   "$9 = scalar less $7, $2 int32"   "$3 = scalar add $2, 1 int64"
//   "$5 = scalar cast $4 int64"
// FunctionToString (executable.h) adds each jump's target pc.
std::string InstructionToString(const Instruction& instruction);

}  // namespace nimble::vm
