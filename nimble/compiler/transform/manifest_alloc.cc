// Memory manifestation [paper 4.3]: rewrites every call of a primitive
// function into the destination-passing forms of docs/memory-dialect.md §2.
// The rewrite is local to the call: its bindings replace the call's `let`
// (the let's variable ends up naming the call's value), so scoping, branches
// and recursion need no special treatment.
#include "nimble/compiler/transform/manifest_alloc.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "nimble/compiler/ir/functor.h"
#include "nimble/compiler/op/op.h"
#include "nimble/compiler/op/vm_instructions.h"
#include "nimble/compiler/support/deep_stack.h"
#include "nimble/compiler/transform/let_chain.h"
#include "nimble/compiler/transform/pass_util.h"
#include "nimble/compiler/typing/type_infer.h"
#include "nimble/vm/error.h"
#include "nimble/vm/tensor.h"

namespace nimble::transform {

namespace {

using ir::ExprKind;
using op::ShapeFuncMode;

// docs/memory-dialect.md: every allocation is 64-byte aligned and, until
// device placement, on the CPU.
constexpr int64_t kAlignment = 64;
const char* const kDevice = "cpu";

std::string At(const ir::Span& span) {
  return span.valid() ? " at " + span.ToString() : "";
}

// The primitive function literal `call` invokes, or null.
const ir::FunctionNode* CalledPrimitive(const ir::CallNode& call) {
  if (call.callee->kind != ExprKind::kFunction) return nullptr;
  const auto* function = static_cast<const ir::FunctionNode*>(call.callee.get());
  return HasFlag(function, kPrimitiveAttr) ? function : nullptr;
}

// How much a shape-function mode asks of the caller; a fused body needs what
// its most demanding op needs.
int Demand(ShapeFuncMode mode) {
  switch (mode) {
    case ShapeFuncMode::kDataIndependent:
      return 0;
    case ShapeFuncMode::kDataDependent:
      return 1;
    case ShapeFuncMode::kUpperBound:
      return 2;
  }
  return 0;
}

class ShapeModeFinder : public ir::ExprVisitor {
 public:
  ShapeFuncMode mode = ShapeFuncMode::kDataIndependent;

  void VisitCall(const ir::CallNode* node) override {
    if (node->callee->kind == ExprKind::kOp) {
      const ShapeFuncMode op_mode =
          static_cast<const ir::OpNode*>(node->callee.get())->def->shape_mode;
      if (Demand(op_mode) > Demand(mode)) mode = op_mode;
    }
    ir::ExprVisitor::VisitCall(node);
  }
};

// The shape-function mode of the ops in the primitive's body (OpDef::shape_mode).
ShapeFuncMode ShapeModeOf(const ir::FunctionNode& primitive) {
  ShapeModeFinder finder;
  finder.VisitExpr(primitive.body);
  return finder.mode;
}

std::vector<int64_t> AssertShape(const ir::TensorTypeNode& type) {
  std::vector<int64_t> dims;
  for (const ir::Dim& dim : type.shape) dims.push_back(dim.is_static() ? dim.value() : -1);
  return dims;
}

// The type of a shape register: an int64 vector of one element per dimension.
ir::TensorType ShapeTensorType(size_t rank) {
  return ir::MakeTensorType({static_cast<int64_t>(rank)}, DataType::Int64());
}

ir::Constant Int64Scalar(int64_t value) {
  return ir::MakeScalar(DataType::Int64(), static_cast<double>(value));
}

// The tensors a primitive call returns, flattened as the kernel ABI passes
// its outputs: a tensor, or a tuple of tensors (split).
std::vector<ir::TensorType> OutputTypes(const ir::Type& type, const ir::Span& span) {
  auto fail = [&]() -> Error {
    return Error("ManifestAlloc: primitive call" + At(span) + " returns " + ir::TypeToString(type) +
                 ", not a tensor or a tuple of tensors");
  };
  if (type->kind == ir::TypeKind::kTensor) return {type.as<ir::TensorTypeNode>()};
  if (type->kind != ir::TypeKind::kTuple) throw fail();
  std::vector<ir::TensorType> outputs;
  for (const ir::Type& field : static_cast<const ir::TupleTypeNode&>(*type).fields) {
    if (field->kind != ir::TypeKind::kTensor) throw fail();
    outputs.push_back(field.as<ir::TensorTypeNode>());
  }
  return outputs;
}

// Writes the bindings that replace one primitive call.
class CallLowering {
 public:
  explicit CallLowering(std::vector<Binding>* out) : out_(*out) {}

