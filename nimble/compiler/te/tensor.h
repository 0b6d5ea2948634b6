// Tensor expressions: what an operator computes, as an index expression over
// its inputs (TVM's TE, reduced to what our operators need). A tensor is a
// placeholder (a kernel input) or a compute: a shape, one index variable per
// dimension, and a body giving the element at those indices, in which reads
// of other tensors and at most one reduction (at the top) appear.
//
// Every registered operator that code generation supports has a compute
// definition next to its registry entry (OpDef::compute); a fused primitive
// composes them by calling each on the tensors of its producers, and
// lowering (lower.h) turns the result into loops.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "nimble/compiler/tir/expr.h"

namespace nimble::te {

using tir::Expr;
using tir::Var;

struct TensorNode;
using Tensor = std::shared_ptr<const TensorNode>;

// Which schedule lowering gives a compute tensor: the default one by its
// shape, or the matrix-product template (matmul_schedule.h) for a reduction
// whose operands are read along the reduction axis (kMatMul) or whose second
// operand is read along the output's last axis (kOuterProduct).
enum class ScheduleHint { kDefault, kMatMul, kOuterProduct };

// Indices of one tensor given indices of another.
using IndexMap = std::function<std::vector<Expr>(const std::vector<Expr>& indices)>;

struct TensorNode {
  TensorNode(std::string name, DataType dtype, std::vector<Expr> shape, std::vector<Var> axes,
             Expr body, ScheduleHint hint = ScheduleHint::kDefault, IndexMap placement = nullptr)
      : name(std::move(name)),
        dtype(dtype),
        shape(std::move(shape)),
        axes(std::move(axes)),
        body(std::move(body)),
        hint(hint),
        placement(std::move(placement)) {}
  bool is_placeholder() const { return body == nullptr; }

  const std::string name;
  const DataType dtype;
  const std::vector<Expr> shape;  // int64 index expressions
  const std::vector<Var> axes;    // compute only: one per dimension
  const Expr body;                // compute only
  const ScheduleHint hint;
  // Set for a tensor that only moves the elements of the one tensor it reads
  // (Rearrange): where the element at given indices of that tensor lands in
  // this one.
  const IndexMap placement;
};

struct TensorReadNode : tir::ExprNode {
  TensorReadNode(Tensor tensor, std::vector<Expr> indices)
      : ExprNode(tir::ExprKind::kTensorRead, tensor->dtype),
        tensor(std::move(tensor)),
        indices(std::move(indices)) {}
  const Tensor tensor;
  const std::vector<Expr> indices;
};

enum class ReduceKind { kSum, kProd, kMax, kMin };

// A reduction axis: a variable ranging over [0, extent).
struct ReduceAxis {
  Var var;
  Expr extent;
};

// The combination (by `reduce_kind`, from its identity) of `source` over
// every point of `axes`.
struct ReduceNode : tir::ExprNode {
  ReduceNode(ReduceKind reduce_kind, Expr source, std::vector<ReduceAxis> axes)
      : ExprNode(tir::ExprKind::kReduce, source->dtype),
        reduce_kind(reduce_kind),
        source(std::move(source)),
        axes(std::move(axes)) {}
  const ReduceKind reduce_kind;
  const Expr source;
  const std::vector<ReduceAxis> axes;
};

Tensor Placeholder(std::string name, DataType dtype, std::vector<Expr> shape);
// A compute tensor whose element at `indices` is `body(indices)`.
Tensor Compute(std::string name, std::vector<Expr> shape,
               const std::function<Expr(const std::vector<Expr>& indices)>& body,
               ScheduleHint hint = ScheduleHint::kDefault);
// A compute tensor of `shape` that moves each element of `data` to exactly
// one place (a transpose, a reshape): its element at `indices` is `data` at
// source(indices), and `data`'s element at i lands at placement(i). A matrix
// product read so stores each sum at its place (te/lower.h).
Tensor Rearrange(std::string name, const Tensor& data, std::vector<Expr> shape,
                 const IndexMap& source, IndexMap placement);
// `tensor` at `indices` (as many as its rank).
Expr Read(const Tensor& tensor, std::vector<Expr> indices);
ReduceAxis MakeReduceAxis(std::string name, Expr extent);
Expr Reduce(ReduceKind kind, Expr source, std::vector<ReduceAxis> axes);
// The identity of `kind` for `dtype` (0, 1, lowest, highest).
Expr ReduceIdentity(ReduceKind kind, DataType dtype);
// combine(a, b) of `kind`: a is the value so far, b the next element. max
// and min skip NaN elements and keep a on a tie.
Expr ReduceCombine(ReduceKind kind, Expr a, Expr b);
std::string ReduceKindName(ReduceKind kind);

// What a kernel must check about its arguments' shapes before it runs (that
// a broadcast operand's dimension is 1 or the result's): kept by the compute
// definitions as they build, checked by the kernel on entry.
struct Requirement {
  Expr condition;
  std::string message;
};

// Builds compute definitions for one kernel: collects requirements.
class ComputeContext {
 public:
  // `gpu`: the kernel is for the GPU, where no built-in kernel stands in for
  // a definition that checks element values (take's "fast" mode then checks
  // its indices with check_index).
  explicit ComputeContext(bool gpu = false) : gpu_(gpu) {}
  bool gpu() const { return gpu_; }

  void Require(Expr condition, std::string message);
  const std::vector<Requirement>& requirements() const { return requirements_; }

 private:
  std::vector<Requirement> requirements_;
  bool gpu_;
};

}  // namespace nimble::te
