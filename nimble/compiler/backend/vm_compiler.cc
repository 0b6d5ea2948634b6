// The VM compiler [paper 5]: one pass over each global of a module in the
// memory dialect, emitting bytecode as it goes. Registers are never reused
// (a value's register is its name for the whole function), which is what
// lets `let` bind a variable to its value's register without a Move, and
// lets a match's clause body, reached from several leaves of the decision
// tree, find its pattern variables in the same registers on every path.
#include "nimble/compiler/backend/vm_compiler.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "nimble/compiler/backend/kernel_devices.h"
#include "nimble/compiler/backend/kernel_tuning.h"
#include "nimble/compiler/backend/primitive_kernels.h"
#if NIMBLE_HAVE_CODEGEN
#include "nimble/compiler/codegen/link.h"
#include "nimble/compiler/codegen/llvm_codegen.h"
#include "nimble/compiler/codegen/target.h"
#endif
#include "nimble/compiler/ir/functor.h"
#include "nimble/compiler/op/tree_schedule.h"
#include "nimble/compiler/op/vm_instructions.h"
#include "nimble/compiler/support/deep_stack.h"
#include "nimble/compiler/transform/pass_util.h"
#include "nimble/vm/cpu_features.h"
#include "nimble/vm/error.h"
#include "nimble/vm/extent_switch.h"
#include "nimble/vm/kernels/op_kernel.h"

namespace nimble::backend {

namespace {

// The operators a primitive's body calls.
class CalledOps : public ir::ExprVisitor {
 public:
  void VisitOp(const ir::OpNode* op) override { names.push_back(op->name); }
  std::vector<std::string> names;
};

// Whether a primitive gets a generated kernel: as measurement chose, else
// per CompileOptions::kernels.
std::function<bool(const ir::FunctionNode&)> KernelPolicy(const CompileOptions& options,
                                                          const KernelChoices& choices) {
  return [&options, &choices](const ir::FunctionNode& primitive) {
    const auto chosen = choices.find(&primitive);
    if (chosen != choices.end()) return chosen->second.kernel == kGeneratedKernel;
    CalledOps ops;
    ops.VisitExpr(primitive.body);
    for (const std::string& op : ops.names) {
      if (!GeneratesOp(op, options)) return false;
    }
    return true;
  };
}

using vm::Instruction;
using vm::kNoRegister;
using vm::RegName;

// "line:col: " when the node came from source text, so errors point at it.
std::string Where(const ir::ExprNode* node) {
  return node->span.valid() ? node->span.ToString() + ": " : "";
}

// An int64 or narrower integer scalar literal, as an instruction immediate.
std::optional<int64_t> IntegerScalar(const ir::Expr& expr) {
  if (expr->kind != ir::ExprKind::kConstant) return std::nullopt;
  const Tensor& data = static_cast<const ir::ConstantNode*>(expr.get())->data;
  if (data->ndim() != 0 || data->dtype().is_float()) return std::nullopt;
  return data->GetAsInt64(0);
}

// The elements of a 1-D integer literal (a static shape), or nothing.
std::optional<Shape> IntegerVector(const ir::Expr& expr) {
  if (expr->kind != ir::ExprKind::kConstant) return std::nullopt;
  const Tensor& data = static_cast<const ir::ConstantNode*>(expr.get())->data;
  if (data->ndim() != 1 || data->dtype().is_float()) return std::nullopt;
  Shape values;
  for (int64_t i = 0; i < data->numel(); ++i) values.push_back(data->GetAsInt64(i));
  return values;
}

// A parameter's type as the VM checks it at entry (tuples nested deeper than
// the format allows are left unchecked).
vm::ParamType SignatureType(const ir::Type& type, int depth) {
  if (type && type->kind == ir::TypeKind::kTensor) {
    const auto* tensor = static_cast<const ir::TensorTypeNode*>(type.get());
    std::vector<int64_t> dims, bounds;
    for (const ir::Dim& dim : tensor->shape) {
      dims.push_back(dim.is_static() ? dim.value() : vm::ParamType::kAnyDim);
      bounds.push_back(dim.is_any() ? dim.upper_bound().value_or(vm::ParamType::kNoBound)
                                    : vm::ParamType::kNoBound);
    }
    return vm::ParamType::Tensor(tensor->dtype, std::move(dims), std::move(bounds));
  }
  if (type && type->kind == ir::TypeKind::kTuple && depth < vm::ParamType::kMaxDepth) {
    std::vector<vm::ParamType> fields;
    for (const ir::Type& field : static_cast<const ir::TupleTypeNode*>(type.get())->fields) {
      fields.push_back(SignatureType(field, depth + 1));
    }
    return vm::ParamType::Tuple(std::move(fields));
  }
  return vm::ParamType::Other(type ? ir::TypeToString(type) : "?");
}

vm::Param SignatureParam(const ir::Var& param) {
  return vm::Param{
      param->name_hint,
      SignatureType(param->checked_type ? param->checked_type : param->type_annotation, 0)};
}

// The tables every function shares: function indices, constant pool,
// primitives, Fatal messages and devices of the executable being built.
class ExecutableBuilder {
 public:
  ExecutableBuilder(const ir::IRModule& module, const CompileOptions& options,
                    const PrimitiveKernels& kernels, const KernelChoices& choices,
                    const KernelDeviceMap& devices)
      : module_(module), kernels_(kernels), choices_(choices), devices_(devices) {
    TargetDevice(options.target);  // rejects an unknown target
    executable_.target = options.target;
    executable_.source_name = options.source_name;
    for (const ir::IRModuleNode::Definition& definition : module->functions()) {
      functions_.emplace(definition.global->name, static_cast<int32_t>(function_defs_.size()));
      function_defs_.push_back(definition.function.get());
    }
  }

  // Index of the VM function of global `global` and its definition.
  int32_t FunctionIndex(const ir::GlobalVarNode* global) const {
    const auto found = functions_.find(global->name);
    if (found == functions_.end()) {
      throw Error(Where(global) + "call of undefined global @" + global->name);
    }
    return found->second;
  }
  const ir::FunctionNode* FunctionDef(const ir::GlobalVarNode* global) const {
    return function_defs_[FunctionIndex(global)];
  }

