// Device placement [paper 4.4]. Two steps:
//
// 1. Placement: a fixed point over the module gives every tensor a Place
//    (host, device, or an argument of @main, which arrives on the CPU but is
//    not host work). Values are tracked per tensor leaf, so a tuple's fields
//    keep their own places. The fixed point only ever demotes the optimistic
//    guesses (parameters, results, constructor fields start as host) to
//    device, so it terminates. Storage takes the place of the tensors viewing
//    it, a kernel's outputs that of the kernel.
// 2. Rewriting: every use asks for its operand on a device (a device kernel's
//    inputs on the accelerator, sizes and conditions on the CPU...). Where the
//    operand lives elsewhere, a device_copy is bound right after the operand's
//    definition (at the scope's start for parameters and pattern variables),
//    once per value and device, and the use reads it. Copies are collected
//    per variable while the scope is rewritten and spliced in when its let
//    chain is rebuilt; every use of a variable lies inside its scope, so the
//    splice always comes later.
#include "nimble/compiler/transform/plan_devices.h"

#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "nimble/compiler/ir/functor.h"
#include "nimble/compiler/op/op.h"
#include "nimble/compiler/op/vm_instructions.h"
#include "nimble/compiler/support/deep_stack.h"
#include "nimble/compiler/transform/let_chain.h"
#include "nimble/compiler/transform/pass_util.h"
#include "nimble/vm/error.h"

namespace nimble::transform {

namespace {

using ir::ExprKind;

const char* const kCpu = "cpu";
const char* const kMain = "main";

std::string At(const ir::Span& span) {
  return span.valid() ? " at " + span.ToString() : "";
}

const ir::CallNode* AsCall(const ir::Expr& expr) {
  return expr->kind == ExprKind::kCall ? static_cast<const ir::CallNode*>(expr.get()) : nullptr;
}

// A constant, or a constant already wrapped in device_copy by this pass: both
// stand for the constant, which the VM compiler loads on the device its use
// asks for.
const ir::ConstantNode* AsConstant(const ir::Expr& expr) {
  if (expr->kind == ExprKind::kConstant) return static_cast<const ir::ConstantNode*>(expr.get());
  const ir::CallNode* call = AsCall(expr);
  if (call && CalledOpName(*call) == "device_copy" && call->args[0]->kind == ExprKind::kConstant) {
    return static_cast<const ir::ConstantNode*>(call->args[0].get());
  }
  return nullptr;
}

// How many tensors a value of `type` holds outside of ADTs and closures
// (which are host objects whose fields keep their own device); nothing for a
// type variable, whose count depends on the instance.
std::optional<size_t> CountLeaves(const ir::Type& type) {
  if (!type) return std::nullopt;
  switch (type->kind) {
    case ir::TypeKind::kTensor:
      return 1;
    case ir::TypeKind::kTuple: {
      size_t count = 0;
      for (const ir::Type& field : static_cast<const ir::TupleTypeNode&>(*type).fields) {
        const std::optional<size_t> leaves = CountLeaves(field);
        if (!leaves) return std::nullopt;
        count += *leaves;
      }
      return count;
    }
    case ir::TypeKind::kTypeVar:
    case ir::TypeKind::kIncomplete:
      return std::nullopt;
    default:
      return 0;
  }
}

// The leaves of field `index` of a tuple type: first leaf and count.
std::pair<size_t, size_t> FieldLeaves(const ir::Type& tuple, size_t index) {
  const auto& fields = static_cast<const ir::TupleTypeNode&>(*tuple).fields;
  size_t offset = 0;
  for (size_t i = 0; i < index; ++i) offset += CountLeaves(fields[i]).value_or(0);
  return {offset, CountLeaves(fields[index]).value_or(0)};
}

template <typename T>
std::vector<T> Slice(const std::vector<T>& values, std::pair<size_t, size_t> range) {
  if (range.first + range.second > values.size()) return {};
  return {values.begin() + static_cast<std::ptrdiff_t>(range.first),
          values.begin() + static_cast<std::ptrdiff_t>(range.first + range.second)};
}

// Where a tensor lives. kInput is an argument of @main: on the CPU, but not
// host work, so kernels reading it still run on the device.
enum class Place : uint8_t { kHost, kDevice, kInput };
using Places = std::vector<Place>;

// What a use asks of each leaf of its operand.
enum class Want : uint8_t { kAny, kCpu, kDevice };
using Wants = std::vector<Want>;

Want WantOf(Place place) {
  return place == Place::kDevice ? Want::kDevice : Want::kCpu;
}

Wants WantsOf(const Places& places) {
  Wants wants;
  for (Place place : places) wants.push_back(WantOf(place));
  return wants;
}

template <typename T>
std::vector<T> Uniform(const ir::Type& type, T value) {
  return std::vector<T>(CountLeaves(type).value_or(0), value);
}

bool AllHost(const Places& places) {
  for (Place place : places) {
    if (place != Place::kHost) return false;
  }
  return true;
}

// Branches of an `if` or `match` share a place; where they differ, the
// device, and the host branches copy.
Places Join(const Places& a, const Places& b) {
  Places joined = a;
  for (size_t i = 0; i < joined.size() && i < b.size(); ++i) {
    if (joined[i] != b[i]) joined[i] = Place::kDevice;
  }
  return joined;
}

bool IsMetadataOp(std::string_view name) {
  return name == "shape_of" || name == "ndarray_size";
}

// Whether the primitive's kernel reads only shapes, which the CPU can read
// wherever the tensor is.
bool ReadsOnlyMetadata(const ir::Expr& primitive) {
  struct Finder : ir::ExprVisitor {
    bool any = false;
    bool only_metadata = true;
    void VisitCall(const ir::CallNode* node) override {
      if (node->callee->kind == ExprKind::kOp) {
        any = true;
        only_metadata = only_metadata && IsMetadataOp(CalledOpName(*node));
      }
      ir::ExprVisitor::VisitCall(node);
    }
  } finder;
  finder.VisitExpr(static_cast<const ir::FunctionNode&>(*primitive).body);
  return finder.any && finder.only_metadata;
}

// Whether the GPU can run the primitive: code generation compiles each of its
// operators, or cuBLAS runs it. An operator without a compute definition has
// no GPU kernel (unique, argwhere: their output sizes depend on their values),
// so its kernel runs on the CPU, its inputs copied there and its outputs back
// where they are used.
bool HasGpuKernel(const ir::Expr& primitive) {
  struct Finder : ir::ExprVisitor {
    bool runs = true;
    void VisitCall(const ir::CallNode* node) override {
      if (node->callee->kind == ExprKind::kOp) {
        const std::string name(CalledOpName(*node));
        const op::OpDef* def = op::OpRegistry::Global().Find(name);
        const bool cublas = name == "nn.dense" || name == "nn.batch_matmul";
        runs = runs && (cublas || !def || def->compute);
      }
      ir::ExprVisitor::VisitCall(node);
    }
  } finder;
  finder.VisitExpr(static_cast<const ir::FunctionNode&>(*primitive).body);
  return finder.runs;
}

// Rejects what is not in the memory dialect (docs/memory-dialect.md §2) and
// notes the globals used as values: they are called as closures, with
// arguments and results on the device.
class DialectChecker : public ir::ExprVisitor {
 public:
  std::unordered_set<std::string> escaping;

