// Union-find unification of types for type inference [dissertation 3.3]:
// each placeholder (IncompleteType) belongs to a class whose solution is a
// type, possibly still holding other placeholders. Unifying two tensor types
// keeps the more specific dimension (Any with 3 gives 3), so a solution only
// ever becomes more specific. The solver hears of every class that changed and
// re-runs the constraints waiting on it.
#pragma once

#include <functional>
#include <unordered_map>
#include <vector>

#include "nimble/compiler/ir/type.h"

namespace nimble::typing {

class Unifier {
 public:
  // Told the root of each class whose solution changed; `absorbed` is the root
  // of a class merged into `root` by this change, or null.
  using Listener = std::function<void(const ir::IncompleteTypeNode* root,
                                      const ir::IncompleteTypeNode* absorbed)>;

  explicit Unifier(Listener listener) : listener_(std::move(listener)) {}

  // The representative of the class of `hole`.
  const ir::IncompleteTypeNode* Find(const ir::IncompleteTypeNode* hole);

  // `type` with a top-level placeholder replaced by its class's solution: a
  // type that is not a placeholder, or the class's root when unsolved.
  ir::Type Shallow(const ir::Type& type);

  // `type` with every solved placeholder replaced, recursively; unsolved ones
  // become their class roots. Returns `type` itself when nothing changed.
  ir::Type Resolve(const ir::Type& type);

  // Whether `type` still holds an unsolved placeholder.
  bool HasHoles(const ir::Type& type);

  // The roots of the unsolved placeholders in `type`.
  void CollectHoles(const ir::Type& type, std::vector<const ir::IncompleteTypeNode*>* holes);

  // Makes `a` and `b` the same type and returns it (their most specific
  // common form). Throws nimble::Error describing the innermost mismatch:
  // "dimension 1 conflicts: 2 does not match 3", "Tensor[...] does not match (...)".
  ir::Type Unify(const ir::Type& a, const ir::Type& b);

  // A mark that survives class merges: the solver marks classes whose solution
  // it guessed, so that a later contradiction can widen the guess.
  void Mark(const ir::IncompleteTypeNode* hole) { Entry(Find(hole)).marked = true; }
  bool IsMarked(const ir::IncompleteTypeNode* hole) { return Entry(Find(hole)).marked; }

 private:
  struct ClassEntry {
    ir::Type self;                                   // keeps the placeholder alive
    const ir::IncompleteTypeNode* parent = nullptr;  // null for a root
    ir::Type solution;
    int rank = 0;
    bool marked = false;
  };

  ClassEntry& Entry(const ir::IncompleteTypeNode* hole);
  ir::Type UnifyWithHole(const ir::IncompleteTypeNode* hole, const ir::Type& other);
  ir::Type UnifyHoles(const ir::IncompleteTypeNode* a, const ir::IncompleteTypeNode* b);
  void SetSolution(const ir::IncompleteTypeNode* root, const ir::Type& solution);
  bool Occurs(const ir::IncompleteTypeNode* root, const ir::Type& type);

  Listener listener_;
  std::unordered_map<const ir::IncompleteTypeNode*, ClassEntry> entries_;
};

}  // namespace nimble::typing