  // The pool entry holding `constant` on device `device_index`. One tensor
  // appears once however many nodes hold it: nodes are matched by identity
  // first, then by dtype, shape and bytes.
  int64_t ConstantIndex(const ir::ConstantNode* constant, int32_t device_index) {
    const auto key = std::make_pair(constant, device_index);
    if (const auto known = constant_nodes_.find(key); known != constant_nodes_.end()) {
      return known->second;
    }
    const Tensor& tensor = constant->data;
    const std::string_view bytes(static_cast<const char*>(tensor->raw_data()), tensor->nbytes());
    const size_t hash = std::hash<std::string_view>()(bytes) ^
                        std::hash<std::string>()(tensor->TypeString()) ^
                        static_cast<size_t>(device_index);
    int64_t index = -1;
    const auto [begin, end] = constant_contents_.equal_range(hash);
    for (auto candidate = begin; candidate != end; ++candidate) {
      const vm::ConstantEntry& entry = executable_.constants[candidate->second];
      if (entry.device_index == device_index && entry.tensor->dtype() == tensor->dtype() &&
          entry.tensor->shape() == tensor->shape() &&
          std::memcmp(entry.tensor->raw_data(), bytes.data(), bytes.size()) == 0) {
        index = candidate->second;
        break;
      }
    }
    if (index < 0) {
      index = static_cast<int64_t>(executable_.constants.size());
      executable_.constants.push_back(vm::ConstantEntry{tensor, device_index});
      constant_contents_.emplace(hash, index);
    }
    constant_nodes_.emplace(key, index);
    return index;
  }

  // The kernel `name` bound to `attrs`; identical primitives share one entry.
  int64_t PrimitiveIndex(const std::string& name, const Attrs& attrs) {
    std::vector<vm::Primitive>& primitives = executable_.primitives;
    const vm::Primitive primitive{name, attrs};
    const auto found = std::find(primitives.begin(), primitives.end(), primitive);
    if (found != primitives.end()) return found - primitives.begin();
    primitives.push_back(primitive);
    return static_cast<int64_t>(primitives.size()) - 1;
  }

  int64_t MessageIndex(const std::string& message) {
    std::vector<std::string>& messages = executable_.messages;
    const auto found = std::find(messages.begin(), messages.end(), message);
    if (found != messages.end()) return found - messages.begin();
    messages.push_back(message);
    return static_cast<int64_t>(messages.size()) - 1;
  }

  // The device table index of a device attribute ("cpu" or "cuda"); the CPU
  // is index 0, the GPU is added on first mention.
  int32_t DeviceIndex(const std::string& name, const ir::ExprNode* where) {
    if (name == "cpu") return 0;
    if (name != "cuda") {
      throw Error(Where(where) + "unknown device \"" + name + "\" (expected \"cpu\" or \"cuda\")");
    }
    if (executable_.target != "nvidia") {
      throw Error(Where(where) + "device \"cuda\" needs target nvidia, not " + executable_.target);
    }
    const Device cuda{DeviceType::kCUDA, 0};
    std::vector<Device>& devices = executable_.devices;
    const auto found = std::find(devices.begin(), devices.end(), cuda);
    if (found != devices.end()) return static_cast<int32_t>(found - devices.begin());
    devices.push_back(cuda);
    return static_cast<int32_t>(devices.size()) - 1;
  }

  // How many constructors the ADT of `constructor` has.
  size_t NumConstructors(const ir::ConstructorNode* constructor) const {
    const ir::TypeData type_data = module_->LookupTypeDef(constructor->belong_to->name);
    if (!type_data) {
      throw Error("constructor " + constructor->name + " belongs to undefined type " +
                  constructor->belong_to->name);
    }
    return type_data->constructors.size();
  }

  void AddFunction(vm::VMFunction function) {
    executable_.functions.push_back(std::move(function));
  }
  vm::Executable Take() { return std::move(executable_); }

  const PrimitiveKernels& kernels() const { return kernels_; }
  // Primitive `kernel` for `primitive`, or a switch from it to the kernel
  // measurement chose for large extents there (vm/extent_switch.h); both
  // take the primitive's parameters, which a site's op call takes in order
  // (matmul_sites.h).
  int64_t SwitchedKernel(const ir::FunctionNode* primitive, int64_t kernel) {
    const auto found = choices_.find(primitive);
    if (found == choices_.end() || !found->second.large) return kernel;
    const LargeExtentKernel& large = *found->second.large;
    const auto* op_call = static_cast<const ir::CallNode*>(primitive->body.get());
    Attrs attrs;
    attrs.Set("below", kernel);
    attrs.Set("from", PrimitiveIndex(large.kernel, op_call->attrs));
    attrs.Set("arg", large.arg);
    attrs.Set("axis", large.axis);
    attrs.Set("extent", large.from_extent);
    return PrimitiveIndex(vm::kExtentSwitch, attrs);
  }

  // The runtime's kernel for `primitive`, one call of `op`: the measured
  // choice, the op's built-in kernel, or on the GPU its library kernel (empty
  // when there is none).
  std::string RuntimeKernel(const ir::FunctionNode* primitive, const std::string& op) const {
    const auto device = devices_.find(primitive);
    if (device != devices_.end() && device->second == "cuda") {
      return op == "nn.dense" || op == "nn.batch_matmul" ? op + ".cublas" : "";
    }
    const auto found = choices_.find(primitive);
    return found == choices_.end() || found->second.kernel == kGeneratedKernel
               ? op
               : found->second.kernel;
  }

 private:
  ir::IRModule module_;
  const PrimitiveKernels& kernels_;
  const KernelChoices& choices_;
  const KernelDeviceMap& devices_;
  vm::Executable executable_;
  std::unordered_map<std::string, int32_t> functions_;
  std::vector<const ir::FunctionNode*> function_defs_;
  std::map<std::pair<const ir::ConstantNode*, int32_t>, int64_t> constant_nodes_;
  std::unordered_multimap<size_t, int64_t> constant_contents_;
};

// Where the value of a branch of `if` or of a match clause goes: in tail
// position it is returned; otherwise it is moved into the merge register and
// control jumps to the end (`exits` collects those jumps for patching).
struct Continuation {
  bool tail = false;
  RegName merge = kNoRegister;
  std::vector<size_t> exits;
};

class FunctionCompiler : public ir::ExprFunctor<RegName> {
 public:
  FunctionCompiler(ExecutableBuilder& builder, std::string name)
      : builder_(builder), name_(std::move(name)) {}

