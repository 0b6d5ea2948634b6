#include "nimble/compiler/typing/type_infer.h"

#include <algorithm>
#include <deque>
#include <map>
#include <memory>
#include <unordered_set>

#include "nimble/compiler/ir/functor.h"
#include "nimble/compiler/op/op.h"
#include "nimble/compiler/support/deep_stack.h"
#include "nimble/compiler/typing/unifier.h"
#include "nimble/vm/error.h"
#include "nimble/vm/shape.h"

namespace nimble::typing {

using ir::Type;

namespace {

std::string At(const ir::Span& span) {
  return span.valid() ? span.ToString() + ": " : "";
}

std::string Describe(const ir::ExprNode* expr) {
  switch (expr->kind) {
    case ir::ExprKind::kVar:
      return "%" + static_cast<const ir::VarNode*>(expr)->name_hint;
    case ir::ExprKind::kGlobalVar:
      return "@" + static_cast<const ir::GlobalVarNode*>(expr)->name;
    case ir::ExprKind::kConstructor:
      return static_cast<const ir::ConstructorNode*>(expr)->name;
    case ir::ExprKind::kOp:
      return static_cast<const ir::OpNode*>(expr)->name;
    case ir::ExprKind::kCall:
      return "the call of " + Describe(static_cast<const ir::CallNode*>(expr)->callee.get());
    case ir::ExprKind::kTupleGetItem: {
      const auto* item = static_cast<const ir::TupleGetItemNode*>(expr);
      return Describe(item->tuple.get()) + "." + std::to_string(item->index);
    }
    case ir::ExprKind::kFunction:
      return "the function";
    case ir::ExprKind::kLet:
      return "the let of %" + static_cast<const ir::LetNode*>(expr)->var->name_hint;
    case ir::ExprKind::kIf:
      return "the if";
    case ir::ExprKind::kMatch:
      return "the match";
    case ir::ExprKind::kTuple:
      return "the tuple";
    case ir::ExprKind::kConstant:
      return "the constant";
  }
  return "the expression";
}

bool IsHole(const Type& type) {
  return type->kind == ir::TypeKind::kIncomplete;
}

// The join of `a` and `b`, or null; with `b_holes_follow_a`, a placeholder in
// `b` takes `a`'s part (widening a guess by a partly known type).
Type Join(const Type& a, const Type& b, bool b_holes_follow_a);

// Replaces the type variables in `vars` by `args`, everywhere in `type`.
Type Substitute(const Type& type, const std::vector<ir::TypeVar>& vars,
                const std::vector<Type>& args) {
  auto substitute = [&](const Type& part) { return Substitute(part, vars, args); };
  std::vector<Type> parts;
  switch (type->kind) {
    case ir::TypeKind::kTypeVar:
      for (size_t i = 0; i < vars.size(); ++i) {
        if (vars[i].get() == type.get()) return args[i];
      }
      return type;
    case ir::TypeKind::kTuple:
      for (const Type& field : static_cast<const ir::TupleTypeNode*>(type.get())->fields) {
        parts.push_back(substitute(field));
      }
      return ir::MakeTupleType(std::move(parts));
    case ir::TypeKind::kFunc: {
      const auto* func = static_cast<const ir::FuncTypeNode*>(type.get());
      for (const Type& arg : func->arg_types) parts.push_back(substitute(arg));
      return Make<ir::FuncTypeNode>(func->type_params, std::move(parts),
                                    substitute(func->ret_type));
    }
    case ir::TypeKind::kTypeCall: {
      const auto* call = static_cast<const ir::TypeCallNode*>(type.get());
      for (const Type& arg : call->args) parts.push_back(substitute(arg));
      return Make<ir::TypeCallNode>(call->func, std::move(parts));
    }
    default:
      return type;
  }
}

bool SameTypeName(const ir::GlobalTypeVar& a, const ir::GlobalTypeVar& b) {
  return a.get() == b.get() || a->name == b->name;
}

// Thrown when a guessed placeholder turns out too narrow: inference starts
// over with the fresh placeholders `indices` replaced by the wider `widened`.
struct WidenRequest {
  std::vector<size_t> indices;
  Type widened;
};

class Solver;

// One pending fact for the solver. Hard constraints (operator relations,
// tuple projections) must be discharged by information; soft ones (sub-shaping,
// joins) may be settled by a default when nothing else can progress.
class Constraint {
 public:
  Constraint(ir::Span span, bool soft) : span(span), soft(soft) {}
  virtual ~Constraint() = default;

  // Returns true once the constraint holds; false for "not yet" after
  // watching the placeholders it waits on.
  virtual bool Solve(Solver& solver) = 0;
  // Soft constraints: how safe a default is now (lower is safer), and the
  // default itself, which returns true when it settles the constraint.
  virtual int DefaultRank(Solver&) { return 0; }
  virtual bool Default(Solver&) { return false; }
  // What cannot be typed when a hard constraint is left over.
  virtual std::string Subject() const { return "the expression"; }

  const ir::Span span;
  const bool soft;
  uint64_t id = 0;
  bool finished = false;
  // Whether to check again when a watched placeholder becomes more specific
  // after the constraint held (a relation may then refine its output).
  bool recheck = false;
  bool queued = false;
  std::unordered_set<const ir::IncompleteTypeNode*> watched;
};

// The worklist over the bipartite graph of placeholders and constraints.
class Solver {
 public:
  explicit Solver(const std::unordered_map<size_t, Type>& hints)
      : unifier_([this](const ir::IncompleteTypeNode* root,
                        const ir::IncompleteTypeNode* absorbed) { OnChange(root, absorbed); }),
        hints_(hints) {}

  Unifier& unifier() { return unifier_; }

  // A fresh placeholder, or the type a restart decided for it.
  Type Fresh() {
    const size_t index = fresh_.size();
    auto hint = hints_.find(index);
    fresh_.push_back(hint != hints_.end() ? hint->second : Make<ir::IncompleteTypeNode>());
    return fresh_.back();
  }

  // Puts `type` in place of placeholder `fresh`, the latest Fresh(), decided
  // as soon as it was made. It keeps its index, so that a restart's hints
  // still name the same placeholders.
  void Settle(const Type& fresh, const Type& type) {
    if (!fresh_.empty() && fresh_.back().get() == fresh.get()) fresh_.back() = type;
  }

