#include "nimble/compiler/text/parser.h"

#include <limits>
#include <set>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "nimble/compiler/op/op.h"
#include "nimble/compiler/support/deep_stack.h"
#include "nimble/compiler/text/lexer.h"
#include "nimble/vm/error.h"
#include "nimble/vm/shape.h"

namespace nimble::text {

namespace {

using ir::Expr;
using ir::Type;

constexpr const char* kVersion = "0.0.5";

class Parser {
 public:
  Parser(const std::string& text, const std::string& source_name, ir::IRModule module,
         const ParamMap* params)
      : tokens_(Lex(text, source_name)),
        source_name_(source_name),
        module_(module ? std::move(module) : ir::MakeModule()),
        params_(params) {}

  // Three passes over the top-level items, so that any item may mention any
  // other: first every ADT's name and type parameters, then the constructors,
  // then the functions.
  ir::IRModule ParseProgram() {
    ParseVersionHeader();
    const size_t start = pos_;
    ForEachItem(start, &Parser::DeclareTypeData, &Parser::SkipItem);
    ForEachItem(start, &Parser::DefineConstructors, &Parser::SkipItem);
    ForEachItem(start, &Parser::SkipItem, &Parser::ParseDefinition);
    CheckGlobals();
    return module_;
  }

  Expr ParseStandaloneExpr() {
    ParseVersionHeader();
    Expr expr = ParseExpr();
    ExpectEnd();
    CheckGlobals();
    return expr;
  }

  Type ParseStandaloneType() {
    Type type = ParseType();
    ExpectEnd();
    return type;
  }

 private:
  // ---- Tokens -------------------------------------------------------------

  const Token& Peek(size_t ahead = 0) const {
    return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)];
  }
  const Token& Next() {
    const Token& token = tokens_[pos_];
    if (pos_ + 1 < tokens_.size()) ++pos_;
    return token;
  }
  bool AcceptPunct(const char* punct) {
    if (!Peek().IsPunct(punct)) return false;
    Next();
    return true;
  }
  const Token& ExpectPunct(const char* punct) {
    if (!Peek().IsPunct(punct)) Unexpected(std::string("'") + punct + "'");
    return Next();
  }
  const Token& ExpectWord(const char* word) {
    if (!Peek().IsWord(word)) Unexpected(std::string("'") + word + "'");
    return Next();
  }
  const Token& Expect(TokenKind kind, const std::string& what) {
    if (Peek().kind != kind) Unexpected(what);
    return Next();
  }
  void ExpectEnd() const {
    if (Peek().kind != TokenKind::kEnd) Unexpected("end of input");
  }

  [[noreturn]] void Fail(const Token& at, const std::string& message) const {
    ThrowSyntaxError(source_name_, at.line, at.column, message);
  }
  [[noreturn]] void Unexpected(const std::string& expected) const {
    Fail(Peek(), "expected " + expected + " but found " + Peek().Describe());
  }

  template <typename T>
  static Ref<T> At(Ref<T> node, const Token& token) {
    node->span = ir::Span{token.line, token.column};
    return node;
  }

  // Reads `item (, item)* [,]` and the closing `close`; returns whether the
  // last item was followed by a comma (which makes `(x,)` a tuple).
  template <typename F>
  bool ParseList(const char* close, F&& item) {
    bool trailing_comma = false;
    while (!AcceptPunct(close)) {
      item();
      trailing_comma = AcceptPunct(",");
      if (!trailing_comma) {
        ExpectPunct(close);
        return false;
      }
    }
    return trailing_comma;
  }

  // ---- Scopes -------------------------------------------------------------

  // Local names (`%x`, `%0`) resolve to the innermost binding; a binding
  // lasts until the enclosing block, function or clause ends.
  void Bind(const std::string& name, Expr value) {
    locals_[name].push_back(std::move(value));
    bound_names_.push_back(name);
  }
  size_t BindingMark() const { return bound_names_.size(); }
  void PopBindings(size_t mark) {
    while (bound_names_.size() > mark) {
      locals_[bound_names_.back()].pop_back();
      bound_names_.pop_back();
    }
  }
  Expr LookupLocal(const std::string& name) const {
    auto it = locals_.find(name);
    return it == locals_.end() || it->second.empty() ? nullptr : it->second.back();
  }

