#include "nimble/compiler/text/printer.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "nimble/compiler/ir/functor.h"
#include "nimble/compiler/op/op.h"
#include "nimble/compiler/support/deep_stack.h"
#include "nimble/vm/error.h"

namespace nimble::text {

namespace {

using ir::ExprKind;
using ir::ExprNode;
using ir::ForEachChild;

constexpr int kMaxIndent = 160;

// Text under construction. Appending a Doc moves it in as a child, so building
// the text of a 10,000-deep expression stays linear; indentation is applied
// once, when rendering, up to kMaxIndent spaces (the text is not
// whitespace-sensitive): indenting each line of 20,000 nested `if`s by its
// depth made 800 MB of spaces.
class Doc {
 public:
  Doc() = default;
  Doc(std::string text) { *this << std::move(text); }  // NOLINT: text is a Doc.

  Doc& operator<<(std::string text) {
    if (!text.empty()) parts_.push_back(Part{.text = std::move(text)});
    return *this;
  }
  Doc& operator<<(Doc child) {
    multiline_ |= child.multiline_;
    parts_.push_back(Part{.child = std::make_unique<Doc>(std::move(child))});
    return *this;
  }
  // A line break, followed by the indentation of the enclosing Indent()s.
  Doc& NewLine() {
    multiline_ = true;
    parts_.push_back(Part{.newline = true});
    return *this;
  }
  // `%name` of graph binding `id`. Names are given when rendering, in text
  // order, so the bindings read %0, %1, ... from top to bottom.
  static Doc Binding(int id) {
    Doc doc;
    doc.parts_.push_back(Part{.binding = id});
    return doc;
  }
  // `body` with its line breaks indented two more spaces.
  static Doc Indent(Doc body) {
    Doc doc;
    doc.multiline_ = body.multiline_;
    doc.parts_.push_back(Part{.child = std::make_unique<Doc>(std::move(body)), .child_indent = 2});
    return doc;
  }

  bool multiline() const { return multiline_; }

  // `fresh_binding_name` names each graph binding at its first appearance.
  std::string Render(const std::function<std::string()>& fresh_binding_name) const {
    Output output{{}, -1, {}, fresh_binding_name};
    Render(0, &output);
    return std::move(output.text);
  }

 private:
  struct Output {
    std::string text;
    int pending_indent;  // >= 0 once a line was started; written with its first text
    std::unordered_map<int, std::string> binding_names;
    const std::function<std::string()>& fresh_binding_name;

    void Append(const std::string& piece) {
      if (pending_indent > 0) {
        text.append(static_cast<size_t>(std::min(pending_indent, kMaxIndent)), ' ');
      }
      pending_indent = -1;
      text.append(piece);
    }
  };

  // Indentation is written with a line's first text, so empty lines carry none.
  void Render(int indent, Output* out) const {
    for (const Part& part : parts_) {
      if (part.newline) {
        out->text.push_back('\n');
        out->pending_indent = indent;
      } else if (part.child) {
        part.child->Render(indent + part.child_indent, out);
      } else if (part.binding >= 0) {
        auto [it, inserted] = out->binding_names.try_emplace(part.binding);
        if (inserted) it->second = out->fresh_binding_name();
        out->Append("%" + it->second);
      } else {
        out->Append(part.text);
      }
    }
  }

  // One of: text, a child Doc, a line break, or a graph binding's name.
  struct Part {
    std::string text{};
    std::unique_ptr<Doc> child{};
    int child_indent = 0;
    bool newline = false;
    int binding = -1;
  };
  std::vector<Part> parts_;
  bool multiline_ = false;
};

template <typename T>
std::string Join(const std::vector<T>& items, const std::string& separator,
                 const std::function<std::string(const T&)>& text) {
  std::string joined;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) joined += separator;
    joined += text(items[i]);
  }
  return joined;
}

bool IsNameChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

// What the parser accepts inside `meta[relay.Constant][...]`: an identifier
// (dotted parts allowed) or a non-negative integer.
bool IsConstantKey(const std::string& name) {
  const auto is_digit = [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; };
  if (name.empty()) return false;
  if (std::all_of(name.begin(), name.end(), is_digit)) return true;
  if (!std::isalpha(static_cast<unsigned char>(name[0])) && name[0] != '_') return false;
  for (size_t i = 0; i < name.size(); ++i) {
    if (name[i] == '.') {
      if (i + 1 == name.size() || !IsNameChar(name[i + 1])) return false;
    } else if (!IsNameChar(name[i])) {
      return false;
    }
  }
  return true;
}