  void Add(std::unique_ptr<Constraint> constraint, bool urgent = false) {
    Constraint* added = constraint.get();
    added->id = next_id_++;
    (added->soft ? soft_pending_ : hard_pending_).emplace(added->id, added);
    constraints_.push_back(std::move(constraint));
    added->queued = true;
    if (urgent) {
      queue_.push_front(added);
    } else {
      queue_.push_back(added);
    }
  }

  // Wakes `constraint` whenever a placeholder in `type` changes.
  void Watch(Constraint* constraint, const Type& type) {
    std::vector<const ir::IncompleteTypeNode*> holes;
    unifier_.CollectHoles(type, &holes);
    for (const ir::IncompleteTypeNode* hole : holes) {
      if (constraint->watched.insert(hole).second) waiters_[hole].push_back(constraint);
    }
  }

  const std::vector<Constraint*>& Waiters(const ir::IncompleteTypeNode* root) {
    return waiters_[root];
  }

  // Unifies, reporting a failure as "line:col: context: cannot unify A with B: why".
  Type UnifyAt(const Type& a, const Type& b, const ir::Span& span, const std::string& context) {
    try {
      return unifier_.Unify(a, b);
    } catch (const Error& error) {
      throw Error(At(span) + context + ": cannot unify " + ir::TypeToString(unifier_.Resolve(a)) +
                  " with " + ir::TypeToString(unifier_.Resolve(b)) + ": " + error.what());
    }
  }

  // When `super` is a guessed placeholder that `sub` does not fit, asks for a
  // restart with the guess widened to cover `sub`.
  void WidenIfGuessed(const Type& sub, const Type& super) {
    if (!IsHole(super)) return;
    const auto* root = unifier_.Find(static_cast<const ir::IncompleteTypeNode*>(super.get()));
    if (!unifier_.IsMarked(root)) return;
    Type widened = Join(unifier_.Resolve(super), unifier_.Resolve(sub), true);
    if (!widened || unifier_.HasHoles(widened)) return;
    WidenRequest request{{}, widened};
    for (size_t i = 0; i < fresh_.size(); ++i) {
      if (IsHole(fresh_[i]) &&
          unifier_.Find(static_cast<const ir::IncompleteTypeNode*>(fresh_[i].get())) == root) {
        request.indices.push_back(i);
      }
    }
    if (!request.indices.empty()) throw request;
  }

  // Runs the worklist to a fixpoint, settling soft constraints by default when
  // stuck; fails when only hard constraints are left.
  void Run() {
    for (;;) {
      while (!queue_.empty()) {
        Constraint* constraint = queue_.front();
        queue_.pop_front();
        constraint->queued = false;
        if (constraint->finished && !constraint->recheck) continue;
        if (constraint->Solve(*this)) Finish(constraint);
      }
      if (Constraint* fallback = PickDefault()) {
        if (fallback->Default(*this)) {
          Finish(fallback);
        } else {
          Enqueue(fallback);
        }
        continue;
      }
      if (!hard_pending_.empty()) {
        const Constraint* stuck = hard_pending_.begin()->second;
        throw Error(At(stuck->span) + "cannot infer the type of " + stuck->Subject() +
                    " (under-constrained)");
      }
      return;
    }
  }

 private:
  void Finish(Constraint* constraint) {
    if (constraint->finished) return;
    constraint->finished = true;
    (constraint->soft ? soft_pending_ : hard_pending_).erase(constraint->id);
  }

  void Enqueue(Constraint* constraint) {
    if (constraint->queued) return;
    constraint->queued = true;
    queue_.push_front(constraint);
  }

  void OnChange(const ir::IncompleteTypeNode* root, const ir::IncompleteTypeNode* absorbed) {
    std::vector<Constraint*>& waiting = waiters_[root];
    if (absorbed) {
      auto it = waiters_.find(absorbed);
      if (it != waiters_.end()) {
        std::vector<Constraint*> moved = std::move(it->second);
        waiters_.erase(it);
        waiting.insert(waiting.end(), moved.begin(), moved.end());
      }
    }
    for (Constraint* constraint : waiting) {
      if (!constraint->finished || constraint->recheck) Enqueue(constraint);
    }
  }

  // The oldest of the soft constraints with the safest default.
  Constraint* PickDefault() {
    Constraint* best = nullptr;
    int best_rank = 0;
    for (const auto& [id, constraint] : soft_pending_) {
      const int rank = constraint->DefaultRank(*this);
      if (!best || rank < best_rank) {
        best = constraint;
        best_rank = rank;
        if (rank == 0) break;
      }
    }
    return best;
  }

  Unifier unifier_;
  const std::unordered_map<size_t, Type>& hints_;
  std::vector<Type> fresh_;
  std::vector<std::unique_ptr<Constraint>> constraints_;
  std::deque<Constraint*> queue_;
  std::map<uint64_t, Constraint*> soft_pending_;
  std::map<uint64_t, Constraint*> hard_pending_;
  std::unordered_map<const ir::IncompleteTypeNode*, std::vector<Constraint*>> waiters_;
  uint64_t next_id_ = 0;
};

// Throws where `type` is, or holds, a tensor type of more dimensions than a
// tensor may have (a relation's result: zeros of a 100,000-entry shape).
void CheckRank(const Type& type) {
  if (!type) return;
  if (type->kind == ir::TypeKind::kTuple) {
    for (const Type& field : static_cast<const ir::TupleTypeNode*>(type.get())->fields) {
      CheckRank(field);
    }
  } else if (type->kind == ir::TypeKind::kTensor) {
    const size_t rank = static_cast<const ir::TensorTypeNode*>(type.get())->ndim();
    if (rank > static_cast<size_t>(kMaxRank)) {
      throw Error("the result would have rank " + std::to_string(rank) + ", above " +
                  std::to_string(kMaxRank) + ", the most a tensor may have");
    }
  }
}

// Lets a relation refine the very types it was given: an assignment to one of
// them unifies the placeholder it was resolved from.
class SolverReporter : public op::TypeReporter {
 public:
  SolverReporter(Unifier& unifier, const std::vector<Type>& originals,
                 const std::vector<Type>& resolved)
      : unifier_(unifier), originals_(originals), resolved_(resolved) {}

