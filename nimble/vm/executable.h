// An executable: everything the VM needs to run a compiled program, and its
// versioned binary file format, the same on every host (fixed-width
// little-endian fields behind a byte-order mark). Loading checks every length, index, register
// number, jump target and dtype, and rejects a bad file with nimble::Error
// naming the section and the cause; it never reads out of bounds. Besides the
// code, an executable carries what makes errors readable: each function's
// signature (checked when a caller runs it) and a map from each instruction
// to the source position it came from.
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

// The type of a parameter, as far as the VM checks it when a caller runs the
// function: a tensor's dtype and dimensions, a tuple's fields; other types
// (ADTs, closures) are not checked and only named, for `nimble dump`.
struct ParamType {
  // Tuples nest at most this deep (deeper types are kOther), so that loading
  // a corrupt file cannot recurse without bound.
  static constexpr int kMaxDepth = 32;
  static constexpr int64_t kAnyDim = -1;   // a `?` dimension
  static constexpr int64_t kNoBound = -1;  // a `?` of any size, or a size

  enum class Kind : uint8_t { kOther, kTensor, kTuple };
  Kind kind = Kind::kOther;
  DataType dtype;             // kTensor
  std::vector<int64_t> dims;  // kTensor: a size, or kAnyDim
  // kTensor, one per dim: the largest size a `?` takes (`?<=512`), else
  // kNoBound. Memory planning sized the program's storage for these.
  std::vector<int64_t> bounds;
  std::vector<ParamType> fields;  // kTuple
  std::string name;               // kOther: the type as the program writes it

  // `bounds` empty: none.
  static ParamType Tensor(DataType dtype, std::vector<int64_t> dims,
                          std::vector<int64_t> bounds = {});
  static ParamType Tuple(std::vector<ParamType> fields);
  static ParamType Other(std::string name);

  // "Tensor[(?, 2), float32]", "(Tensor[(), int32], List[...])".
  std::string ToString() const;
  bool operator==(const ParamType&) const = default;
};

struct Param {
  std::string name;  // without the %; may be empty
  ParamType type;

  bool operator==(const Param&) const = default;
};

// Where an instruction came from in the program text; line 0: nowhere known.
struct SourcePosition {
  int32_t line = 0;
  int32_t column = 0;

  bool valid() const { return line > 0; }
  std::string ToString() const;  // "12:5"
  bool operator==(const SourcePosition&) const = default;
};

// A bytecode function. Parameters arrive in registers 0..num_params-1.
struct VMFunction {
  std::string name;
  int32_t num_params = 0;
  int32_t register_file_size = 0;
  std::vector<Instruction> instructions;
  // One entry per parameter, or empty for a function without a signature
  // (built by hand), whose arguments the VM does not check.
  std::vector<Param> params = {};
  // One entry per instruction, or empty: the source of each instruction, for
  // run-time errors.
  std::vector<SourcePosition> positions = {};

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

// The checksum each section of an executable file stores beside its payload
// (executable.cc: the layout). Load refuses a section whose payload does not
// match it before reading anything in it, since flipped bytes in a kernel
// library would run as machine code. It catches damage, not tampering.
uint64_t SectionChecksum(std::span<const std::byte> payload);

struct Executable {
  // Bumped on any change of the file layout or of the kernel library's ABI
  // (7: the GPU launch hook takes a grid of blocks; 8: invokes and
  // constructors say which arguments move; 9: each section carries a
  // checksum); loading requires an exact match.
  static constexpr uint32_t kFormatVersion = 9;

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
  // PTX of the GPU kernels whose launches kernel_library's host code makes
  // (target nvidia), or empty.
  std::vector<std::byte> device_code;
  // The program file the code was compiled from (for "prog.relay:12:5: ..."
  // in run-time errors); may be empty.
  std::string source_name;

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
  // size cannot make the VM allocate a huge frame. A signature must have one
  // entry per parameter and a source map one per instruction (or be empty).
  void Validate() const;
};

// A function as text: "def @name($0, $1) registers N:", then one line per
// instruction, "pc: <InstructionToString form>", jump offsets followed by
// their target pcs ("goto -3 (pc 4)").
std::string FunctionToString(const VMFunction& function);

// "@name(%x: Tensor[(?, 2), float32], %n: Tensor[(), int32])".
std::string SignatureToString(const VMFunction& function);

// The executable as text, for `nimble dump`: target, source, devices, kernels
// (with attributes), constants (type and device; with `constants`, also
// their first values), messages, kernel library size, then every function: a
// "signature" line when it has one, then its code, each instruction with a
// known source position followed by "  ; line:col".
std::string ExecutableToString(const Executable& executable, bool constants);

// One line per kernel, for `nimble dump --kernels`: its symbol and where it
// comes from: generated (with the ops it fuses and its signature, `?` for a
// symbolic dimension), a library (oneDNN, OpenBLAS) or the runtime's built-in
// kernels; shape functions are marked as such.
std::string KernelTableToString(const Executable& executable);

}  // namespace nimble::vm