  // Appends the bindings for `call` and returns its value: `result` when
  // given (the call's let binder), otherwise a fresh variable.
  ir::Var Lower(const ir::CallNode& call, const ir::Var& result) {
    span_ = call.span;
    if (!call.checked_type) {
      throw Error("ManifestAlloc: primitive call" + At(call.span) +
                  " has no type; run InferTypes first");
    }
    const ir::Function primitive = call.callee.as<ir::FunctionNode>();
    const std::vector<ir::TensorType> outputs = OutputTypes(call.checked_type, call.span);
    const ShapeFuncMode mode = ShapeModeOf(*primitive);
    const bool upper_bound = mode == ShapeFuncMode::kUpperBound;
    const bool single = call.checked_type->kind == ir::TypeKind::kTensor;
    // An upper-bound output is sized by the bound whatever its type says.
    const bool dynamic = upper_bound || std::any_of(outputs.begin(), outputs.end(),
                                                    [](const auto& t) { return !t->is_static(); });

    std::vector<ir::Var> shapes;
    if (dynamic) shapes = RunShapeFunc(primitive, call, outputs, mode);

    // The tensors the kernel writes: each output, then for an upper-bound op
    // each output's true shape.
    std::vector<ir::Expr> kernel_outputs;
    for (size_t i = 0; i < outputs.size(); ++i) {
      const ir::Var binder = single && !upper_bound ? result : nullptr;
      kernel_outputs.push_back(dynamic && (upper_bound || !outputs[i]->is_static())
                                   ? AllocFromShape(outputs[i], shapes[i], binder)
                                   : StaticAlloc(outputs[i], binder, "y"));
    }
    std::vector<ir::Var> true_shapes;
    for (size_t i = 0; upper_bound && i < outputs.size(); ++i) {
      true_shapes.push_back(StaticAlloc(ShapeTensorType(outputs[i]->ndim()), nullptr, "ts"));
      kernel_outputs.push_back(true_shapes.back());
    }
    Bind(nullptr, "u", ir::MakeTupleType({}),
         op::MakeOpCall("memory.invoke_mut", {primitive, ir::MakeTupleExpr(call.args),
                                              ir::MakeTupleExpr(kernel_outputs)}));

    std::vector<ir::Expr> values(kernel_outputs.begin(), kernel_outputs.begin() + outputs.size());
    for (size_t i = 0; i < true_shapes.size(); ++i) {
      Attrs attrs;
      attrs.Set("assert_shape", AssertShape(*outputs[i]));
      values[i] = Bind(
          single ? result : nullptr, "y", outputs[i],
          op::MakeOpCall("memory.reshape_tensor", {values[i], true_shapes[i]}, std::move(attrs)));
    }
    if (single) return values[0].as<ir::VarNode>();
    return Bind(result, "y", call.checked_type, ir::MakeTupleExpr(std::move(values)));
  }

 private:
  // Binds `value` to `var`, or to a new variable named `hint` annotated with
  // `type`. Every value comes from the lowered call and takes its span, so
  // that a run-time error in an allocation, shape function or kernel points
  // at the call in the source.
  ir::Var Bind(const ir::Var& var, const std::string& hint, const ir::Type& type, ir::Expr value) {
    value->span = span_;
    ir::Var bound = var ? var : ir::MakeVar(hint, type);
    out_.push_back({bound, std::move(value)});
    return bound;
  }

  static Attrs StorageAttrs(DataType dtype) {
    Attrs attrs;
    attrs.Set("alignment", kAlignment);
    attrs.Set("device", std::string(kDevice));
    attrs.Set("dtype", dtype);
    return attrs;
  }