  // ---- Module -------------------------------------------------------------

  void ParseVersionHeader() {
    if (!AcceptPunct("#")) return;
    ExpectPunct("[");
    ExpectWord("version");
    ExpectPunct("=");
    const Token& version = Expect(TokenKind::kString, "a version string");
    if (version.value != kVersion) {
      Fail(version, "unsupported text format version \"" + version.value + "\" (expected \"" +
                        kVersion + "\")");
    }
    ExpectPunct("]");
  }

  // Calls `on_type` at each `type` item and `on_def` at each `def`.
  void ForEachItem(size_t start, void (Parser::*on_type)(), void (Parser::*on_def)()) {
    pos_ = start;
    while (Peek().kind != TokenKind::kEnd) {
      if (Peek().IsWord("type")) {
        (this->*on_type)();
      } else if (Peek().IsWord("def")) {
        (this->*on_def)();
      } else {
        Unexpected("'def' or 'type'");
      }
    }
  }

  // Skips a top-level item (its header up to the braced body, and the body).
  void SkipItem() {
    Next();
    SkipToEndOfItem();
  }

  // Stops early at the next `def` or `type`, which only start items: the pass
  // that parses the item reports what is wrong with it.
  void SkipToEndOfItem() {
    int depth = 0;
    while (Peek().kind != TokenKind::kEnd && !Peek().IsWord("def") && !Peek().IsWord("type")) {
      const Token& token = Next();
      if (token.IsPunct("{")) ++depth;
      if (token.IsPunct("}") && --depth == 0) return;
    }
  }

  void DeclareTypeData() {
    Next();
    const Token& name = Expect(TokenKind::kIdentifier, "a type name");
    if (module_->LookupTypeDef(name.value)) Fail(name, "type " + name.value + " is defined twice");
    const size_t type_mark = type_scope_.size();
    std::vector<ir::TypeVar> type_vars = ParseTypeParams();
    type_scope_.resize(type_mark);
    module_->AddTypeDef(Make<ir::TypeDataNode>(Make<ir::GlobalTypeVarNode>(name.value),
                                               std::move(type_vars),
                                               std::vector<ir::Constructor>{}));
    if (!Peek().IsPunct("{")) Unexpected("'{'");
    SkipToEndOfItem();
  }

  void DefineConstructors() {
    Next();
    ir::TypeData data = module_->LookupTypeDef(Next().value);
    if (AcceptPunct("[")) {
      while (!Next().IsPunct("]")) {
      }
    }
    const size_t type_mark = type_scope_.size();
    type_scope_.insert(type_scope_.end(), data->type_vars.begin(), data->type_vars.end());
    ExpectPunct("{");
    ParseList("}", [&] {
      const Token& name = Expect(TokenKind::kIdentifier, "a constructor name");
      if (module_->LookupConstructor(name.value)) {
        Fail(name, "constructor " + name.value + " is defined twice");
      }
      std::vector<Type> inputs;
      if (AcceptPunct("(")) ParseList(")", [&] { inputs.push_back(ParseType()); });
      const auto tag = static_cast<int32_t>(data->constructors.size());
      data->constructors.push_back(
          At(Make<ir::ConstructorNode>(name.value, std::move(inputs), data->header, tag), name));
    });
    type_scope_.resize(type_mark);
  }

  void ParseDefinition() {
    const Token& keyword = Next();
    const Token& name = Expect(TokenKind::kGlobal, "a global name such as @main");
    if (module_->Contains(name.value)) Fail(name, "global @" + name.value + " is defined twice");
    ir::GlobalVar global = module_->GetGlobalVar(name.value);
    if (!global->span.valid()) global->span = ir::Span{name.line, name.column};
    module_->Add(global, ParseFunctionRest(keyword));
  }