// The shortest decimal that reads back as the same value of `dtype`
// (float16, float32 or float64), without a redundant ".0".
std::string FloatText(double value, DataType dtype) {
  double shortest = value;
  if (dtype.bits() < 64) {
    const auto same = [&](double candidate) {
      if (dtype.bits() == 16) {
        return FloatToHalf(static_cast<float>(candidate)).bits ==
               FloatToHalf(static_cast<float>(value)).bits;
      }
      return static_cast<float>(candidate) == static_cast<float>(value);
    };
    char buffer[64];
    for (int precision = 1; precision <= 9; ++precision) {
      std::snprintf(buffer, sizeof(buffer), "%.*g", precision, value);
      shortest = std::strtod(buffer, nullptr);
      if (same(shortest)) break;
    }
  }
  std::string text = ir::FormatFloatLiteral(shortest);
  if (text.size() > 2 && text.compare(text.size() - 2, 2, ".0") == 0) text.resize(text.size() - 2);
  return text;
}

// A rank-0 tensor as a literal (`1f`, `0.5f64`, `3`, `3i64`, `True`), or
// nothing for a value no literal spells (inf, nan).
std::optional<std::string> ScalarLiteral(const Tensor& tensor) {
  const DataType dtype = tensor->dtype();
  if (dtype.is_bool()) return tensor->GetAsInt64(0) ? "True" : "False";
  const std::string bits = std::to_string(dtype.bits());
  if (dtype.is_int()) {
    const std::string suffix = dtype == DataType::Int32()              ? ""
                               : dtype.code() == DataType::Code::kUInt ? "u" + bits
                                                                       : "i" + bits;
    return std::to_string(tensor->GetAsInt64(0)) + suffix;
  }
  const double value = tensor->GetAsDouble(0);
  if (!std::isfinite(value)) return std::nullopt;
  return FloatText(value, dtype) + (dtype.bits() == 32 ? "f" : "f" + bits);
}

class Printer {
 public:
  explicit Printer(const PrintOptions& options) : options_(options) {}

  std::string PrintModule(const ir::IRModule& module) {
    for (const auto& definition : module->functions()) {
      ReserveConstantNames(definition.function.get());
    }
    Doc doc;
    doc << "#[version = \"0.0.5\"]";
    bool first = true;
    const auto separate = [&] {
      doc.NewLine();
      if (!first) doc.NewLine();
      first = false;
    };
    for (const ir::TypeData& data : module->type_defs()) {
      separate();
      doc << PrintTypeData(data);
    }
    for (const auto& definition : module->functions()) {
      separate();
      doc << PrintDefinition(definition.global, definition.function);
    }
    doc.NewLine();
    return doc.Render(nullptr);
  }

  std::string PrintStandalone(const ir::Expr& expr) {
    if (!expr) throw Error("cannot print a null expression");
    ReserveConstantNames(expr.get());
    Scope* root = Analyze(expr.get());
    return PrintBlock(expr.get(), root).Render([this] { return FreshBindingName(); });
  }

 private:
  // A block of lines: a function body, an if branch, a match clause, or a
  // parenthesised let. Graph bindings are added to `lines` while the block's
  // current line is still being built, so they land before it.
  struct Scope {
    Scope* parent;
    int depth;
    std::vector<Doc> lines;
  };

  Doc PrintTypeData(const ir::TypeData& data) {
    Doc doc;
    doc << "type " + data->header->name;
    if (!data->type_vars.empty()) doc << "[" + TypeParamList(data->type_vars) + "]";
    Doc body;
    for (const ir::Constructor& constructor : data->constructors) {
      if (constructor != data->constructors.front()) body.NewLine();
      body << constructor->name;
      if (!constructor->inputs.empty()) {
        body << "(" + Join<ir::Type>(constructor->inputs, ", ", [](const ir::Type& type) {
                  return ir::TypeToString(type);
                }) + ")";
      }
      body << ",";
    }
    doc << " " << Enclose("{", std::move(body), "}");
    return doc;
  }

  // Rendered on the spot: binding names come from this function's names.
  std::string PrintDefinition(const ir::GlobalVar& global, const ir::Function& function) {
    Analyze(function.get());
    Doc doc;
    doc << "def @" + global->name << PrintFunctionRest(function.get());
    return doc.Render([this] { return FreshBindingName(); });
  }

