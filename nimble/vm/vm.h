// The virtual machine [paper 5]: loads an Executable, binds its primitives to
// kernels, and interprets its bytecode.
//
// Frames do not own their registers: all frames share one register stack
// that grows only to the deepest call seen, so a call allocates nothing once
// warm. A call immediately followed by `ret` of its result (a tail call)
// reuses the caller's frame, so loops written as recursion run in constant
// memory however many iterations they take.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nimble/vm/closure.h"
#include "nimble/vm/executable.h"
#include "nimble/vm/kernel.h"
#include "nimble/vm/profiler.h"
#include "nimble/vm/scalar_ops.h"

namespace nimble::vm {

class KernelLibrary;

struct VMOptions {
  // Devices to run on: each device of the executable is replaced by the first
  // one here of the same type (e.g. cuda(1) for the executable's cuda(0));
  // devices of a type not listed stay as the executable names them.
  std::vector<Device> devices;
  // Kernels by primitive name, consulted after the executable's embedded
  // kernel library and before the built-in kernels (KernelRegistry::Global()).
  std::map<std::string, KernelFactory> extra_kernels;
  // Counts instructions and times kernels (profiler()); off, the interpreter
  // runs a loop without any of that bookkeeping.
  bool profiling = false;
  // Non-tail calls deeper than this fail with an error instead of exhausting memory.
  size_t max_call_depth = 1 << 20;
};

// Runs one function at a time: use one VirtualMachine per thread.
class VirtualMachine {
 public:
  // Validates `executable`, loads its kernel library and binds every
  // primitive; throws nimble::Error naming the primitive that has no kernel.
  explicit VirtualMachine(Executable executable, VMOptions options = {});
  ~VirtualMachine();
  VirtualMachine(const VirtualMachine&) = delete;
  VirtualMachine& operator=(const VirtualMachine&) = delete;

  // Runs `function` on `args` (tensors or ADTs of them) and returns its result.
  // The arguments must agree with the function's signature, when it has one
  // (number, and each tensor's dtype, rank and static dimensions), or a
  // nimble::Error names the first that does not. A run-time error names the
  // source position of the failing instruction ("prog.relay:12:5: ..."),
  // when the executable's source map has one.
  Ref<Object> Invoke(const std::string& function, const std::vector<Ref<Object>>& args);

  // The stateful interface: set the inputs of a function, run it, read its
  // outputs (the result with nested tuples flattened, in order). Inputs come
  // from other frameworks through FromDLPack (dlpack.h) or from files
  // through ReadNpy (npy.h). Inputs are checked against the signature as
  // Invoke checks its arguments.
  void SetInput(const std::string& function, int32_t index, Ref<Object> value);
  void SetInputs(const std::string& function, std::vector<Ref<Object>> values);
  void Run(const std::string& function);
  size_t NumOutputs() const { return outputs_.size(); }
  Tensor GetOutput(size_t index) const;

  const Executable& executable() const { return executable_; }
  // Null unless VMOptions::profiling.
  Profiler* profiler() { return profiler_.get(); }
  // The deepest the frame stack and the register stack have been; tail calls
  // keep both flat.
  size_t peak_call_depth() const { return peak_call_depth_; }
  size_t register_stack_size() const { return registers_.size(); }

 private:
  struct Frame {
    int32_t function;
    int64_t return_pc;  // where the frame resumes after its callee returns
    size_t base;        // its first register in registers_
    RegName caller_dst;
  };
  struct LoadedFunction {
    const Instruction* code;
    int64_t size;
    int32_t num_params;
    int32_t register_file_size;
  };

  void BindPrimitives(const VMOptions& options);
  Ref<Object> Execute(int32_t function, const std::vector<Ref<Object>>& args);
  template <bool kProfile>
  Ref<Object> RunLoop();
  // "prog.relay:12:5: " for the instruction `frame` is at, or "".
  std::string SourceOf(const Frame& frame) const;
  void ResetStacks();
  void EnsureRegisters(size_t count);
  void ClearRegisters(size_t base, size_t count);
  // Enters `callee` with `num_args` arguments produced by `fill(args)`, in a
  // new frame or, for a tail call, in the current one.
  template <typename FillArgs>
  void Call(int32_t callee, size_t num_args, RegName dst, bool tail, FillArgs fill);

  const Ref<Object>& LoadConstant(int64_t index);
  Storage AllocStorage(const Instruction& in, const Ref<Object>* regs) const;
  Tensor AllocTensor(const Instruction& in, const Ref<Object>* regs) const;
  Tensor DeviceCopy(const Instruction& in, const Ref<Object>& source) const;
  template <bool kProfile>
  void InvokePacked(const Instruction& in, const Ref<Object>* regs);
  // The executable's CUDA device (as chosen by the options).
  Device GpuDevice() const;
  // Library kernel `name` of one of the executable's devices (cuBLAS), if any.
  std::optional<Kernel> DeviceLibraryKernel(const std::string& name, const Attrs& attrs) const;
  Tensor Scalar(const Instruction& in, const Ref<Object>* regs);
  Tensor ShapeOf(const Instruction& in, const Ref<Object>& value);

  Executable executable_;
  std::vector<Device> devices_;
  std::unique_ptr<DeviceCode> device_code_;  // what kernel_library_'s GPU kernels launch
  std::unique_ptr<KernelLibrary> kernel_library_;
  std::vector<Kernel> kernels_;
  std::vector<LoadedFunction> functions_;
  std::vector<Ref<Object>> constants_;  // on their devices, loaded on first use
  size_t max_call_depth_;
  std::unique_ptr<Profiler> profiler_;

  std::vector<Frame> frames_;
  std::vector<Ref<Object>> registers_;
  std::vector<Ref<Object>> call_args_;  // a tail call's arguments in transit
  std::vector<DLTensor> packed_tensors_;
  std::vector<DLTensor*> packed_args_;
  ScalarTensorCache scalars_;
  size_t peak_call_depth_ = 0;

  std::map<std::string, std::vector<Ref<Object>>> inputs_;
  std::vector<Tensor> outputs_;
};

}  // namespace nimble::vm