  void Assign(const Type& dst, const Type& src) override {
    CheckRank(src);
    bool matched = false;
    for (size_t i = 0; i < resolved_.size(); ++i) {
      if (resolved_[i].get() == dst.get()) {
        unifier_.Unify(originals_[i], src);
        matched = true;
      }
    }
    if (!matched) unifier_.Unify(dst, src);
  }

 private:
  Unifier& unifier_;
  const std::vector<Type>& originals_;
  const std::vector<Type>& resolved_;
};

// Whether `type` is a tensor of static shape or a tuple of them: a type no
// unification can make more specific. (A placeholder could be solved, an Any
// dimension become a size, so a call's result decided from them could differ
// from what the constraints would make of it.)
bool IsStatic(const Type& type) {
  if (type->kind == ir::TypeKind::kTuple) {
    const auto& fields = static_cast<const ir::TupleTypeNode*>(type.get())->fields;
    return std::all_of(fields.begin(), fields.end(), IsStatic);
  }
  if (type->kind != ir::TypeKind::kTensor) return false;
  const auto& shape = static_cast<const ir::TensorTypeNode*>(type.get())->shape;
  return std::none_of(shape.begin(), shape.end(), [](const ir::Dim& dim) { return dim.is_any(); });
}

// Runs `def`'s relation over `types` (the arguments', then the result's), its
// errors naming the operator, the call's position and the argument types.
bool RunRelation(const op::OpDef& def, const ir::Attrs& attrs, const std::vector<Type>& types,
                 op::TypeReporter& reporter, const ir::Span& span) {
  try {
    return def.relation(types, attrs, reporter);
  } catch (const std::exception& error) {
    const std::string message = error.what();
    std::string args;
    for (size_t i = 0; i + 1 < types.size(); ++i) {
      args += (i ? ", " : "") + ir::TypeToString(types[i]);
    }
    throw Error(At(span) +
                (message.rfind(def.name + ":", 0) == 0 ? message : def.name + ": " + message) +
                " (argument types: " + args + ")");
  }
}

// Takes what a relation says of the result placeholder alone; whether it
// said anything else (refined an argument, or the result twice) is noted.
class ResultReporter : public op::TypeReporter {
 public:
  explicit ResultReporter(const Type& result) : result_(result) {}

  void Assign(const Type& dst, const Type& src) override {
    if (dst.get() == result_.get() && !assigned_) {
      CheckRank(src);
      assigned_ = src;
    } else {
      other_ = true;
    }
  }

  // The result's type when the relation set it and nothing else.
  Type Decided() const { return other_ ? nullptr : assigned_; }

 private:
  const Type& result_;
  Type assigned_;
  bool other_ = false;
};

// An operator call: the op's type relation over the argument types and the result.
class RelationConstraint : public Constraint {
 public:
  RelationConstraint(ir::Span span, const op::OpDef& def, const ir::Attrs& attrs,
                     std::vector<Type> types)
      : Constraint(span, false), def_(def), attrs_(attrs), types_(std::move(types)) {}

  bool Solve(Solver& solver) override {
    std::vector<Type> resolved;
    for (const Type& type : types_) resolved.push_back(solver.unifier().Resolve(type));
    SolverReporter reporter(solver.unifier(), types_, resolved);
    const bool done = RunRelation(def_, attrs_, resolved, reporter, span);
    for (const Type& type : types_) solver.Watch(this, type);
    recheck = true;
    return done;
  }

  std::string Subject() const override { return "the call of " + def_.name; }

 private:
  const op::OpDef& def_;
  const ir::Attrs& attrs_;
  std::vector<Type> types_;
};

// `sub` must be a sub-shape of `super` (arguments, annotated lets, declared
// results). Structured types split into one constraint per part; `root_sub`
// and `root_super` are the whole types, for the error message.
class SubtypeConstraint : public Constraint {
 public:
  SubtypeConstraint(ir::Span span, std::string label, Type sub, Type super, Type root_sub,
                    Type root_super)
      : Constraint(span, true),
        label_(std::move(label)),
        sub_(std::move(sub)),
        super_(std::move(super)),
        root_sub_(std::move(root_sub)),
        root_super_(std::move(root_super)) {}

  bool Solve(Solver& solver) override {
    Unifier& unifier = solver.unifier();
    const Type a = unifier.Shallow(sub_);
    const Type b = unifier.Shallow(super_);
    solver.Watch(this, a);
    solver.Watch(this, b);
    if (a.get() == b.get()) return true;
    if (IsHole(a) || IsHole(b)) return false;
    if (a->kind != b->kind) Fail(solver);
    switch (a->kind) {
      case ir::TypeKind::kTensor:
        if (!IsSubtype(a, b)) Fail(solver);
        recheck = true;
        return true;
      case ir::TypeKind::kTuple: {
        const auto& sub_fields = static_cast<const ir::TupleTypeNode*>(a.get())->fields;
        const auto& super_fields = static_cast<const ir::TupleTypeNode*>(b.get())->fields;
        if (sub_fields.size() != super_fields.size()) Fail(solver);
        for (size_t i = 0; i < sub_fields.size(); ++i) {
          Split(solver, sub_fields[i], super_fields[i]);
        }
        return true;
      }
      case ir::TypeKind::kFunc: {
        const auto* fa = static_cast<const ir::FuncTypeNode*>(a.get());
        const auto* fb = static_cast<const ir::FuncTypeNode*>(b.get());
        if (fa->arg_types.size() != fb->arg_types.size() || fa->type_params != fb->type_params) {
          Fail(solver);
        }
        for (size_t i = 0; i < fa->arg_types.size(); ++i) {
          Split(solver, fb->arg_types[i], fa->arg_types[i]);  // contravariant
        }
        Split(solver, fa->ret_type, fb->ret_type);
        return true;
      }
      case ir::TypeKind::kTypeCall: {
        const auto* ca = static_cast<const ir::TypeCallNode*>(a.get());
        const auto* cb = static_cast<const ir::TypeCallNode*>(b.get());
        if (!SameTypeName(ca->func, cb->func) || ca->args.size() != cb->args.size()) Fail(solver);
        for (size_t i = 0; i < ca->args.size(); ++i) Split(solver, ca->args[i], cb->args[i]);
        return true;
      }
      default:
        if (!IsSubtype(a, b)) Fail(solver);
        return true;
    }
  }

