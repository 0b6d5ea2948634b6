// The ONNX operators the importer converts (onnx_import.h), one converter
// each, and what a converter sees of its node: the inputs as expressions
// (with their values when known at import time), the attributes, the opset,
// the types of its inputs, and a way to fail that names the node.
#pragma once

#include <onnx/onnx_pb.h>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "nimble/compiler/ir/expr.h"
#include "nimble/compiler/ir/type.h"

namespace nimble::onnx_import {

// One element of an integer vector that shape arithmetic builds (PyTorch's
// `x.shape[1]`, `x.size()[:-1] + (12, 64)`): its value when known, else the
// tensor and dimension whose size it is, when it is one, and that
// dimension's bound (`?<=N`), which a Range up to it keeps.
struct ShapeElement {
  std::optional<int64_t> value;
  const ir::ExprNode* size_of = nullptr;
  int64_t dim = -1;
  std::optional<int64_t> upper_bound = std::nullopt;
};

// A tensor of the graph: its expression, and its value when known at import
// time (then the expression is that constant). An integer scalar or vector
// of shape arithmetic also carries what is known of each element, so that
// a Reshape to `x.shape[0], x.shape[1], 12, 64` keeps x's dimensions (and
// its output a static rank and sizes) though x's sizes are `?`.
struct Value {
  ir::Expr expr;
  std::optional<Tensor> known;
  std::vector<ShapeElement> elements;  // empty: nothing tracked
};

// Attributes of a Nimble operator call.
ir::Attrs AttrsOf(std::initializer_list<std::pair<std::string, AttrValue>> entries);

// `name` (an ONNX tensor's) made an identifier that Relay text can print:
// letters, digits and `_`.
std::string Identifier(const std::string& name);

// A value known at import time: a constant named `name` (empty: unnamed),
// with its elements when it is a small integer scalar or vector.
Value KnownValue(const Tensor& tensor, const std::string& name = "");

// How a control-flow converter (If, Loop, Scan) imports the graphs its node
// holds and adds the global functions they become; the importer implements
// it, keeping a scope per graph so that a subgraph reads the values of the
// graphs around it.
class Subgraphs {
 public:
  virtual ~Subgraphs() = default;
  // The values of enclosing graphs that `graph`, or a graph nested in it,
  // reads, by name (sorted); names no scope defines are left out, for
  // Import to report.
  virtual std::vector<std::pair<std::string, Value>> Captured(const onnx::GraphProto& graph) = 0;
  // Converts the nodes of `graph` in a scope of its own where `bindings`
  // define names (its inputs, captured values made variables) before the
  // enclosing scopes; returns its outputs. `what` names the graph in errors
  // ("node /Loop (Loop): body").
  virtual std::vector<Value> Import(const onnx::GraphProto& graph,
                                    const std::map<std::string, Value>& bindings,
                                    const std::string& what) = 0;
  // A global variable named from `stem` that no function of the module has
  // yet, and the adding of its function (a recursion names it in its body).
  virtual ir::GlobalVar FreshGlobal(const std::string& stem) = 0;
  virtual void AddFunction(const ir::GlobalVar& global, const ir::Function& function) = 0;
};

// What the importer gives a converter for one node.
class NodeContext {
 public:
  // `name` names the node in errors ("#3 (Relu)" for an unnamed one);
  // `type_of` infers (and remembers) the type of an expression;
  // `reads_inputs` says (and remembers) whether an expression reads a graph
  // input, so that its value is not known at import time; `fold` evaluates a
  // call whose arguments are all known, throwing op::OutputTooLarge rather
  // than computing a tensor past `max_bytes`; `define` adds a global function given
  // as Relay text (`def @name(...) { ... }`) to the module being built, once
  // per name, and returns it; `subgraphs` imports the graphs a node holds.
  NodeContext(const onnx::NodeProto& node, std::string name, int64_t opset,
              std::vector<std::optional<Value>> inputs,
              std::function<ir::TensorType(const ir::Expr&)> type_of,
              std::function<bool(const ir::Expr&)> reads_inputs,
              std::function<Tensor(const ir::Expr&, int64_t max_bytes)> fold,
              std::function<ir::GlobalVar(const std::string&, const std::string&)> define,
              Subgraphs& subgraphs);

  const onnx::NodeProto& node() const { return node_; }
  int64_t opset() const { return opset_; }

  size_t num_inputs() const { return inputs_.size(); }
  // Whether input `i` is given (ONNX leaves optional inputs empty).
  bool Has(size_t i) const { return i < inputs_.size() && inputs_[i].has_value(); }
  // Input `i`; fails unless given.
  const Value& Input(size_t i) const;
  // Input `i`'s type (a tensor type).
  ir::TensorType TypeOf(size_t i) const;
  ir::TensorType TypeOfExpr(const ir::Expr& expr) const { return type_of_(expr); }
  // Input `i`'s value as integers; fails unless known at import time.
  std::vector<int64_t> KnownInts(size_t i, const std::string& what) const;

  std::optional<int64_t> IntAttr(const std::string& name) const;
  std::optional<float> FloatAttr(const std::string& name) const;
  std::optional<std::vector<int64_t>> IntsAttr(const std::string& name) const;
  const onnx::TensorProto* TensorAttr(const std::string& name) const;
  std::optional<std::string> StringAttr(const std::string& name) const;
  std::optional<std::vector<std::string>> StringsAttr(const std::string& name) const;
  // The graph attribute `name`; fails when it is missing or not a graph.
  const onnx::GraphProto& GraphAttr(const std::string& name) const;
  // Fails when the node has an attribute that is not in `known`.
  void OnlyAttrs(const std::vector<std::string>& known) const;

  // A call of the Nimble operator `op`: computed now when every argument
  // is known, else an expression.
  Value Call(const std::string& op, const std::vector<Value>& args, ir::Attrs attrs = {}) const;
  Value Expr(const ir::Expr& expr) const;
  // The global function `name`, defined by `relay_text` the first time.
  ir::GlobalVar Define(const std::string& name, const std::string& relay_text) const;
  Subgraphs& subgraphs() const { return subgraphs_; }
  // How the node is named in errors ("/Loop (Loop)", "#3 (If)").
  const std::string& name() const { return name_; }

  // Throws nimble::Error "node NAME (OP): reason" (#INDEX for NAME where the
  // node has none).
  [[noreturn]] void Fail(const std::string& reason) const;

 private:
  const onnx::NodeProto& node_;
  std::string name_;
  int64_t opset_;
  std::vector<std::optional<Value>> inputs_;
  std::function<ir::TensorType(const ir::Expr&)> type_of_;
  std::function<bool(const ir::Expr&)> reads_inputs_;
  std::function<Tensor(const ir::Expr&, int64_t max_bytes)> fold_;
  std::function<ir::GlobalVar(const std::string&, const std::string&)> define_;
  Subgraphs& subgraphs_;
};

// A converter: the node's outputs, in order.
using Converter = std::function<std::vector<Value>(const NodeContext&)>;

// The converter of `op_type` (default domain), or null.
const Converter* FindConverter(const std::string& op_type);

// A TensorProto's data as a tensor; throws nimble::Error naming `what` for
// an element type Nimble has no dtype for, or data that does not fit its
// dims.
Tensor TensorFromProto(const onnx::TensorProto& proto, const std::string& what);

// Nimble's dtype for an ONNX element type; throws nimble::Error naming `what`.
DataType DTypeFromOnnx(int32_t element_type, const std::string& what);

}  // namespace nimble::onnx_import