  void Check(const ir::IRModuleNode::Definition& definition) {
    name_ = definition.global->name;
    const ir::FunctionNode& function = *definition.function;
    if (!function.body->checked_type) {
      throw Error("PlanDevices: @" + name_ + " has no types; run InferTypes first");
    }
    ir::Expr body = function.body;
    if (HasFlag(&function, kClosureAttr)) {
      if (body->kind != ExprKind::kFunction) {
        throw Error("PlanDevices: @" + name_ +
                    " is marked Closure=1 but its body is not a "
                    "function literal");
      }
      body = static_cast<const ir::FunctionNode&>(*body).body;
    }
    VisitExpr(body);
  }

  void VisitCall(const ir::CallNode* node) override {
    if (node->callee->kind == ExprKind::kFunction) {
      throw Error(std::string("PlanDevices: call of a ") +
                  (IsPrimitiveFunction(node->callee) ? "primitive" : "nested") + " function" +
                  At(node->span) + " in @" + name_ +
                  "; the module is not in the memory dialect (run ManifestAlloc first)");
    }
    if (node->callee->kind == ExprKind::kOp) {
      const auto* op = static_cast<const ir::OpNode*>(node->callee.get());
      if (!op->def->dialect && !op::RunsAsVMInstruction(*node)) {
        throw Error("PlanDevices: operator '" + op->name + "'" + At(node->span) + " in @" + name_ +
                    " is called outside a primitive function; the module is not in the memory "
                    "dialect (run ManifestAlloc first)");
      }
      if (op->name == "memory.invoke_mut" || op->name == "memory.shape_func") {
        if (!IsPrimitiveFunction(node->args[0]) || node->args[2]->kind != ExprKind::kTuple) {
          throw Error("PlanDevices: " + op->name + At(node->span) + " in @" + name_ +
                      " must take a primitive function literal and a tuple of outputs");
        }
        // The primitive's body is kernel code, not placed here.
        VisitExpr(node->args[1]);
        VisitExpr(node->args[2]);
        return;
      }
    }
    if (node->callee->kind != ExprKind::kGlobalVar) VisitExpr(node->callee);
    for (const ir::Expr& arg : node->args) VisitExpr(arg);
  }

  void VisitGlobalVar(const ir::GlobalVarNode* node) override { escaping.insert(node->name); }

  void VisitFunction(const ir::FunctionNode* node) override {
    throw Error("PlanDevices: function literal" + At(node->span) + " in @" + name_ +
                " used as a value; run LambdaLift first");
  }