  // Safest when one side is known (the other takes it), then blind equality.
  int DefaultRank(Solver& solver) override {
    Unifier& unifier = solver.unifier();
    const Type a = unifier.Shallow(sub_);
    const Type b = unifier.Shallow(super_);
    return (IsHole(b) && !unifier.HasHoles(a)) || (IsHole(a) && !unifier.HasHoles(b)) ? 0 : 1;
  }

  // An unknown super-type becomes the join of the known types flowing into it
  // (a guess, widened later if needed); otherwise both sides become equal.
  bool Default(Solver& solver) override {
    Unifier& unifier = solver.unifier();
    const Type super = unifier.Shallow(super_);
    if (IsHole(super)) {
      const auto* root = static_cast<const ir::IncompleteTypeNode*>(super.get());
      Type bound;
      for (Constraint* waiter : std::vector<Constraint*>(solver.Waiters(root))) {
        auto* other = dynamic_cast<SubtypeConstraint*>(waiter);
        if (!other || other->finished || unifier.Shallow(other->super_).get() != root) continue;
        const Type incoming = unifier.Resolve(other->sub_);
        if (unifier.HasHoles(incoming)) continue;
        Type joined = bound ? JoinTypes(bound, incoming) : incoming;
        if (!joined) {
          throw Error(At(other->span) + other->label_ + ": conflicting types " +
                      ir::TypeToString(bound) + " and " + ir::TypeToString(incoming));
        }
        bound = joined;
      }
      if (bound) {
        unifier.Mark(root);
        solver.UnifyAt(super, bound, span, label_);
        return false;
      }
    }
    solver.UnifyAt(sub_, super_, span, label_);
    return true;
  }

 private:
  void Split(Solver& solver, const Type& sub, const Type& super) {
    solver.Add(
        std::make_unique<SubtypeConstraint>(span, label_, sub, super, root_sub_, root_super_),
        true);
  }

  [[noreturn]] void Fail(Solver& solver) {
    solver.WidenIfGuessed(sub_, super_);
    solver.WidenIfGuessed(root_sub_, root_super_);
    Unifier& unifier = solver.unifier();
    throw Error(At(span) + label_ + ": expected " + ir::TypeToString(unifier.Resolve(root_super_)) +
                ", got " + ir::TypeToString(unifier.Resolve(root_sub_)));
  }

  const std::string label_;
  const Type sub_;
  const Type super_;
  const Type root_sub_;
  const Type root_super_;
};

// `out` is the join of `inputs`: the result of an `if` or a `match`.
class JoinConstraint : public Constraint {
 public:
  JoinConstraint(ir::Span span, std::string what, Type out, std::vector<Type> inputs)
      : Constraint(span, true),
        what_(std::move(what)),
        out_(std::move(out)),
        inputs_(std::move(inputs)) {}

  bool Solve(Solver& solver) override {
    for (const Type& input : inputs_) {
      if (solver.unifier().HasHoles(input)) {
        for (const Type& watched : inputs_) solver.Watch(this, watched);
        return false;
      }
    }
    solver.UnifyAt(out_, JoinKnown(solver), span, what_);
    return true;
  }

  // After every sub-shaping default: a join's default fixes the unknown
  // inputs, so they should learn all they can from elsewhere first.
  int DefaultRank(Solver& solver) override {
    for (const Type& input : inputs_) {
      if (!solver.unifier().HasHoles(input)) return 2;
    }
    return 3;
  }

  // The join of the known inputs stands for the unknown ones too (the
  // recursive call in a loop's body); with none known, all are one type.
  bool Default(Solver& solver) override {
    Type joined = JoinKnown(solver);
    if (!joined) {
      for (const Type& input : inputs_) solver.UnifyAt(out_, input, span, what_);
      return true;
    }
    solver.UnifyAt(out_, joined, span, what_);
    for (const Type& input : inputs_) {
      if (solver.unifier().HasHoles(input)) solver.UnifyAt(input, joined, span, what_);
    }
    return true;
  }

 private:
  // The join of the inputs without placeholders; null when there are none.
  Type JoinKnown(Solver& solver) {
    Type joined;
    for (const Type& input : inputs_) {
      const Type resolved = solver.unifier().Resolve(input);
      if (solver.unifier().HasHoles(resolved)) continue;
      Type next = joined ? JoinTypes(joined, resolved) : resolved;
      if (!next) {
        throw Error(At(span) + what_ + " have different types: " + ir::TypeToString(joined) +
                    " and " + ir::TypeToString(resolved));
      }
      joined = next;
    }
    return joined;
  }

  const std::string what_;
  const Type out_;
  const std::vector<Type> inputs_;
};

// `out` is field `index` of `tuple`, once the tuple's type is known.
class ProjectionConstraint : public Constraint {
 public:
  ProjectionConstraint(ir::Span span, std::string subject, Type tuple, int index, Type out)
      : Constraint(span, false),
        subject_(std::move(subject)),
        tuple_(std::move(tuple)),
        index_(index),
        out_(std::move(out)) {}

  bool Solve(Solver& solver) override;
  std::string Subject() const override { return subject_; }