  // Every `@name` must be defined somewhere in the module, and a call of one
  // must pass as many arguments as it has parameters.
  void CheckGlobals() const {
    for (const Token* token : global_refs_) {
      if (!module_->Contains(token->value)) Fail(*token, "undefined global @" + token->value);
    }
    for (const GlobalCall& call : global_calls_) {
      const size_t expected = module_->Lookup(call.name)->params.size();
      if (expected != call.arg_count) {
        Fail(*call.token, "@" + call.name + " takes " + std::to_string(expected) +
                              " argument(s), got " + std::to_string(call.arg_count));
      }
    }
  }

  // ---- Functions and attributes ------------------------------------------

  // `[A, B]`, if present; the type variables are pushed on the type scope.
  std::vector<ir::TypeVar> ParseTypeParams() {
    std::vector<ir::TypeVar> params;
    if (!AcceptPunct("[")) return params;
    ParseList("]", [&] {
      const Token& name = Expect(TokenKind::kIdentifier, "a type parameter name");
      for (const ir::TypeVar& param : params) {
        if (param->name == name.value) Fail(name, "type parameter " + name.value + " is repeated");
      }
      params.push_back(Make<ir::TypeVarNode>(name.value));
      type_scope_.push_back(params.back());
    });
    return params;
  }

  // After `def @f` or `fn`: `[A](%x: T, %y, Attr=1) -> R { body }`.
  ir::Function ParseFunctionRest(const Token& start) {
    const size_t type_mark = type_scope_.size();
    const size_t local_mark = BindingMark();
    std::vector<ir::TypeVar> type_params = ParseTypeParams();
    std::vector<ir::Var> params;
    ir::Attrs attrs;
    ExpectPunct("(");
    ParseList(")", [&] {
      if (IsAttributeNext()) {
        ParseAttribute(&attrs);
        return;
      }
      if (!attrs.empty()) Unexpected("an attribute 'name=value' after the attributes");
      const Token& name = Peek();
      ir::Var param = ParseVarBinder();
      for (const ir::Var& other : params) {
        if (other->name_hint == param->name_hint) {
          Fail(name, "parameter %" + param->name_hint + " is repeated");
        }
      }
      params.push_back(param);
      Bind(param->name_hint, param);
    });
    Type ret_type = AcceptPunct("->") ? ParseType() : nullptr;
    Expr body = ParseBlock();
    PopBindings(local_mark);
    type_scope_.resize(type_mark);
    return At(Make<ir::FunctionNode>(std::move(params), std::move(body), std::move(ret_type),
                                     std::move(type_params), std::move(attrs)),
              start);
  }

  // `%x` or `%x: T`; the caller binds it.
  ir::Var ParseVarBinder() {
    const Token& name = Expect(TokenKind::kLocal, "a variable such as %x");
    Type type = AcceptPunct(":") ? ParseType() : nullptr;
    return At(ir::MakeVar(name.value, std::move(type)), name);
  }

  bool IsAttributeNext() const {
    return Peek().kind == TokenKind::kIdentifier && Peek(1).IsPunct("=");
  }

  void ParseAttribute(ir::Attrs* attrs) {
    const Token& name = Next();
    Next();
    if (attrs->Has(name.value)) Fail(name, "attribute '" + name.value + "' is given twice");
    attrs->Set(name.value, ParseAttrValue());
  }

  // Ints, floats, True/False, strings, None, and int lists `[1, 2]` or `(1, 2)`.
  ir::AttrValue ParseAttrValue() {
    const Token& token = Peek();
    switch (token.kind) {
      case TokenKind::kInteger:
        Next();
        return token.integer;
      case TokenKind::kFloat:
        Next();
        return token.number;
      case TokenKind::kString:
        Next();
        return token.value;
      default:
        break;
    }
    if (token.IsWord("True") || token.IsWord("False")) {
      Next();
      return token.value == "True";
    }
    if (token.IsWord("None")) {
      Next();
      return std::monostate{};
    }
    if (token.IsPunct("[") || token.IsPunct("(")) {
      const char* close = token.IsPunct("[") ? "]" : ")";
      Next();
      std::vector<int64_t> values;
      ParseList(close,
                [&] { values.push_back(Expect(TokenKind::kInteger, "an integer").integer); });
      return values;
    }
    Unexpected("an attribute value");
  }

  // ---- Expressions --------------------------------------------------------

