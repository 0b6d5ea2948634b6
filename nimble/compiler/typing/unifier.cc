#include "nimble/compiler/typing/unifier.h"

#include "nimble/vm/error.h"

namespace nimble::typing {

namespace {

const ir::IncompleteTypeNode* AsHole(const ir::Type& type) {
  return type->kind == ir::TypeKind::kIncomplete
             ? static_cast<const ir::IncompleteTypeNode*>(type.get())
             : nullptr;
}

// Rebuilds `types` through `fn`; returns false (leaving `out` unused) when no
// element changed, so callers keep the original node.
template <typename T, typename F>
bool MapTypes(const std::vector<T>& types, F&& fn, std::vector<ir::Type>* out) {
  bool changed = false;
  out->reserve(types.size());
  for (const T& type : types) {
    out->push_back(fn(type));
    changed |= out->back().get() != type.get();
  }
  return changed;
}

[[noreturn]] void Mismatch(const ir::Type& a, const ir::Type& b) {
  throw Error(ir::TypeToString(a) + " does not match " + ir::TypeToString(b));
}

}  // namespace

Unifier::ClassEntry& Unifier::Entry(const ir::IncompleteTypeNode* hole) {
  auto [it, inserted] = entries_.try_emplace(hole);
  if (inserted) it->second.self = ir::Type(const_cast<ir::IncompleteTypeNode*>(hole));
  return it->second;
}

const ir::IncompleteTypeNode* Unifier::Find(const ir::IncompleteTypeNode* hole) {
  const ir::IncompleteTypeNode* root = hole;
  while (const ir::IncompleteTypeNode* parent = Entry(root).parent) root = parent;
  while (hole != root) {  // path compression
    ClassEntry& entry = Entry(hole);
    hole = entry.parent;
    entry.parent = root;
  }
  return root;
}

ir::Type Unifier::Shallow(const ir::Type& type) {
  const ir::IncompleteTypeNode* hole = AsHole(type);
  if (!hole) return type;
  ClassEntry& entry = Entry(Find(hole));
  return entry.solution ? entry.solution : entry.self;
}

ir::Type Unifier::Resolve(const ir::Type& type) {
  const ir::Type shallow = Shallow(type);
  auto resolve = [this](const ir::Type& t) { return Resolve(t); };
  std::vector<ir::Type> parts;
  switch (shallow->kind) {
    case ir::TypeKind::kTuple: {
      const auto* tuple = static_cast<const ir::TupleTypeNode*>(shallow.get());
      if (!MapTypes(tuple->fields, resolve, &parts)) return shallow;
      return ir::MakeTupleType(std::move(parts));
    }
    case ir::TypeKind::kFunc: {
      const auto* func = static_cast<const ir::FuncTypeNode*>(shallow.get());
      const bool args_changed = MapTypes(func->arg_types, resolve, &parts);
      ir::Type ret = Resolve(func->ret_type);
      if (!args_changed && ret.get() == func->ret_type.get()) return shallow;
      return Make<ir::FuncTypeNode>(func->type_params, std::move(parts), std::move(ret));
    }
    case ir::TypeKind::kTypeCall: {
      const auto* call = static_cast<const ir::TypeCallNode*>(shallow.get());
      if (!MapTypes(call->args, resolve, &parts)) return shallow;
      return Make<ir::TypeCallNode>(call->func, std::move(parts));
    }
    default:
      return shallow;
  }
}

void Unifier::CollectHoles(const ir::Type& type,
                           std::vector<const ir::IncompleteTypeNode*>* holes) {
  const ir::Type shallow = Shallow(type);
  switch (shallow->kind) {
    case ir::TypeKind::kIncomplete:
      holes->push_back(AsHole(shallow));
      return;
    case ir::TypeKind::kTuple:
      for (const ir::Type& field : static_cast<const ir::TupleTypeNode*>(shallow.get())->fields) {
        CollectHoles(field, holes);
      }
      return;
    case ir::TypeKind::kFunc: {
      const auto* func = static_cast<const ir::FuncTypeNode*>(shallow.get());
      for (const ir::Type& arg : func->arg_types) CollectHoles(arg, holes);
      CollectHoles(func->ret_type, holes);
      return;
    }
    case ir::TypeKind::kTypeCall:
      for (const ir::Type& arg : static_cast<const ir::TypeCallNode*>(shallow.get())->args) {
        CollectHoles(arg, holes);
      }
      return;
    default:
      return;
  }
}

bool Unifier::HasHoles(const ir::Type& type) {
  std::vector<const ir::IncompleteTypeNode*> holes;
  CollectHoles(type, &holes);
  return !holes.empty();
}

bool Unifier::Occurs(const ir::IncompleteTypeNode* root, const ir::Type& type) {
  std::vector<const ir::IncompleteTypeNode*> holes;
  CollectHoles(type, &holes);
  for (const ir::IncompleteTypeNode* hole : holes) {
    if (hole == root) return true;
  }
  return false;
}

void Unifier::SetSolution(const ir::IncompleteTypeNode* root, const ir::Type& solution) {
  if (Occurs(root, solution)) {
    throw Error("the type would contain itself: " + ir::TypeToString(Resolve(solution)));
  }
  Entry(root).solution = solution;
  listener_(root, nullptr);
}

ir::Type Unifier::UnifyHoles(const ir::IncompleteTypeNode* a, const ir::IncompleteTypeNode* b) {
  const ir::IncompleteTypeNode* root_a = Find(a);
  const ir::IncompleteTypeNode* root_b = Find(b);
  if (root_a == root_b) return Shallow(Entry(root_a).self);
  // Unify the solutions before linking, so that a conflict leaves both classes as they were.
  const ir::Type solution_a = Entry(root_a).solution;
  const ir::Type solution_b = Entry(root_b).solution;
  ir::Type merged = solution_a && solution_b ? Unify(solution_a, solution_b)
                                             : (solution_a ? solution_a : solution_b);
  // Unifying the solutions may itself have merged these classes.
  root_a = Find(root_a);
  root_b = Find(root_b);
  if (root_a == root_b) {
    if (merged && merged.get() != Entry(root_a).solution.get()) SetSolution(root_a, merged);
    return Shallow(Entry(root_a).self);
  }
  if (Entry(root_a).rank < Entry(root_b).rank) std::swap(root_a, root_b);
  ClassEntry& winner = Entry(root_a);
  ClassEntry& loser = Entry(root_b);
  loser.parent = root_a;
  loser.solution = nullptr;
  winner.marked |= loser.marked;
  if (winner.rank == loser.rank) ++winner.rank;
  if (merged && Occurs(root_a, merged)) {
    throw Error("the type would contain itself: " + ir::TypeToString(Resolve(merged)));
  }
  winner.solution = merged;
  listener_(root_a, root_b);
  return Shallow(winner.self);
}

ir::Type Unifier::UnifyWithHole(const ir::IncompleteTypeNode* hole, const ir::Type& other) {
  const ir::IncompleteTypeNode* root = Find(hole);
  const ir::Type solution = Entry(root).solution;
  if (!solution) {
    SetSolution(root, other);
    return other;
  }
  ir::Type merged = Unify(solution, other);
  root = Find(root);
  if (merged.get() != Entry(root).solution.get()) SetSolution(root, merged);
  return merged;
}

ir::Type Unifier::Unify(const ir::Type& a, const ir::Type& b) {
  if (a.get() == b.get()) return a;
  const ir::IncompleteTypeNode* hole_a = AsHole(a);
  const ir::IncompleteTypeNode* hole_b = AsHole(b);
  if (hole_a && hole_b) return UnifyHoles(hole_a, hole_b);
  if (hole_a) return UnifyWithHole(hole_a, b);
  if (hole_b) return UnifyWithHole(hole_b, a);
  if (a->kind != b->kind) Mismatch(Resolve(a), Resolve(b));

  std::vector<ir::Type> parts;
  switch (a->kind) {
    case ir::TypeKind::kTensor: {
      const auto* ta = static_cast<const ir::TensorTypeNode*>(a.get());
      const auto* tb = static_cast<const ir::TensorTypeNode*>(b.get());
      if (ta->dtype != tb->dtype || ta->ndim() != tb->ndim()) Mismatch(a, b);
      std::vector<ir::Dim> shape(ta->ndim());
      for (size_t i = 0; i < shape.size(); ++i) {
        const ir::Dim da = ta->shape[i];
        const ir::Dim db = tb->shape[i];
        if (da.is_static() && db.is_static() && da != db) {
          throw Error("dimension " + std::to_string(i) + " conflicts: " + da.ToString() +
                      " does not match " + db.ToString());
        }
        shape[i] = ir::BothDim(da, db);  // the more specific one
      }
      if (shape == ta->shape) return a;
      if (shape == tb->shape) return b;
      return ir::MakeTensorType(std::move(shape), ta->dtype);
    }
    case ir::TypeKind::kTuple: {
      const auto* ta = static_cast<const ir::TupleTypeNode*>(a.get());
      const auto* tb = static_cast<const ir::TupleTypeNode*>(b.get());
      if (ta->fields.size() != tb->fields.size()) Mismatch(Resolve(a), Resolve(b));
      size_t i = 0;
      auto unify = [&](const ir::Type& field) { return Unify(field, tb->fields[i++]); };
      if (!MapTypes(ta->fields, unify, &parts)) return a;
      return ir::MakeTupleType(std::move(parts));
    }
    case ir::TypeKind::kFunc: {
      const auto* fa = static_cast<const ir::FuncTypeNode*>(a.get());
      const auto* fb = static_cast<const ir::FuncTypeNode*>(b.get());
      if (fa->arg_types.size() != fb->arg_types.size() || fa->type_params != fb->type_params) {
        Mismatch(Resolve(a), Resolve(b));
      }
      size_t i = 0;
      auto unify = [&](const ir::Type& arg) { return Unify(arg, fb->arg_types[i++]); };
      const bool args_changed = MapTypes(fa->arg_types, unify, &parts);
      ir::Type ret = Unify(fa->ret_type, fb->ret_type);
      if (!args_changed && ret.get() == fa->ret_type.get()) return a;
      return Make<ir::FuncTypeNode>(fa->type_params, std::move(parts), std::move(ret));
    }
    case ir::TypeKind::kTypeCall: {
      const auto* ca = static_cast<const ir::TypeCallNode*>(a.get());
      const auto* cb = static_cast<const ir::TypeCallNode*>(b.get());
      if (ca->func->name != cb->func->name || ca->args.size() != cb->args.size()) {
        Mismatch(Resolve(a), Resolve(b));
      }
      size_t i = 0;
      auto unify = [&](const ir::Type& arg) { return Unify(arg, cb->args[i++]); };
      if (!MapTypes(ca->args, unify, &parts)) return a;
      return Make<ir::TypeCallNode>(ca->func, std::move(parts));
    }
    case ir::TypeKind::kStorage:
      return a;
    case ir::TypeKind::kGlobalTypeVar:
      if (static_cast<const ir::GlobalTypeVarNode*>(a.get())->name !=
          static_cast<const ir::GlobalTypeVarNode*>(b.get())->name) {
        Mismatch(a, b);
      }
      return a;
    case ir::TypeKind::kTypeVar:  // rigid: only the same variable unifies
    case ir::TypeKind::kIncomplete:
      Mismatch(a, b);
  }
  Mismatch(a, b);
}

}  // namespace nimble::typing
