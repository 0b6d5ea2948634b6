#include "nimble/compiler/op/invoke.h"

#include "nimble/vm/adt.h"
#include "nimble/vm/error.h"

namespace nimble::op {

namespace {

// Unification over types that are complete except for the relation's output
// placeholder. `dst` and `src` agree when dimensions are equal or one is Any;
// an incomplete `dst` (the output) takes `src`.
class ConcreteReporter : public TypeReporter {
 public:
  explicit ConcreteReporter(ir::Type output) : output_(std::move(output)) {}

  void Assign(const ir::Type& dst, const ir::Type& src) override {
    if (dst == output_ && !resolved_) {
      resolved_ = src;
      return;
    }
    Check(dst == output_ ? resolved_ : dst, src);
  }

  const ir::Type& resolved() const { return resolved_; }

 private:
  static void Check(const ir::Type& a, const ir::Type& b) {
    if (!a || !b || a->kind == ir::TypeKind::kIncomplete || b->kind == ir::TypeKind::kIncomplete) {
      return;
    }
    if (a->kind != b->kind) {
      throw Error("type " + ir::TypeToString(a) + " does not match " + ir::TypeToString(b));
    }
    if (a->kind == ir::TypeKind::kTensor) {
      const auto* ta = static_cast<const ir::TensorTypeNode*>(a.get());
      const auto* tb = static_cast<const ir::TensorTypeNode*>(b.get());
      bool same = ta->dtype == tb->dtype && ta->ndim() == tb->ndim();
      for (size_t i = 0; same && i < ta->ndim(); ++i) {
        same = ta->shape[i].is_any() || tb->shape[i].is_any() || ta->shape[i] == tb->shape[i];
      }
      if (!same) {
        throw Error("type " + ir::TypeToString(a) + " does not match " + ir::TypeToString(b));
      }
    } else if (a->kind == ir::TypeKind::kTuple) {
      const auto* ta = static_cast<const ir::TupleTypeNode*>(a.get());
      const auto* tb = static_cast<const ir::TupleTypeNode*>(b.get());
      if (ta->fields.size() != tb->fields.size()) {
        throw Error("type " + ir::TypeToString(a) + " does not match " + ir::TypeToString(b));
      }
      for (size_t i = 0; i < ta->fields.size(); ++i) Check(ta->fields[i], tb->fields[i]);
    }
  }