  // A sequence: `let %x = e;` and graph bindings `%0 = e;`, then the result.
  // The bindings are read in a loop, so 10,000 lets do not nest the parser.
  Expr ParseExpr() {
    struct PendingLet {
      ir::Var var;
      Expr value;
      const Token* keyword;
    };
    std::vector<PendingLet> lets;
    const size_t mark = BindingMark();
    while (true) {
      if (Peek().IsWord("let")) {
        const Token& keyword = Next();
        ir::Var var = ParseVarBinder();
        ExpectPunct("=");
        Expr value = ParseExpr();
        ExpectPunct(";");
        Bind(var->name_hint, var);
        lets.push_back({std::move(var), std::move(value), &keyword});
      } else if (Peek().kind == TokenKind::kLocal && Peek(1).IsPunct("=")) {
        const std::string& name = Next().value;
        Next();
        Expr value = ParseExpr();
        ExpectPunct(";");
        Bind(name, std::move(value));
      } else {
        break;
      }
    }
    Expr result = ParseTerm();
    PopBindings(mark);
    for (auto it = lets.rbegin(); it != lets.rend(); ++it) {
      result = At(Make<ir::LetNode>(std::move(it->var), std::move(it->value), std::move(result)),
                  *it->keyword);
    }
    return result;
  }

  // `{ sequence }`
  Expr ParseBlock() {
    ExpectPunct("{");
    Expr body = ParseExpr();
    ExpectPunct("}");
    return body;
  }

  // A primary expression followed by calls `(...)` and projections `.0`.
  Expr ParseTerm() {
    const Token& start = Peek();
    Expr expr = ParsePrimary();
    while (true) {
      if (AcceptPunct("(")) {
        expr = MakeCall(std::move(expr), ParseArgs(nullptr), start);
      } else if (AcceptPunct(".")) {
        const Token& index = Peek();
        if (index.kind != TokenKind::kInteger || index.has_suffix || index.integer < 0 ||
            index.integer > std::numeric_limits<int>::max()) {
          Unexpected("a tuple index");
        }
        Next();
        expr =
            At(Make<ir::TupleGetItemNode>(std::move(expr), static_cast<int>(index.integer)), start);
      } else {
        return expr;
      }
    }
  }

  Expr ParsePrimary() {
    const Token& token = Peek();
    switch (token.kind) {
      case TokenKind::kLocal: {
        Next();
        Expr value = LookupLocal(token.value);
        if (!value) Fail(token, "undefined variable %" + token.value);
        return value;
      }
      case TokenKind::kGlobal:
        Next();
        global_refs_.push_back(&token);
        return module_->GetGlobalVar(token.value);
      case TokenKind::kInteger:
      case TokenKind::kFloat:
        Next();
        return At(ScalarLiteral(token), token);
      case TokenKind::kIdentifier:
        return ParseWord();
      default:
        break;
    }
    if (token.IsPunct("(")) return ParseParenthesized();
    Unexpected("an expression");
  }