  // ---- Sharing analysis ---------------------------------------------------

  // Resets the per-function state, then finds each shared node's block: the
  // innermost one enclosing all its uses. Blocks are created here in the
  // order the printer meets them, and looked up by (node, slot) when printing.
  Scope* Analyze(const ExprNode* root) {
    var_names_.clear();
    used_names_.clear();
    next_suffix_.clear();
    next_binding_ = 0;
    use_count_.clear();
    use_scopes_.clear();
    home_.clear();
    binding_ids_.clear();
    block_scopes_.clear();
    scopes_.clear();
    scopes_.push_back(Scope{nullptr, 0, {}});
    Scope* root_scope = &scopes_.back();

    CountUses(root);
    WalkBlock(root, root_scope, false);
    // A shared node is placed once all its users are (Kahn's order on the DAG).
    while (!ready_.empty()) {
      const ExprNode* node = ready_.back();
      ready_.pop_back();
      Scope* home = nullptr;
      for (Scope* use : use_scopes_[node]) home = home ? CommonAncestor(home, use) : use;
      home_[node] = home;
      WalkNode(node, home);
    }
    return root_scope;
  }

  void CountUses(const ExprNode* node) {
    if (++use_count_[node] > 1) return;
    ForEachChild(node, [&](const ExprNode* child) { CountUses(child); });
  }

  bool IsShared(const ExprNode* node) const {
    switch (node->kind) {
      case ExprKind::kVar:
      case ExprKind::kGlobalVar:
      case ExprKind::kOp:
      case ExprKind::kConstructor:
      case ExprKind::kConstant:
        return false;
      default:
        return use_count_.at(node) > 1;
    }
  }

  static Scope* CommonAncestor(Scope* a, Scope* b) {
    while (a->depth > b->depth) a = a->parent;
    while (b->depth > a->depth) b = b->parent;
    while (a != b) {
      a = a->parent;
      b = b->parent;
    }
    return a;
  }

  Scope* NewBlock(const ExprNode* owner, Scope* parent) {
    scopes_.push_back(Scope{parent, parent->depth + 1, {}});
    block_scopes_[owner].push_back(&scopes_.back());
    return &scopes_.back();
  }
  Scope* Block(const ExprNode* owner, size_t slot) const { return block_scopes_.at(owner)[slot]; }

  // Mirrors PrintBlock: a chain of unshared lets stays in the block.
  void WalkBlock(const ExprNode* node, Scope* scope, bool defining) {
    while (node->kind == ExprKind::kLet && (defining || !IsShared(node))) {
      defining = false;
      const auto* let = static_cast<const ir::LetNode*>(node);
      WalkExpr(let->value.get(), scope);
      node = let->body.get();
    }
    WalkExpr(node, scope);
  }

  void WalkExpr(const ExprNode* node, Scope* scope) {
    if (!IsShared(node)) {
      WalkNode(node, scope);
      return;
    }
    std::vector<Scope*>& uses = use_scopes_[node];
    uses.push_back(scope);
    if (static_cast<int>(uses.size()) == use_count_.at(node)) ready_.push_back(node);
  }

  // Mirrors PrintNode.
  void WalkNode(const ExprNode* node, Scope* scope) {
    switch (node->kind) {
      case ExprKind::kLet:
        WalkBlock(node, NewBlock(node, scope), true);
        break;
      case ExprKind::kIf: {
        const auto* branch = static_cast<const ir::IfNode*>(node);
        WalkExpr(branch->cond.get(), scope);
        WalkBlock(branch->then_branch.get(), NewBlock(node, scope), false);
        WalkBlock(branch->else_branch.get(), NewBlock(node, scope), false);
        break;
      }
      case ExprKind::kFunction:
        WalkBlock(static_cast<const ir::FunctionNode*>(node)->body.get(), NewBlock(node, scope),
                  false);
        break;
      case ExprKind::kMatch: {
        const auto* match = static_cast<const ir::MatchNode*>(node);
        WalkExpr(match->data.get(), scope);
        for (const ir::Clause& clause : match->clauses) {
          WalkBlock(clause.rhs.get(), NewBlock(node, scope), false);
        }
        break;
      }
      default:
        ForEachChild(node, [&](const ExprNode* child) { WalkExpr(child, scope); });
    }
  }

  // ---- Names --------------------------------------------------------------