  // A `Closure=1` global is flattened into one function taking the captured
  // values, then the inner function's parameters.
  vm::VMFunction Compile(const ir::FunctionNode* function) {
    std::vector<ir::Var> params = function->params;
    ir::Expr body = function->body;
    if (transform::HasFlag(function, transform::kClosureAttr)) {
      if (body->kind != ir::ExprKind::kFunction) {
        throw Error("@" + name_ + " is marked Closure=1 but its body is not a function literal");
      }
      const auto* inner = static_cast<const ir::FunctionNode*>(body.get());
      params.insert(params.end(), inner->params.begin(), inner->params.end());
      body = inner->body;
    }
    std::vector<vm::Param> signature;
    for (const ir::Var& param : params) {
      Bind(param.get(), NewRegister());
      signature.push_back(SignatureParam(param));
    }
    Return(body);
    return vm::VMFunction{name_,
                          static_cast<int32_t>(params.size()),
                          num_registers_,
                          std::move(code_),
                          std::move(signature),
                          std::move(positions_)};
  }

 private:
  // ---- Emission ----

  // While one lives, emitted instructions come from `node`'s source position
  // (when it has one; otherwise from the enclosing node's).
  class SourceScope {
   public:
    SourceScope(FunctionCompiler& compiler, const ir::ExprNode* node)
        : compiler_(compiler), outer_(compiler.position_) {
      if (node->span.valid()) compiler.position_ = {node->span.line, node->span.column};
    }
    ~SourceScope() { compiler_.position_ = outer_; }
    SourceScope(const SourceScope&) = delete;
    SourceScope& operator=(const SourceScope&) = delete;

   private:
    FunctionCompiler& compiler_;
    const vm::SourcePosition outer_;
  };

  RegName NewRegister() { return num_registers_++; }
  size_t Pc() const { return code_.size(); }
  size_t Emit(Instruction instruction) {
    code_.push_back(std::move(instruction));
    positions_.push_back(position_);
    return code_.size() - 1;
  }
  RegName EmitTo(const std::function<Instruction(RegName)>& make) {
    const RegName dst = NewRegister();
    Emit(make(dst));
    return dst;
  }
  // Jumps land at the current pc (a branch's start, a construct's end).
  void MarkJumpTarget() { jump_target_ = Pc(); }

  // Drops `reg`'s reference. Directly after the instruction that reads it
  // last, the instruction moves it instead: one instruction fewer, no count
  // taken and dropped, and a callee may free the value while it runs. Not
  // where a jump lands, as the kill must stay for the paths arriving there.
  void Kill(RegName reg) {
    if (!code_.empty() && jump_target_ != Pc() && code_.back().dst != reg) {
      Instruction& last = code_.back();
      const auto arg = std::find(last.args.begin(), last.args.end(), reg);
      if (arg != last.args.end() && last.SetMoves(static_cast<size_t>(arg - last.args.begin()))) {
        return;
      }
    }
    Emit(Instruction::KillRegister(reg));
  }

  // `ret reg`. When the instruction before computed reg, its args move: the
  // frame ends here, so they are their registers' last reads.
  void Ret(RegName reg) {
    if (!code_.empty() && code_.back().dst == reg && CanMoveArgs(code_.back().op)) {
      Instruction& last = code_.back();
      for (size_t i = 0; i < last.args.size(); ++i) last.SetMoves(i);
    }
    Emit(Instruction::Ret(reg));
  }

  int32_t OffsetTo(size_t from, size_t to) const {
    return static_cast<int32_t>(static_cast<int64_t>(to) - static_cast<int64_t>(from));
  }
  [[noreturn]] void Fail(const ir::ExprNode* node, const std::string& message) const {
    throw Error(Where(node) + message + " (in @" + name_ + ")");
  }

  // ---- Variables ----

  void Bind(const ir::VarNode* var, RegName reg) { registers_[var] = reg; }

  // A unit value (what memory.invoke_mut and friends return) gets a register
  // only if something reads it.
  RegName Materialize(RegName reg) {
    if (reg != kNoRegister) return reg;
    return EmitTo([](RegName dst) { return Instruction::AllocADT(0, {}, dst); });
  }

  // ---- Expressions ----

  // The value of `expr` in a register.
  RegName Value(const ir::Expr& expr) { return Materialize(VisitExpr(expr)); }

  std::vector<RegName> Values(const std::vector<ir::Expr>& exprs) {
    std::vector<RegName> regs;
    for (const ir::Expr& expr : exprs) regs.push_back(Value(expr));
    return regs;
  }

  // Binds the lets of a chain in order, iteratively (chains run 10,000
  // deep), and returns the expression they scope over. In tail position
  // `let %x = e; %x` ends at `e`, so a call there stays a tail call.
  ir::Expr BindLets(ir::Expr expr, bool tail) {
    while (expr->kind == ir::ExprKind::kLet) {
      const auto* let = static_cast<const ir::LetNode*>(expr.get());
      if (tail && let->body.get() == let->var.get()) return let->value;
      Bind(let->var.get(), VisitExpr(let->value));
      expr = let->body;
    }
    return expr;
  }

  // Emits `expr` in tail position: every path ends in `ret`, and a call
  // comes directly before its `ret`, which the VM runs as a tail call.
  void Return(const ir::Expr& expr) {
    const ir::Expr body = BindLets(expr, /*tail=*/true);
    Continuation returned{.tail = true, .merge = kNoRegister, .exits = {}};
    switch (body->kind) {
      case ir::ExprKind::kLet:
        return Return(body);
      case ir::ExprKind::kIf:
        return CompileIf(static_cast<const ir::IfNode*>(body.get()), returned);
      case ir::ExprKind::kMatch:
        return CompileMatch(static_cast<const ir::MatchNode*>(body.get()), returned);
      default:
        Ret(Value(body));
    }
  }

  // A branch's value, delivered to `k`; the last code of a construct falls
  // through to its end instead of jumping there.
  void Deliver(const ir::Expr& expr, Continuation& k, bool last) {
    if (k.tail) return Return(expr);
    Emit(Instruction::Move(Value(expr), k.merge));
    if (!last) k.exits.push_back(Emit(Instruction::Goto(0)));
  }