  ir::Constant ScalarLiteral(const Token& token) {
    if (token.kind == TokenKind::kFloat) return ir::MakeScalar(token.dtype, token.number);
    Tensor tensor = TensorNode::Empty({}, token.dtype);
    DispatchDType(token.dtype, [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
        if (!std::in_range<T>(token.integer)) {
          Fail(token, "literal " + std::to_string(token.integer) + " is out of range for " +
                          token.dtype.name());
        }
        *tensor->data<T>() = static_cast<T>(token.integer);
      }
    });
    return Make<ir::ConstantNode>(std::move(tensor), "");
  }

  // `()`, `(e)`, `(e,)`, `(a, b)`.
  Expr ParseParenthesized() {
    const Token& open = Next();
    std::vector<Expr> fields;
    const bool trailing_comma = ParseList(")", [&] { fields.push_back(ParseExpr()); });
    if (fields.size() == 1 && !trailing_comma) return fields[0];
    return At(ir::MakeTupleExpr(std::move(fields)), open);
  }

  Expr ParseWord() {
    const Token& token = Peek();
    const std::string& word = token.value;
    if (word == "True" || word == "False") {
      Next();
      return At(ir::MakeScalar(DataType::Bool(), word == "True" ? 1 : 0), token);
    }
    if (word == "fn") return ParseFunctionRest(Next());
    if (word == "if") return ParseIf();
    if (word == "match") return ParseMatch();
    if (word == "meta") return ParseMeta();
    if (word == "def" || word == "type" || word == "let" || word == "else") {
      Unexpected("an expression");
    }
    if (ir::Constructor constructor = module_->LookupConstructor(word)) {
      Next();
      if (AcceptPunct("(")) return MakeCall(constructor, ParseArgs(nullptr), token);
      // A bare nullary constructor is the value it builds; any other is the
      // constructor as a function.
      if (constructor->inputs.empty()) {
        return At(Make<ir::CallNode>(constructor, std::vector<Expr>{}), token);
      }
      return constructor;
    }
    if (op::OpRegistry::Global().Find(word)) {
      Next();
      if (!AcceptPunct("(")) return op::GetOp(word);
      ir::Attrs attrs;
      std::vector<Expr> args = ParseArgs(&attrs);
      return MakeOpCall(word, std::move(args), std::move(attrs), token);
    }
    Fail(token, "unknown operator or constructor '" + word + "'");
  }

  // The arguments after `(`, through `)`. Attributes `name=value` follow the
  // positional arguments and are only allowed when `attrs` is given.
  std::vector<Expr> ParseArgs(ir::Attrs* attrs) {
    std::vector<Expr> args;
    ParseList(")", [&] {
      if (IsAttributeNext()) {
        if (!attrs) Fail(Peek(), "only operator calls take attributes");
        ParseAttribute(attrs);
        return;
      }
      if (attrs && !attrs->empty()) Unexpected("an attribute 'name=value' after the attributes");
      args.push_back(ParseExpr());
    });
    return args;
  }

  // op::MakeOpCall (arity and attribute checks), its errors located at `at`.
  Expr MakeOpCall(const std::string& name, std::vector<Expr> args, ir::Attrs attrs,
                  const Token& at) {
    try {
      return At(op::MakeOpCall(name, std::move(args), std::move(attrs)), at);
    } catch (const Error& error) {
      Fail(at, error.what());
    }
  }

  // A call of any callee but a named operator; arities are checked where
  // known (constructors now, globals once all are defined).
  Expr MakeCall(Expr callee, std::vector<Expr> args, const Token& start) {
    if (const auto* op = dynamic_cast<const ir::OpNode*>(callee.get())) {
      return MakeOpCall(op->name, std::move(args), {}, start);
    }
    if (const auto* constructor = dynamic_cast<const ir::ConstructorNode*>(callee.get())) {
      if (args.size() != constructor->inputs.size()) {
        Fail(start, "constructor " + constructor->name + " takes " +
                        std::to_string(constructor->inputs.size()) + " argument(s), got " +
                        std::to_string(args.size()));
      }
    }
    if (const auto* global = dynamic_cast<const ir::GlobalVarNode*>(callee.get())) {
      global_calls_.push_back({global->name, args.size(), &start});
    }
    return At(Make<ir::CallNode>(std::move(callee), std::move(args)), start);
  }

  Expr ParseIf() {
    const Token& keyword = Next();
    ExpectPunct("(");
    Expr cond = ParseExpr();
    ExpectPunct(")");
    Expr then_branch = ParseBlock();
    ExpectWord("else");
    Expr else_branch = ParseBlock();
    return At(Make<ir::IfNode>(std::move(cond), std::move(then_branch), std::move(else_branch)),
              keyword);
  }

  // `match (e) { pattern => body, ... }`; `match?` for an incomplete match.
  // A clause body is a block `{ ... }` or a bare expression.
  Expr ParseMatch() {
    const Token& keyword = Next();
    const bool complete = !AcceptPunct("?");
    ExpectPunct("(");
    Expr data = ParseExpr();
    ExpectPunct(")");
    ExpectPunct("{");
    std::vector<ir::Clause> clauses;
    ParseList("}", [&] {
      const size_t mark = BindingMark();
      std::set<std::string> bound;
      ir::Pattern lhs = ParsePattern(&bound);
      ExpectPunct("=>");
      Expr rhs = Peek().IsPunct("{") ? ParseBlock() : ParseExpr();
      PopBindings(mark);
      clauses.push_back({std::move(lhs), std::move(rhs)});
    });
    return At(Make<ir::MatchNode>(std::move(data), std::move(clauses), complete), keyword);
  }

  // `_`, `%x`, `%x: T`, `Cons(p, q)`, `Nil`, `(p, q)`; variables are bound
  // for the clause body and may not repeat within one pattern.
  ir::Pattern ParsePattern(std::set<std::string>* bound) {
    const Token& token = Peek();
    if (token.IsWord("_")) {
      Next();
      return Make<ir::PatternWildcardNode>();
    }
    if (token.kind == TokenKind::kLocal) {
      ir::Var var = ParseVarBinder();
      if (!bound->insert(var->name_hint).second) {
        Fail(token, "variable %" + var->name_hint + " is bound twice in one pattern");
      }
      Bind(var->name_hint, var);
      return Make<ir::PatternVarNode>(std::move(var));
    }
    if (token.IsPunct("(")) {
      Next();
      std::vector<ir::Pattern> fields;
      const bool trailing_comma = ParseList(")", [&] { fields.push_back(ParsePattern(bound)); });
      if (fields.size() == 1 && !trailing_comma) return fields[0];
      return Make<ir::PatternTupleNode>(std::move(fields));
    }
    if (token.kind != TokenKind::kIdentifier) Unexpected("a pattern");
    ir::Constructor constructor = module_->LookupConstructor(token.value);
    if (!constructor) Fail(token, "unknown constructor '" + token.value + "'");
    Next();
    std::vector<ir::Pattern> fields;
    if (AcceptPunct("(")) ParseList(")", [&] { fields.push_back(ParsePattern(bound)); });
    if (fields.size() != constructor->inputs.size()) {
      Fail(token, "constructor " + constructor->name + " takes " +
                      std::to_string(constructor->inputs.size()) + " argument(s), got " +
                      std::to_string(fields.size()));
    }
    return Make<ir::PatternConstructorNode>(std::move(constructor), std::move(fields));
  }

  // `meta[relay.Constant][name]`: a tensor from the params. Every mention of
  // one name is the same node.
  Expr ParseMeta() {
    const Token& keyword = Next();
    ExpectPunct("[");
    const Token& section = Peek();
    if (!section.IsWord("relay.Constant") && !section.IsWord("Constant")) {
      Unexpected("'relay.Constant'");
    }
    Next();
    ExpectPunct("]");
    ExpectPunct("[");
    const Token& key = Peek();
    if (key.kind != TokenKind::kIdentifier &&
        (key.kind != TokenKind::kInteger || key.has_suffix || key.integer < 0)) {
      Unexpected("a constant name");
    }
    Next();
    ExpectPunct("]");
    const std::string& name = key.text;
    if (auto it = constants_.find(name); it != constants_.end()) return it->second;
    if (!params_) Fail(key, "unknown constant '" + name + "': no params were given");
    auto param = params_->find(name);
    if (param == params_->end()) Fail(key, "unknown constant '" + name + "' (not in the params)");
    ir::Constant constant = At(Make<ir::ConstantNode>(param->second, name), keyword);
    constants_.emplace(name, constant);
    return constant;
  }

  // ---- Types --------------------------------------------------------------

  Type ParseType() {
    const Token& token = Peek();
    if (token.IsPunct("(")) {
      Next();
      std::vector<Type> fields;
      const bool trailing_comma = ParseList(")", [&] { fields.push_back(ParseType()); });
      if (fields.size() == 1 && !trailing_comma) return fields[0];
      return ir::MakeTupleType(std::move(fields));
    }
    if (token.kind != TokenKind::kIdentifier) Unexpected("a type");
    Next();
    const std::string& word = token.value;
    if (word == "fn") return ParseFuncType();
    if (word == "_") return Make<ir::IncompleteTypeNode>();
    for (auto it = type_scope_.rbegin(); it != type_scope_.rend(); ++it) {
      if ((*it)->name == word) return *it;
    }
    if (ir::TypeData data = module_->LookupTypeDef(word)) return ParseTypeCall(token, data);
    if (word == "Tensor") return ParseTensorType();
    if (word == "Storage") return ir::MakeStorageType();
    DataType dtype;
    if (DataType::TryParse(word, &dtype)) return ir::MakeTensorType({}, dtype);
    Fail(token, "unknown type '" + word + "'");
  }

  // After `Tensor`: `[(1, ?), float32]`; `?<=512` is a `?` of at most 512.
  Type ParseTensorType() {
    const Token& start = Peek();
    ExpectPunct("[");
    ExpectPunct("(");
    std::vector<ir::Dim> shape;
    const auto size = [&](const char* what) {
      const Token& token = Peek();
      if (token.kind != TokenKind::kInteger || token.has_suffix || token.integer < 0) {
        Unexpected(what);
      }
      Next();
      return token.integer;
    };
    ParseList(")", [&] {
      if (AcceptPunct("?")) {
        shape.push_back(AcceptPunct("<=") ? ir::Dim::Any(size("a bound (a size)"))
                                          : ir::Dim::Any());
        return;
      }
      shape.push_back(size("a dimension (a size or ?)"));
    });
    if (shape.size() > static_cast<size_t>(kMaxRank)) {
      Fail(start, "a tensor type of rank " + std::to_string(shape.size()) + ", above " +
                      std::to_string(kMaxRank) + ", the most a tensor may have");
    }
    ExpectPunct(",");
    const Token& name = Expect(TokenKind::kIdentifier, "a dtype");
    DataType dtype;
    try {
      dtype = DataType::Parse(name.value);
    } catch (const Error& error) {
      Fail(name, error.what());
    }
    ExpectPunct("]");
    return ir::MakeTensorType(std::move(shape), dtype);
  }

  // After `fn`: `[A](A, B) -> C`.
  Type ParseFuncType() {
    const size_t type_mark = type_scope_.size();
    std::vector<ir::TypeVar> type_params = ParseTypeParams();
    std::vector<Type> arg_types;
    ExpectPunct("(");
    ParseList(")", [&] { arg_types.push_back(ParseType()); });
    ExpectPunct("->");
    Type ret_type = ParseType();
    type_scope_.resize(type_mark);
    return Make<ir::FuncTypeNode>(std::move(type_params), std::move(arg_types),
                                  std::move(ret_type));
  }

  // After an ADT's name: its type arguments `[A, B]`, as many as it takes.
  Type ParseTypeCall(const Token& name, const ir::TypeData& data) {
    std::vector<Type> args;
    if (AcceptPunct("[")) ParseList("]", [&] { args.push_back(ParseType()); });
    if (args.size() != data->type_vars.size()) {
      Fail(name, "type " + name.value + " takes " + std::to_string(data->type_vars.size()) +
                     " type argument(s), got " + std::to_string(args.size()));
    }
    return Make<ir::TypeCallNode>(data->header, std::move(args));
  }

  struct GlobalCall {
    std::string name;
    size_t arg_count;
    const Token* token;
  };

  const std::vector<Token> tokens_;
  const std::string& source_name_;
  ir::IRModule module_;
  const ParamMap* params_;
  size_t pos_ = 0;
  std::unordered_map<std::string, std::vector<Expr>> locals_;
  std::vector<std::string> bound_names_;
  std::vector<ir::TypeVar> type_scope_;
  std::unordered_map<std::string, ir::Constant> constants_;
  std::vector<const Token*> global_refs_;  // in text order
  std::vector<GlobalCall> global_calls_;
};

}  // namespace

ir::IRModule ParseModule(const std::string& text, const std::string& source_name,
                         const ParamMap* params) {
  return RunWithDeepStack(
      [&] { return Parser(text, source_name, nullptr, params).ParseProgram(); });
}

ir::Expr ParseExpr(const std::string& text, const std::string& source_name, ir::IRModule module) {
  return RunWithDeepStack(
      [&] { return Parser(text, source_name, std::move(module), nullptr).ParseStandaloneExpr(); });
}

ir::Type ParseType(const std::string& text) {
  return RunWithDeepStack(
      [&] { return Parser(text, "<type>", nullptr, nullptr).ParseStandaloneType(); });
}

}  // namespace nimble::text