 private:
  const std::string subject_;
  const Type tuple_;
  const int index_;
  const Type out_;
};

// The type of field `index` of `tuple_type`, checking the index.
Type ProjectField(const Type& tuple_type, int index, const ir::Span& span) {
  if (tuple_type->kind != ir::TypeKind::kTuple) {
    throw Error(At(span) + "cannot take field " + std::to_string(index) + " of non-tuple type " +
                ir::TypeToString(tuple_type));
  }
  const auto& fields = static_cast<const ir::TupleTypeNode*>(tuple_type.get())->fields;
  if (index < 0 || static_cast<size_t>(index) >= fields.size()) {
    throw Error(At(span) + "tuple index " + std::to_string(index) + " is out of range for " +
                ir::TypeToString(tuple_type));
  }
  return fields[index];
}

bool ProjectionConstraint::Solve(Solver& solver) {
  const Type tuple = solver.unifier().Shallow(tuple_);
  solver.Watch(this, tuple);
  if (IsHole(tuple)) return false;
  solver.UnifyAt(out_, ProjectField(solver.unifier().Resolve(tuple), index_, span), span, subject_);
  recheck = true;
  return true;
}

// Walks the IR once, giving every expression a type (possibly a placeholder)
// and handing the solver the constraints between them.
class ConstraintGenerator : public ir::ExprFunctor<Type> {
 public:
  ConstraintGenerator(Solver& solver, const ir::IRModuleNode* module,
                      const std::unordered_map<const ir::VarNode*, Type>& param_types)
      : solver_(solver), module_(module), param_types_(param_types) {}

  // Types every global function of the module.
  void AddModule() {
    std::vector<Type> types;
    for (const ir::IRModuleNode::Definition& definition : module_->functions()) {
      types.push_back(GlobalType(definition.global->name, definition.global->span));
    }
    VisitPendingGlobals();
    // After the bodies, so that an unknown parameter is reported before its function.
    for (size_t i = 0; i < types.size(); ++i) {
      const ir::GlobalVarNode* global = module_->functions()[i].global.get();
      if (recorded_.insert(global).second) typed_.push_back({global, types[i], global->span});
    }
  }

  // Types `expr` and the globals it reaches.
  Type AddExpr(const ir::Expr& expr) {
    Type type = VisitExpr(expr);
    VisitPendingGlobals();
    return type;
  }

  // Every typed node with its final type; fails on one left unknown.
  TypedExprs ResolveAll() {
    Unifier& unifier = solver_.unifier();
    TypedExprs resolved;
    resolved.reserve(typed_.size());
    for (const Typed& entry : typed_) {
      Type type = unifier.Resolve(entry.type);
      if (unifier.HasHoles(type)) {
        throw Error(At(entry.span) + "cannot infer the type of " + Describe(entry.node) +
                    " (under-constrained)");
      }
      resolved.emplace_back(entry.node, std::move(type));
    }
    return resolved;
  }

  Type VisitExpr(const ir::Expr& expr) override {
    const ir::Span saved = location_;
    if (expr->span.valid()) location_ = expr->span;
    Type type;
    if (expr->kind == ir::ExprKind::kOp) {
      throw Error(At(location_) + "operator " + static_cast<const ir::OpNode*>(expr.get())->name +
                  " can only be called, not used as a value");
    }
    if (expr->kind == ir::ExprKind::kGlobalVar || expr->kind == ir::ExprKind::kConstructor) {
      // Shared nodes: each use instantiates the generic type afresh.
      type = ir::ExprFunctor<Type>::VisitExpr(expr);
      if (recorded_.insert(expr.get()).second) typed_.push_back({expr.get(), type, location_});
    } else if (auto it = memo_.find(expr.get()); it != memo_.end()) {
      type = it->second;
    } else {
      type = ir::ExprFunctor<Type>::VisitExpr(expr);
      Record(expr.get(), type);
    }
    location_ = saved;
    const bool is_use = expr->kind == ir::ExprKind::kVar ||
                        expr->kind == ir::ExprKind::kGlobalVar ||
                        expr->kind == ir::ExprKind::kConstructor;
    return is_use ? Instantiate(type) : type;
  }

  Type VisitVar(const ir::VarNode* var) override {
    if (!var->type_annotation) {
      throw Error(At(location_) + "free variable %" + var->name_hint + " has no type annotation");
    }
    return var->type_annotation;
  }

  Type VisitGlobalVar(const ir::GlobalVarNode* global) override {
    return GlobalType(global->name, location_);
  }

  Type VisitConstant(const ir::ConstantNode* constant) override {
    const Shape& shape = constant->data->shape();
    return ir::MakeTensorType(std::vector<ir::Dim>(shape.begin(), shape.end()),
                              constant->data->dtype());
  }

  Type VisitTuple(const ir::TupleNode* tuple) override {
    std::vector<Type> fields;
    for (const ir::Expr& field : tuple->fields) fields.push_back(VisitExpr(field));
    return ir::MakeTupleType(std::move(fields));
  }

  Type VisitTupleGetItem(const ir::TupleGetItemNode* item) override {
    const Type tuple = solver_.unifier().Shallow(VisitExpr(item->tuple));
    if (!IsHole(tuple)) return ProjectField(tuple, item->index, location_);
    Type out = solver_.Fresh();
    solver_.Add(
        std::make_unique<ProjectionConstraint>(location_, Describe(item), tuple, item->index, out));
    return out;
  }

  Type VisitOp(const ir::OpNode*) override { return nullptr; }  // rejected in VisitExpr

  Type VisitCall(const ir::CallNode* call) override {
    if (call->callee->kind == ir::ExprKind::kOp) {
      return VisitOpCall(call, static_cast<const ir::OpNode*>(call->callee.get()));
    }
    const Type callee = Instantiate(VisitExpr(call->callee));
    std::vector<Type> args;
    for (const ir::Expr& arg : call->args) args.push_back(VisitExpr(arg));
    const std::string name = Describe(call->callee.get());
    const Type shallow = solver_.unifier().Shallow(callee);
    if (IsHole(shallow)) {
      Type ret = solver_.Fresh();
      solver_.UnifyAt(callee, Make<ir::FuncTypeNode>(std::vector<ir::TypeVar>{}, args, ret),
                      location_, "the call of " + name);
      return ret;
    }
    if (shallow->kind != ir::TypeKind::kFunc) {
      throw Error(At(location_) + "cannot call " + name + " of non-function type " +
                  ir::TypeToString(solver_.unifier().Resolve(shallow)));
    }
    const auto* func = static_cast<const ir::FuncTypeNode*>(shallow.get());
    if (func->arg_types.size() != args.size()) {
      throw Error(At(location_) + name + " takes " + std::to_string(func->arg_types.size()) +
                  " argument(s), got " + std::to_string(args.size()));
    }
    for (size_t i = 0; i < args.size(); ++i) {
      RequireSubtype(args[i], func->arg_types[i], "argument " + std::to_string(i) + " of " + name);
    }
    return func->ret_type;
  }