  RegName Merge(Continuation& k) {
    MarkJumpTarget();
    for (size_t exit : k.exits) code_[exit].true_offset = OffsetTo(exit, Pc());
    return k.merge;
  }

  RegName VisitVar(const ir::VarNode* var) override {
    const auto bound = registers_.find(var);
    if (bound == registers_.end()) Fail(var, "unbound variable %" + var->name_hint);
    if (bound->second == kNoRegister) bound->second = Materialize(kNoRegister);
    return bound->second;
  }

  RegName VisitGlobalVar(const ir::GlobalVarNode* global) override {
    if (transform::HasFlag(builder_.FunctionDef(global), transform::kClosureAttr)) {
      Fail(global, "@" + global->name + " is marked Closure=1 and can only be called");
    }
    const int64_t index = builder_.FunctionIndex(global);
    return EmitTo([&](RegName dst) { return Instruction::AllocClosure(index, {}, dst); });
  }

  RegName VisitConstant(const ir::ConstantNode* constant) override {
    const Tensor& data = constant->data;
    if (data->ndim() == 0 && data->dtype() == DataType::Int64()) {
      const int64_t value = data->GetAsInt64(0);
      return EmitTo([&](RegName dst) { return Instruction::LoadConsti(value, dst); });
    }
    const int64_t index = builder_.ConstantIndex(constant, 0);
    return EmitTo([&](RegName dst) { return Instruction::LoadConst(index, dst); });
  }

  RegName VisitTuple(const ir::TupleNode* tuple) override {
    std::vector<RegName> fields = Values(tuple->fields);
    return EmitTo([&](RegName dst) { return Instruction::AllocADT(0, std::move(fields), dst); });
  }

  RegName VisitTupleGetItem(const ir::TupleGetItemNode* item) override {
    const RegName tuple = Value(item->tuple);
    return EmitTo([&](RegName dst) { return Instruction::GetField(tuple, item->index, dst); });
  }

  RegName VisitOp(const ir::OpNode* op) override {
    Fail(op, "operator " + op->name + " used as a value");
  }

  RegName VisitLet(const ir::LetNode* let) override {
    return VisitExpr(BindLets(ir::RefOf<ir::ExprNode>(let), /*tail=*/false));
  }

  RegName VisitIf(const ir::IfNode* node) override {
    Continuation merged{.tail = false, .merge = NewRegister(), .exits = {}};
    CompileIf(node, merged);
    return Merge(merged);
  }

  RegName VisitMatch(const ir::MatchNode* match) override {
    Continuation merged{.tail = false, .merge = NewRegister(), .exits = {}};
    CompileMatch(match, merged);
    return Merge(merged);
  }

  RegName VisitFunction(const ir::FunctionNode* function) override {
    if (transform::HasFlag(function, transform::kPrimitiveAttr)) {
      Fail(function, "primitive function outside memory.invoke_mut or memory.shape_func");
    }
    Fail(function, "nested function literal (lambda lifting turns it into a global)");
  }

  RegName VisitConstructor(const ir::ConstructorNode* constructor) override {
    if (!constructor->inputs.empty()) {
      Fail(constructor, "constructor " + constructor->name + " used as a function value");
    }
    return EmitTo([&](RegName dst) { return Instruction::AllocADT(constructor->tag, {}, dst); });
  }

  RegName VisitCall(const ir::CallNode* call) override {
    const SourceScope source(*this, call);
    const ir::Expr& callee = call->callee;
    switch (callee->kind) {
      case ir::ExprKind::kOp:
        return CompileOpCall(call, static_cast<const ir::OpNode*>(callee.get()));
      case ir::ExprKind::kGlobalVar: {
        const auto* global = static_cast<const ir::GlobalVarNode*>(callee.get());
        const ir::FunctionNode* definition = builder_.FunctionDef(global);
        const int64_t index = builder_.FunctionIndex(global);
        if (call->args.size() != definition->params.size()) {
          Fail(call, "call of @" + global->name + " passes " + std::to_string(call->args.size()) +
                         " arguments, it takes " + std::to_string(definition->params.size()));
        }
        std::vector<RegName> args = Values(call->args);
        if (transform::HasFlag(definition, transform::kClosureAttr)) {
          return EmitTo(
              [&](RegName dst) { return Instruction::AllocClosure(index, std::move(args), dst); });
        }
        return EmitTo(
            [&](RegName dst) { return Instruction::Invoke(index, std::move(args), dst); });
      }
      case ir::ExprKind::kConstructor: {
        const auto* constructor = static_cast<const ir::ConstructorNode*>(callee.get());
        std::vector<RegName> fields = Values(call->args);
        return EmitTo([&](RegName dst) {
          return Instruction::AllocADT(constructor->tag, std::move(fields), dst);
        });
      }
      case ir::ExprKind::kFunction:
        return VisitFunction(static_cast<const ir::FunctionNode*>(callee.get()));
      default: {
        const RegName closure = Value(callee);
        std::vector<RegName> args = Values(call->args);
        return EmitTo(
            [&](RegName dst) { return Instruction::InvokeClosure(closure, std::move(args), dst); });
      }
    }
  }

  // ---- The memory dialect and the ops that are instructions ----