  static Attrs TensorAttrs(const ir::TensorTypeNode& type) {
    Attrs attrs;
    attrs.Set("dtype", type.dtype);
    attrs.Set("assert_shape", AssertShape(type));
    return attrs;
  }

  // `type`'s largest shape: its static shape, or with bounded `?` dims the
  // shape at their bounds; nullopt for an unbounded `?`.
  static std::optional<std::vector<int64_t>> BoundShape(const ir::TensorTypeNode& type) {
    std::vector<int64_t> shape;
    for (const ir::Dim& dim : type.shape) {
      const std::optional<int64_t> bound = dim.upper_bound();
      if (!bound) return std::nullopt;
      shape.push_back(*bound);
    }
    return shape;
  }

  // The bytes of BoundShape; nullopt for an unbounded `?` or a size past
  // int64.
  static std::optional<int64_t> BoundBytes(const ir::TensorTypeNode& type) {
    const std::optional<std::vector<int64_t>> shape = BoundShape(type);
    if (!shape) return std::nullopt;
    try {
      return ShapeBytes(*shape, type.dtype);
    } catch (const Error&) {
      return std::nullopt;
    }
  }

  ir::Var ConstantStorage(int64_t bytes, DataType dtype) {
    return Bind(nullptr, "s", ir::MakeStorageType(),
                op::MakeOpCall("memory.alloc_storage", {Int64Scalar(bytes)}, StorageAttrs(dtype)));
  }

  // Storage of constant size and a tensor of static `type` in it.
  ir::Var StaticAlloc(const ir::TensorType& type, const ir::Var& var, const std::string& hint) {
    int64_t bytes = 0;
    try {
      bytes = ShapeBytes(BoundShape(*type).value(), type->dtype);
    } catch (const Error& error) {
      throw Error("ManifestAlloc: " + ir::TypeToString(type) + At(span_) + ": " + error.what());
    }
    const ir::Var storage = ConstantStorage(bytes, type->dtype);
    return Bind(
        var, hint, type,
        op::MakeOpCall("memory.alloc_tensor", {storage, Int64Scalar(0)}, TensorAttrs(*type)));
  }

  // A tensor of the shape held by the register `shape`, in storage sized
  // for the bounds when every `?` of `type` has one (so that memory planning
  // can place it in a region, as a static one), else for that shape.
  ir::Var AllocFromShape(const ir::TensorType& type, const ir::Var& shape, const ir::Var& var) {
    const std::optional<int64_t> bound_bytes = BoundBytes(*type);
    const ir::Var storage =
        bound_bytes
            ? ConstantStorage(*bound_bytes, type->dtype)
            : Bind(nullptr, "s", ir::MakeStorageType(),
                   op::MakeOpCall("memory.alloc_storage", {shape}, StorageAttrs(type->dtype)));
    return Bind(var, "y", type,
                op::MakeOpCall("memory.alloc_tensor", {storage, Int64Scalar(0), shape},
                               TensorAttrs(*type)));
  }

  // Appends shape_of of each tensor in `value` (a tuple's fields in order,
  // projected one by one) to `shapes`.
  void AppendShapes(const ir::Expr& value, const ir::Type& type, const ir::Span& span,
                    std::vector<ir::Expr>* shapes) {
    if (type && type->kind == ir::TypeKind::kTensor) {
      Attrs attrs;
      attrs.Set("dtype", DataType::Int64());
      shapes->push_back(Bind(nullptr, "sh",
                             ShapeTensorType(static_cast<const ir::TensorTypeNode&>(*type).ndim()),
                             op::MakeOpCall("shape_of", {value}, std::move(attrs))));
      return;
    }
    if (type && type->kind == ir::TypeKind::kTuple) {
      const auto& fields = static_cast<const ir::TupleTypeNode&>(*type).fields;
      for (size_t i = 0; i < fields.size(); ++i) {
        const ir::Var field =
            Bind(nullptr, "f", fields[i], Make<ir::TupleGetItemNode>(value, static_cast<int>(i)));
        AppendShapes(field, fields[i], span, shapes);
      }
      return;
    }
    throw Error("ManifestAlloc: argument of primitive call" + At(span) + " has type " +
                (type ? ir::TypeToString(type) : std::string("(none)")) +
                ", not a tensor or a tuple of tensors");
  }

