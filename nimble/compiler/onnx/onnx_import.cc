#include "nimble/compiler/onnx/onnx_import.h"

#include <deque>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <unordered_map>

#include "nimble/compiler/eval/evaluator.h"
#include "nimble/compiler/ir/functor.h"
#include "nimble/compiler/onnx/onnx_converters.h"
#include "nimble/compiler/support/deep_stack.h"
#include "nimble/compiler/text/parser.h"
#include "nimble/compiler/typing/type_infer.h"
#include "nimble/vm/error.h"

namespace nimble::onnx_import {
namespace {

// Larger input dimensions are a broken file, not a model.
constexpr int64_t kMaxDimension = int64_t{1} << 31;

std::string NodeName(const onnx::NodeProto& node, size_t index) {
  const std::string op = node.op_type().empty() ? "" : " (" + node.op_type() + ")";
  return (node.name().empty() ? "#" + std::to_string(index) : node.name()) + op;
}

// The names a graph's nodes, and the graphs nested in them, read without
// defining them (the graph's inputs, initializers and nodes' outputs), sorted.
std::set<std::string> FreeNames(const onnx::GraphProto& graph) {
  std::set<std::string> defined, used;
  for (const onnx::ValueInfoProto& input : graph.input()) defined.insert(input.name());
  for (const onnx::TensorProto& initializer : graph.initializer()) {
    defined.insert(initializer.name());
  }
  for (const onnx::NodeProto& node : graph.node()) {
    for (const std::string& output : node.output()) defined.insert(output);
    for (const std::string& input : node.input()) used.insert(input);
    for (const onnx::AttributeProto& attribute : node.attribute()) {
      if (attribute.has_g()) used.merge(FreeNames(attribute.g()));
      for (const onnx::GraphProto& nested : attribute.graphs()) used.merge(FreeNames(nested));
    }
  }
  std::set<std::string> free;
  for (const std::string& name : used) {
    if (!name.empty() && !defined.contains(name)) free.insert(name);
  }
  return free;
}

class GraphImporter : public Subgraphs {
 public:
  GraphImporter(const onnx::GraphProto& graph, int64_t opset, const std::string& source,
                const ImportOptions& options)
      : graph_(graph), opset_(opset), source_(source), options_(options) {}

  ir::IRModule Run() {
    scopes_.emplace_back();
    AddInitializers(graph_);
    std::vector<ir::Var> params;
    for (const onnx::ValueInfoProto& input : graph_.input()) {
      if (Lookup(input.name())) continue;  // an initialiser listed as an input
      params.push_back(Make<ir::VarNode>(Identifier(input.name()), InputType(input)));
      scopes_.back()[input.name()] = {params.back(), std::nullopt, {}};
    }
    CheckDimBoundsNameInputDims();
    std::vector<ir::Expr> outputs;
    for (const Value& output : ConvertNodes(graph_, "graph")) outputs.push_back(output.expr);
    if (outputs.empty()) Fail("the graph has no outputs");
    const ir::Expr body = outputs.size() == 1 ? outputs.front() : Make<ir::TupleNode>(outputs);
    module_->Add(Make<ir::GlobalVarNode>("main"),
                 Make<ir::FunctionNode>(params, body, nullptr, std::vector<ir::TypeVar>{}));
    typing::InferTypes(module_);
    return module_;
  }

 private:
  [[noreturn]] void Fail(const std::string& reason) const { throw Error(source_ + ": " + reason); }

  // Records the input's named dimensions in dim_names_.
  ir::Type InputType(const onnx::ValueInfoProto& input) {
    const std::string what = "graph input '" + input.name() + "'";
    if (!input.type().has_tensor_type()) Fail(what + " is not a tensor");
    const onnx::TypeProto::Tensor& tensor = input.type().tensor_type();
    std::vector<ir::Dim> shape;
    if (!tensor.has_shape()) Fail(what + " has no shape (its rank must be known)");
    for (const onnx::TensorShapeProto::Dimension& dim : tensor.shape().dim()) {
      if (dim.has_dim_value() && (dim.dim_value() < 0 || dim.dim_value() > kMaxDimension)) {
        Fail(what + " has a dimension of " + std::to_string(dim.dim_value()));
      }
      if (dim.has_dim_value()) {
        shape.push_back(ir::Dim(dim.dim_value()));
        continue;
      }
      std::optional<int64_t> bound;
      if (dim.has_dim_param()) {
        dim_names_.insert(dim.dim_param());
        if (const auto found = options_.dim_bounds.find(dim.dim_param());
            found != options_.dim_bounds.end()) {
          bound = found->second;
        }
      }
      shape.push_back(ir::Dim::AnyAtMost(bound));
    }
    return ir::MakeTensorType(shape, DTypeFromOnnx(tensor.elem_type(), what));
  }

