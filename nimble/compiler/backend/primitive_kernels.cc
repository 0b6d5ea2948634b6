#include "nimble/compiler/backend/primitive_kernels.h"

#include <functional>
#include <optional>
#include <unordered_map>
#include <utility>

#include "nimble/compiler/ir/functor.h"
#include "nimble/compiler/ir/structural_equal.h"
#include "nimble/compiler/ir/structural_hash.h"
#include "nimble/compiler/op/compute.h"
#include "nimble/compiler/op/op.h"
#include "nimble/compiler/te/lower.h"
#include "nimble/compiler/tir/simplify.h"
#include "nimble/compiler/transform/pass_util.h"
#include "nimble/vm/error.h"
#include "nimble/vm/string_join.h"

namespace nimble::backend {
namespace {

using Tensors = std::vector<te::Tensor>;

// Longer names are cut: the symbol only has to be unique and readable.
constexpr size_t kMaxOpsInName = 4;

ir::Type ParamType(const ir::Var& param) {
  return param->checked_type ? param->checked_type : param->type_annotation;
}

// Evaluates a primitive's body on tensor expressions.
class Composer {
 public:
  explicit Composer(te::ComputeContext& context) : context_(context) {}

  // The result's tensors, or nothing when an op of the body is unsupported.
  std::optional<Tensors> Compose(const ir::FunctionNode& primitive,
                                 const std::vector<Tensors>& params) {
    for (size_t i = 0; i < params.size(); ++i) values_[primitive.params[i].get()] = params[i];
    const ir::ExprNode* expr = primitive.body.get();
    while (expr->kind == ir::ExprKind::kLet) {
      const auto& let = static_cast<const ir::LetNode&>(*expr);
      std::optional<Tensors> value = Evaluate(let.value);
      if (!value) return std::nullopt;
      values_[let.var.get()] = std::move(*value);
      expr = let.body.get();
    }
    return Evaluate(ir::RefOf(expr));
  }

  const std::vector<std::string>& ops() const { return ops_; }

 private:
  std::optional<Tensors> Evaluate(const ir::Expr& expr) {
    switch (expr->kind) {
      case ir::ExprKind::kVar: {
        const auto found = values_.find(expr.get());
        if (found == values_.end()) return std::nullopt;
        return found->second;
      }
      case ir::ExprKind::kTuple: {
        Tensors fields;
        for (const ir::Expr& field : static_cast<const ir::TupleNode&>(*expr).fields) {
          std::optional<Tensors> value = Evaluate(field);
          if (!value) return std::nullopt;
          fields.insert(fields.end(), value->begin(), value->end());
        }
        return fields;
      }
      case ir::ExprKind::kTupleGetItem: {
        // Flattened positions equal field indices only for tuples of tensors.
        const auto& get = static_cast<const ir::TupleGetItemNode&>(*expr);
        if (!expr->checked_type || expr->checked_type->kind != ir::TypeKind::kTensor) {
          return std::nullopt;
        }
        std::optional<Tensors> tuple = Evaluate(get.tuple);
        if (!tuple || op::FlattenTensorTypes(get.tuple->checked_type).size() != tuple->size()) {
          return std::nullopt;
        }
        return Tensors{tuple->at(static_cast<size_t>(get.index))};
      }
      case ir::ExprKind::kConstant: {
        const auto& constant = static_cast<const ir::ConstantNode&>(*expr);
        if (constant.data->ndim() != 0) return std::nullopt;
        const te::Expr value = tir::Constant(constant.data->dtype(), constant.data->GetAsDouble(0));
        return Tensors{te::Compute("c", {}, [&](const std::vector<te::Expr>&) { return value; })};
      }
      case ir::ExprKind::kCall: {
        const auto& call = static_cast<const ir::CallNode&>(*expr);
        if (call.callee->kind != ir::ExprKind::kOp) return std::nullopt;
        Tensors inputs;
        for (const ir::Expr& arg : call.args) {
          std::optional<Tensors> value = Evaluate(arg);
          if (!value) return std::nullopt;
          inputs.insert(inputs.end(), value->begin(), value->end());
        }
        Tensors outputs = op::ComputeCall(call, inputs, context_);
        if (outputs.empty()) return std::nullopt;
        ops_.push_back(static_cast<const ir::OpNode&>(*call.callee).name);
        return outputs;
      }
      default:
        return std::nullopt;
    }
  }

