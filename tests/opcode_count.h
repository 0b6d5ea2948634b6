// How many instructions of one opcode a compiled function has, for tests
// that check what a pass left in the bytecode (allocations, kernel calls).
#pragma once

#include <string>

#include "nimble/vm/executable.h"

namespace nimble {

inline int OpcodeCount(const vm::Executable& executable, const std::string& function,
                       vm::Opcode opcode) {
  int count = 0;
  for (const vm::Instruction& instruction :
       executable.functions[executable.FunctionIndex(function)].instructions) {
    count += instruction.op == opcode;
  }
  return count;
}

}  // namespace nimble