  ir::Type output_;
  ir::Type resolved_;
};

void FlattenTensors(const Ref<Object>& value, std::vector<Tensor>* out) {
  if (Tensor tensor = value.as<TensorNode>()) {
    out->push_back(std::move(tensor));
  } else if (ADT tuple = value.as<ADTNode>()) {
    for (const Ref<Object>& field : tuple->fields()) FlattenTensors(field, out);
  } else {
    throw Error("operator arguments must be tensors or tuples of tensors");
  }
}

void FlattenTensorTypes(const ir::Type& type, std::vector<ir::TensorType>* out) {
  if (type->kind == ir::TypeKind::kTensor) {
    out->push_back(type.as<ir::TensorTypeNode>());
  } else if (type->kind == ir::TypeKind::kTuple) {
    for (const ir::Type& field : type.as<ir::TupleTypeNode>()->fields) {
      FlattenTensorTypes(field, out);
    }
  } else {
    throw Error("operator result type " + ir::TypeToString(type) + " is not made of tensors");
  }
}

// Relations, shape functions and kernels often name their op already; the
// message names it exactly once.
std::string PrefixedWithOp(const OpDef& def, const std::string& message) {
  return message.rfind(def.name + ":", 0) == 0 ? message : def.name + ": " + message;
}

std::string ShapesToString(std::span<const Shape> shapes) {
  std::string text;
  for (size_t i = 0; i < shapes.size(); ++i) {
    if (i) text += ", ";
    text += ShapeToString(shapes[i]);
  }
  return text;
}

}  // namespace

ir::Type ResolveCallType(const OpDef& def, const std::vector<ir::Type>& arg_types,
                         const ir::Attrs& attrs) {
  std::vector<ir::Type> types = arg_types;
  types.push_back(Make<ir::IncompleteTypeNode>());
  ConcreteReporter reporter(types.back());
  try {
    if (!def.relation(types, attrs, reporter) || !reporter.resolved()) {
      throw Error("cannot infer the result type");
    }
  } catch (const Error& error) {
    throw Error(PrefixedWithOp(def, error.what()));
  }
  return reporter.resolved();
}

ir::Type TypeOfValue(const Ref<Object>& value) {
  if (Tensor tensor = value.as<TensorNode>()) {
    std::vector<ir::Dim> shape(tensor->shape().begin(), tensor->shape().end());
    return ir::MakeTensorType(std::move(shape), tensor->dtype());
  }
  if (ADT tuple = value.as<ADTNode>()) {
    std::vector<ir::Type> fields;
    for (const Ref<Object>& field : tuple->fields()) fields.push_back(TypeOfValue(field));
    return ir::MakeTupleType(std::move(fields));
  }
  throw Error("value has no tensor or tuple type");
}

Ref<Object> InvokeOp(const OpDef& def, const std::vector<Ref<Object>>& args, const ir::Attrs& attrs,
                     int64_t max_output_bytes) {
  if (def.dialect) {
    throw Error(def.name + ": a memory-dialect op runs only in compiled programs (the VM)");
  }
  std::vector<ir::Type> arg_types;
  std::vector<Tensor> inputs;
  try {
    for (const Ref<Object>& arg : args) {
      arg_types.push_back(TypeOfValue(arg));
      FlattenTensors(arg, &inputs);
    }
  } catch (const Error& error) {
    throw Error(PrefixedWithOp(def, error.what()));
  }
  std::vector<Shape> input_shapes;
  for (const Tensor& input : inputs) input_shapes.push_back(input->shape());
  ir::Type out_type;
  try {
    out_type = ResolveCallType(def, arg_types, attrs);
  } catch (const Error& error) {
    // On concrete values a relation failure is a run-time shape error: name
    // the shapes that caused it.
    throw Error(std::string(error.what()) + " (input shapes " + ShapesToString(input_shapes) + ")");
  }
  std::vector<ir::TensorType> out_types;
  FlattenTensorTypes(out_type, &out_types);
  std::vector<Shape> out_shapes;
  try {
    const vm::TensorArgViews input_views(inputs);
    out_shapes = def.shape_func(
        input_shapes,
        def.shape_mode == ShapeFuncMode::kDataDependent ? input_views.args() : vm::TensorArgs(),
        attrs);
  } catch (const Error& error) {
    throw Error(PrefixedWithOp(def, error.what()));
  }
  if (out_shapes.size() != out_types.size()) {
    throw Error(def.name + ": shape function returned " + std::to_string(out_shapes.size()) +
                " shapes for " + std::to_string(out_types.size()) + " outputs");
  }
  std::vector<Tensor> outputs;
  for (size_t i = 0; i < out_types.size(); ++i) {
    const ir::TensorType& type = out_types[i];
    bool fits = out_shapes[i].size() == type->ndim();
    for (size_t d = 0; fits && d < type->ndim(); ++d) {
      fits = type->shape[d].is_any() || type->shape[d].value() == out_shapes[i][d];
    }
    if (!fits) {
      throw Error(def.name + ": output shape " + ShapeToString(out_shapes[i]) +
                  " does not match its type " + ir::TypeToString(type) + " for inputs " +
                  ShapesToString(input_shapes));
    }
    if (ShapeBytes(out_shapes[i], type->dtype) > max_output_bytes) {
      throw OutputTooLarge(def.name + ": output " + ShapeToString(out_shapes[i]) + " of " +
                           type->dtype.name() + " is past " + std::to_string(max_output_bytes) +
                           " bytes");
    }
    outputs.push_back(TensorNode::Empty(out_shapes[i], type->dtype));
  }
  try {
    def.kernel(inputs, outputs, attrs);
  } catch (const Error& error) {
    throw Error(PrefixedWithOp(def, error.what()));
  }
  if (out_type->kind == ir::TypeKind::kTensor) return outputs[0];
  // Rebuild the (possibly nested) tuple structure of the result type.
  size_t next = 0;
  std::function<Ref<Object>(const ir::Type&)> rebuild = [&](const ir::Type& type) -> Ref<Object> {
    if (type->kind == ir::TypeKind::kTensor) return outputs[next++];
    std::vector<Ref<Object>> fields;
    for (const ir::Type& field : type.as<ir::TupleTypeNode>()->fields) {
      fields.push_back(rebuild(field));
    }
    return MakeTuple(std::move(fields));
  };
  return rebuild(out_type);
}

}  // namespace nimble::op