  Type VisitLet(const ir::LetNode* let) override {
    const ir::Var& var = let->var;
    const std::string label = "let %" + var->name_hint;
    if (var->type_annotation) {
      Record(var.get(), var->type_annotation);
      RequireSubtype(VisitExpr(let->value), var->type_annotation, label);
    } else if (let->value->kind == ir::ExprKind::kFunction) {
      // A let-bound function may call itself: its variable is in scope first.
      Type type = solver_.Fresh();
      Record(var.get(), type);
      solver_.UnifyAt(type, VisitExpr(let->value), location_, label);
    } else {
      Record(var.get(), VisitExpr(let->value));
    }
    return VisitExpr(let->body);
  }

  Type VisitIf(const ir::IfNode* node) override {
    RequireSubtype(VisitExpr(node->cond), ir::MakeTensorType({}, DataType::Bool()),
                   "the if condition");
    std::vector<Type> branches = {VisitExpr(node->then_branch), VisitExpr(node->else_branch)};
    Type out = solver_.Fresh();
    solver_.Add(std::make_unique<JoinConstraint>(location_, "if branches", out, branches));
    return out;
  }

  Type VisitFunction(const ir::FunctionNode* function) override {
    std::vector<Type> params;
    Type ret;
    std::string name = "the function";
    if (auto it = signatures_.find(function); it != signatures_.end()) {
      params = it->second.params;
      ret = it->second.ret;
      name = it->second.name;
    } else {
      for (const ir::Var& param : function->params) params.push_back(ParamType(param));
    }
    for (size_t i = 0; i < params.size(); ++i) Record(function->params[i].get(), params[i]);
    const Type body = VisitExpr(function->body);
    if (function->ret_type) {
      RequireSubtype(body, function->ret_type, "the body of " + name);
      ret = function->ret_type;
    } else if (ret) {
      solver_.UnifyAt(ret, body, location_, "the body of " + name);
    } else {
      ret = body;
    }
    return Make<ir::FuncTypeNode>(function->type_params, std::move(params), std::move(ret));
  }

  Type VisitConstructor(const ir::ConstructorNode* constructor) override {
    const ir::TypeData data = LookupTypeData(constructor->belong_to, constructor->name);
    std::vector<Type> vars(data->type_vars.begin(), data->type_vars.end());
    return Make<ir::FuncTypeNode>(data->type_vars, constructor->inputs,
                                  Make<ir::TypeCallNode>(data->header, std::move(vars)));
  }

  Type VisitMatch(const ir::MatchNode* match) override {
    const Type data = VisitExpr(match->data);
    std::vector<Type> clauses;
    for (const ir::Clause& clause : match->clauses) {
      BindPattern(clause.lhs, data);
      clauses.push_back(VisitExpr(clause.rhs));
    }
    Type out = solver_.Fresh();
    solver_.Add(std::make_unique<JoinConstraint>(location_, "match clauses", out, clauses));
    return out;
  }

 private:
  struct Typed {
    const ir::ExprNode* node;
    Type type;
    ir::Span span;
  };
  struct Signature {
    std::vector<Type> params;
    Type ret;
    std::string name;
  };
  struct PendingGlobal {
    ir::Function function;
    Type type;
    std::string name;
  };

  void Record(const ir::ExprNode* node, const Type& type) {
    memo_.emplace(node, type);
    typed_.push_back({node, type, node->span.valid() ? node->span : location_});
  }

  void RequireSubtype(const Type& sub, const Type& super, std::string label) {
    if (sub.get() == super.get()) return;
    solver_.Add(
        std::make_unique<SubtypeConstraint>(location_, std::move(label), sub, super, sub, super));
  }

  Type ParamType(const ir::Var& param) {
    if (auto it = param_types_.find(param.get()); it != param_types_.end()) return it->second;
    return param->type_annotation ? param->type_annotation : solver_.Fresh();
  }

  // A use of a polymorphic function: its type variables become fresh placeholders.
  Type Instantiate(const Type& type) {
    const Type shallow = solver_.unifier().Shallow(type);
    if (shallow->kind != ir::TypeKind::kFunc) return type;
    const auto* func = static_cast<const ir::FuncTypeNode*>(shallow.get());
    if (func->type_params.empty()) return type;
    std::vector<Type> args;
    for (size_t i = 0; i < func->type_params.size(); ++i) args.push_back(solver_.Fresh());
    std::vector<Type> params;
    for (const Type& param : func->arg_types) {
      params.push_back(Substitute(param, func->type_params, args));
    }
    return Make<ir::FuncTypeNode>(std::vector<ir::TypeVar>{}, std::move(params),
                                  Substitute(func->ret_type, func->type_params, args));
  }

  // The type of global `name`, from its annotations with placeholders for the
  // rest; the first use schedules its body for typing.
  Type GlobalType(const std::string& name, const ir::Span& span) {
    if (auto it = global_types_.find(name); it != global_types_.end()) return it->second;
    const ir::Function function = module_ ? module_->Lookup(name) : nullptr;
    if (!function) throw Error(At(span) + "unknown global @" + name);
    Signature signature;
    signature.name = "@" + name;
    for (const ir::Var& param : function->params) signature.params.push_back(ParamType(param));
    signature.ret = function->ret_type ? function->ret_type : solver_.Fresh();
    Type type = Make<ir::FuncTypeNode>(function->type_params, signature.params, signature.ret);
    signatures_.emplace(function.get(), std::move(signature));
    global_types_.emplace(name, type);
    pending_globals_.push_back({function, type, "@" + name});
    return type;
  }

  void VisitPendingGlobals() {
    while (!pending_globals_.empty()) {
      const PendingGlobal pending = pending_globals_.front();
      pending_globals_.pop_front();
      // The same type, unless the function was typed already as a standalone
      // expression (InferExprType of a global's function).
      solver_.UnifyAt(pending.type, VisitExpr(pending.function), location_, pending.name);
    }
  }

