// The variables bound on the current path of a recursive walk over the IR,
// each mapped to what the walk associates with it (its binding level, its
// partner in the other program). Shared by structural equality and hashing.
//
// Leaving a binder restores whatever it shadowed. Every binding opens a fresh
// scope id, so a memo keyed by (node, scope id) never reuses a result computed
// under other bindings, while shared subexpressions met again under the same
// bindings (the common DAG case) are computed once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

namespace nimble::ir {

template <typename Key, typename Value>
class ScopedBindings {
 public:
  struct Mark {
    size_t undo_size;
    uint64_t scope_id;
  };

  // Null when `key` is not bound on the current path.
  const Value* Find(const Key& key) const {
    auto it = values_.find(key);
    return it == values_.end() || !it->second ? nullptr : &*it->second;
  }

  void Bind(const Key& key, Value value) {
    std::optional<Value>& slot = values_[key];
    undo_.push_back({key, std::move(slot)});
    slot = std::move(value);
    scope_id_ = ++last_scope_id_;
  }

  // How many bindings are live, i.e. the binding depth.
  size_t depth() const { return undo_.size(); }
  uint64_t scope_id() const { return scope_id_; }

  Mark mark() const { return {undo_.size(), scope_id_}; }
  // Undoes every binding made since `mark`.
  void Restore(const Mark& mark) {
    while (undo_.size() > mark.undo_size) {
      values_[undo_.back().key] = std::move(undo_.back().previous);
      undo_.pop_back();
    }
    scope_id_ = mark.scope_id;
  }

 private:
  struct Undo {
    Key key;
    std::optional<Value> previous;
  };
  std::unordered_map<Key, std::optional<Value>> values_;
  std::vector<Undo> undo_;
  uint64_t scope_id_ = 0;
  uint64_t last_scope_id_ = 0;
};

}  // namespace nimble::ir
