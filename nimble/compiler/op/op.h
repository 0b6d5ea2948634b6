// The operator registry. Everything the compiler and runtime know about an
// operator lives in its one OpDef, registered in one place (the family file
// under op/, e.g. op/unary.cc):
//   - arity and attribute schema (names, kinds, defaults);
//   - its type relation, used by type inference [paper 4.1];
//   - its shape function and the function's mode [paper 4.2], which live in
//     the runtime (nimble/vm/kernels/op_kernel.h) and are linked in here;
//   - its op pattern, used by operator fusion;
//   - a reference kernel, used by the reference evaluator.
//
// Calling conventions shared by shape functions and kernels: inputs are the
// call's arguments with tuple arguments flattened into their fields
// (`concatenate((%a, %b))` passes a and b); outputs are the tensors of the
// result, flattened the same way (`split` returns one per section).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "nimble/compiler/ir/expr.h"
#include "nimble/compiler/te/tensor.h"
#include "nimble/vm/kernels/op_kernel.h"
#include "nimble/vm/tensor.h"

namespace nimble::op {

// How an operator may fuse with its neighbours (TVM's lattice, ordered so that
// a larger value fuses less).
enum class OpPattern : int {
  kElemWise = 0,
  kBroadcast = 1,
  kInjective = 2,
  kCommReduce = 3,
  kOutEWiseFusable = 4,
  kTuple = 7,
  kOpaque = 8,
};

using vm::ShapeFuncMode;
using vm::ShapeFuncModeName;
using vm::ShapeFunction;
using vm::ShapeRule;

std::string OpPatternName(OpPattern pattern);

// What a type relation reports back to the solver.
class TypeReporter {
 public:
  virtual ~TypeReporter() = default;
  // Unifies `dst` with `src`; this is how a relation refines inputs and the
  // output (bidirectional). Throws nimble::Error when they cannot unify.
  virtual void Assign(const ir::Type& dst, const ir::Type& src) = 0;
};

// types = the argument types then the output type, as far as known (an
// unknown one is an IncompleteType). Returns false when the types are still
// too incomplete to decide (the solver retries later); true once it has
// assigned everything it can. Throws nimble::Error when the types cannot
// hold, with a message that names the dimension and both sizes.
using TypeRelation = std::function<bool(const std::vector<ir::Type>& types, const ir::Attrs& attrs,
                                        TypeReporter& reporter)>;

// Destination passing: `outputs` come allocated with the shape function's
// shapes and the call's output dtypes. An upper-bound op replaces an output by
// a view of its valid part.
using ReferenceKernel = std::function<void(std::span<const Tensor> inputs,
                                           std::span<Tensor> outputs, const ir::Attrs& attrs)>;

// The compute definition [paper 4.5]: the op's outputs (flattened like a
// kernel's) as tensor expressions of `inputs`, which are placeholders or the
// tensors of producers fused with it. `output_dtypes` are the call's. Shapes
// are index expressions of the inputs' shapes; what the kernel must check at
// run time (a broadcast dimension being 1) goes into `context`. Returns no
// tensors for attributes or dtypes code generation does not support: the
// call then runs the op's built-in kernel, unfused.
using ComputeFunction = std::function<std::vector<te::Tensor>(
    te::ComputeContext& context, std::span<const te::Tensor> inputs, const ir::Attrs& attrs,
    std::span<const DataType> output_dtypes)>;

struct AttrSpec {
  std::string name;
  ir::AttrKind kind;
  ir::AttrValue default_value;  // monostate: defaults to None
  bool required = false;
  // A None value is accepted even when `default_value` is not None.
  bool nullable = false;
};

struct OpDef {
  std::string name;
  std::string description;
  int min_inputs = 1;
  int max_inputs = 1;
  std::vector<AttrSpec> attrs;
  TypeRelation relation;
  ShapeFunction shape_func;
  ShapeFuncMode shape_mode = ShapeFuncMode::kDataIndependent;
  ShapeRule shape_rule = ShapeRule::kOpaque;
  OpPattern pattern = OpPattern::kOpaque;
  ReferenceKernel kernel;
  // Null for ops that code generation does not support at all.
  ComputeFunction compute;
  // An op of the memory dialect (op/memory.cc): written by memory
  // manifestation, compiled to VM instructions; no shape function or kernel.
  bool dialect = false;
};

class OpRegistry {
 public:
  // The registry with every built-in operator, built on first use.
  static const OpRegistry& Global();

  // Adds a definition; a duplicate name throws.
  OpDef& Register(const std::string& name);
  // Null when there is no such operator.
  const OpDef* Find(const std::string& name) const;
  OpDef* FindMutable(const std::string& name);
  std::vector<std::string> Names() const;

 private:
  std::map<std::string, std::unique_ptr<OpDef>> ops_;
};

// The interned Op node for `name`; throws nimble::Error "unknown operator 'x'".
ir::Op GetOp(const std::string& name);

// Checks `given` against the op's schema and returns it in schema order with
// defaults filled in. Errors name the op and the attribute.
ir::Attrs NormalizeAttrs(const OpDef& def, const ir::Attrs& given);

// A call of the operator `op_name` with normalised attributes. Throws
// nimble::Error on a wrong argument count or a bad attribute.
ir::Call MakeOpCall(const std::string& op_name, std::vector<ir::Expr> args, ir::Attrs attrs = {});

// Registration of each family; OpRegistry::Global() calls them all. A new
// family adds its function here and to the list in op.cc.
void RegisterUnaryOps(OpRegistry& registry);
void RegisterBinaryOps(OpRegistry& registry);
void RegisterNnOps(OpRegistry& registry);
void RegisterConvOps(OpRegistry& registry);
void RegisterReduceOps(OpRegistry& registry);
void RegisterTransformOps(OpRegistry& registry);
void RegisterCreationOps(OpRegistry& registry);
void RegisterDynamicOps(OpRegistry& registry);
void RegisterIndexOps(OpRegistry& registry);
void RegisterMemoryOps(OpRegistry& registry);
void RegisterTreeScheduleOp(OpRegistry& registry);

}  // namespace nimble::op
