// Expressions of the IR [paper 4.1]: a functional, Relay-like language with
// let-bindings, closures, recursion, if, and pattern matching over ADTs.
// Nodes are immutable once built, except `checked_type`, which type inference
// fills in (and may refill after a pass). Variables are identified by node,
// never by name.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nimble/compiler/ir/type.h"
#include "nimble/vm/attrs.h"
#include "nimble/vm/tensor.h"

namespace nimble::op {
struct OpDef;
}

namespace nimble::ir {

using nimble::AttrKind;
using nimble::AttrKindName;
using nimble::Attrs;
using nimble::AttrValue;
using nimble::AttrValueToString;
using nimble::FormatFloatLiteral;

// Where a node came from in the source text; line 0 means "built in memory".
struct Span {
  int line = 0;
  int column = 0;
  bool valid() const { return line > 0; }
  std::string ToString() const { return std::to_string(line) + ":" + std::to_string(column); }
};

enum class ExprKind : uint8_t {
  kVar,
  kGlobalVar,
  kConstant,
  kTuple,
  kTupleGetItem,
  kOp,
  kCall,
  kLet,
  kIf,
  kFunction,
  kConstructor,
  kMatch,
};

class ExprNode : public Object {
 public:
  explicit ExprNode(ExprKind kind) : kind(kind) {}
  const ExprKind kind;
  Span span;
  // Set by type inference; null before it runs.
  mutable Type checked_type;
};
using Expr = Ref<ExprNode>;

class VarNode : public ExprNode {
 public:
  VarNode(std::string name_hint, Type type_annotation)
      : ExprNode(ExprKind::kVar),
        name_hint(std::move(name_hint)),
        type_annotation(std::move(type_annotation)) {}
  const std::string name_hint;
  const Type type_annotation;  // may be null
};
using Var = Ref<VarNode>;

class GlobalVarNode : public ExprNode {
 public:
  explicit GlobalVarNode(std::string name)
      : ExprNode(ExprKind::kGlobalVar), name(std::move(name)) {}
  const std::string name;
};
using GlobalVar = Ref<GlobalVarNode>;

// A tensor literal. Scalars print inline (`1f`, `2i64`, `True`); larger
// tensors (weights) print as `meta[relay.Constant][name]` and are stored in a
// params file, never in the program text. `name` is empty for inline scalars.
class ConstantNode : public ExprNode {
 public:
  ConstantNode(Tensor data, std::string name)
      : ExprNode(ExprKind::kConstant), data(std::move(data)), name(std::move(name)) {}
  const Tensor data;
  const std::string name;
  bool is_scalar() const { return data->ndim() == 0; }
};
using Constant = Ref<ConstantNode>;

class TupleNode : public ExprNode {
 public:
  explicit TupleNode(std::vector<Expr> fields)
      : ExprNode(ExprKind::kTuple), fields(std::move(fields)) {}
  const std::vector<Expr> fields;
};
using Tuple = Ref<TupleNode>;

class TupleGetItemNode : public ExprNode {
 public:
  TupleGetItemNode(Expr tuple, int index)
      : ExprNode(ExprKind::kTupleGetItem), tuple(std::move(tuple)), index(index) {}
  const Expr tuple;
  const int index;
};
using TupleGetItem = Ref<TupleGetItemNode>;

// A primitive operator. One node per operator name (interned by op::GetOp), so
// ops compare by pointer.
class OpNode : public ExprNode {
 public:
  OpNode(std::string name, const op::OpDef* def)
      : ExprNode(ExprKind::kOp), name(std::move(name)), def(def) {}
  const std::string name;
  const op::OpDef* const def;
};
using Op = Ref<OpNode>;

// A call of an Op, a function, a global, a constructor or a closure. `attrs`
// are only for Op calls, normalised against the op's schema.
class CallNode : public ExprNode {
 public:
  CallNode(Expr callee, std::vector<Expr> args, Attrs attrs = {})
      : ExprNode(ExprKind::kCall),
        callee(std::move(callee)),
        args(std::move(args)),
        attrs(std::move(attrs)) {}
  const Expr callee;
  const std::vector<Expr> args;
  const Attrs attrs;
};
using Call = Ref<CallNode>;

class LetNode : public ExprNode {
 public:
  LetNode(Var var, Expr value, Expr body)
      : ExprNode(ExprKind::kLet),
        var(std::move(var)),
        value(std::move(value)),
        body(std::move(body)) {}
  const Var var;
  const Expr value;
  const Expr body;
};
using Let = Ref<LetNode>;

class IfNode : public ExprNode {
 public:
  IfNode(Expr cond, Expr then_branch, Expr else_branch)
      : ExprNode(ExprKind::kIf),
        cond(std::move(cond)),
        then_branch(std::move(then_branch)),
        else_branch(std::move(else_branch)) {}
  const Expr cond;
  const Expr then_branch;
  const Expr else_branch;
};
using If = Ref<IfNode>;

// A function; when nested, a closure over its free variables. `ret_type` and
// parameter annotations may be null (inferred). `attrs` mark compiler-made
// functions (e.g. `Primitive=1`).
class FunctionNode : public ExprNode {
 public:
  FunctionNode(std::vector<Var> params, Expr body, Type ret_type, std::vector<TypeVar> type_params,
               Attrs attrs = {})
      : ExprNode(ExprKind::kFunction),
        params(std::move(params)),
        body(std::move(body)),
        ret_type(std::move(ret_type)),
        type_params(std::move(type_params)),
        attrs(std::move(attrs)) {}
  const std::vector<Var> params;
  const Expr body;
  const Type ret_type;
  const std::vector<TypeVar> type_params;
  const Attrs attrs;
};
using Function = Ref<FunctionNode>;

// A constructor of an ADT (`Cons`, `Nil`). `tag` is its index in the ADT's
// constructor list, the tag of the values it builds.
class ConstructorNode : public ExprNode {
 public:
  ConstructorNode(std::string name, std::vector<Type> inputs, GlobalTypeVar belong_to, int32_t tag)
      : ExprNode(ExprKind::kConstructor),
        name(std::move(name)),
        inputs(std::move(inputs)),
        belong_to(std::move(belong_to)),
        tag(tag) {}
  const std::string name;
  const std::vector<Type> inputs;  // may mention the ADT's type vars
  const GlobalTypeVar belong_to;
  const int32_t tag;
};
using Constructor = Ref<ConstructorNode>;

// The definition of an ADT: `type List[A] { Cons(A, List[A]), Nil }`.
class TypeDataNode : public Object {
 public:
  TypeDataNode(GlobalTypeVar header, std::vector<TypeVar> type_vars,
               std::vector<Constructor> constructors)
      : header(std::move(header)),
        type_vars(std::move(type_vars)),
        constructors(std::move(constructors)) {}
  const GlobalTypeVar header;
  const std::vector<TypeVar> type_vars;
  std::vector<Constructor> constructors;  // filled after the header exists
};
using TypeData = Ref<TypeDataNode>;

enum class PatternKind : uint8_t { kWildcard, kVar, kConstructor, kTuple };

class PatternNode : public Object {
 public:
  explicit PatternNode(PatternKind kind) : kind(kind) {}
  const PatternKind kind;
};
using Pattern = Ref<PatternNode>;

class PatternWildcardNode : public PatternNode {
 public:
  PatternWildcardNode() : PatternNode(PatternKind::kWildcard) {}
};

class PatternVarNode : public PatternNode {
 public:
  explicit PatternVarNode(Var var) : PatternNode(PatternKind::kVar), var(std::move(var)) {}
  const Var var;
};

class PatternConstructorNode : public PatternNode {
 public:
  PatternConstructorNode(Constructor constructor, std::vector<Pattern> patterns)
      : PatternNode(PatternKind::kConstructor),
        constructor(std::move(constructor)),
        patterns(std::move(patterns)) {}
  const Constructor constructor;
  const std::vector<Pattern> patterns;
};

class PatternTupleNode : public PatternNode {
 public:
  explicit PatternTupleNode(std::vector<Pattern> patterns)
      : PatternNode(PatternKind::kTuple), patterns(std::move(patterns)) {}
  const std::vector<Pattern> patterns;
};

struct Clause {
  Pattern lhs;
  Expr rhs;
};

// `match (data) { p => e, ... }`; `complete` is false for Relay's `match?`,
// which may fall through (a run-time error then).
class MatchNode : public ExprNode {
 public:
  MatchNode(Expr data, std::vector<Clause> clauses, bool complete)
      : ExprNode(ExprKind::kMatch),
        data(std::move(data)),
        clauses(std::move(clauses)),
        complete(complete) {}
  const Expr data;
  const std::vector<Clause> clauses;
  const bool complete;
};
using Match = Ref<MatchNode>;

// Builders for the common cases.
Var MakeVar(std::string name_hint, Type type_annotation = nullptr);
Constant MakeScalar(DataType dtype, double value);
Tuple MakeTupleExpr(std::vector<Expr> fields);

// A new strong reference to a node reached through a raw pointer (visitors get
// `const XNode*`); safe because counts are intrusive.
template <typename T>
Ref<T> RefOf(const T* node) {
  return Ref<T>(const_cast<T*>(node));
}

}  // namespace nimble::ir
