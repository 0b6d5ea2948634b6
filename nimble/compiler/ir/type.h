// The types of the IR [paper 4.1]: tensor types whose dimensions are integers
// or Any, tuples, functions, type variables and algebraic data types.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "nimble/vm/dtype.h"
#include "nimble/vm/object.h"

namespace nimble::ir {

enum class TypeKind : uint8_t {
  kTensor,
  kTuple,
  kFunc,
  kTypeVar,
  kGlobalTypeVar,
  kTypeCall,
  kIncomplete,
  kStorage,
};

class TypeNode : public Object {
 public:
  explicit TypeNode(TypeKind kind) : kind(kind) {}
  const TypeKind kind;
};
using Type = Ref<TypeNode>;

// One tensor dimension: a static size or Any ("?"), a size known only at run
// time. Any is its own kind, never a negative sentinel mixed with sizes. An
// Any may carry an upper bound ("?<=512"), from the model or a compile
// option: memory planning then sizes its storage for the bound, once
// (transform/manifest_alloc.h). Relations keep a bound where the output dim
// provably stays within it, and drop it otherwise.
class Dim {
 public:
  constexpr Dim() : value_(kAnyValue) {}
  constexpr Dim(int64_t value) : value_(value) {}  // NOLINT: sizes convert implicitly.
  static constexpr Dim Any() { return Dim(); }
  // A run-time size of at most `bound` (>= 0).
  static constexpr Dim Any(int64_t bound) {
    Dim dim;
    dim.bound_ = bound;
    return dim;
  }
  // Any of at most `bound`, or unbounded without one.
  static constexpr Dim AnyAtMost(std::optional<int64_t> bound) {
    return bound ? Any(*bound) : Any();
  }

  constexpr bool is_any() const { return value_ == kAnyValue; }
  constexpr bool is_static() const { return !is_any(); }
  // The static size; only meaningful when is_static().
  constexpr int64_t value() const { return value_; }
  // The largest size it can take: its value when static, its bound when
  // bounded, else nullopt.
  constexpr std::optional<int64_t> upper_bound() const {
    if (is_static()) return value_;
    if (bound_ != kNoBound) return bound_;
    return std::nullopt;
  }
  std::string ToString() const {
    if (is_static()) return std::to_string(value_);
    return bound_ == kNoBound ? "?" : "?<=" + std::to_string(bound_);
  }
  constexpr bool operator==(const Dim&) const = default;

 private:
  static constexpr int64_t kAnyValue = INT64_MIN;
  static constexpr int64_t kNoBound = -1;
  int64_t value_;
  int64_t bound_ = kNoBound;  // Any only
};

// The dim of a value that is one of `a` or `b` (a broadcast of two Any dims,
// a branch's result): Any, bounded by the larger upper bound when both have
// one.
constexpr Dim EitherDim(Dim a, Dim b) {
  const std::optional<int64_t> x = a.upper_bound(), y = b.upper_bound();
  return Dim::AnyAtMost(x && y ? std::optional<int64_t>(std::max(*x, *y)) : std::nullopt);
}

// The dim that satisfies both `a` and `b` (unification): a static size when
// one is static, else Any bounded by the smaller bound.
constexpr Dim BothDim(Dim a, Dim b) {
  if (a.is_static()) return a;
  if (b.is_static()) return b;
  const std::optional<int64_t> x = a.upper_bound(), y = b.upper_bound();
  if (x && y) return Dim::Any(std::min(*x, *y));
  return x ? a : b;
}

class TensorTypeNode : public TypeNode {
 public:
  TensorTypeNode(std::vector<Dim> shape, DataType dtype)
      : TypeNode(TypeKind::kTensor), shape(std::move(shape)), dtype(dtype) {}
  const std::vector<Dim> shape;
  const DataType dtype;

  size_t ndim() const { return shape.size(); }
  bool is_static() const;
};
using TensorType = Ref<TensorTypeNode>;

class TupleTypeNode : public TypeNode {
 public:
  explicit TupleTypeNode(std::vector<Type> fields)
      : TypeNode(TypeKind::kTuple), fields(std::move(fields)) {}
  const std::vector<Type> fields;
};
using TupleType = Ref<TupleTypeNode>;

// A type parameter (`A` in `List[A]`, or of a polymorphic function). Identity
// is the node, not the name.
class TypeVarNode : public TypeNode {
 public:
  explicit TypeVarNode(std::string name) : TypeNode(TypeKind::kTypeVar), name(std::move(name)) {}
  const std::string name;
};
using TypeVar = Ref<TypeVarNode>;

// The name of an algebraic data type (`List`); its definition is a TypeData in
// the module.
class GlobalTypeVarNode : public TypeNode {
 public:
  explicit GlobalTypeVarNode(std::string name)
      : TypeNode(TypeKind::kGlobalTypeVar), name(std::move(name)) {}
  const std::string name;
};
using GlobalTypeVar = Ref<GlobalTypeVarNode>;

// An ADT applied to type arguments: `List[Tensor[(2,), float32]]`.
class TypeCallNode : public TypeNode {
 public:
  TypeCallNode(GlobalTypeVar func, std::vector<Type> args)
      : TypeNode(TypeKind::kTypeCall), func(std::move(func)), args(std::move(args)) {}
  const GlobalTypeVar func;
  const std::vector<Type> args;
};
using TypeCall = Ref<TypeCallNode>;

class FuncTypeNode : public TypeNode {
 public:
  FuncTypeNode(std::vector<TypeVar> type_params, std::vector<Type> arg_types, Type ret_type)
      : TypeNode(TypeKind::kFunc),
        type_params(std::move(type_params)),
        arg_types(std::move(arg_types)),
        ret_type(std::move(ret_type)) {}
  const std::vector<TypeVar> type_params;
  const std::vector<Type> arg_types;
  const Type ret_type;
};
using FuncType = Ref<FuncTypeNode>;

// A type still to be inferred; type inference replaces every one of them.
class IncompleteTypeNode : public TypeNode {
 public:
  IncompleteTypeNode() : TypeNode(TypeKind::kIncomplete) {}
};
using IncompleteType = Ref<IncompleteTypeNode>;

// The type of a device allocation in the memory dialect (`memory.alloc_storage`
// returns one; `memory.alloc_tensor` views it). Printed `Storage`.
class StorageTypeNode : public TypeNode {
 public:
  StorageTypeNode() : TypeNode(TypeKind::kStorage) {}
};
using StorageType = Ref<StorageTypeNode>;

TensorType MakeTensorType(std::vector<Dim> shape, DataType dtype);
TupleType MakeTupleType(std::vector<Type> fields);
StorageType MakeStorageType();

// The type in Relay text syntax: "Tensor[(?, 2), float32]", "(A, B)",
// "fn (A) -> B", "List[A]"; incomplete types print as "_".
std::string TypeToString(const Type& type);

}  // namespace nimble::ir