  void CheckDimBoundsNameInputDims() const {
    for (const auto& [name, bound] : options_.dim_bounds) {
      if (bound < 0 || bound > kMaxDimension) {
        Fail("the bound of dimension '" + name + "' must be between 0 and " +
             std::to_string(kMaxDimension) + ", got " + std::to_string(bound));
      }
      if (dim_names_.contains(name)) continue;
      std::string names;
      for (const std::string& known : dim_names_)
        names += (names.empty() ? "'" : ", '") + known + "'";
      Fail("a bound is given for dimension '" + name + "', which no graph input has (" +
           (names.empty() ? std::string("the inputs have no named dimensions")
                          : "their named dimensions: " + names) +
           ")");
    }
  }

  // Subgraphs:
  std::vector<std::pair<std::string, Value>> Captured(const onnx::GraphProto& graph) override {
    std::vector<std::pair<std::string, Value>> captured;
    for (const std::string& name : FreeNames(graph)) {
      if (const Value* value = Lookup(name)) captured.emplace_back(name, *value);
    }
    return captured;
  }

  std::vector<Value> Import(const onnx::GraphProto& graph,
                            const std::map<std::string, Value>& bindings,
                            const std::string& what) override {
    scopes_.emplace_back(bindings.begin(), bindings.end());
    std::vector<Value> outputs;
    try {
      AddInitializers(graph);
      outputs = ConvertNodes(graph, what);
    } catch (const Error& error) {
      scopes_.pop_back();
      // The node holding the graph adds its name and the file's.
      std::string message = error.what();
      if (message.starts_with(source_ + ": ")) message.erase(0, source_.size() + 2);
      if (!message.starts_with(what)) message = what + ": " + message;
      throw Error(message);
    }
    scopes_.pop_back();
    return outputs;
  }

  ir::GlobalVar FreshGlobal(const std::string& stem) override {
    std::string name = stem;
    for (int suffix = 1; module_->Lookup(name) || !global_names_.insert(name).second; ++suffix) {
      name = stem + "_" + std::to_string(suffix);
    }
    return Make<ir::GlobalVarNode>(name);
  }

  void AddFunction(const ir::GlobalVar& global, const ir::Function& function) override {
    module_->Add(global, function);
  }

  // The value named `name` in the innermost scope that has it, or null.
  const Value* Lookup(const std::string& name) const {
    for (auto scope = scopes_.rbegin(); scope != scopes_.rend(); ++scope) {
      const auto found = scope->find(name);
      if (found != scope->end()) return &found->second;
    }
    return nullptr;
  }

  void AddInitializers(const onnx::GraphProto& graph) {
    for (const onnx::TensorProto& initializer : graph.initializer()) {
      const std::string what = source_ + ": initializer '" + initializer.name() + "'";
      Tensor tensor = TensorFromProto(initializer, what);
      std::string name = Identifier(initializer.name());
      while (!constant_names_.insert(name).second) name += "_";
      scopes_.back()[initializer.name()] = KnownValue(tensor, name);
    }
  }

  // Converts the nodes of `graph` into the innermost scope; returns the
  // graph's outputs (`what` names the graph).
  std::vector<Value> ConvertNodes(const onnx::GraphProto& graph, const std::string& what) {
    for (size_t index : TopologicalOrder(graph)) {
      Convert(graph.node(static_cast<int>(index)), index);
    }
    std::vector<Value> outputs;
    for (const onnx::ValueInfoProto& output : graph.output()) {
      const Value* value = Lookup(output.name());
      if (!value) Fail(what + " output '" + output.name() + "' is never defined");
      outputs.push_back(*value);
    }
    return outputs;
  }