  RegName CompileOpCall(const ir::CallNode* call, const ir::OpNode* op) {
    const std::string& name = op->name;
    const ir::Attrs& attrs = call->attrs;
    if (name == "memory.alloc_storage") return AllocStorage(call);
    if (name == "memory.alloc_tensor") return AllocTensor(call);
    if (name == "memory.invoke_mut" || name == "memory.shape_func") {
      InvokePrimitive(call, name == "memory.shape_func");
      return kNoRegister;
    }
    if (name == "memory.kill") {
      const ir::Expr& killed = call->args[0];
      if (killed->kind != ir::ExprKind::kVar) Fail(call, "memory.kill of a non-variable");
      const auto* var = static_cast<const ir::VarNode*>(killed.get());
      const auto bound = registers_.find(var);
      if (bound == registers_.end()) Fail(var, "unbound variable %" + var->name_hint);
      // A unit value never got a register: nothing to drop.
      if (bound->second != kNoRegister) Kill(bound->second);
      return kNoRegister;
    }
    if (name == "memory.reshape_tensor") {
      const RegName data = Value(call->args[0]);
      const RegName shape = Value(call->args[1]);
      return EmitTo([&](RegName dst) { return Instruction::ReshapeTensor(data, shape, dst); });
    }
    if (name == "adt.tree_schedule") {
      const vm::TreeScheduleLayout layout = op::TreeScheduleLayoutOf(attrs);
      const RegName tree = Value(call->args[0]);
      return EmitTo([&](RegName dst) {
        return Instruction::TreeSchedule(tree, layout.max_children,
                                         vm::EncodeTreeScheduleLayout(layout), dst);
      });
    }
    if (name == "shape_of") {
      const DataType dtype = attrs.GetDType("dtype");
      if (!op::RunsAsVMInstruction(*call)) {
        Fail(call, "shape_of with dtype " + dtype.name() +
                       " outside a primitive function (the ShapeOf instruction gives int32 or "
                       "int64)");
      }
      const RegName tensor = Value(call->args[0]);
      return EmitTo([&](RegName dst) { return Instruction::ShapeOf(tensor, dtype, dst); });
    }
    if (const std::optional<op::ScalarInstruction> scalar = op::ScalarInstructionOf(*call)) {
      const RegName lhs = Value(call->args[0]);
      // A constant second operand is an immediate.
      std::optional<int64_t> rhs_value;
      RegName rhs = kNoRegister;
      if (call->args.size() > 1) {
        rhs_value = IntegerScalar(call->args[1]);
        if (!rhs_value) rhs = Value(call->args[1]);
      }
      return EmitTo([&](RegName dst) {
        return Instruction::Scalar(scalar->op, lhs, rhs, rhs_value.value_or(0), scalar->dtype, dst);
      });
    }
    if (name == "device_copy") return DeviceCopy(call);
    Fail(call, "operator " + name +
                   " called outside a primitive function (memory manifestation turns it into "
                   "memory.invoke_mut)");
  }

  RegName AllocStorage(const ir::CallNode* call) {
    const ir::Attrs& attrs = call->attrs;
    const DataType dtype = attrs.GetDType("dtype");
    const int32_t alignment = static_cast<int32_t>(attrs.GetInt("alignment"));
    const int32_t device = builder_.DeviceIndex(attrs.GetString("device"), call);
    const ir::Expr& size = call->args[0];
    // A constant size, in bytes or as the shape of the tensor to store, is an immediate.
    std::optional<int64_t> bytes = IntegerScalar(size);
    if (const std::optional<Shape> shape = IntegerVector(size)) {
      bytes = ShapeBytes(*shape, dtype);
    }
    const RegName size_reg = bytes ? kNoRegister : Value(size);
    return EmitTo([&](RegName dst) {
      return Instruction::AllocStorage(size_reg, bytes.value_or(0), alignment, dtype, device, dst);
    });
  }

  RegName AllocTensor(const ir::CallNode* call) {
    const DataType dtype = call->attrs.GetDType("dtype");
    const RegName storage = Value(call->args[0]);
    const std::optional<int64_t> offset = IntegerScalar(call->args[1]);
    const RegName offset_reg = offset ? kNoRegister : Value(call->args[1]);
    std::optional<Shape> shape;
    if (call->args.size() == 2) {
      shape = call->attrs.GetIntList("assert_shape");
    } else {
      shape = IntegerVector(call->args[2]);
    }
    if (shape) {
      if (std::find(shape->begin(), shape->end(), -1) != shape->end()) {
        Fail(call, "memory.alloc_tensor with a dynamic assert_shape needs a shape argument");
      }
      return EmitTo([&](RegName dst) {
        return Instruction::AllocTensor(storage, offset_reg, offset.value_or(0), *shape, dtype,
                                        dst);
      });
    }
    if (!offset) {
      Fail(call,
           "memory.alloc_tensor with both a computed offset and a computed shape (the VM takes "
           "one of them from a register)");
    }
    const RegName shape_reg = Value(call->args[2]);
    return EmitTo([&](RegName dst) {
      return Instruction::AllocTensorReg(storage, *offset, shape_reg, dtype, dst);
    });
  }

  RegName DeviceCopy(const ir::CallNode* call) {
    const int32_t source = builder_.DeviceIndex(call->attrs.GetString("src_device"), call);
    const int32_t target = builder_.DeviceIndex(call->attrs.GetString("dst_device"), call);
    const ir::Expr& data = call->args[0];
    // A constant is stored for the device that uses it: the VM copies it there once.
    if (data->kind == ir::ExprKind::kConstant) {
      const int64_t index =
          builder_.ConstantIndex(static_cast<const ir::ConstantNode*>(data.get()), target);
      return EmitTo([&](RegName dst) { return Instruction::LoadConst(index, dst); });
    }
    const RegName from = Value(data);
    if (source == target) return from;
    return EmitTo([&](RegName dst) { return Instruction::DeviceCopy(from, source, target, dst); });
  }