  // Binds the shape function's call and returns the static int64 registers
  // that receive each output's shape.
  std::vector<ir::Var> RunShapeFunc(const ir::Function& primitive, const ir::CallNode& call,
                                    const std::vector<ir::TensorType>& outputs,
                                    ShapeFuncMode mode) {
    std::vector<ir::Expr> inputs;
    if (mode == ShapeFuncMode::kDataDependent) {
      inputs = call.args;
    } else {
      for (const ir::Expr& arg : call.args)
        AppendShapes(arg, arg->checked_type, call.span, &inputs);
    }
    std::vector<ir::Var> shapes;
    for (const ir::TensorType& output : outputs) {
      shapes.push_back(StaticAlloc(ShapeTensorType(output->ndim()), nullptr, "os"));
    }
    Bind(nullptr, "u", ir::MakeTupleType({}),
         op::MakeOpCall("memory.shape_func", {primitive, ir::MakeTupleExpr(std::move(inputs)),
                                              ir::MakeTupleExpr({shapes.begin(), shapes.end()})}));
    return shapes;
  }

  std::vector<Binding>& out_;
  ir::Span span_;  // of the call being lowered
};

class Manifester : public ir::ExprMutator {
 public:
  // A global's function: its body rewritten, its signature kept.
  ir::Function LowerGlobal(const ir::Function& function) {
    return ir::ExprMutator::VisitFunction(function.get()).as<ir::FunctionNode>();
  }

  // A let chain in a loop rather than by recursion: chains run 10,000 deep.
  ir::Expr VisitLet(const ir::LetNode* node) override {
    std::vector<Binding> bindings;
    ir::Expr expr = ir::RefOf(node);
    while (expr->kind == ExprKind::kLet) {
      const auto* let = static_cast<const ir::LetNode*>(expr.get());
      const auto* call = let->value->kind == ExprKind::kCall
                             ? static_cast<const ir::CallNode*>(let->value.get())
                             : nullptr;
      if (call && CalledPrimitive(*call)) {
        CallLowering(&bindings).Lower(*call, let->var);
      } else {
        bindings.push_back({let->var, VisitExpr(let->value)});
      }
      expr = let->body;
    }
    return WrapLets(bindings, VisitExpr(expr));
  }

  // A primitive call outside a let (a function's or branch's result).
  ir::Expr VisitCall(const ir::CallNode* node) override {
    if (CalledPrimitive(*node)) {
      std::vector<Binding> bindings;
      const ir::Var result = CallLowering(&bindings).Lower(*node, nullptr);
      return WrapLets(bindings, result);
    }
    if (node->callee->kind == ExprKind::kOp) {
      const auto* op = static_cast<const ir::OpNode*>(node->callee.get());
      // Already in the memory dialect, or a VM instruction: kept as it is,
      // so that running the pass again changes nothing.
      if (op->def->dialect || op::RunsAsVMInstruction(*node)) return ir::RefOf(node);
      throw Error("ManifestAlloc: operator '" + op->name + "'" + At(node->span) +
                  " is called outside a primitive function; run FuseOps first");
    }
    return ir::ExprMutator::VisitCall(node);
  }

  ir::Expr VisitFunction(const ir::FunctionNode* node) override {
    if (HasFlag(node, kPrimitiveAttr)) {
      throw Error("ManifestAlloc: primitive function" + At(node->span) +
                  " is used as a value; it may only be called directly");
    }
    return ir::ExprMutator::VisitFunction(node);
  }
};

}  // namespace

ir::IRModule ManifestAlloc(const ir::IRModule& module) {
  return RunWithDeepStack([&] {
    ir::IRModule result = ir::MakeModule();
    for (const ir::TypeData& type_data : module->type_defs()) result->AddTypeDef(type_data);
    for (const ir::IRModuleNode::Definition& definition : module->functions()) {
      result->Add(definition.global, Manifester().LowerGlobal(definition.function));
    }
    typing::InferTypes(result);
    return result;
  });
}

}  // namespace nimble::transform
