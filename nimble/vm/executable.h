// An executable: everything the VM needs to run a compiled program, and its
// versioned binary file format. Loading checks every length, index, register
// number, jump target and dtype, and rejects a bad file with nimble::Error
// naming the section and the cause; it never reads out of bounds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "nimble/vm/attrs.h"
#include "nimble/vm/bytecode.h"
#include "nimble/vm/device.h"
#include "nimble/vm/tensor.h"

namespace nimble::vm {

// A bytecode function. Parameters arrive in registers 0..num_params-1.
struct VMFunction {
  std::string name;
  int32_t num_params = 0;
  int32_t register_file_size = 0;
  std::vector<Instruction> instructions;

  bool operator==(const VMFunction&) const = default;
};

// A kernel InvokePacked calls: looked up by name (in the embedded kernel
// library first, then the runtime's built-in kernels) and bound to `attrs`
// when the executable is loaded into a VM.
struct Primitive {
  std::string name;
  Attrs attrs;

  bool operator==(const Primitive&) const = default;
};

struct ConstantEntry {
  Tensor tensor;  // on the CPU in the file; the VM copies it to its device once
  int32_t device_index = 0;
};

struct Executable {
  // Bumped on any change of the file layout; loading requires an exact match.
  static constexpr uint32_t kFormatVersion = 1;

  std::string target;  // "intel", "arm" or "nvidia"
  // Devices by index (as used by AllocStorage, DeviceCopy, constants); one of
  // them is the host, where shape work runs.
  std::vector<Device> devices = {Device{DeviceType::kCPU, 0}};
  int32_t host_device_index = 0;
  std::vector<VMFunction> functions;
  std::vector<ConstantEntry> constants;
  std::vector<Primitive> primitives;
  std::vector<std::string> messages;      // Fatal's texts
  std::vector<std::byte> kernel_library;  // a shared object for `target`, or empty

  // Index of the function called `name`; throws nimble::Error when absent.
  int32_t FunctionIndex(const std::string& name) const;

  std::vector<std::byte> Save() const;
  // Parses and fully validates `bytes` (see the file comment).
  static Executable Load(std::span<const std::byte> bytes);
  void SaveToFile(const std::string& path) const;
  static Executable LoadFromFile(const std::string& path);

  // Checks indices, registers, jump targets and operand counts of all
  // functions; Load calls it, and builders of executables may too. A
  // function's register file may hold at most its parameters plus one
  // register per instruction (the most its code can write), so a corrupt
  // size cannot make the VM allocate a huge frame.
  void Validate() const;
};

// A function as text: "def @name($0, $1) registers N:", then one line per
// instruction, "pc: <InstructionToString form>", jump offsets followed by
// their target pcs ("goto -3 (pc 4)").
std::string FunctionToString(const VMFunction& function);

// The executable as text, for `nimble dump`: target, devices, kernels (with
// attributes), constants (type and device; with `constants`, also their first
// values), messages, kernel library size, then every function.
std::string ExecutableToString(const Executable& executable, bool constants);

}  // namespace nimble::vm