  // memory.invoke_mut / memory.shape_func (prim, (inputs), (outputs)) as
  // InvokePacked of the op's kernel or shape function, bound to the op's
  // attributes. Kernels take tensors (kernel.h), so tuples are passed field
  // by field.
  void InvokePrimitive(const ir::CallNode* call, bool shape_func) {
    const ir::Expr& callee = call->args[0];
    if (!transform::IsPrimitiveFunction(callee)) {
      Fail(call, "argument 0 of " +
                     std::string(shape_func ? "memory.shape_func" : "memory.invoke_mut") +
                     " must be a primitive function literal");
    }
    const auto* primitive = static_cast<const ir::FunctionNode*>(callee.get());
    if (const GeneratedKernel* generated = builder_.kernels().Find(primitive)) {
      return InvokeGenerated(call, *primitive, *generated, shape_func);
    }
    const ir::Expr& body = primitive->body;
    if (body->kind != ir::ExprKind::kCall ||
        static_cast<const ir::CallNode*>(body.get())->callee->kind != ir::ExprKind::kOp) {
      Fail(primitive,
           "primitive function whose body is not one operator call (a fused primitive needs a "
           "generated kernel)");
    }
    const auto* op_call = static_cast<const ir::CallNode*>(body.get());
    const std::string& op = static_cast<const ir::OpNode*>(op_call->callee.get())->name;
    const std::vector<ir::Expr>& inputs = TupleFields(call->args[1], call, "inputs");
    const std::vector<ir::Expr>& outputs = TupleFields(call->args[2], call, "outputs");

    std::vector<RegName> input_regs;
    if (shape_func) {
      // Already one entry per shape-function input (the shapes of a tuple's fields).
      for (const ir::Expr& input : inputs) Flatten(input, input_regs);
    } else {
      if (inputs.size() != primitive->params.size()) {
        Fail(call, "memory.invoke_mut passes " + std::to_string(inputs.size()) +
                       " inputs to a primitive with " + std::to_string(primitive->params.size()) +
                       " parameters");
      }
      std::unordered_map<const ir::VarNode*, ir::Expr> argument_of;
      for (size_t i = 0; i < inputs.size(); ++i) {
        argument_of.emplace(primitive->params[i].get(), inputs[i]);
      }
      for (const ir::Expr& arg : op_call->args) KernelArgument(arg, argument_of, input_regs);
    }
    std::vector<RegName> output_regs;
    for (const ir::Expr& output : outputs) Flatten(output, output_regs);
    if (output_regs.empty()) Fail(call, "a kernel call without outputs");
    const std::string runtime_kernel =
        shape_func ? vm::ShapeFuncKernelName(op) : builder_.RuntimeKernel(primitive, op);
    if (runtime_kernel.empty()) {
      Fail(call, "operator " + op +
                     " runs on the GPU here, and it has no GPU kernel (it is neither generated "
                     "nor a cuBLAS operator)");
    }
    int64_t kernel = builder_.PrimitiveIndex(runtime_kernel, op_call->attrs);
    if (!shape_func) kernel = builder_.SwitchedKernel(primitive, kernel);
    Emit(Instruction::InvokePacked(kernel, std::move(input_regs), std::move(output_regs)));
  }

  // A generated kernel takes the primitive's parameters (flattened) and its
  // shape function their shapes, as memory manifestation passes them.
  void InvokeGenerated(const ir::CallNode* call, const ir::FunctionNode& primitive,
                       const GeneratedKernel& generated, bool shape_func) {
    const std::vector<ir::Expr>& inputs = TupleFields(call->args[1], call, "inputs");
    const std::vector<ir::Expr>& outputs = TupleFields(call->args[2], call, "outputs");
    if (!shape_func && inputs.size() != primitive.params.size()) {
      Fail(call, "memory.invoke_mut passes " + std::to_string(inputs.size()) +
                     " inputs to a primitive with " + std::to_string(primitive.params.size()) +
                     " parameters");
    }
    if (shape_func && generated.shape_func.empty()) {
      Fail(call, "memory.shape_func of " + generated.name + ", whose outputs are static");
    }
    std::vector<RegName> input_regs;
    for (const ir::Expr& input : inputs) Flatten(input, input_regs);
    std::vector<RegName> output_regs;
    for (const ir::Expr& output : outputs) Flatten(output, output_regs);
    Attrs attrs;
    attrs.Set("fused", generated.fused);
    attrs.Set("signature", generated.signature);
    // The VM passes a GPU kernel device tensors only (its shape function, host ones).
    if (generated.gpu && !shape_func) attrs.Set("device", std::string("cuda"));
    int64_t kernel =
        builder_.PrimitiveIndex(shape_func ? generated.shape_func : generated.name, attrs);
    if (!shape_func) kernel = builder_.SwitchedKernel(&primitive, kernel);
    Emit(Instruction::InvokePacked(kernel, std::move(input_regs), std::move(output_regs)));
  }

  const std::vector<ir::Expr>& TupleFields(const ir::Expr& expr, const ir::CallNode* call,
                                           const std::string& what) {
    if (expr->kind != ir::ExprKind::kTuple) {
      Fail(call, "the " + what + " of " + static_cast<const ir::OpNode*>(call->callee.get())->name +
                     " must be a tuple literal");
    }
    return static_cast<const ir::TupleNode*>(expr.get())->fields;
  }

  // An argument of the primitive body's op call, in terms of the call's inputs.
  void KernelArgument(const ir::Expr& arg,
                      const std::unordered_map<const ir::VarNode*, ir::Expr>& argument_of,
                      std::vector<RegName>& regs) {
    switch (arg->kind) {
      case ir::ExprKind::kVar: {
        const auto found = argument_of.find(static_cast<const ir::VarNode*>(arg.get()));
        if (found == argument_of.end()) {
          Fail(arg.get(), "primitive body uses %" +
                              static_cast<const ir::VarNode*>(arg.get())->name_hint +
                              ", which is not a parameter");
        }
        return Flatten(found->second, regs);
      }
      case ir::ExprKind::kTuple:
        for (const ir::Expr& field : static_cast<const ir::TupleNode*>(arg.get())->fields) {
          KernelArgument(field, argument_of, regs);
        }
        return;
      case ir::ExprKind::kConstant:
        return Flatten(arg, regs);
      default:
        Fail(arg.get(),
             "primitive body passes its operator an argument that is not a parameter, "
             "tuple or constant");
    }
  }

  // The tensors of `expr`: itself, or the fields of a tuple, depth first.
  void Flatten(const ir::Expr& expr, std::vector<RegName>& regs) {
    if (expr->kind == ir::ExprKind::kTuple) {
      for (const ir::Expr& field : static_cast<const ir::TupleNode*>(expr.get())->fields) {
        Flatten(field, regs);
      }
      return;
    }
    ir::Type type = expr->checked_type;
    if (!type && expr->kind == ir::ExprKind::kVar) {
      type = static_cast<const ir::VarNode*>(expr.get())->type_annotation;
    }
    if (!type) Fail(expr.get(), "a kernel argument without a type (run type inference first)");
    FlattenRegister(Value(expr), type, regs);
  }