 private:
  std::string name_;
};

// The places of a global's parameters and result as its callers see them;
// nullopt where the type is a type variable (such values are on the device).
struct Signature {
  std::vector<std::optional<Places>> params;
  std::optional<Places> result;
  // @main, closures and globals used as values have places fixed by their
  // callers (the embedder, InvokeClosure), not by the fixed point.
  bool fixed = false;
};

// Step 1: the place of every variable, kernel and storage.
class Placement : public ir::ExprFunctor<Places> {
 public:
  Placement(const ir::IRModule& module, const std::unordered_set<std::string>& escaping)
      : module_(module) {
    for (const ir::IRModuleNode::Definition& definition : module->functions()) {
      const ir::FunctionNode& function = *definition.function;
      const std::string& name = definition.global->name;
      Signature signature;
      signature.fixed =
          name == kMain || escaping.count(name) != 0 || HasFlag(&function, kClosureAttr);
      const Place fixed = name == kMain ? Place::kInput : Place::kDevice;
      for (const ir::Var& param : function.params) {
        const std::optional<size_t> leaves = CountLeaves(param->checked_type);
        if (leaves) {
          signature.params.push_back(Places(*leaves, signature.fixed ? fixed : Place::kHost));
        } else {
          signature.params.push_back(std::nullopt);
        }
      }
      const ir::Type result = function.body->checked_type;
      if (const std::optional<size_t> leaves = CountLeaves(result)) {
        signature.result = Places(*leaves, name == kMain     ? Place::kHost
                                           : signature.fixed ? Place::kDevice
                                                             : Place::kHost);
      }
      signatures_[name] = std::move(signature);
    }
  }

  void Run() {
    do {
      changed_ = false;
      host_kernels_.clear();
      for (const ir::IRModuleNode::Definition& definition : module_->functions()) {
        AnalyzeGlobal(definition);
      }
    } while (changed_);
    PlaceStorage();
  }

  // ---- Results ----

  const Signature& signature(const std::string& name) const { return signatures_.at(name); }
  Places PlacesOf(const ir::VarNode* var) const {
    const auto found = vars_.find(var);
    return found != vars_.end() ? found->second : Uniform(var->checked_type, Place::kDevice);
  }
  Places PlacesOf(const ir::Expr& expr) const {
    if (expr->kind == ExprKind::kVar) return PlacesOf(static_cast<const ir::VarNode*>(expr.get()));
    if (AsConstant(expr)) return ConstantPlaces(*AsConstant(expr));
    const auto found = exprs_.find(expr.get());
    return found != exprs_.end() ? found->second : Uniform(expr->checked_type, Place::kDevice);
  }
  void SetPlaces(const ir::VarNode* var, Places places) { vars_[var] = std::move(places); }
  bool KernelOnHost(const ir::CallNode* invoke) const { return host_kernels_.count(invoke) != 0; }
  Place StoragePlace(const ir::VarNode* storage) const {
    const auto found = storages_.find(storage);
    return found != storages_.end() ? found->second : Place::kDevice;
  }
  Place FieldPlace(const ir::ConstructorNode* constructor, size_t index) const {
    return device_fields_.count({constructor->name, index}) ? Place::kDevice : Place::kHost;
  }

 private:
  static Places ConstantPlaces(const ir::ConstantNode& constant) {
    // A scalar is host work (a loop bound, a step); a tensor constant is a
    // weight, for the device.
    return {constant.is_scalar() ? Place::kHost : Place::kDevice};
  }

  void AnalyzeGlobal(const ir::IRModuleNode::Definition& definition) {
    const ir::FunctionNode* function = definition.function.get();
    Signature& signature = signatures_[definition.global->name];
    for (size_t i = 0; i < function->params.size(); ++i) {
      const ir::Var& param = function->params[i];
      vars_[param.get()] =
          signature.params[i] ? *signature.params[i] : Uniform(param->checked_type, Place::kDevice);
    }
    if (HasFlag(function, kClosureAttr)) {
      function = static_cast<const ir::FunctionNode*>(function->body.get());
      for (const ir::Var& param : function->params) {
        vars_[param.get()] = Uniform(param->checked_type, Place::kDevice);
      }
    }
    const Places result = VisitExpr(function->body);
    if (!signature.fixed && signature.result) Demote(&*signature.result, result);
  }

  // Demotes each host guess in `guess` whose value in `seen` is not host.
  void Demote(Places* guess, const Places& seen) {
    for (size_t i = 0; i < guess->size(); ++i) {
      if ((*guess)[i] == Place::kHost && (i >= seen.size() || seen[i] != Place::kHost)) {
        (*guess)[i] = Place::kDevice;
        changed_ = true;
      }
    }
  }

  Places Remember(const ir::ExprNode* node, Places places) {
    exprs_[node] = places;
    return places;
  }

  Places VisitVar(const ir::VarNode* node) override { return PlacesOf(node); }
  Places VisitGlobalVar(const ir::GlobalVarNode*) override { return {}; }
  Places VisitConstant(const ir::ConstantNode* node) override { return ConstantPlaces(*node); }
  Places VisitOp(const ir::OpNode* node) override {
    throw Error("PlanDevices: operator " + node->name + " used as a value");
  }
  Places VisitFunction(const ir::FunctionNode* node) override {
    throw Error("PlanDevices: function literal" + At(node->span) + " used as a value");
  }
  Places VisitConstructor(const ir::ConstructorNode*) override { return {}; }

