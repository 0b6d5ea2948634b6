// Which code may run more than once each time its program runs: the bodies
// of functions on a cycle of calls (recursion, the form the VM's loops
// take) and of every function they refer to; of lifted closures
// (`Closure=1`) and functions passed as values, which whoever receives them
// may call any number of times; and, inside any function, of function
// literals, for the same reason. Kernel choice asks it whether a matrix
// product's weight is read once per run, and so comes from memory in a large
// enough program, or again and again, staying in cache (an LSTM's input
// projection against its recurrent product).
#pragma once

#include <set>
#include <string>

#include "nimble/compiler/ir/functor.h"
#include "nimble/compiler/ir/module.h"

namespace nimble::transform {

class RepeatedCode {
 public:
  explicit RepeatedCode(const ir::IRModule& module);

  // Whether the body of global @`name` may run more than once per run (its
  // function literals always may).
  bool Global(const std::string& name) const { return repeated_.contains(name); }

 private:
  std::set<std::string> repeated_;
};

// A mutator of one global's function that knows whether the code it is in
// may run more than once per run: a repeated global's body, or a function
// literal's. Primitive functions are left as they are.
class RepeatedCodeMutator : public ir::ExprMutator {
 public:
  explicit RepeatedCodeMutator(bool global_repeated) : global_repeated_(global_repeated) {}

  ir::Expr VisitFunction(const ir::FunctionNode* function) override;

 protected:
  bool InRepeatedCode() const { return global_repeated_ || depth_ > 1; }

 private:
  bool global_repeated_;
  int depth_ = 0;  // functions entered: 1 in the global's own body
};

}  // namespace nimble::transform