  void FlattenRegister(RegName reg, const ir::Type& type, std::vector<RegName>& regs) {
    if (type->kind != ir::TypeKind::kTuple) {
      regs.push_back(reg);
      return;
    }
    const std::vector<ir::Type>& fields = static_cast<const ir::TupleTypeNode*>(type.get())->fields;
    for (size_t i = 0; i < fields.size(); ++i) {
      const RegName field = EmitTo(
          [&](RegName dst) { return Instruction::GetField(reg, static_cast<int64_t>(i), dst); });
      FlattenRegister(field, fields[i], regs);
    }
  }

  // ---- Control flow ----

  // if (c) {a} else {b}:  if c == 1 then +1 else +N;  <a>;  <b>.
  void CompileIf(const ir::IfNode* node, Continuation& k) {
    const SourceScope source(*this, node);
    const RegName cond = Value(node->cond);
    const size_t branch = Emit(Instruction::If(cond, kNoRegister, 1, 1, 0));
    Deliver(node->then_branch, k, /*last=*/false);
    MarkJumpTarget();
    code_[branch].false_offset = OffsetTo(branch, Pc());
    Deliver(node->else_branch, k, /*last=*/true);
  }

  // A pending check of a match row: the value in register `reg` against a
  // constructor pattern (wildcards, variables and tuples never need one).
  struct Test {
    RegName reg;
    const ir::PatternConstructorNode* pattern;
  };
  // A clause still possible on the current path: its remaining tests and the
  // variables its patterns bound so far.
  struct Row {
    std::vector<Test> tests;
    std::vector<std::pair<const ir::VarNode*, RegName>> bindings;
    size_t clause;
  };
  // What the code on the current path has established.
  struct PathFacts {
    std::set<RegName> written;                       // field and tag registers loaded
    std::map<RegName, std::set<int32_t>> ruled_out;  // tags a value is known not to have
  };
  // One match being compiled. Field and tag registers are per (value, index)
  // for the whole match, so a clause's variables sit in the same registers
  // on every path that reaches it and its body is emitted once.
  struct MatchState {
    const ir::MatchNode* node;
    Continuation& k;
    std::map<std::pair<RegName, int64_t>, RegName> field_regs;
    std::map<RegName, RegName> tag_regs;
    std::map<size_t, size_t> body_pcs;  // clause -> where its body starts
  };

  // match (d) {...} as a decision tree [paper 5]: test the first remaining
  // clause's first constructor, split the clauses on the outcome, repeat; a
  // path no clause survives ends in Fatal.
  void CompileMatch(const ir::MatchNode* match, Continuation& k) {
    const SourceScope source(*this, match);
    const RegName data = Value(match->data);
    MatchState state{.node = match, .k = k, .field_regs = {}, .tag_regs = {}, .body_pcs = {}};
    PathFacts facts;
    std::vector<Row> rows;
    for (size_t i = 0; i < match->clauses.size(); ++i) {
      Row row{.tests = {}, .bindings = {}, .clause = i};
      // Nothing is ruled out yet, so every clause starts possible.
      Expand(state, facts, data, match->clauses[i].lhs, row);
      rows.push_back(std::move(row));
    }
    Decide(state, std::move(rows), facts, /*last=*/true);
  }

  RegName Field(MatchState& state, PathFacts& facts, RegName object, int64_t index) {
    const auto [entry, added] = state.field_regs.emplace(std::make_pair(object, index), 0);
    if (added) entry->second = NewRegister();
    if (facts.written.insert(entry->second).second) {
      Emit(Instruction::GetField(object, index, entry->second));
    }
    return entry->second;
  }

  RegName Tag(MatchState& state, PathFacts& facts, RegName object) {
    const auto [entry, added] = state.tag_regs.emplace(object, 0);
    if (added) entry->second = NewRegister();
    if (facts.written.insert(entry->second).second) {
      Emit(Instruction::GetTag(object, entry->second));
    }
    return entry->second;
  }

  // Adds what matching `pattern` against register `reg` needs to `row`:
  // variables bind, tuples split into their fields, constructors become
  // tests. False when the path already rules the row out.
  bool Expand(MatchState& state, PathFacts& facts, RegName reg, const ir::Pattern& pattern,
              Row& row) {
    switch (pattern->kind) {
      case ir::PatternKind::kWildcard:
        return true;
      case ir::PatternKind::kVar:
        row.bindings.emplace_back(static_cast<const ir::PatternVarNode*>(pattern.get())->var.get(),
                                  reg);
        return true;
      case ir::PatternKind::kTuple: {
        const auto& fields = static_cast<const ir::PatternTupleNode*>(pattern.get())->patterns;
        for (size_t i = 0; i < fields.size(); ++i) {
          if (fields[i]->kind == ir::PatternKind::kWildcard) continue;
          if (!Expand(state, facts, Field(state, facts, reg, static_cast<int64_t>(i)), fields[i],
                      row)) {
            return false;
          }
        }
        return true;
      }
      case ir::PatternKind::kConstructor: {
        const auto* constructor = static_cast<const ir::PatternConstructorNode*>(pattern.get());
        const auto ruled_out = facts.ruled_out.find(reg);
        if (ruled_out != facts.ruled_out.end() &&
            ruled_out->second.contains(constructor->constructor->tag)) {
          return false;
        }
        row.tests.push_back(Test{reg, constructor});
        return true;
      }
    }
    return true;
  }