  Places VisitTuple(const ir::TupleNode* node) override {
    Places places;
    for (const ir::Expr& field : node->fields) {
      const Places field_places = VisitExpr(field);
      places.insert(places.end(), field_places.begin(), field_places.end());
    }
    return Remember(node, std::move(places));
  }

  Places VisitTupleGetItem(const ir::TupleGetItemNode* node) override {
    const Places tuple = VisitExpr(node->tuple);
    return Remember(node, Slice(tuple, FieldLeaves(node->tuple->checked_type,
                                                   static_cast<size_t>(node->index))));
  }

  Places VisitLet(const ir::LetNode* node) override {
    ir::Expr expr = ir::RefOf<ir::ExprNode>(node);
    while (expr->kind == ExprKind::kLet) {
      const auto* let = static_cast<const ir::LetNode*>(expr.get());
      vars_[let->var.get()] = VisitExpr(let->value);
      const ir::CallNode* call = AsCall(let->value);
      if (call && CalledOpName(*call) == "memory.alloc_tensor" &&
          call->args[0]->kind == ExprKind::kVar) {
        views_[let->var.get()] = static_cast<const ir::VarNode*>(call->args[0].get());
      }
      expr = let->body;
    }
    return Remember(node, VisitExpr(expr));
  }

  Places VisitIf(const ir::IfNode* node) override {
    VisitExpr(node->cond);
    return Remember(node, Join(VisitExpr(node->then_branch), VisitExpr(node->else_branch)));
  }

  Places VisitMatch(const ir::MatchNode* node) override {
    const Places data = VisitExpr(node->data);
    std::optional<Places> joined;
    for (const ir::Clause& clause : node->clauses) {
      BindPattern(clause.lhs, node->data->checked_type, &data, Place::kDevice);
      const Places result = VisitExpr(clause.rhs);
      joined = joined ? Join(*joined, result) : result;
    }
    return Remember(node, joined.value_or(Places{}));
  }

  // Gives the variables of `pattern` the places of the matched value: `exact`
  // (per leaf of `type`) where known, or `uniform` inside a constructor field.
  void BindPattern(const ir::Pattern& pattern, const ir::Type& type, const Places* exact,
                   Place uniform) {
    switch (pattern->kind) {
      case ir::PatternKind::kWildcard:
        return;
      case ir::PatternKind::kVar: {
        const ir::Var& var = static_cast<const ir::PatternVarNode&>(*pattern).var;
        vars_[var.get()] = exact && exact->size() == CountLeaves(var->checked_type)
                               ? *exact
                               : Uniform(var->checked_type, uniform);
        return;
      }
      case ir::PatternKind::kTuple: {
        const auto& subs = static_cast<const ir::PatternTupleNode&>(*pattern).patterns;
        const bool known = exact && type && type->kind == ir::TypeKind::kTuple;
        for (size_t i = 0; i < subs.size(); ++i) {
          if (known) {
            const Places field = Slice(*exact, FieldLeaves(type, i));
            BindPattern(subs[i], static_cast<const ir::TupleTypeNode&>(*type).fields[i], &field,
                        uniform);
          } else {
            BindPattern(subs[i], nullptr, nullptr, uniform);
          }
        }
        return;
      }
      case ir::PatternKind::kConstructor: {
        const auto& node = static_cast<const ir::PatternConstructorNode&>(*pattern);
        for (size_t i = 0; i < node.patterns.size(); ++i) {
          BindPattern(node.patterns[i], nullptr, nullptr, FieldPlace(node.constructor.get(), i));
        }
        return;
      }
    }
  }

  Places VisitCall(const ir::CallNode* node) override {
    switch (node->callee->kind) {
      case ExprKind::kOp:
        return Remember(node, VisitOpCall(*node));
      case ExprKind::kGlobalVar: {
        Signature& callee =
            signatures_.at(static_cast<const ir::GlobalVarNode*>(node->callee.get())->name);
        for (size_t i = 0; i < node->args.size(); ++i) {
          const Places arg = VisitExpr(node->args[i]);
          if (!callee.fixed && i < callee.params.size() && callee.params[i]) {
            Demote(&*callee.params[i], arg);
          }
        }
        return Remember(
            node, callee.result ? *callee.result : Uniform(node->checked_type, Place::kDevice));
      }
      case ExprKind::kConstructor: {
        const auto* constructor = static_cast<const ir::ConstructorNode*>(node->callee.get());
        for (size_t i = 0; i < node->args.size(); ++i) {
          const Places arg = VisitExpr(node->args[i]);
          const bool host = CountLeaves(node->args[i]->checked_type) && AllHost(arg);
          if (!host && device_fields_.insert({constructor->name, i}).second) changed_ = true;
        }
        return Remember(node, {});
      }
      default:
        VisitExpr(node->callee);
        for (const ir::Expr& arg : node->args) VisitExpr(arg);
        return Remember(node, Uniform(node->checked_type, Place::kDevice));
    }
  }