  te::ComputeContext& context_;
  std::unordered_map<const ir::ExprNode*, Tensors> values_;
  std::vector<std::string> ops_;
};

std::string SymbolFor(const std::vector<std::string>& ops, size_t index) {
  std::string name = "fused";
  for (size_t i = 0; i < ops.size() && i < kMaxOpsInName; ++i) {
    std::string op = ops[i];
    for (char& c : op) {
      if (c == '.') c = '_';
    }
    name += "_" + op;
  }
  return name + "_" + std::to_string(index);
}

std::string TensorTypesText(const ir::Type& type) {
  std::string text;
  for (const ir::TensorType& tensor : op::FlattenTensorTypes(type)) {
    std::string shape;
    for (const ir::Dim& dim : tensor->shape) shape += (shape.empty() ? "" : ", ") + dim.ToString();
    text += (text.empty() ? "(" : ", (") + shape + ") " + tensor->dtype.name();
  }
  return text;
}

std::string SignatureOf(const ir::FunctionNode& primitive) {
  std::string inputs;
  for (const ir::Var& param : primitive.params) {
    inputs += (inputs.empty() ? "" : ", ") + TensorTypesText(ParamType(param));
  }
  return inputs + " -> " + TensorTypesText(primitive.body->checked_type);
}

bool HasDynamicOutput(const ir::FunctionNode& primitive) {
  for (const ir::TensorType& type : op::FlattenTensorTypes(primitive.body->checked_type)) {
    if (!type->is_static()) return true;
  }
  return false;
}

// Placeholders for `primitive`'s parameters: a static dimension is its size,
// a `?` one a variable of its own, which `on_variable` sees with the input
// tensor (counted over the flattened parameters) and axis it stands for.
std::vector<Tensors> PlaceholdersWithDimVariables(
    const ir::FunctionNode& primitive,
    const std::function<void(const tir::Var&, size_t input, size_t axis)>& on_variable = {}) {
  std::vector<Tensors> params;
  size_t first_input = 0;
  for (size_t i = 0; i < primitive.params.size(); ++i) {
    const std::string param = "p" + std::to_string(i);
    const ir::Type type = ParamType(primitive.params[i]);
    params.push_back(
        op::PlaceholdersFor(param, type, [&](size_t tensor, size_t dim, int64_t size) -> te::Expr {
          if (size >= 0) return tir::IntImm(size);
          tir::Var var =
              tir::MakeVar(param + "." + std::to_string(tensor) + ".d" + std::to_string(dim));
          if (on_variable) on_variable(var, first_input + tensor, dim);
          return var;
        }));
    first_input += params.back().size();
  }
  return params;
}

// The kernel: placeholders with a shape variable per `?` dimension.
std::optional<std::pair<tir::PrimFunc, std::vector<std::string>>> BuildKernel(
    const ir::FunctionNode& primitive, const std::string& name, const te::MatMulKnobs& matmul,
    tir::PrimFunc::Device device) {
  const std::vector<Tensors> params = PlaceholdersWithDimVariables(primitive);
  Tensors inputs;
  for (const Tensors& param : params) inputs.insert(inputs.end(), param.begin(), param.end());
  te::ComputeContext context(device == tir::PrimFunc::Device::kGpu);
  Composer composer(context);
  std::optional<Tensors> outputs = composer.Compose(primitive, params);
  if (!outputs) return std::nullopt;
  for (const te::Tensor& output : *outputs) {
    if (output->is_placeholder()) return std::nullopt;  // the body returns a parameter
  }
  return std::make_pair(te::Lower(name, inputs, *outputs, context.requirements(), matmul, device),
                        composer.ops());
}

// The shape function: the same composition on placeholders whose `?`
// dimensions are loads from the input-shape buffers (one int64 vector per
// input tensor, as memory manifestation passes them).
// `for_gpu_kernel`: the kernel's composition is the GPU's (te::ComputeContext),
// though the shape function runs on the CPU.
tir::PrimFunc BuildShapeFunc(const ir::FunctionNode& primitive, const std::string& name,
                             bool for_gpu_kernel) {
  tir::PrimFunc func;
  func.name = name;
  std::vector<Tensors> params;
  for (size_t i = 0; i < primitive.params.size(); ++i) {
    const std::string param = "p" + std::to_string(i);
    const ir::Type type = ParamType(primitive.params[i]);
    const size_t first = func.params.size();
    const std::vector<ir::TensorType> types = op::FlattenTensorTypes(type);
    for (size_t k = 0; k < types.size(); ++k) {
      func.params.push_back(std::make_shared<tir::BufferNode>(
          "shape." + param + "." + std::to_string(k), DataType::Int64(),
          std::vector<te::Expr>{tir::IntImm(static_cast<int64_t>(types[k]->ndim()))}));
    }
    params.push_back(
        op::PlaceholdersFor(param, type, [&](size_t tensor, size_t dim, int64_t size) -> te::Expr {
          if (size >= 0) return tir::IntImm(size);
          return tir::Load(func.params[first + tensor], tir::IntImm(static_cast<int64_t>(dim)));
        }));
  }
  func.num_inputs = static_cast<int>(func.params.size());
  te::ComputeContext context(for_gpu_kernel);
  std::optional<Tensors> outputs = Composer(context).Compose(primitive, params);
  if (!outputs) throw Error("the shape function of " + name + " cannot be composed");
  std::vector<tir::Stmt> stores;
  for (size_t j = 0; j < outputs->size(); ++j) {
    const std::vector<te::Expr>& shape = (*outputs)[j]->shape;
    func.params.push_back(std::make_shared<tir::BufferNode>(
        "shape.out" + std::to_string(j), DataType::Int64(),
        std::vector<te::Expr>{tir::IntImm(static_cast<int64_t>(shape.size()))}));
    for (size_t d = 0; d < shape.size(); ++d) {
      stores.push_back(
          tir::Store(func.params.back(), tir::IntImm(static_cast<int64_t>(d)), shape[d]));
    }
  }
  tir::Stmt body = tir::Seq(std::move(stores));
  const std::vector<te::Requirement>& requirements = context.requirements();
  for (auto it = requirements.rbegin(); it != requirements.rend(); ++it) {
    body = tir::Assert(it->condition, it->message, body);
  }
  func.body = std::move(body);
  return tir::Simplify(func);
}

// Every primitive function literal of a module, in order of first appearance.
class PrimitiveCollector : public ir::ExprVisitor {
 public:
  void VisitFunction(const ir::FunctionNode* function) override {
    if (transform::HasFlag(function, transform::kPrimitiveAttr)) {
      primitives.push_back(function);
      return;
    }
    ExprVisitor::VisitFunction(function);
  }
  std::vector<const ir::FunctionNode*> primitives;
};

// Whether an op of `primitive` has a shape function that reads its inputs'
// values (dyn.strided_slice) or gives a bound (argwhere): the composition's
// shapes are not those.
class ReadsValuesForShapes : public ir::ExprVisitor {
 public:
  void VisitCall(const ir::CallNode* call) override {
    const ir::OpNode* op = transform::CalledOp(*call);
    if (op && op->def && op->def->shape_mode != op::ShapeFuncMode::kDataIndependent) found = true;
    ExprVisitor::VisitCall(call);
  }
  bool found = false;
};

using InputDims = std::unordered_map<const tir::ExprNode*, transform::DimSource>;

// Adds the values `expr` may take to `form`: a constant, an input dimension,
// or either arm of a select of such (a broadcast's); false for anything else.
bool AddCandidates(const te::Expr& expr, const InputDims& input_dims, transform::DimForm& form) {
  if (expr->kind == tir::ExprKind::kIntImm) {
    form.push_back({.constant = true, .value = static_cast<const tir::IntImmNode&>(*expr).value});
    return true;
  }
  if (expr->kind == tir::ExprKind::kSelect) {
    const auto& select = static_cast<const tir::SelectNode&>(*expr);
    return AddCandidates(select.true_value, input_dims, form) &&
           AddCandidates(select.false_value, input_dims, form);
  }
  const auto input = input_dims.find(expr.get());
  if (input == input_dims.end()) return false;
  form.push_back(input->second);
  return true;
}

}  // namespace

std::optional<std::vector<std::vector<transform::DimForm>>> OutputDimFormsOf(
    const ir::FunctionNode& primitive) {
  ReadsValuesForShapes reads;
  reads.VisitExpr(primitive.body);
  if (reads.found) return std::nullopt;
  // Each `?` dimension a variable of its own, to be recognised in the
  // composed output shapes.
  InputDims input_dims;
  const std::vector<Tensors> params =
      PlaceholdersWithDimVariables(primitive, [&](const tir::Var& var, size_t input, size_t axis) {
        input_dims[var.get()] = {.input = input, .axis = axis};
      });
  te::ComputeContext context(false);
  const std::optional<Tensors> outputs = Composer(context).Compose(primitive, params);
  if (!outputs) return std::nullopt;
  std::vector<std::vector<transform::DimForm>> forms;
  for (const te::Tensor& output : *outputs) {
    std::vector<transform::DimForm>& dims = forms.emplace_back();
    for (const te::Expr& dim : output->shape) {
      transform::DimForm& form = dims.emplace_back();
      if (!AddCandidates(tir::Simplify(dim), input_dims, form)) form.clear();
    }
  }
  return forms;
}

const GeneratedKernel* PrimitiveKernels::Find(const ir::FunctionNode* primitive) const {
  const auto found = kernel_of_.find(primitive);
  return found == kernel_of_.end() ? nullptr : &kernels_[found->second];
}

PrimitiveKernels GenerateKernels(const ir::IRModule& module,
                                 const std::function<bool(const ir::FunctionNode&)>& wanted,
                                 const MatMulKnobsOf& matmul,
                                 const std::function<bool(const ir::FunctionNode&)>& on_gpu) {
  PrimitiveCollector collector;
  for (const ir::IRModuleNode::Definition& definition : module->functions()) {
    collector.VisitExpr(definition.function);
  }
  PrimitiveKernels result;
  // Structurally equal primitives on one device share a kernel: buckets by
  // hash.
  std::unordered_map<size_t, std::vector<std::pair<const ir::FunctionNode*, size_t>>> seen;
  for (const ir::FunctionNode* primitive : collector.primitives) {
    const ir::Expr expr = ir::RefOf(primitive);
    const bool gpu = on_gpu && on_gpu(*primitive);
    auto& bucket = seen[ir::StructuralHash(expr)];
    bool shared = false;
    for (const auto& [other, index] : bucket) {
      if (result.kernels_[index].gpu == gpu && ir::StructuralEqual(ir::RefOf(other), expr)) {
        result.kernel_of_[primitive] = index;
        shared = true;
        break;
      }
    }
    if (shared || !wanted(*primitive)) continue;

    const size_t index = result.kernels_.size();
    const bool multi_op = primitive->body->kind == ir::ExprKind::kLet;
    std::string name = "fused_" + std::to_string(index);
    auto built = BuildKernel(*primitive, name, matmul(*primitive),
                             gpu ? tir::PrimFunc::Device::kGpu : tir::PrimFunc::Device::kCpu);
    if (!built) {
      if (multi_op)
        throw Error("a fused primitive with an operator code generation cannot compile");
      continue;
    }
    name = SymbolFor(built->second, index);
    built->first.name = name;
    GeneratedKernel kernel{name, "", JoinStrings(built->second, "+"), SignatureOf(*primitive), gpu};
    result.funcs_.push_back(std::move(built->first));
    if (HasDynamicOutput(*primitive)) {
      kernel.shape_func = "shape_func." + name;
      result.funcs_.push_back(BuildShapeFunc(*primitive, kernel.shape_func, gpu));
    }
    result.kernels_.push_back(std::move(kernel));
    result.kernel_of_[primitive] = index;
    bucket.emplace_back(primitive, index);
  }
  return result;
}

}  // namespace nimble::backend