  ir::TypeData LookupTypeData(const ir::GlobalTypeVar& type, const std::string& constructor) {
    const ir::TypeData data = module_ ? module_->LookupTypeDef(type->name) : nullptr;
    if (!data) {
      throw Error(At(location_) + "constructor " + constructor + " belongs to unknown type " +
                  type->name);
    }
    return data;
  }

  // Gives the variables of `pattern` their types, matching it against `type`.
  void BindPattern(const ir::Pattern& pattern, const Type& type) {
    switch (pattern->kind) {
      case ir::PatternKind::kWildcard:
        return;
      case ir::PatternKind::kVar: {
        const ir::Var& var = static_cast<const ir::PatternVarNode*>(pattern.get())->var;
        if (var->type_annotation) {
          RequireSubtype(type, var->type_annotation, "pattern %" + var->name_hint);
          Record(var.get(), var->type_annotation);
        } else {
          Record(var.get(), type);
        }
        return;
      }
      case ir::PatternKind::kConstructor: {
        const auto* node = static_cast<const ir::PatternConstructorNode*>(pattern.get());
        const ir::Constructor& constructor = node->constructor;
        const ir::TypeData data = LookupTypeData(constructor->belong_to, constructor->name);
        std::vector<Type> args;
        for (size_t i = 0; i < data->type_vars.size(); ++i) args.push_back(solver_.Fresh());
        solver_.UnifyAt(type, Make<ir::TypeCallNode>(data->header, args), location_,
                        "pattern " + constructor->name);
        if (node->patterns.size() != constructor->inputs.size()) {
          throw Error(At(location_) + "pattern " + constructor->name + " has " +
                      std::to_string(node->patterns.size()) + " field(s), the constructor takes " +
                      std::to_string(constructor->inputs.size()));
        }
        for (size_t i = 0; i < node->patterns.size(); ++i) {
          BindPattern(node->patterns[i], Substitute(constructor->inputs[i], data->type_vars, args));
        }
        return;
      }
      case ir::PatternKind::kTuple: {
        const auto& patterns = static_cast<const ir::PatternTupleNode*>(pattern.get())->patterns;
        std::vector<Type> fields;
        for (size_t i = 0; i < patterns.size(); ++i) fields.push_back(solver_.Fresh());
        solver_.UnifyAt(type, ir::MakeTupleType(fields), location_, "tuple pattern");
        for (size_t i = 0; i < patterns.size(); ++i) BindPattern(patterns[i], fields[i]);
        return;
      }
    }
  }

  Type VisitOpCall(const ir::CallNode* call, const ir::OpNode* op) {
    const op::OpDef& def = *op->def;
    const int count = static_cast<int>(call->args.size());
    if (count < def.min_inputs || count > def.max_inputs) {
      throw Error(At(location_) + op->name + " takes " + std::to_string(def.min_inputs) +
                  (def.max_inputs != def.min_inputs ? " to " + std::to_string(def.max_inputs)
                                                    : std::string()) +
                  " argument(s), got " + std::to_string(count));
    }
    if (!def.relation)
      throw Error(At(location_) + "operator " + op->name + " has no type relation");
    std::vector<Type> types;
    for (const ir::Expr& arg : call->args) types.push_back(VisitExpr(arg));
    Type out = solver_.Fresh();
    if (Type decided = DecidedResult(def, call->attrs, types, out)) {
      solver_.Settle(out, decided);
      return decided;
    }
    types.push_back(out);
    solver_.Add(
        std::make_unique<RelationConstraint>(location_, def, call->attrs, std::move(types)));
    return out;
  }

  // The result type of a call whose argument types are all known, when the
  // relation decides it from them alone; null otherwise (then a constraint
  // decides it). Most calls of a typed program are decided here, with no
  // placeholder to unify and no constraint to solve: this keeps inference
  // of a long chain of calls cheap.
  Type DecidedResult(const op::OpDef& def, const ir::Attrs& attrs, std::vector<Type> types,
                     const Type& out) {
    if (!IsHole(out)) return nullptr;  // a restart's hint: the constraint checks it
    for (Type& type : types) {
      type = solver_.unifier().Resolve(type);
      if (!IsStatic(type)) return nullptr;
    }
    types.push_back(out);
    ResultReporter reporter(out);
    if (!RunRelation(def, attrs, types, reporter, location_)) return nullptr;
    Type decided = reporter.Decided();
    return decided && IsStatic(decided) ? decided : nullptr;
  }