  // The nodes in an order where each comes after what defines its inputs
  // (ONNX asks for that order, but not every exporter keeps it).
  std::vector<size_t> TopologicalOrder(const onnx::GraphProto& graph) const {
    const int count = graph.node_size();
    std::unordered_map<std::string, size_t> producer;
    for (int i = 0; i < count; ++i) {
      for (const std::string& output : graph.node(i).output()) {
        if (output.empty()) continue;
        if (Lookup(output) || !producer.emplace(output, i).second) {
          Fail("node " + NodeName(graph.node(i), i) + " defines '" + output +
               "', which is already defined");
        }
      }
    }
    std::vector<std::vector<size_t>> users(count);
    std::vector<size_t> waiting(count, 0);
    for (int i = 0; i < count; ++i) {
      for (const std::string& input : graph.node(i).input()) {
        if (input.empty() || Lookup(input)) continue;
        const auto found = producer.find(input);
        if (found == producer.end()) {
          Fail("node " + NodeName(graph.node(i), i) + " refers to '" + input +
               "', which no input, initializer or node defines");
        }
        users[found->second].push_back(i);
        ++waiting[i];
      }
    }
    std::vector<size_t> order, ready;
    for (int i = count - 1; i >= 0; --i) {
      if (waiting[i] == 0) ready.push_back(i);
    }
    while (!ready.empty()) {
      const size_t next = ready.back();
      ready.pop_back();
      order.push_back(next);
      for (size_t user : users[next]) {
        if (--waiting[user] == 0) ready.push_back(user);
      }
    }
    if (order.size() != static_cast<size_t>(count)) {
      for (int i = 0; i < count; ++i) {
        if (waiting[i] > 0)
          Fail("the graph has a cycle through node " + NodeName(graph.node(i), i));
      }
    }
    return order;
  }

  // The type of `expr`, inferred over what is new in it: each part whose type
  // is known already (an earlier node's value) stands for a variable of that
  // type, so that each node is inferred once (inferring each node's whole
  // expression took 9.6 s for a chain of 4,000 Relus). Constants stay, as a
  // relation may read their values.
  ir::TensorType TypeOf(const ir::Expr& expr) {
    const auto found = types_.find(expr.get());
    if (found != types_.end()) return found->second.second;
    struct KnownAsVariables : ir::ExprMutator {
      explicit KnownAsVariables(const TypeMap& types) : types(types) {}
      ir::Expr VisitExpr(const ir::Expr& expr) override {
        const auto known = types.find(expr.get());
        if (known == types.end() || expr->kind == ir::ExprKind::kConstant ||
            expr->kind == ir::ExprKind::kVar) {
          return ir::ExprMutator::VisitExpr(expr);
        }
        auto [variable, made] = memo_.try_emplace(expr.get());
        if (made) variable->second = Make<ir::VarNode>("known", known->second.second);
        return variable->second;
      }
      const TypeMap& types;
    };
    const ir::Type type = typing::InferExprType(KnownAsVariables(types_).VisitExpr(expr), module_);
    if (!type || type->kind != ir::TypeKind::kTensor) throw Error("a value is not a tensor");
    const ir::TensorType tensor = type.as<ir::TensorTypeNode>();
    types_.emplace(expr.get(), std::make_pair(expr, tensor));
    return tensor;
  }

  // Whether `expr` reads a graph input (the importer's only variables; a
  // global function's recurrence reads them through its arguments), each
  // part looked at once over the whole import.
  bool ReadsInputs(const ir::Expr& expr) {
    const auto found = reads_inputs_.find(expr.get());
    if (found != reads_inputs_.end()) return found->second.second;
    bool reads = expr->kind == ir::ExprKind::kVar || expr->kind == ir::ExprKind::kGlobalVar;
    ir::ForEachChild(expr.get(), [&](const ir::ExprNode* child) {
      reads = ReadsInputs(ir::Expr(const_cast<ir::ExprNode*>(child))) || reads;
    });
    reads_inputs_.emplace(expr.get(), std::make_pair(expr, reads));
    return reads;
  }

  // Throws op::OutputTooLarge when it would compute a tensor past max_bytes.
  static Tensor Fold(const ir::Expr& expr, int64_t max_bytes) {
    ir::IRModule module = ir::MakeModule();
    module->Add(
        Make<ir::GlobalVarNode>("main"),
        Make<ir::FunctionNode>(std::vector<ir::Var>{}, expr, nullptr, std::vector<ir::TypeVar>{}));
    typing::InferTypes(module);
    const Ref<Object> value = eval::Evaluate(module, "main", {}, max_bytes);
    const Tensor tensor = value.as<TensorNode>();
    if (!tensor) throw Error("a value known at import time is not a tensor");
    return tensor;
  }