  Places VisitOpCall(const ir::CallNode& call) {
    const std::string_view name = CalledOpName(call);
    if (name == "memory.invoke_mut" || name == "memory.shape_func") {
      const bool host = name == "memory.shape_func" || KernelRunsOnHost(call);
      if (host) host_kernels_.insert(&call);
      for (const ir::Expr& output : static_cast<const ir::TupleNode&>(*call.args[2]).fields) {
        if (output->kind == ExprKind::kVar) {
          const auto* var = static_cast<const ir::VarNode*>(output.get());
          vars_[var] = Uniform(var->checked_type, host ? Place::kHost : Place::kDevice);
        }
      }
      return {};
    }
    if (name == "memory.reshape_tensor") return VisitExpr(call.args[0]);
    if (name == "shape_of") return {Place::kHost};
    // The TreeSchedule instruction walks the tree on the host and returns
    // new CPU tensors, whatever device the tree's payloads are on.
    if (name == "adt.tree_schedule") {
      VisitExpr(call.args[0]);
      return Uniform(call.checked_type, Place::kHost);
    }
    // Scalar instructions read and write on the CPU.
    if (op::ScalarInstructionOf(call)) {
      for (const ir::Expr& arg : call.args) VisitExpr(arg);
      return {Place::kHost};
    }
    if (name == "device_copy") {
      VisitExpr(call.args[0]);
      return Uniform(call.checked_type,
                     call.attrs.GetString("dst_device") == kCpu ? Place::kHost : Place::kDevice);
    }
    for (const ir::Expr& arg : call.args) {
      if (!IsPrimitiveFunction(arg)) VisitExpr(arg);
    }
    return Uniform(call.checked_type, Place::kDevice);
  }

  // A kernel runs on the host when it reads only shapes, when the GPU cannot
  // run it, or when it reads at least one non-constant input and every one of
  // them is host work.
  bool KernelRunsOnHost(const ir::CallNode& invoke) {
    if (ReadsOnlyMetadata(invoke.args[0]) || !HasGpuKernel(invoke.args[0])) {
      VisitExpr(invoke.args[1]);
      return true;
    }
    const ir::Expr& inputs = invoke.args[1];
    const std::vector<ir::Expr> fields = inputs->kind == ExprKind::kTuple
                                             ? static_cast<const ir::TupleNode&>(*inputs).fields
                                             : std::vector<ir::Expr>{inputs};
    bool any = false;
    bool host = true;
    for (const ir::Expr& field : fields) {
      if (AsConstant(field)) continue;
      any = true;
      host = AllHost(VisitExpr(field)) && host;
    }
    return any && host;
  }

  // Storage is where the tensors viewing it are.
  void PlaceStorage() {
    for (const auto& [tensor, storage] : views_) {
      const Places places = PlacesOf(tensor);
      const Place place = AllHost(places) ? Place::kHost : Place::kDevice;
      const auto [it, inserted] = storages_.emplace(storage, place);
      if (!inserted && it->second != place) {
        throw Error("PlanDevices: storage %" + storage->name_hint +
                    " holds tensors both on the CPU and on the device");
      }
    }
  }

  const ir::IRModule& module_;
  std::unordered_map<std::string, Signature> signatures_;
  std::unordered_map<const ir::VarNode*, Places> vars_;
  std::unordered_map<const ir::ExprNode*, Places> exprs_;
  std::unordered_set<const ir::CallNode*> host_kernels_;
  // alloc_tensor results and the storage they view.
  std::unordered_map<const ir::VarNode*, const ir::VarNode*> views_;
  std::unordered_map<const ir::VarNode*, Place> storages_;
  // Constructor fields (constructor name, index) some value not on the host
  // is stored in; the others hold host values only.
  std::set<std::pair<std::string, size_t>> device_fields_;
  bool changed_ = false;
};

void CollectPatternVars(const ir::Pattern& pattern, std::vector<ir::Var>* vars) {
  switch (pattern->kind) {
    case ir::PatternKind::kWildcard:
      return;
    case ir::PatternKind::kVar:
      vars->push_back(static_cast<const ir::PatternVarNode&>(*pattern).var);
      return;
    case ir::PatternKind::kTuple:
      for (const ir::Pattern& sub : static_cast<const ir::PatternTupleNode&>(*pattern).patterns) {
        CollectPatternVars(sub, vars);
      }
      return;
    case ir::PatternKind::kConstructor:
      for (const ir::Pattern& sub :
           static_cast<const ir::PatternConstructorNode&>(*pattern).patterns) {
        CollectPatternVars(sub, vars);
      }
      return;
  }
}

bool Satisfied(const Places& places, const Wants& wants) {
  for (size_t i = 0; i < places.size() && i < wants.size(); ++i) {
    if (wants[i] != Want::kAny && wants[i] != WantOf(places[i])) return false;
  }
  return true;
}

// The places a value has once coerced to `wants`.
Places Resolve(const Places& places, const Wants& wants) {
  Places resolved = places;
  for (size_t i = 0; i < resolved.size() && i < wants.size(); ++i) {
    if (wants[i] != Want::kAny) {
      resolved[i] = wants[i] == Want::kDevice ? Place::kDevice : Place::kHost;
    }
  }
  return resolved;
}

// Step 2 for one global: every use gets its operand where it wants it.
class Rewriter {
 public:
  Rewriter(Placement& placement, std::string device)
      : placement_(placement), device_(std::move(device)) {}

