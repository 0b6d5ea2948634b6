// The reference evaluator: a direct walk of the IR that defines what a program
// computes. It is deliberately simple, and every backend (the VM) is checked
// against it. It is dynamically typed and does not need type inference to have
// run: each operator's output types come from its type relation applied to the
// concrete argument values (op::InvokeOp), and parameter annotations are
// checked against the arguments at every call.
//
// Values are Tensors, ADTs (tuples have tag 0, constructor values their
// constructor's tag) and closures.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "nimble/compiler/ir/module.h"
#include "nimble/vm/object.h"

namespace nimble::eval {

// A function value: a Function with the values of its free variables at the
// time it was created. Globals and constructors used as values are closures too
// (a constructor as a function that builds its value).
class ClosureNode : public Object {
 public:
  using Captured = std::vector<std::pair<ir::Var, Ref<Object>>>;

  ClosureNode(std::string name, ir::Function function, Captured captured, ir::Var self)
      : name(std::move(name)),
        function(std::move(function)),
        captured(std::move(captured)),
        self(std::move(self)) {}

  // For error messages: "@loop", "%f", "Cons" or "function".
  const std::string name;
  const ir::Function function;
  const Captured captured;
  // The let-bound variable by which a recursive local function calls itself
  // (may be null). It is bound to the closure at each call rather than
  // captured, which would make the closure own itself.
  const ir::Var self;
};
using Closure = Ref<ClosureNode>;

// Calls the global `function` of `module` on `args`. Throws nimble::Error when
// the arguments do not fit the function's parameter annotations (naming the
// parameter and both types; Any dimensions accept any size), and on any
// run-time error (prefixed with the line:col of the expression that failed);
// op::OutputTooLarge, as it is, when an op's output would be past
// `max_tensor_bytes` (folding's bound).
Ref<Object> Evaluate(const ir::IRModule& module, const std::string& function,
                     const std::vector<Ref<Object>>& args,
                     int64_t max_tensor_bytes = std::numeric_limits<int64_t>::max());

}  // namespace nimble::eval