  void Decide(MatchState& state, std::vector<Row> rows, PathFacts& facts, bool last) {
    if (rows.empty()) {
      // The source map gives the match's position.
      Emit(Instruction::Fatal(builder_.MessageIndex("non-exhaustive match in @" + name_)));
      return;
    }
    if (rows[0].tests.empty()) return Leaf(state, rows[0], last);

    const Test test = rows[0].tests[0];
    const ir::ConstructorNode* constructor = test.pattern->constructor.get();
    const std::set<int32_t>& ruled_out = facts.ruled_out[test.reg];
    // When every other constructor is ruled out, this one needs no check.
    const bool certain = ruled_out.size() + 1 == builder_.NumConstructors(constructor);
    size_t branch = 0;
    if (!certain) {
      const RegName tag = Tag(state, facts, test.reg);
      branch = Emit(Instruction::If(tag, kNoRegister, constructor->tag, 1, 0));
    }

    PathFacts then_facts = facts;
    std::vector<Row> then_rows;
    for (const Row& row : rows) {
      const auto at = std::find_if(row.tests.begin(), row.tests.end(),
                                   [&](const Test& t) { return t.reg == test.reg; });
      if (at == row.tests.end()) {
        then_rows.push_back(row);
        continue;
      }
      if (at->pattern->constructor->tag != constructor->tag) continue;
      // Replace the test by its sub-patterns on the value's fields.
      Row specialized{
          .tests = {row.tests.begin(), at}, .bindings = row.bindings, .clause = row.clause};
      const std::vector<ir::Pattern>& subpatterns = at->pattern->patterns;
      bool possible = true;
      for (size_t i = 0; possible && i < subpatterns.size(); ++i) {
        if (subpatterns[i]->kind == ir::PatternKind::kWildcard) continue;
        possible =
            Expand(state, then_facts, Field(state, then_facts, test.reg, static_cast<int64_t>(i)),
                   subpatterns[i], specialized);
      }
      if (!possible) continue;
      specialized.tests.insert(specialized.tests.end(), at + 1, row.tests.end());
      then_rows.push_back(std::move(specialized));
    }
    Decide(state, std::move(then_rows), then_facts, certain && last);
    if (certain) return;

    MarkJumpTarget();
    code_[branch].false_offset = OffsetTo(branch, Pc());
    PathFacts else_facts = facts;
    else_facts.ruled_out[test.reg].insert(constructor->tag);
    std::vector<Row> else_rows;
    for (Row& row : rows) {
      const bool excluded = std::any_of(row.tests.begin(), row.tests.end(), [&](const Test& t) {
        return t.reg == test.reg && t.pattern->constructor->tag == constructor->tag;
      });
      if (!excluded) else_rows.push_back(std::move(row));
    }
    Decide(state, std::move(else_rows), else_facts, last);
  }

  // A path on which clause `row.clause` matches: its body, emitted the first
  // time, jumped to after that.
  void Leaf(MatchState& state, const Row& row, bool last) {
    const auto [body, first] = state.body_pcs.emplace(row.clause, Pc());
    if (!first) {
      const size_t jump = Pc();
      Emit(Instruction::Goto(OffsetTo(jump, body->second)));
      return;
    }
    MarkJumpTarget();
    for (const auto& [var, reg] : row.bindings) Bind(var, reg);
    Deliver(state.node->clauses[row.clause].rhs, state.k, last);
  }

  ExecutableBuilder& builder_;
  const std::string name_;
  std::vector<Instruction> code_;
  std::vector<vm::SourcePosition> positions_;  // of each instruction of code_
  vm::SourcePosition position_;                // of the node being compiled
  RegName num_registers_ = 0;
  size_t jump_target_ = 0;  // the last pc a jump lands at
  std::unordered_map<const ir::VarNode*, RegName> registers_;
};

}  // namespace

std::string TargetDevice(const std::string& target) {
  if (target == "nvidia") return "cuda";
  if (target == "intel" || target == "arm") return "cpu";
  throw Error("unknown target '" + target + "' (expected intel, arm or nvidia)");
}

void CheckPrecision(const CompileOptions& options) {
  if (options.precision == "fp32") return;
  if (options.precision != "bf16") {
    throw Error("unknown precision '" + options.precision + "' (expected fp32 or bf16)");
  }
  if (options.target != "intel") {
    throw Error(
        "--precision bf16 runs on x86-64 hosts with avx512_bf16 (target intel), not "
        "target " +
        options.target);
  }
  vm::RequireBf16Products("--precision bf16");
}

bool GeneratesOp(const std::string& op, const CompileOptions& options) {
  if (options.kernels == "builtin") {
    if (options.target == "nvidia") {
      throw Error(
          "--kernels builtin: the built-in kernels run on the CPU only; --target nvidia "
          "needs generated kernels (auto, generated or library)");
    }
    return false;
  }
  if (options.kernels != "auto" && options.kernels != "generated" && options.kernels != "library") {
    throw Error("unknown kernel choice '" + options.kernels +
                "' (auto, generated, builtin or library)");
  }
  if (!NIMBLE_HAVE_CODEGEN) {
    // The cross-built compiler has no LLVM: "auto" falls back to built-ins.
    if (options.kernels == "generated") {
      throw Error("--kernels generated: code generation (LLVM) is not in this build");
    }
    return false;
  }
  if (options.kernels == "generated") return true;
  return op != "nn.dense" && op != "nn.batch_matmul";
}

PrimitiveKernels GeneratedKernels(const ir::IRModule& module, const CompileOptions& options,
                                  const KernelChoices& choices) {
  const KernelDeviceMap devices = KernelDevices(module);
  const MatMulKnobsOf matmul = [&](const ir::FunctionNode& primitive) {
    const auto chosen = choices.find(&primitive);
    return chosen == choices.end() ? options.matmul : chosen->second.matmul;
  };
  return GenerateKernels(module, KernelPolicy(options, choices), matmul,
                         [&devices](const ir::FunctionNode& primitive) {
                           const auto found = devices.find(&primitive);
                           return found != devices.end() && found->second == "cuda";
                         });
}

vm::Executable CompileToExecutable(const ir::IRModule& module, const CompileOptions& options) {
  return RunWithDeepStack([&] {
    const KernelChoices choices = ChooseMatMulKernels(module, options);
    const PrimitiveKernels kernels = GeneratedKernels(module, options, choices);
    const KernelDeviceMap devices = KernelDevices(module);
    ExecutableBuilder builder(module, options, kernels, choices, devices);
    for (const ir::IRModuleNode::Definition& definition : module->functions()) {
      builder.AddFunction(
          FunctionCompiler(builder, definition.global->name).Compile(definition.function.get()));
    }
    vm::Executable executable = builder.Take();
#if NIMBLE_HAVE_CODEGEN
    if (!kernels.funcs().empty()) {
      const codegen::CodegenTarget target = codegen::CodegenTargetFor(options.target);
      std::string ptx;
      executable.kernel_library =
          codegen::LinkSharedLibrary(codegen::EmitObject(kernels.funcs(), target, &ptx), target);
      const auto* ptx_bytes = reinterpret_cast<const std::byte*>(ptx.data());
      executable.device_code.assign(ptx_bytes, ptx_bytes + ptx.size());
    }
#endif
    executable.Validate();
    return executable;
  });
}

}  // namespace nimble::backend