  ir::Function RewriteGlobal(const ir::IRModuleNode::Definition& definition) {
    const ir::FunctionNode& function = *definition.function;
    ir::Expr body;
    if (HasFlag(&function, kClosureAttr)) {
      // Captured values and arguments come from AllocClosure and
      // InvokeClosure, on the device; so goes the result.
      const auto& inner = static_cast<const ir::FunctionNode&>(*function.body);
      std::vector<ir::Var> binders = function.params;
      binders.insert(binders.end(), inner.params.begin(), inner.params.end());
      body = Rebuild(inner,
                     Scope(inner.body, Uniform(inner.body->checked_type, Want::kDevice), binders));
    } else {
      const std::optional<Places>& result = placement_.signature(definition.global->name).result;
      body = Scope(function.body, result ? WantsOf(*result) : Wants{}, function.params);
    }
    return Rebuild(function, std::move(body));
  }

 private:
  static ir::Function Rebuild(const ir::FunctionNode& function, ir::Expr body) {
    ir::Function rebuilt = Make<ir::FunctionNode>(
        function.params, std::move(body), function.ret_type, function.type_params, function.attrs);
    rebuilt->span = function.span;
    return rebuilt;
  }

  const std::string& DeviceName(Want want) const {
    static const std::string cpu = kCpu;
    return want == Want::kDevice ? device_ : cpu;
  }

  static ir::Expr DeviceCopy(ir::Expr data, const std::string& from, const std::string& to) {
    Attrs attrs;
    attrs.Set("src_device", from);
    attrs.Set("dst_device", to);
    return op::MakeOpCall("device_copy", {std::move(data)}, std::move(attrs));
  }

  // A new variable bound after `after`'s definition: for a kernel's output,
  // the kernel's call, which writes it.
  ir::Var BindAfter(const ir::VarNode* after, const ir::Type& type, Places places, ir::Expr value) {
    ir::Var var = ir::MakeVar(after->name_hint, type);
    placement_.SetPlaces(var.get(), std::move(places));
    const auto writer = writers_.find(after);
    after_[writer != writers_.end() ? writer->second : after].push_back({var, std::move(value)});
    return var;
  }

  // Notes the outputs `let` writes, when its value is a kernel or shape function.
  void NoteWriter(const ir::LetNode& let) {
    const ir::CallNode* call = AsCall(let.value);
    if (!call || (CalledOpName(*call) != "memory.invoke_mut" &&
                  CalledOpName(*call) != "memory.shape_func")) {
      return;
    }
    for (const ir::Expr& output : static_cast<const ir::TupleNode&>(*call->args[2]).fields) {
      if (output->kind == ExprKind::kVar) {
        writers_[static_cast<const ir::VarNode*>(output.get())] = let.var.get();
      }
    }
  }

  // The rewritten let chain of `expr`, its result coerced to `wants`;
  // `binders` (parameters, pattern variables) are bound at its start.
  ir::Expr Scope(const ir::Expr& expr, const Wants& wants, const std::vector<ir::Var>& binders) {
    std::vector<Binding> chain;
    ir::Expr current = expr;
    while (current->kind == ExprKind::kLet) {
      const auto* let = static_cast<const ir::LetNode*>(current.get());
      if (let->value->kind == ExprKind::kTuple) {
        literals_[let->var.get()] = static_cast<const ir::TupleNode*>(let->value.get());
      }
      NoteWriter(*let);
      chain.push_back({let->var, Value(let->value, let->var.get())});
      current = let->body;
    }
    const ir::Expr result = Result(current, wants, &chain);
    std::vector<Binding> bindings;
    for (const ir::Var& binder : binders) EmitAfter(binder.get(), &bindings);
    for (Binding& binding : chain) Emit(std::move(binding), &bindings);
    return WrapLets(bindings, result);
  }

  void Emit(Binding binding, std::vector<Binding>* out) {
    const ir::VarNode* var = binding.var.get();
    out->push_back(std::move(binding));
    EmitAfter(var, out);
  }

  void EmitAfter(const ir::VarNode* var, std::vector<Binding>* out) {
    const auto found = after_.find(var);
    if (found == after_.end()) return;
    std::vector<Binding> bindings = std::move(found->second);
    after_.erase(found);
    for (Binding& binding : bindings) Emit(std::move(binding), out);
  }

