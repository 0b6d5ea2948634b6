#include "nimble/vm/vm.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <typeinfo>
#include <utility>

#include "nimble/vm/adt.h"
#include "nimble/vm/dlpack.h"
#include "nimble/vm/error.h"
#include "nimble/vm/extent_switch.h"
#include "nimble/vm/kernel_library.h"
#include "nimble/vm/kernels/element.h"
#include "nimble/vm/tree_schedule.h"

namespace nimble::vm {
namespace {

using Clock = std::chrono::steady_clock;

// `value` as a T, or null. Runtime values are almost always exactly a
// TensorNode, ADTNode or ClosureNode, which one type_info comparison confirms
// without dynamic_cast's walk of the class hierarchy.
template <typename T>
T* As(const Ref<Object>& value) {
  Object* object = value.get();
  if (!object) return nullptr;
  if (typeid(*object) == typeid(T)) return static_cast<T*>(object);
  return dynamic_cast<T*>(object);
}

std::string Describe(const Ref<Object>& value) {
  if (!value) return "no value";
  if (const TensorNode* tensor = As<TensorNode>(value)) {
    return "a tensor of type " + tensor->TypeString() + " on " + tensor->device().ToString();
  }
  if (const ADTNode* adt = As<ADTNode>(value)) {
    return "an ADT value with tag " + std::to_string(adt->tag()) + " and " +
           std::to_string(adt->size()) + " fields";
  }
  if (const ClosureNode* closure = As<ClosureNode>(value)) {
    return "a closure of function " + std::to_string(closure->function_index());
  }
  if (As<StorageNode>(value)) return "a storage";
  return "an object of unknown kind";
}

template <typename T>
T& Expect(const Ref<Object>& value, const char* what, const char* role) {
  if (T* object = As<T>(value)) return *object;
  throw Error(std::string(role) + " must be " + what + ", got " + Describe(value));
}

// An integer or bool scalar on the CPU: sizes, offsets, tests of `if`.
int64_t ReadScalar(const Ref<Object>& value, const char* role) {
  const TensorNode* tensor = As<TensorNode>(value);
  if (tensor && tensor->device().type == DeviceType::kCPU && tensor->numel() == 1) {
    if (tensor->dtype() == DataType::Int64()) return *tensor->data<int64_t>();
    if (!tensor->dtype().is_float()) return tensor->GetAsInt64(0);
  }
  throw Error(std::string(role) + " must be an integer or bool scalar on the CPU, got " +
              Describe(value));
}

// A shape: a 1-D int64 tensor on the CPU.
Shape ReadShape(const Ref<Object>& value, const char* role) {
  const TensorNode* tensor = As<TensorNode>(value);
  if (!tensor || tensor->dtype() != DataType::Int64() || tensor->ndim() != 1 ||
      tensor->device().type != DeviceType::kCPU) {
    throw Error(std::string(role) + " must be a 1-D int64 tensor on the CPU, got " +
                Describe(value));
  }
  const int64_t* dims = tensor->data<int64_t>();
  return Shape(dims, dims + tensor->shape()[0]);
}

// Calls `visit(tensor)` for `value` if it is a tensor, or for each tensor in
// its fields, depth first, if it is an ADT. `role()` names the value in
// errors; it is only called on failure, so the hot path builds no strings.
template <typename Role, typename Visit>
void ForEachTensor(const Ref<Object>& value, const Role& role, Visit&& visit) {
  if (TensorNode* tensor = As<TensorNode>(value)) {
    visit(tensor);
  } else if (const ADTNode* adt = As<ADTNode>(value)) {
    for (const Ref<Object>& field : adt->fields()) ForEachTensor(field, role, visit);
  } else {
    throw Error(role() + " must be a tensor or a tuple of tensors, got " + Describe(value));
  }
}

// Whether `value` has parameter type `type`: a tensor of its dtype and rank
// whose static dimensions agree, or a tuple of such values. Other types are
// not checked.
bool Fits(const ParamType& type, const Ref<Object>& value) {
  switch (type.kind) {
    case ParamType::Kind::kTensor: {
      const TensorNode* tensor = As<TensorNode>(value);
      if (!tensor || tensor->dtype() != type.dtype ||
          static_cast<size_t>(tensor->ndim()) != type.dims.size()) {
        return false;
      }
      for (size_t i = 0; i < type.dims.size(); ++i) {
        const int64_t size = tensor->shape()[i];
        if (type.dims[i] != ParamType::kAnyDim && type.dims[i] != size) return false;
        if (type.bounds[i] != ParamType::kNoBound && size > type.bounds[i]) return false;
      }
      return true;
    }
    case ParamType::Kind::kTuple: {
      const ADTNode* tuple = As<ADTNode>(value);
      if (!tuple || tuple->tag() != 0 || tuple->size() != type.fields.size()) return false;
      for (size_t i = 0; i < type.fields.size(); ++i) {
        if (!Fits(type.fields[i], tuple->fields()[i])) return false;
      }
      return true;
    }
    case ParamType::Kind::kOther:
      return true;
  }
  return false;
}

// A value's type as a signature writes it, where it has one: "Tensor[(2,),
// float32]", "(Tensor[(), int32],)"; other values as Describe says.
std::string TypeOfValue(const Ref<Object>& value) {
  if (const TensorNode* tensor = As<TensorNode>(value)) return tensor->TypeString();
  const ADTNode* tuple = As<ADTNode>(value);
  if (!tuple || tuple->tag() != 0) return Describe(value);
  std::string fields;
  for (const Ref<Object>& field : tuple->fields()) {
    fields += (fields.empty() ? "" : ", ") + TypeOfValue(field);
  }
  return "(" + fields + (tuple->size() == 1 ? ",)" : ")");
}

// Checks argument `index` of `function` against its signature, if it has one.
void CheckArgument(const VMFunction& function, size_t index, const Ref<Object>& value) {
  if (function.params.empty()) return;
  const Param& param = function.params[index];
  if (!Fits(param.type, value)) {
    throw Error("@" + function.name + ": argument " + std::to_string(index) + " (%" + param.name +
                "): expected " + param.type.ToString() + ", got " + TypeOfValue(value));
  }
}

// True for a tensor, or an ADT whose fields all are such values.
bool IsTensorTree(const Ref<Object>& value) {
  if (As<TensorNode>(value)) return true;
  const ADTNode* adt = As<ADTNode>(value);
  return adt && std::all_of(adt->fields().begin(), adt->fields().end(), IsTensorTree);
}

// An Invoke or InvokeClosure whose result the next instruction returns: the
// caller's frame has nothing left to do, so the callee can take it over.
// Validation guarantees a function ends in ret, goto or fatal, so a call is
// never the last instruction.
bool IsTailCall(const Instruction* code, int64_t pc) {
  const Instruction& next = code[pc + 1];
  return next.op == Opcode::kRet && next.src == code[pc].dst;
}

// The reference args[i] passes: taken from its register when the instruction
// moves it (its last read), else a copy.
Ref<Object> TakeArg(const Instruction& in, Ref<Object>* regs, size_t i) {
  Ref<Object>& reg = regs[in.args[i]];
  return in.Moves(i) ? std::move(reg) : reg;
}

// A view of `tensor` with `shape`: all its elements, or fewer, its leading
// ones, which is how an upper-bound op's output (whose kernel writes the valid
// part first, kernels/op_kernel.h) is trimmed to its true shape.
Tensor LeadingView(const TensorNode& tensor, Shape shape) {
  if (ShapeNumel(shape) >= tensor.numel()) return tensor.View(shape);
  return Make<TensorNode>(tensor.storage(), tensor.byte_offset(), std::move(shape), tensor.dtype());
}

std::vector<Device> UniqueDevices(const std::vector<Device>& devices) {
  std::vector<Device> unique;
  for (const Device& device : devices) {
    if (std::find(unique.begin(), unique.end(), device) == unique.end()) unique.push_back(device);
  }
  return unique;
}

}  // namespace

VirtualMachine::VirtualMachine(Executable executable, VMOptions options)
    : executable_(std::move(executable)), max_call_depth_(options.max_call_depth) {
  executable_.Validate();
  for (const Device& device : executable_.devices) {
    const auto chosen = std::find_if(options.devices.begin(), options.devices.end(),
                                     [&](const Device& d) { return d.type == device.type; });
    devices_.push_back(chosen == options.devices.end() ? device : *chosen);
    DeviceAPI::Get(devices_.back());  // fails now, with its reason, if the device is missing
  }
  for (const VMFunction& function : executable_.functions) {
    functions_.push_back(LoadedFunction{function.instructions.data(),
                                        static_cast<int64_t>(function.instructions.size()),
                                        function.num_params, function.register_file_size});
  }
  constants_.resize(executable_.constants.size());
  BindPrimitives(options);
  if (options.profiling) {
    std::vector<std::string> names;
    for (const Kernel& kernel : kernels_) names.push_back(kernel.name);
    profiler_ = std::make_unique<Profiler>(std::move(names), UniqueDevices(devices_));
  }
}

VirtualMachine::~VirtualMachine() = default;

namespace {

// The target whose generated kernels this host's processor runs.
constexpr const char* kHostTarget =
#if defined(__x86_64__)
    "intel";
#elif defined(__aarch64__)
    "arm";
#else
    "";
#endif

// Throws nimble::Error unless this host's processor runs `target`'s kernels
// (nvidia's host code is intel's).
void CheckKernelsRunHere(const std::string& target) {
  if (target == kHostTarget || (target == "nvidia" && std::string(kHostTarget) == "intel")) return;
  throw Error("the executable's generated kernels are for target '" + target +
              "', and this host runs '" + std::string(kHostTarget) +
              "' kernels: compile it with --target " + kHostTarget +
              ", or run it on a host of its target (an arm one may be emulated with "
              "qemu-aarch64 and the cross-built runtime)");
}

}  // namespace

void VirtualMachine::BindPrimitives(const VMOptions& options) {
  if (!executable_.kernel_library.empty()) {
    CheckKernelsRunHere(executable_.target);
    if (!executable_.device_code.empty()) {
      device_code_ = DeviceAPI::Get(GpuDevice())->LoadCode(executable_.device_code);
    }
    kernel_library_ =
        std::make_unique<KernelLibrary>(executable_.kernel_library, device_code_.get());
  }
  KernelRegistry extra_kernels;
  for (const auto& [name, factory] : options.extra_kernels) extra_kernels.Register(name, factory);

  // Switches choose among the other kernels, so they are bound last.
  std::vector<bool> is_switch;
  for (const Primitive& primitive : executable_.primitives) {
    is_switch.push_back(primitive.name == kExtentSwitch);
  }
  const auto where = [&](size_t i) {
    return "primitive " + std::to_string(i) + " '" + executable_.primitives[i].name + "'";
  };
  for (size_t i = 0; i < executable_.primitives.size(); ++i) {
    const Primitive& primitive = executable_.primitives[i];
    if (is_switch[i]) {
      kernels_.emplace_back();
      continue;
    }
    std::string library_miss = "the executable embeds no kernel library";
    if (kernel_library_) {
      if (NimbleKernelFunc func = kernel_library_->Find(primitive.name, &library_miss)) {
        const bool gpu = primitive.attrs.Has("device") &&
                         primitive.attrs.GetString("device") == DeviceTypeName(DeviceType::kCUDA);
        kernels_.push_back(
            Kernel{primitive.name, func, nullptr, gpu ? DeviceType::kCUDA : DeviceType::kCPU});
        continue;
      }
    }
    try {
      if (extra_kernels.Contains(primitive.name)) {
        kernels_.push_back(extra_kernels.Bind(primitive.name, primitive.attrs));
        continue;
      }
      const KernelRegistry& builtin = KernelRegistry::Global();
      if (builtin.Contains(primitive.name)) {
        kernels_.push_back(builtin.Bind(primitive.name, primitive.attrs));
        continue;
      }
      if (std::optional<Kernel> kernel = DeviceLibraryKernel(primitive.name, primitive.attrs)) {
        kernels_.push_back(std::move(*kernel));
        continue;
      }
    } catch (const Error& error) {
      throw Error(where(i) + ": " + error.what());
    }
    throw Error(where(i) + " has no kernel: it is not in the executable's kernel library (" +
                library_miss +
                "), among the VM's extra kernels, the built-in kernels or its devices' libraries");
  }
  for (size_t i = 0; i < executable_.primitives.size(); ++i) {
    if (!is_switch[i]) continue;
    try {
      kernels_[i] = BindExtentSwitch(executable_.primitives[i].attrs, kernels_, is_switch);
    } catch (const Error& error) {
      throw Error(where(i) + ": " + error.what());
    }
  }
}

Device VirtualMachine::GpuDevice() const {
  for (const Device& device : devices_) {
    if (device.type == DeviceType::kCUDA) return device;
  }
  throw Error("the executable has GPU code but no CUDA device");
}

std::optional<Kernel> VirtualMachine::DeviceLibraryKernel(const std::string& name,
                                                          const Attrs& attrs) const {
  for (const Device& device : devices_) {
    if (device.type == DeviceType::kCPU) continue;
    DeviceAPI* api = DeviceAPI::Get(device);
    if (DeviceKernelFunc func = api->LibraryKernel(name)) {
      auto state = std::make_shared<DeviceKernelState>(
          DeviceKernelState{.api = api, .set_error = NimbleKernelSetError});
      if (attrs.Has("transpose_a")) state->transpose_a = attrs.GetBool("transpose_a");
      if (attrs.Has("transpose_b")) state->transpose_b = attrs.GetBool("transpose_b");
      return Kernel{name, func, std::move(state), device.type};
    }
  }
  return std::nullopt;
}

Ref<Object> VirtualMachine::Invoke(const std::string& function,
                                   const std::vector<Ref<Object>>& args) {
  return Execute(executable_.FunctionIndex(function), args);
}

void VirtualMachine::SetInput(const std::string& function, int32_t index, Ref<Object> value) {
  const VMFunction& callee = executable_.functions[executable_.FunctionIndex(function)];
  if (index < 0 || index >= callee.num_params) {
    throw Error("input index " + std::to_string(index) + " out of range: @" + function + " takes " +
                std::to_string(callee.num_params) + " inputs");
  }
  std::vector<Ref<Object>>& inputs = inputs_[function];
  CheckArgument(callee, static_cast<size_t>(index), value);
  inputs.resize(static_cast<size_t>(callee.num_params));
  inputs[static_cast<size_t>(index)] = std::move(value);
}

void VirtualMachine::SetInputs(const std::string& function, std::vector<Ref<Object>> values) {
  const VMFunction& callee = executable_.functions[executable_.FunctionIndex(function)];
  if (values.size() != static_cast<size_t>(callee.num_params)) {
    throw Error("@" + function + " takes " + std::to_string(callee.num_params) + " inputs, got " +
                std::to_string(values.size()));
  }
  for (size_t i = 0; i < values.size(); ++i) CheckArgument(callee, i, values[i]);
  inputs_[function] = std::move(values);
}

void VirtualMachine::Run(const std::string& function) {
  const int32_t index = executable_.FunctionIndex(function);
  const auto inputs = inputs_.find(function);
  const size_t num_params = static_cast<size_t>(executable_.functions[index].num_params);
  for (size_t i = 0; i < num_params; ++i) {
    if (inputs == inputs_.end() || !inputs->second[i]) {
      throw Error("input " + std::to_string(i) + " of @" + function + " is not set");
    }
  }
  outputs_.clear();
  const Ref<Object> result =
      Execute(index, inputs == inputs_.end() ? std::vector<Ref<Object>>() : inputs->second);
  ForEachTensor(
      result, [&] { return "the result of @" + function; },
      [&](TensorNode* tensor) { outputs_.push_back(Tensor(tensor)); });
}

Tensor VirtualMachine::GetOutput(size_t index) const {
  if (index >= outputs_.size()) {
    throw Error("output index " + std::to_string(index) + " out of range (" +
                std::to_string(outputs_.size()) + " outputs)");
  }
  return outputs_[index];
}

Ref<Object> VirtualMachine::Execute(int32_t function, const std::vector<Ref<Object>>& args) {
  const LoadedFunction& entry = functions_[function];
  const std::string& name = executable_.functions[function].name;
  if (args.size() != static_cast<size_t>(entry.num_params)) {
    throw Error("@" + name + " takes " + std::to_string(entry.num_params) + " arguments, got " +
                std::to_string(args.size()));
  }
  for (size_t i = 0; i < args.size(); ++i) {
    CheckArgument(executable_.functions[function], i, args[i]);
    if (!IsTensorTree(args[i])) {
      throw Error("argument " + std::to_string(i) + " of @" + name +
                  " must be a tensor or an ADT of tensors, got " + Describe(args[i]));
    }
  }
  if (!frames_.empty()) throw Error("the VM is already running a function");

  EnsureRegisters(static_cast<size_t>(entry.register_file_size));
  std::copy(args.begin(), args.end(), registers_.begin());
  frames_.push_back(Frame{function, 0, 0, kNoRegister});
  peak_call_depth_ = std::max<size_t>(peak_call_depth_, 1);
  Ref<Object> result;
  try {
    result = profiler_ ? RunLoop<true>() : RunLoop<false>();
  } catch (const Error& error) {
    const std::string where = frames_.empty() ? "" : SourceOf(frames_.back());
    // Innermost first: the failing instruction, then the calls that led to it.
    constexpr size_t kFramesShown = 8;
    std::string trace;
    for (auto frame = frames_.rbegin(); frame != frames_.rend(); ++frame) {
      if (static_cast<size_t>(frame - frames_.rbegin()) == kFramesShown) {
        trace += "\n  ... " + std::to_string(frames_.size() - kFramesShown) + " more frames";
        break;
      }
      const VMFunction& at = executable_.functions[frame->function];
      const int64_t pc = frame == frames_.rbegin() ? frame->return_pc : frame->return_pc - 1;
      trace += "\n  at @" + at.name + " pc " + std::to_string(pc) + ": " +
               InstructionToString(at.instructions[pc]);
    }
    ResetStacks();
    throw Error(where + error.what() + trace);
  } catch (...) {
    ResetStacks();
    throw;
  }
  if (!result) throw Error("@" + name + " returned no value");
  return result;
}

std::string VirtualMachine::SourceOf(const Frame& frame) const {
  const std::vector<SourcePosition>& positions = executable_.functions[frame.function].positions;
  if (positions.empty() || !positions[frame.return_pc].valid()) return "";
  const std::string& file = executable_.source_name;
  return (file.empty() ? "" : file + ":") + positions[frame.return_pc].ToString() + ": ";
}

void VirtualMachine::ResetStacks() {
  frames_.clear();
  std::fill(registers_.begin(), registers_.end(), nullptr);
  call_args_.clear();
}

void VirtualMachine::EnsureRegisters(size_t count) {
  if (registers_.size() < count) registers_.resize(std::max(count, 2 * registers_.size()));
}

void VirtualMachine::ClearRegisters(size_t base, size_t count) {
  Ref<Object>* regs = registers_.data() + base;
  for (size_t i = 0; i < count; ++i) {
    if (regs[i]) regs[i] = nullptr;
  }
}

template <typename FillArgs>
void VirtualMachine::Call(int32_t callee, size_t num_args, RegName dst, bool tail, FillArgs fill) {
  const LoadedFunction& target = functions_[callee];
  Frame& frame = frames_.back();
  const size_t frame_size = static_cast<size_t>(functions_[frame.function].register_file_size);
  if (tail) {
    // The arguments may read registers the callee's parameters overwrite.
    call_args_.resize(num_args);
    fill(registers_.data() + frame.base, call_args_.data());
    ClearRegisters(frame.base, frame_size);
    EnsureRegisters(frame.base + static_cast<size_t>(target.register_file_size));
    std::move(call_args_.begin(), call_args_.end(), registers_.begin() + frame.base);
    frame.function = callee;
    return;
  }
  if (frames_.size() >= max_call_depth_) {
    throw Error("call depth exceeds " + std::to_string(max_call_depth_) +
                " frames (unbounded recursion?)");
  }
  const size_t base = frame.base + frame_size;
  EnsureRegisters(base + static_cast<size_t>(target.register_file_size));
  fill(registers_.data() + frame.base, registers_.data() + base);
  frames_.push_back(Frame{callee, 0, base, dst});
  peak_call_depth_ = std::max(peak_call_depth_, frames_.size());
}

const Ref<Object>& VirtualMachine::LoadConstant(int64_t index) {
  Ref<Object>& loaded = constants_[index];
  if (!loaded) {
    const ConstantEntry& constant = executable_.constants[index];
    const Device device = devices_[constant.device_index];
    loaded =
        constant.tensor->device() == device ? constant.tensor : constant.tensor->CopyTo(device);
  }
  return loaded;
}

Storage VirtualMachine::AllocStorage(const Instruction& in, const Ref<Object>* regs) const {
  int64_t size = in.immediate;
  if (in.src != kNoRegister) {
    // A rank-1 size register is the shape of the tensor the storage is for,
    // which spares a program the size arithmetic of every dynamic allocation.
    const TensorNode* tensor = As<TensorNode>(regs[in.src]);
    if (tensor && tensor->ndim() == 1) {
      const Shape shape = ReadShape(regs[in.src], "the storage size");
      size = ShapeBytes(shape, in.dtype);
    } else {
      size = ReadScalar(regs[in.src], "the storage size");
    }
  }
  if (size < 0) throw Error("negative storage size " + std::to_string(size));
  return StorageNode::Allocate(devices_[in.device_index], static_cast<size_t>(size),
                               static_cast<size_t>(in.alignment));
}

Tensor VirtualMachine::AllocTensor(const Instruction& in, const Ref<Object>* regs) const {
  StorageNode& storage = Expect<StorageNode>(regs[in.src], "a storage", "the tensor's storage");
  const bool offset_in_register = in.op == Opcode::kAllocTensor && in.operand != kNoRegister;
  const int64_t offset =
      offset_in_register ? ReadScalar(regs[in.operand], "the tensor offset") : in.immediate;
  Shape shape =
      in.op == Opcode::kAllocTensor ? in.shape : ReadShape(regs[in.operand], "the tensor shape");
  const uint64_t bytes = static_cast<uint64_t>(ShapeBytes(shape, in.dtype));
  if (offset < 0 || static_cast<uint64_t>(offset) > storage.size() ||
      bytes > storage.size() - static_cast<uint64_t>(offset)) {
    throw Error("a tensor of shape " + ShapeToString(shape) + " and dtype " + in.dtype.name() +
                " at offset " + std::to_string(offset) + " does not fit in a storage of " +
                std::to_string(storage.size()) + " bytes");
  }
  return Make<TensorNode>(Storage(&storage), static_cast<size_t>(offset), std::move(shape),
                          in.dtype);
}

Tensor VirtualMachine::DeviceCopy(const Instruction& in, const Ref<Object>& source) const {
  const TensorNode& tensor = Expect<TensorNode>(source, "a tensor", "the copied value");
  const Device from = devices_[in.source_device_index];
  if (tensor.device() != from) {
    throw Error("device_copy expects a tensor on " + from.ToString() + ", got one on " +
                tensor.device().ToString());
  }
  return tensor.CopyTo(devices_[in.device_index]);
}

namespace {

[[noreturn]] void RefuseDevice(const Kernel& kernel, size_t argument, const TensorNode& tensor) {
  throw Error("kernel " + kernel.name + ": argument " + std::to_string(argument) + " (" +
              tensor.TypeString() + ") is on " + tensor.device().ToString() +
              ", and the kernel reads " + DeviceTypeName(kernel.device) + " memory");
}

}  // namespace

template <bool kProfile>
void VirtualMachine::InvokePacked(const Instruction& in, const Ref<Object>* regs) {
  const Kernel& kernel = kernels_[in.index];
  packed_tensors_.clear();
  for (RegName reg : in.args) {
    ForEachTensor(
        regs[reg], [&] { return "argument $" + std::to_string(reg) + " of kernel " + kernel.name; },
        [&](TensorNode* tensor) {
          if (tensor->device().type != kernel.device) {
            RefuseDevice(kernel, packed_tensors_.size(), *tensor);
          }
          packed_tensors_.push_back(AsDLTensor(*tensor));
        });
  }
  packed_args_.clear();
  for (DLTensor& tensor : packed_tensors_) packed_args_.push_back(&tensor);
  const int32_t num_args = static_cast<int32_t>(packed_args_.size());
  if constexpr (kProfile) {
    const Clock::time_point start = Clock::now();
    kernel(packed_args_.data(), num_args);
    // A GPU kernel is queued: its time is until the device has run it.
    if (kernel.device != DeviceType::kCPU) DeviceAPI::Get(GpuDevice())->Synchronize();
    profiler_->AddKernelTime(static_cast<size_t>(in.index), Clock::now() - start);
  } else {
    kernel(packed_args_.data(), num_args);
  }
}

Tensor VirtualMachine::Scalar(const Instruction& in, const Ref<Object>* regs) {
  const auto op = static_cast<ScalarOperator>(in.index);
  const auto operand = [&](RegName reg) -> const TensorNode& {
    return Expect<TensorNode>(regs[reg], "a tensor", "an operand of scalar");
  };
  const TensorNode* rhs = in.operand == kNoRegister ? nullptr : &operand(in.operand);
  Tensor result = scalars_.Get(ScalarResultDType(op, in.dtype), {});
  EvaluateScalar(op, in.dtype, operand(in.src), rhs, in.immediate, result->raw_data());
  return result;
}

Tensor VirtualMachine::ShapeOf(const Instruction& in, const Ref<Object>& value) {
  const TensorNode& tensor = Expect<TensorNode>(value, "a tensor", "shape_of's value");
  const int64_t rank = tensor.ndim();
  Tensor shape = scalars_.Get(in.dtype, {&rank, 1});
  // As the shape_of kernel: int32 narrows modulo 2^32.
  DispatchDType(in.dtype, [&](auto tag) {
    using T = decltype(tag);
    std::transform(tensor.shape().begin(), tensor.shape().end(), shape->data<T>(),
                   [](int64_t dim) { return ConvertElement<T>(dim); });
  });
  return shape;
}

template <bool kProfile>
Ref<Object> VirtualMachine::RunLoop() {
  const Clock::time_point start = kProfile ? Clock::now() : Clock::time_point();
  const LoadedFunction* function = nullptr;
  const Instruction* code = nullptr;
  Ref<Object>* regs = nullptr;
  int64_t pc = 0;
  // After a call or return: the top frame's function and registers.
  const auto enter_top_frame = [&] {
    const Frame& frame = frames_.back();
    function = &functions_[frame.function];
    code = function->code;
    regs = registers_.data() + frame.base;
  };
  enter_top_frame();
  try {
    while (true) {
      const Instruction& in = code[pc];
      if constexpr (kProfile) profiler_->CountInstruction(in.op);
      switch (in.op) {
        case Opcode::kMove:
          regs[in.dst] = regs[in.src];
          ++pc;
          break;
        case Opcode::kRet: {
          Ref<Object> result = std::move(regs[in.src]);
          const Frame& frame = frames_.back();
          ClearRegisters(frame.base, static_cast<size_t>(function->register_file_size));
          const RegName dst = frame.caller_dst;
          frames_.pop_back();
          if (frames_.empty()) {
            if constexpr (kProfile) profiler_->AddRunTime(Clock::now() - start);
            return result;
          }
          enter_top_frame();
          pc = frames_.back().return_pc;
          regs[dst] = std::move(result);
          break;
        }
        case Opcode::kInvoke:
          frames_.back().return_pc = pc + 1;
          Call(static_cast<int32_t>(in.index), in.args.size(), in.dst, IsTailCall(code, pc),
               [&](Ref<Object>* caller, Ref<Object>* params) {
                 for (size_t i = 0; i < in.args.size(); ++i) params[i] = TakeArg(in, caller, i);
               });
          enter_top_frame();
          pc = 0;
          break;
        case Opcode::kInvokeClosure: {
          const ClosureNode& closure =
              Expect<ClosureNode>(regs[in.src], "a closure", "the invoked value");
          const RefArray& captured = closure.captured();
          const int32_t callee = closure.function_index();
          const size_t num_args = captured.size() + in.args.size();
          if (num_args != static_cast<size_t>(functions_[callee].num_params)) {
            throw Error("closure of @" + executable_.functions[callee].name + " takes " +
                        std::to_string(functions_[callee].num_params - captured.size()) +
                        " arguments, got " + std::to_string(in.args.size()));
          }
          frames_.back().return_pc = pc + 1;
          Call(callee, num_args, in.dst, IsTailCall(code, pc),
               [&](Ref<Object>* caller, Ref<Object>* params) {
                 std::copy(captured.begin(), captured.end(), params);
                 for (size_t i = 0; i < in.args.size(); ++i) {
                   params[captured.size() + i] = TakeArg(in, caller, i);
                 }
               });
          enter_top_frame();
          pc = 0;
          break;
        }
        case Opcode::kInvokePacked:
          InvokePacked<kProfile>(in, regs);
          ++pc;
          break;
        case Opcode::kAllocStorage:
          regs[in.dst] = AllocStorage(in, regs);
          ++pc;
          break;
        case Opcode::kAllocTensor:
        case Opcode::kAllocTensorReg:
          regs[in.dst] = AllocTensor(in, regs);
          ++pc;
          break;
        case Opcode::kAllocADT:
          regs[in.dst] = Make<ADTNode>(static_cast<int32_t>(in.index), in.args.size(),
                                       [&](size_t i) { return TakeArg(in, regs, i); });
          ++pc;
          break;
        case Opcode::kAllocClosure:
          regs[in.dst] = Make<ClosureNode>(static_cast<int32_t>(in.index), in.args.size(),
                                           [&](size_t i) { return TakeArg(in, regs, i); });
          ++pc;
          break;
        case Opcode::kGetField: {
          const ADTNode& adt = Expect<ADTNode>(regs[in.src], "an ADT value", "get_field's object");
          if (static_cast<uint64_t>(in.index) >= adt.size()) {
            throw Error("field " + std::to_string(in.index) + " out of range for " +
                        Describe(regs[in.src]));
          }
          regs[in.dst] = adt.fields()[in.index];
          ++pc;
          break;
        }
        case Opcode::kGetTag: {
          const int32_t tag =
              Expect<ADTNode>(regs[in.src], "an ADT value", "get_tag's object").tag();
          Tensor value = scalars_.Get(DataType::Int32(), {});
          *value->data<int32_t>() = tag;
          regs[in.dst] = std::move(value);
          ++pc;
          break;
        }
        case Opcode::kIf: {
          const int64_t test = ReadScalar(regs[in.src], "the test of if");
          const int64_t target = in.operand == kNoRegister
                                     ? in.immediate
                                     : ReadScalar(regs[in.operand], "the target of if");
          pc += test == target ? in.true_offset : in.false_offset;
          break;
        }
        case Opcode::kGoto:
          pc += in.true_offset;
          break;
        case Opcode::kLoadConst:
          regs[in.dst] = LoadConstant(in.index);
          ++pc;
          break;
        case Opcode::kLoadConsti: {
          Tensor value = scalars_.Get(DataType::Int64(), {});
          *value->data<int64_t>() = in.immediate;
          regs[in.dst] = std::move(value);
          ++pc;
          break;
        }
        case Opcode::kDeviceCopy:
          regs[in.dst] = DeviceCopy(in, regs[in.src]);
          ++pc;
          break;
        case Opcode::kShapeOf:
          regs[in.dst] = ShapeOf(in, regs[in.src]);
          ++pc;
          break;
        case Opcode::kReshapeTensor:
          regs[in.dst] =
              LeadingView(Expect<TensorNode>(regs[in.src], "a tensor", "the reshaped value"),
                          ReadShape(regs[in.operand], "the new shape"));
          ++pc;
          break;
        case Opcode::kFatal:
          throw Error(executable_.messages[in.index]);
        case Opcode::kKillRegister:
          regs[in.dst] = nullptr;
          ++pc;
          break;
        case Opcode::kScalar:
          regs[in.dst] = Scalar(in, regs);
          ++pc;
          break;
        case Opcode::kTreeSchedule:
          regs[in.dst] = ScheduleTree(regs[in.src], DecodeTreeScheduleLayout(in.index, in.shape));
          ++pc;
          break;
      }
    }
  } catch (...) {
    frames_.back().return_pc = pc;
    if constexpr (kProfile) profiler_->AddRunTime(Clock::now() - start);
    throw;
  }
}

}  // namespace nimble::vm