  std::string VarName(const ir::VarNode* var) {
    auto [it, inserted] = var_names_.try_emplace(var);
    if (!inserted) return it->second;
    std::string base = var->name_hint.empty() ? "v" : var->name_hint;
    for (char& c : base) {
      if (!IsNameChar(c)) c = '_';
    }
    // The next suffix to try is kept per base name, so a program with many
    // variables of one name prints in linear time.
    std::string name = base;
    for (int& suffix = next_suffix_[base]; !used_names_.insert(name).second;) {
      name = base + std::to_string(++suffix);
    }
    it->second = name;
    return name;
  }

  std::string FreshBindingName() {
    while (!used_names_.insert(std::to_string(next_binding_)).second) ++next_binding_;
    return std::to_string(next_binding_++);
  }

  void ReserveConstantNames(const ExprNode* root) {
    std::unordered_set<const ExprNode*> visited;
    std::vector<const ExprNode*> stack{root};
    while (!stack.empty()) {
      const ExprNode* node = stack.back();
      stack.pop_back();
      if (!visited.insert(node).second) continue;
      if (node->kind == ExprKind::kConstant) {
        reserved_constant_names_.insert(static_cast<const ir::ConstantNode*>(node)->name);
      }
      ForEachChild(node, [&](const ExprNode* child) { stack.push_back(child); });
    }
  }

  // The constant's own name when it is usable and not taken by another
  // constant, else a fresh `cN`.
  std::string ConstantName(const ir::ConstantNode* constant) {
    auto [it, inserted] = constant_names_.try_emplace(constant);
    if (!inserted) return it->second;
    std::string name = constant->name;
    if (!IsConstantKey(name) || !used_constant_names_.insert(name).second) {
      do {
        name = "c" + std::to_string(next_constant_++);
      } while (reserved_constant_names_.count(name) || !used_constant_names_.insert(name).second);
    }
    if (options_.constants_out) (*options_.constants_out)[name] = constant->data;
    it->second = name;
    return name;
  }

  // ---- Expressions --------------------------------------------------------

  // The contents of a block: its lets one per line, the graph bindings they
  // need before them, then the result. `defining` prints `node` itself as a
  // let chain even though it is shared (its graph binding's value).
  Doc PrintBlock(const ExprNode* node, Scope* scope, bool defining = false) {
    while (node->kind == ExprKind::kLet && (defining || !IsShared(node))) {
      defining = false;
      const auto* let = static_cast<const ir::LetNode*>(node);
      Doc line;
      line << "let " + VarDecl(let->var.get()) + " = " << PrintExpr(let->value.get(), scope) << ";";
      scope->lines.push_back(std::move(line));
      node = let->body.get();
    }
    Doc result = PrintExpr(node, scope);
    Doc block;
    for (Doc& line : scope->lines) {
      block << std::move(line);
      block.NewLine();
    }
    scope->lines.clear();
    block << std::move(result);
    return block;
  }

  Doc PrintExpr(const ExprNode* node, Scope* scope) {
    if (!IsShared(node)) return PrintNode(node, scope);
    if (auto it = binding_ids_.find(node); it != binding_ids_.end()) {
      return Doc::Binding(it->second);
    }
    Scope* home = home_.at(node);
    Doc value = PrintNode(node, home);
    const int id = static_cast<int>(binding_ids_.size());
    binding_ids_[node] = id;
    Doc line;
    line << Doc::Binding(id) << " = " << std::move(value) << ";";
    home->lines.push_back(std::move(line));
    return Doc::Binding(id);
  }

  // A callee or projected tuple; block-like expressions and literals (`3.0`
  // would read as a float) get parentheses.
  Doc PrintOperand(const ExprNode* node, Scope* scope) {
    Doc doc = PrintExpr(node, scope);
    if (IsShared(node)) return doc;
    switch (node->kind) {
      case ExprKind::kIf:
      case ExprKind::kMatch:
      case ExprKind::kFunction:
      case ExprKind::kConstant: {
        Doc wrapped;
        wrapped << "(" << std::move(doc) << ")";
        return wrapped;
      }
      default:
        return doc;
    }
  }