  // A scope's result: an operand, or a value bound first when it must move.
  ir::Expr Result(const ir::Expr& expr, const Wants& wants, std::vector<Binding>* chain) {
    switch (expr->kind) {
      case ExprKind::kCall:
      case ExprKind::kIf:
      case ExprKind::kMatch:
      case ExprKind::kTupleGetItem:
        if (!AsConstant(expr)) break;
        [[fallthrough]];
      default:
        return Use(expr, wants);
    }
    ir::Expr value = Value(expr, nullptr);
    const Places places = placement_.PlacesOf(expr);
    if (Satisfied(places, wants)) return value;
    ir::Var var = ir::MakeVar("x", expr->checked_type);
    placement_.SetPlaces(var.get(), places);
    chain->push_back({var, std::move(value)});
    return Use(var, wants);
  }

  // `expr` (an operand: variable, constant, tuple of operands) where `wants`
  // asks for it.
  ir::Expr Use(const ir::Expr& expr, const Wants& wants) {
    if (const ir::ConstantNode* constant = AsConstant(expr)) {
      ir::Expr plain = ir::RefOf<ir::ExprNode>(constant);
      if (wants.empty() || wants[0] != Want::kDevice) return plain;
      return DeviceCopy(std::move(plain), kCpu, device_);
    }
    if (expr->kind == ExprKind::kTuple) {
      const auto& tuple = static_cast<const ir::TupleNode&>(*expr);
      std::vector<ir::Expr> fields;
      for (size_t i = 0; i < tuple.fields.size(); ++i) {
        fields.push_back(Use(tuple.fields[i], Slice(wants, FieldLeaves(expr->checked_type, i))));
      }
      return ir::MakeTupleExpr(std::move(fields));
    }
    if (expr->kind != ExprKind::kVar) return expr;
    const auto* var = static_cast<const ir::VarNode*>(expr.get());
    const Places places = placement_.PlacesOf(var);
    if (Satisfied(places, wants)) return expr;
    if (var->checked_type->kind == ir::TypeKind::kTensor) return CopyOf(var, places[0], wants[0]);
    return CoerceTuple(var, places, wants);
  }

  // The copy of tensor `var` on `want`'s device, made once.
  ir::Var CopyOf(const ir::VarNode* var, Place place, Want want) {
    const auto key = std::make_pair(var, want);
    if (const auto found = copies_.find(key); found != copies_.end()) return found->second;
    ir::Var copy =
        BindAfter(var, var->checked_type, Resolve({place}, {want}),
                  DeviceCopy(ir::RefOf(var), DeviceName(WantOf(place)), DeviceName(want)));
    copies_.emplace(key, copy);
    return copy;
  }

  // A tuple with the fields of `var`, each where `wants` asks: built from
  // the coerced fields of the literal `var` names, or from its projections.
  ir::Var CoerceTuple(const ir::VarNode* var, const Places& places, const Wants& wants) {
    const auto key = std::make_pair(var, wants);
    if (const auto found = tuples_.find(key); found != tuples_.end()) return found->second;
    const ir::Type& type = var->checked_type;
    const auto& field_types = static_cast<const ir::TupleTypeNode&>(*type).fields;
    const auto literal = literals_.find(var);
    std::vector<ir::Expr> fields;
    for (size_t i = 0; i < field_types.size(); ++i) {
      const std::pair<size_t, size_t> leaves = FieldLeaves(type, i);
      if (literal != literals_.end()) {
        fields.push_back(Use(literal->second->fields[i], Slice(wants, leaves)));
        continue;
      }
      const ir::Var item =
          BindAfter(var, field_types[i], Slice(places, leaves),
                    Make<ir::TupleGetItemNode>(ir::RefOf(var), static_cast<int>(i)));
      fields.push_back(Use(item, Slice(wants, leaves)));
    }
    ir::Var tuple =
        BindAfter(var, type, Resolve(places, wants), ir::MakeTupleExpr(std::move(fields)));
    tuples_.emplace(key, tuple);
    return tuple;
  }

  // The rewritten value of a let (`binder`) or a scope's result.
  ir::Expr Value(const ir::Expr& expr, const ir::VarNode* binder) {
    switch (expr->kind) {
      case ExprKind::kCall:
        return CallValue(static_cast<const ir::CallNode&>(*expr), binder);
      case ExprKind::kIf: {
        const auto& node = static_cast<const ir::IfNode&>(*expr);
        const Wants wants = WantsOf(placement_.PlacesOf(expr));
        return Make<ir::IfNode>(Use(node.cond, {Want::kCpu}), Scope(node.then_branch, wants, {}),
                                Scope(node.else_branch, wants, {}));
      }
      case ExprKind::kMatch: {
        const auto& node = static_cast<const ir::MatchNode&>(*expr);
        const Wants wants = WantsOf(placement_.PlacesOf(expr));
        std::vector<ir::Clause> clauses;
        for (const ir::Clause& clause : node.clauses) {
          std::vector<ir::Var> binders;
          CollectPatternVars(clause.lhs, &binders);
          clauses.push_back({clause.lhs, Scope(clause.rhs, wants, binders)});
        }
        return Make<ir::MatchNode>(node.data, std::move(clauses), node.complete);
      }
      case ExprKind::kLet:
        return Scope(expr, WantsOf(placement_.PlacesOf(expr)), {});
      default:
        return expr;
    }
  }