  Solver& solver_;
  const ir::IRModuleNode* module_;
  const std::unordered_map<const ir::VarNode*, Type>& param_types_;
  ir::Span location_;  // the innermost enclosing node with a source position
  std::unordered_map<const ir::ExprNode*, Type> memo_;
  std::unordered_set<const ir::ExprNode*> recorded_;
  std::vector<Typed> typed_;
  std::unordered_map<std::string, Type> global_types_;
  std::unordered_map<const ir::FunctionNode*, Signature> signatures_;
  std::deque<PendingGlobal> pending_globals_;
};

// Generates constraints with `generate`, solves them, and resolves every type;
// starts over when a guess has to be widened (a finite number of times: each
// restart fixes one more placeholder, and a fixed one is never guessed again).
template <typename Generate>
TypedExprs Infer(const ir::IRModuleNode* module,
                 const std::unordered_map<const ir::VarNode*, Type>& param_types,
                 Generate&& generate) {
  std::unordered_map<size_t, Type> hints;
  for (;;) {
    try {
      Solver solver(hints);
      ConstraintGenerator generator(solver, module, param_types);
      generate(generator);
      solver.Run();
      return generator.ResolveAll();
    } catch (const WidenRequest& request) {
      for (size_t index : request.indices) hints[index] = request.widened;
    }
  }
}

void WriteCheckedTypes(const TypedExprs& typed) {
  for (const auto& [node, type] : typed) node->checked_type = type;
}

}  // namespace

void InferTypes(const ir::IRModule& module) {
  RunWithDeepStack([&] {
    const std::unordered_map<const ir::VarNode*, Type> no_overrides;
    WriteCheckedTypes(Infer(module.get(), no_overrides,
                            [](ConstraintGenerator& generator) { generator.AddModule(); }));
  });
}

ir::Type InferExprType(const ir::Expr& expr, const ir::IRModule& module) {
  return RunWithDeepStack([&] {
    const std::unordered_map<const ir::VarNode*, Type> no_overrides;
    WriteCheckedTypes(Infer(module.get(), no_overrides,
                            [&](ConstraintGenerator& generator) { generator.AddExpr(expr); }));
    return expr->checked_type;
  });
}

TypedExprs InferTypesAssuming(const ir::IRModule& module,
                              const std::unordered_map<const ir::VarNode*, ir::Type>& param_types) {
  return RunWithDeepStack([&] {
    return Infer(module.get(), param_types,
                 [](ConstraintGenerator& generator) { generator.AddModule(); });
  });
}

bool IsSubtype(const ir::Type& sub, const ir::Type& super) {
  if (sub.get() == super.get()) return true;
  if (!sub || !super || sub->kind != super->kind) return false;
  switch (sub->kind) {
    case ir::TypeKind::kTensor: {
      const auto* a = static_cast<const ir::TensorTypeNode*>(sub.get());
      const auto* b = static_cast<const ir::TensorTypeNode*>(super.get());
      if (a->dtype != b->dtype || a->ndim() != b->ndim()) return false;
      for (size_t i = 0; i < a->ndim(); ++i) {
        if (b->shape[i].is_static() && a->shape[i] != b->shape[i]) return false;
        // A bounded `?` refuses a dim that may be larger than its bound; an
        // unbounded `?` is checked at run time (the storage sized for the
        // bound must hold it), as a `?` against a static size is.
        const std::optional<int64_t> bound = b->shape[i].upper_bound();
        const std::optional<int64_t> size = a->shape[i].upper_bound();
        if (bound && size && *size > *bound) return false;
      }
      return true;
    }
    case ir::TypeKind::kTuple: {
      const auto& a = static_cast<const ir::TupleTypeNode*>(sub.get())->fields;
      const auto& b = static_cast<const ir::TupleTypeNode*>(super.get())->fields;
      if (a.size() != b.size()) return false;
      for (size_t i = 0; i < a.size(); ++i) {
        if (!IsSubtype(a[i], b[i])) return false;
      }
      return true;
    }
    case ir::TypeKind::kFunc: {
      const auto* a = static_cast<const ir::FuncTypeNode*>(sub.get());
      const auto* b = static_cast<const ir::FuncTypeNode*>(super.get());
      if (a->arg_types.size() != b->arg_types.size() || a->type_params != b->type_params) {
        return false;
      }
      for (size_t i = 0; i < a->arg_types.size(); ++i) {
        if (!IsSubtype(b->arg_types[i], a->arg_types[i])) return false;
      }
      return IsSubtype(a->ret_type, b->ret_type);
    }
    case ir::TypeKind::kTypeCall: {
      const auto* a = static_cast<const ir::TypeCallNode*>(sub.get());
      const auto* b = static_cast<const ir::TypeCallNode*>(super.get());
      if (!SameTypeName(a->func, b->func) || a->args.size() != b->args.size()) return false;
      for (size_t i = 0; i < a->args.size(); ++i) {
        if (!IsSubtype(a->args[i], b->args[i])) return false;
      }
      return true;
    }
    case ir::TypeKind::kGlobalTypeVar:
      return static_cast<const ir::GlobalTypeVarNode*>(sub.get())->name ==
             static_cast<const ir::GlobalTypeVarNode*>(super.get())->name;
    case ir::TypeKind::kStorage:
      return true;
    case ir::TypeKind::kTypeVar:
    case ir::TypeKind::kIncomplete:
      return false;
  }
  return false;
}

ir::Type JoinTypes(const ir::Type& a, const ir::Type& b) {
  return Join(a, b, false);
}

namespace {

Type Join(const Type& a, const Type& b, bool b_holes_follow_a) {
  if (a.get() == b.get()) return a;
  if (b_holes_follow_a && b && IsHole(b)) return a;
  if (!a || !b || a->kind != b->kind) return nullptr;
  // Joins `xs` and `ys` element by element into `out`; false when one pair has no join.
  auto join_all = [&](const std::vector<Type>& xs, const std::vector<Type>& ys,
                      std::vector<Type>* out) {
    if (xs.size() != ys.size()) return false;
    for (size_t i = 0; i < xs.size(); ++i) {
      out->push_back(Join(xs[i], ys[i], b_holes_follow_a));
      if (!out->back()) return false;
    }
    return true;
  };
  std::vector<Type> parts;
  switch (a->kind) {
    case ir::TypeKind::kTensor: {
      const auto* ta = static_cast<const ir::TensorTypeNode*>(a.get());
      const auto* tb = static_cast<const ir::TensorTypeNode*>(b.get());
      if (ta->dtype != tb->dtype || ta->ndim() != tb->ndim()) return nullptr;
      std::vector<ir::Dim> shape(ta->ndim());
      for (size_t i = 0; i < shape.size(); ++i) {
        shape[i] = ta->shape[i] == tb->shape[i] ? ta->shape[i] : ir::Dim::Any();
      }
      if (shape == ta->shape) return a;
      if (shape == tb->shape) return b;
      return ir::MakeTensorType(std::move(shape), ta->dtype);
    }
    case ir::TypeKind::kTuple:
      if (!join_all(static_cast<const ir::TupleTypeNode*>(a.get())->fields,
                    static_cast<const ir::TupleTypeNode*>(b.get())->fields, &parts)) {
        return nullptr;
      }
      return ir::MakeTupleType(std::move(parts));
    case ir::TypeKind::kTypeCall: {
      const auto* ca = static_cast<const ir::TypeCallNode*>(a.get());
      const auto* cb = static_cast<const ir::TypeCallNode*>(b.get());
      if (!SameTypeName(ca->func, cb->func) || !join_all(ca->args, cb->args, &parts)) {
        return nullptr;
      }
      return Make<ir::TypeCallNode>(ca->func, std::move(parts));
    }
    default:
      // Functions and type variables join only with an equivalent type.
      if (IsSubtype(a, b) && IsSubtype(b, a)) return a;
      return nullptr;
  }
}

}  // namespace

}  // namespace nimble::typing