  Doc PrintNode(const ExprNode* node, Scope* scope) {
    switch (node->kind) {
      case ExprKind::kVar:
        return "%" + VarName(static_cast<const ir::VarNode*>(node));
      case ExprKind::kGlobalVar:
        return "@" + static_cast<const ir::GlobalVarNode*>(node)->name;
      case ExprKind::kConstant:
        return PrintConstant(static_cast<const ir::ConstantNode*>(node));
      case ExprKind::kTuple: {
        const auto& fields = static_cast<const ir::TupleNode*>(node)->fields;
        Doc doc;
        doc << "(";
        for (size_t i = 0; i < fields.size(); ++i) {
          if (i) doc << ", ";
          doc << PrintExpr(fields[i].get(), scope);
        }
        doc << (fields.size() == 1 ? ",)" : ")");
        return doc;
      }
      case ExprKind::kTupleGetItem: {
        const auto* item = static_cast<const ir::TupleGetItemNode*>(node);
        Doc doc = PrintOperand(item->tuple.get(), scope);
        doc << "." + std::to_string(item->index);
        return doc;
      }
      case ExprKind::kOp:
        return static_cast<const ir::OpNode*>(node)->name;
      case ExprKind::kCall:
        return PrintCall(static_cast<const ir::CallNode*>(node), scope);
      case ExprKind::kLet: {
        return Enclose("(", PrintBlock(node, Block(node, 0), true), ")");
      }
      case ExprKind::kIf: {
        const auto* branch = static_cast<const ir::IfNode*>(node);
        Doc doc;
        doc << "if (" << PrintExpr(branch->cond.get(), scope) << ") "
            << Braced(PrintBlock(branch->then_branch.get(), Block(node, 0))) << " else "
            << Braced(PrintBlock(branch->else_branch.get(), Block(node, 1)));
        return doc;
      }
      case ExprKind::kFunction: {
        Doc doc;
        doc << "fn " << PrintFunctionRest(static_cast<const ir::FunctionNode*>(node));
        return doc;
      }
      case ExprKind::kConstructor:
        return static_cast<const ir::ConstructorNode*>(node)->name;
      case ExprKind::kMatch:
        return PrintMatch(static_cast<const ir::MatchNode*>(node), scope);
    }
    throw Error("cannot print an expression of unknown kind");
  }

  // `open`, `body` on its own lines indented two more spaces, then `close`
  // on a line of its own.
  static Doc Enclose(const std::string& open, Doc body, const std::string& close) {
    Doc inner;
    inner.NewLine();
    inner << std::move(body);
    Doc doc;
    doc << open << Doc::Indent(std::move(inner));
    doc.NewLine();
    doc << close;
    return doc;
  }

  static Doc Braced(Doc body) { return Enclose("{", std::move(body), "}"); }

  Doc PrintConstant(const ir::ConstantNode* constant) {
    if (constant->name.empty() && constant->is_scalar()) {
      if (std::optional<std::string> literal = ScalarLiteral(constant->data)) return *literal;
    }
    return "meta[relay.Constant][" + ConstantName(constant) + "]";
  }

  Doc PrintCall(const ir::CallNode* call, Scope* scope) {
    const ExprNode* callee = call->callee.get();
    // A nullary constructor's value prints as the bare name, as it is written.
    if (callee->kind == ExprKind::kConstructor && call->args.empty()) {
      return static_cast<const ir::ConstructorNode*>(callee)->name;
    }
    Doc doc = PrintOperand(callee, scope);
    doc << "(";
    bool first = true;
    for (const ir::Expr& arg : call->args) {
      if (!first) doc << ", ";
      first = false;
      doc << PrintExpr(arg.get(), scope);
    }
    const op::OpDef* def =
        callee->kind == ExprKind::kOp ? static_cast<const ir::OpNode*>(callee)->def : nullptr;
    for (const auto& [name, value] : call->attrs.entries()) {
      if (def && IsDefault(*def, name, value)) continue;
      if (!first) doc << ", ";
      first = false;
      doc << name + "=" + ir::AttrValueToString(value);
    }
    doc << ")";
    return doc;
  }

  // Attributes left at their defaults are omitted; parsing fills them back in.
  static bool IsDefault(const op::OpDef& def, const std::string& name, const ir::AttrValue& value) {
    for (const op::AttrSpec& spec : def.attrs) {
      if (spec.name == name) return !spec.required && spec.default_value == value;
    }
    return false;
  }