  // Each argument of a call where the callee reads it.
  ir::Expr CallValue(const ir::CallNode& call, const ir::VarNode* binder) {
    auto all = [](const ir::Expr& arg, Want want) { return Uniform(arg->checked_type, want); };
    std::vector<ir::Expr> args = call.args;
    Attrs attrs = call.attrs;
    switch (call.callee->kind) {
      case ExprKind::kOp: {
        const std::string_view name = CalledOpName(call);
        // Sizes, offsets and shapes are read by the VM on the CPU.
        size_t first_size = args.size();
        if (name == "memory.alloc_storage") {
          const bool host = binder && placement_.StoragePlace(binder) == Place::kHost;
          attrs.Set("device", host ? std::string(kCpu) : device_);
          first_size = 0;
        } else if (name == "memory.alloc_tensor" || name == "memory.reshape_tensor") {
          first_size = 1;
        } else if (op::ScalarInstructionOf(call)) {
          first_size = 0;
        } else if (name == "memory.invoke_mut") {
          const Want want = ReadsOnlyMetadata(args[0])       ? Want::kAny
                            : placement_.KernelOnHost(&call) ? Want::kCpu
                                                             : Want::kDevice;
          args[1] = Use(args[1], all(args[1], want));
        } else if (name == "memory.shape_func") {
          args[1] = Use(args[1], all(args[1], Want::kCpu));
        } else if (name == "device_copy") {
          const Want from = call.attrs.GetString("src_device") == kCpu ? Want::kCpu : Want::kDevice;
          args[0] = Use(args[0], all(args[0], from));
        }
        for (size_t i = first_size; i < args.size(); ++i) {
          args[i] = Use(args[i], all(args[i], Want::kCpu));
        }
        break;
      }
      case ExprKind::kGlobalVar: {
        const Signature& callee =
            placement_.signature(static_cast<const ir::GlobalVarNode&>(*call.callee).name);
        for (size_t i = 0; i < args.size(); ++i) {
          const bool known = i < callee.params.size() && callee.params[i];
          args[i] = Use(args[i], known ? WantsOf(*callee.params[i]) : all(args[i], Want::kDevice));
        }
        break;
      }
      case ExprKind::kConstructor: {
        const auto* constructor = static_cast<const ir::ConstructorNode*>(call.callee.get());
        for (size_t i = 0; i < args.size(); ++i) {
          args[i] = Use(args[i], all(args[i], WantOf(placement_.FieldPlace(constructor, i))));
        }
        break;
      }
      default:
        for (ir::Expr& arg : args) arg = Use(arg, all(arg, Want::kDevice));
    }
    ir::Call rewritten = Make<ir::CallNode>(call.callee, std::move(args), std::move(attrs));
    rewritten->span = call.span;
    return rewritten;
  }

  Placement& placement_;
  const std::string device_;
  // Bindings that go right after a variable's definition: its copies.
  std::unordered_map<const ir::VarNode*, std::vector<Binding>> after_;
  std::map<std::pair<const ir::VarNode*, Want>, ir::Var> copies_;
  std::map<std::pair<const ir::VarNode*, Wants>, ir::Var> tuples_;
  std::unordered_map<const ir::VarNode*, const ir::TupleNode*> literals_;
  // Kernel outputs and the binder of the call that writes them.
  std::unordered_map<const ir::VarNode*, const ir::VarNode*> writers_;
};

// The CPU-only target: every allocation on the CPU, nothing else changes.
class OnCpu : public ir::ExprMutator {
 public:
  ir::Expr VisitCall(const ir::CallNode* node) override {
    if (CalledOpName(*node) != "memory.alloc_storage" || node->attrs.GetString("device") == kCpu) {
      return ir::ExprMutator::VisitCall(node);
    }
    Attrs attrs = node->attrs;
    attrs.Set("device", std::string(kCpu));
    ir::Call rewritten = Make<ir::CallNode>(node->callee, node->args, std::move(attrs));
    rewritten->span = node->span;
    return rewritten;
  }
};

}  // namespace

ir::IRModule PlanDevices(const ir::IRModule& module, const std::string& device) {
  if (device != kCpu && device != "cuda") {
    throw Error("PlanDevices: unknown device '" + device + "' (expected \"cpu\" or \"cuda\")");
  }
  return RunWithDeepStack([&] {
    DialectChecker checker;
    for (const ir::IRModuleNode::Definition& definition : module->functions()) {
      checker.Check(definition);
    }
    ir::IRModule result;
    if (device == kCpu) {
      result = MapFunctions(module, [](const ir::IRModuleNode::Definition& definition) {
        return OnCpu().VisitExpr(definition.function).as<ir::FunctionNode>();
      });
    } else {
      Placement placement(module, checker.escaping);
      placement.Run();
      result = MapFunctions(module, [&](const ir::IRModuleNode::Definition& definition) {
        return Rewriter(placement, device).RewriteGlobal(definition);
      });
    }
    return Retyped(module, std::move(result));
  });
}

}  // namespace nimble::transform