  // A converter's global function (a recurrence), parsed from its Relay
  // text; its GlobalVar is the parsed one, which its recursive calls use.
  ir::GlobalVar Define(const std::string& name, const std::string& text) {
    if (ir::Function existing = module_->Lookup(name)) return module_->GetGlobalVar(name);
    const ir::IRModule parsed =
        text::ParseModule("#[version = \"0.0.5\"]\n" + text, "<" + name + ">");
    const ir::Function function = parsed->Lookup(name);
    if (!function) throw Error("a converter's function @" + name + " did not parse");
    module_->Add(parsed->GetGlobalVar(name), function);
    return parsed->GetGlobalVar(name);
  }

  void Convert(const onnx::NodeProto& node, size_t index) {
    const std::string name = NodeName(node, index);
    if (!node.domain().empty() && node.domain() != "ai.onnx") {
      Fail("node " + name + ": operators of domain '" + node.domain() + "' are not supported");
    }
    const Converter* converter = FindConverter(node.op_type());
    if (node.op_type().empty()) Fail("node " + name + " has no operator type");
    if (!converter) Fail("node " + name + ": operator " + node.op_type() + " is not supported");
    std::vector<std::optional<Value>> inputs;
    for (const std::string& input : node.input()) {
      inputs.push_back(input.empty() ? std::nullopt : std::optional(*Lookup(input)));
    }
    std::vector<Value> outputs;
    try {
      const NodeContext context(
          node, name, opset_, std::move(inputs),
          [this](const ir::Expr& expr) { return TypeOf(expr); },
          [this](const ir::Expr& expr) { return ReadsInputs(expr); }, Fold,
          [this](const std::string& name, const std::string& text) { return Define(name, text); },
          *this);
      outputs = (*converter)(context);
    } catch (const Error& error) {
      const std::string message = error.what();
      if (message.starts_with("node ")) Fail(message);
      Fail("node " + name + ": " + message);
    }
    for (int i = 0; i < node.output_size(); ++i) {
      if (node.output(i).empty()) continue;
      if (static_cast<size_t>(i) >= outputs.size()) {
        Fail("node " + name + ": output " + std::to_string(i) + " is not supported");
      }
      scopes_.back()[node.output(i)] = outputs[i];
    }
  }

  const onnx::GraphProto& graph_;
  const int64_t opset_;
  const std::string source_;
  const ImportOptions& options_;
  std::set<std::string> dim_names_;  // the inputs' named dimensions
  ir::IRModule module_ = ir::MakeModule();
  // The values by name of the graph being converted and of the graphs
  // around it, innermost last.
  std::deque<std::unordered_map<std::string, Value>> scopes_;
  std::set<std::string> constant_names_;  // the initializers' identifiers
  std::set<std::string> global_names_;    // given by FreshGlobal
  // Each entry holds its expression, so that no address is reused for
  // another while the importer runs.
  using TypeMap = std::unordered_map<const ir::ExprNode*, std::pair<ir::Expr, ir::TensorType>>;
  TypeMap types_;
  std::unordered_map<const ir::ExprNode*, std::pair<ir::Expr, bool>> reads_inputs_;
};

}  // namespace

ir::IRModule ImportOnnx(const std::string& bytes, const std::string& source_name,
                        const ImportOptions& options) {
  onnx::ModelProto model;
  if (!model.ParseFromString(bytes)) {
    throw Error(source_name +
                ": not an ONNX model (the protobuf does not parse: truncated, or nested deeper "
                "than protobuf's limit of 100 messages?)");
  }
  if (!model.has_graph()) throw Error(source_name + ": the ONNX model has no graph");
  std::optional<int64_t> opset;
  for (const onnx::OperatorSetIdProto& entry : model.opset_import()) {
    if (entry.domain().empty() || entry.domain() == "ai.onnx") opset = entry.version();
  }
  if (!opset) throw Error(source_name + ": the model imports no opset of the default domain");
  if (*opset < kMinOpset || *opset > kMaxOpset) {
    throw Error(source_name + ": opset " + std::to_string(*opset) + " is not supported (" +
                std::to_string(kMinOpset) + " to " + std::to_string(kMaxOpset) + ")");
  }
  // On the deep stack once, rather than a thread of its own for each node's
  // type inference (the thread's start and its stack's mapping were most of
  // the time of a 20,000-node import).
  return RunWithDeepStack(
      [&] { return GraphImporter(model.graph(), *opset, source_name, options).Run(); });
}

ir::IRModule ImportOnnxFile(const std::string& path, const ImportOptions& options) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw Error(path + ": cannot open it");
  std::ostringstream bytes;
  bytes << file.rdbuf();
  return ImportOnnx(bytes.str(), path, options);
}

}  // namespace nimble::onnx_import