  // After `def @f` or `fn `: `[A](%x: T, Attr=1) -> R {` body `}`.
  Doc PrintFunctionRest(const ir::FunctionNode* function) {
    std::string header;
    if (!function->type_params.empty()) {
      header += "[" + TypeParamList(function->type_params) + "]";
    }
    header += "(";
    bool first = true;
    for (const ir::Var& param : function->params) {
      if (!first) header += ", ";
      first = false;
      header += VarDecl(param.get());
    }
    for (const auto& [name, value] : function->attrs.entries()) {
      if (!first) header += ", ";
      first = false;
      header += name + "=" + ir::AttrValueToString(value);
    }
    header += ")";
    ir::Type ret_type = function->ret_type;
    if (options_.show_types && function->checked_type) {
      if (auto func_type = function->checked_type.as<ir::FuncTypeNode>()) {
        ret_type = func_type->ret_type;
      }
    }
    if (ret_type) header += " -> " + ir::TypeToString(ret_type);
    Doc doc;
    doc << header + " " << Braced(PrintBlock(function->body.get(), Block(function, 0)));
    return doc;
  }

  static std::string TypeParamList(const std::vector<ir::TypeVar>& params) {
    return Join<ir::TypeVar>(params, ", ", [](const ir::TypeVar& param) { return param->name; });
  }

  // `%x` or `%x: T` for a binder: the annotation, or with show_types the
  // inferred type.
  std::string VarDecl(const ir::VarNode* var) {
    ir::Type type =
        options_.show_types && var->checked_type ? var->checked_type : var->type_annotation;
    std::string text = "%" + VarName(var);
    if (type) text += ": " + ir::TypeToString(type);
    return text;
  }

  Doc PrintMatch(const ir::MatchNode* match, Scope* scope) {
    Doc doc;
    doc << (match->complete ? "match (" : "match? (") << PrintExpr(match->data.get(), scope)
        << ") ";
    Doc clauses;
    for (size_t i = 0; i < match->clauses.size(); ++i) {
      const ir::Clause& clause = match->clauses[i];
      if (i) clauses.NewLine();
      clauses << PrintPattern(clause.lhs) + " => ";
      Doc body = PrintBlock(clause.rhs.get(), Block(match, i));
      clauses << (body.multiline() ? Braced(std::move(body)) : std::move(body)) << ",";
    }
    doc << Braced(std::move(clauses));
    return doc;
  }

  std::string PrintPattern(const ir::Pattern& pattern) {
    const auto print_all = [&](const std::vector<ir::Pattern>& patterns) {
      return Join<ir::Pattern>(patterns, ", ",
                               [&](const ir::Pattern& field) { return PrintPattern(field); });
    };
    switch (pattern->kind) {
      case ir::PatternKind::kWildcard:
        return "_";
      case ir::PatternKind::kVar:
        return VarDecl(static_cast<const ir::PatternVarNode*>(pattern.get())->var.get());
      case ir::PatternKind::kConstructor: {
        const auto* constructor = static_cast<const ir::PatternConstructorNode*>(pattern.get());
        std::string text = constructor->constructor->name;
        if (!constructor->patterns.empty()) text += "(" + print_all(constructor->patterns) + ")";
        return text;
      }
      case ir::PatternKind::kTuple: {
        const auto& fields = static_cast<const ir::PatternTupleNode*>(pattern.get())->patterns;
        return "(" + print_all(fields) + (fields.size() == 1 ? ",)" : ")");
      }
    }
    throw Error("cannot print a pattern of unknown kind");
  }

  const PrintOptions& options_;

  // Per function (reset by Analyze).
  std::unordered_map<const ir::VarNode*, std::string> var_names_;
  std::unordered_set<std::string> used_names_;
  std::unordered_map<std::string, int> next_suffix_;
  int next_binding_ = 0;
  std::unordered_map<const ExprNode*, int> use_count_;
  std::unordered_map<const ExprNode*, std::vector<Scope*>> use_scopes_;
  std::vector<const ExprNode*> ready_;
  std::unordered_map<const ExprNode*, Scope*> home_;
  std::unordered_map<const ExprNode*, int> binding_ids_;
  std::unordered_map<const ExprNode*, std::vector<Scope*>> block_scopes_;
  std::deque<Scope> scopes_;

  // Per module.
  std::unordered_set<std::string> reserved_constant_names_;
  std::unordered_set<std::string> used_constant_names_;
  std::unordered_map<const ir::ConstantNode*, std::string> constant_names_;
  int next_constant_ = 0;
};

}  // namespace

std::string PrintModule(const ir::IRModule& module, const PrintOptions& options) {
  return RunWithDeepStack([&] { return Printer(options).PrintModule(module); });
}

std::string PrintExpr(const ir::Expr& expr, const PrintOptions& options) {
  return RunWithDeepStack([&] { return Printer(options).PrintStandalone(expr); });
}

}  // namespace nimble::text
