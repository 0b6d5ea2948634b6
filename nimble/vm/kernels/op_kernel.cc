#include "nimble/vm/kernels/op_kernel.h"

#include <exception>
#include <utility>

#include "nimble/vm/error.h"

namespace nimble::vm {

namespace {

// A kernel's state: the op and the attributes it was bound to at load time.
struct BoundOp {
  const OpKernelDef* def;
  Attrs attrs;
  int32_t num_outputs;  // for an upper-bound op, with its true-shape outputs
};

std::string ArgCountError(int32_t num_args, int32_t num_outputs) {
  return "got " + std::to_string(num_args) + " arguments for " + std::to_string(num_outputs) +
         " outputs";
}

int CallOpKernel(void* state, DLTensor* const* args, int32_t num_args) {
  const BoundOp& bound = *static_cast<const BoundOp*>(state);
  try {
    if (num_args < bound.num_outputs) throw Error(ArgCountError(num_args, bound.num_outputs));
    const int32_t num_inputs = num_args - bound.num_outputs;
    bound.def->kernel(TensorArgs(args, num_inputs),
                      TensorArgs(args + num_inputs, bound.num_outputs), bound.attrs);
    return 0;
  } catch (const std::exception& error) {
    NimbleKernelSetError(error.what());
    return 1;
  }
}

void CheckShapeTensor(const DLTensor& tensor, const std::string& what) {
  if (DTypeOf(tensor) != DataType::Int64() || tensor.ndim != 1) {
    throw Error(what + " must be a rank-1 int64 tensor, got " + DTypeOf(tensor).name() +
                " of rank " + std::to_string(tensor.ndim));
  }
}

int CallShapeFunc(void* state, DLTensor* const* args, int32_t num_args) {
  const BoundOp& bound = *static_cast<const BoundOp*>(state);
  try {
    if (num_args < bound.num_outputs) throw Error(ArgCountError(num_args, bound.num_outputs));
    const TensorArgs inputs(args, num_args - bound.num_outputs);
    const bool reads_data = bound.def->shape_mode == ShapeFuncMode::kDataDependent;
    std::vector<Shape> input_shapes;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const DLTensor& input = *inputs[i];
      if (reads_data) {
        const std::span<const int64_t> shape = ShapeOf(input);
        input_shapes.emplace_back(shape.begin(), shape.end());
      } else {
        CheckShapeTensor(input, "input shape " + std::to_string(i));
        input_shapes.push_back(ElementsAsInt64(input));
      }
    }
    const std::vector<Shape> shapes =
        bound.def->shape_func(input_shapes, reads_data ? inputs : TensorArgs(), bound.attrs);
    if (shapes.size() != static_cast<size_t>(bound.num_outputs)) {
      throw Error("the shape function gave " + std::to_string(shapes.size()) + " shapes for " +
                  std::to_string(bound.num_outputs) + " outputs");
    }
    for (size_t i = 0; i < shapes.size(); ++i) {
      const DLTensor& out = *args[inputs.size() + i];
      CheckShapeTensor(out, "output shape " + std::to_string(i));
      if (out.shape[0] != static_cast<int64_t>(shapes[i].size())) {
        throw Error("output " + std::to_string(i) + " has shape " + ShapeToString(shapes[i]) +
                    ", of rank " + std::to_string(shapes[i].size()) + ", but its type has rank " +
                    std::to_string(out.shape[0]));
      }
      std::copy(shapes[i].begin(), shapes[i].end(), DataOf<int64_t>(out));
    }
    return 0;
  } catch (const std::exception& error) {
    NimbleKernelSetError(error.what());
    return 1;
  }
}

KernelFactory BindWith(const OpKernelDef* def, NimbleKernelFunc func, int outputs_per_output) {
  return [def, func, outputs_per_output](const Attrs& attrs) {
    auto bound = std::make_shared<BoundOp>(
        BoundOp{def, attrs, static_cast<int32_t>(def->NumOutputs(attrs) * outputs_per_output)});
    return Kernel{.name = {}, .func = func, .state = std::move(bound)};
  };
}

}  // namespace

std::string ShapeFuncModeName(ShapeFuncMode mode) {
  switch (mode) {
    case ShapeFuncMode::kDataIndependent:
      return "data-independent";
    case ShapeFuncMode::kDataDependent:
      return "data-dependent";
    case ShapeFuncMode::kUpperBound:
      return "upper-bound";
  }
  return "?";
}

const OpKernelRegistry& OpKernelRegistry::Global() {
  static const OpKernelRegistry registry = [] {
    OpKernelRegistry built;
    RegisterElemwiseOpKernels(built);
    RegisterNnOpKernels(built);
    RegisterConvOpKernels(built);
    RegisterReduceOpKernels(built);
    RegisterTransformOpKernels(built);
    RegisterCreationOpKernels(built);
    RegisterDynamicOpKernels(built);
    RegisterIndexOpKernels(built);
    return built;
  }();
  return registry;
}

OpKernelDef& OpKernelRegistry::Register(const std::string& name) {
  auto [it, inserted] = ops_.try_emplace(name, std::make_unique<OpKernelDef>());
  if (!inserted) throw Error("operator '" + name + "' has two runtime definitions");
  it->second->name = name;
  return *it->second;
}

const OpKernelDef* OpKernelRegistry::Find(const std::string& name) const {
  auto it = ops_.find(name);
  return it == ops_.end() ? nullptr : it->second.get();
}

std::vector<std::string> OpKernelRegistry::Names() const {
  std::vector<std::string> names;
  for (const auto& [name, def] : ops_) names.push_back(name);
  return names;
}

std::string ShapeFuncKernelName(const std::string& op_name) {
  return "shape_func." + op_name;
}

void RegisterOpKernels(KernelRegistry& registry) {
  for (const std::string& name : OpKernelRegistry::Global().Names()) {
    const OpKernelDef* def = OpKernelRegistry::Global().Find(name);
    if (def->kernel) {
      const int per_output = def->shape_mode == ShapeFuncMode::kUpperBound ? 2 : 1;
      registry.Register(name, BindWith(def, &CallOpKernel, per_output));
    }
    registry.Register(ShapeFuncKernelName(name), BindWith(def, &CallShapeFunc, 1));
  }
}

int64_t ElementAsInt64(const DLTensor& tensor, int64_t index) {
  return LoadElementAsInt64(DataOf<void>(tensor), DTypeOf(tensor), index);
}

double ElementAsDouble(const DLTensor& tensor, int64_t index) {
  return LoadElementAsDouble(DataOf<void>(tensor), DTypeOf(tensor), index);
}

std::vector<int64_t> ElementsAsInt64(const DLTensor& tensor) {
  if (tensor.ndim > 1) {
    throw Error("expected a tensor of rank 0 or 1, got rank " + std::to_string(tensor.ndim));
  }
  std::vector<int64_t> values(static_cast<size_t>(NumelOf(tensor)));
  for (size_t i = 0; i < values.size(); ++i) {
    values[i] = ElementAsInt64(tensor, static_cast<int64_t>(i));
  }
  return values;
}

TensorArgViews::TensorArgViews(std::span<const Tensor> tensors) {
  views_.reserve(tensors.size());
  for (const Tensor& tensor : tensors) views_.push_back(AsDLTensor(tensor));
  for (const DLTensor& view : views_) pointers_.push_back(&view);
}

}  // namespace nimble::vm
