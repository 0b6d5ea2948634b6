// A VM closure: a lambda-lifted bytecode function and the values it captured.
// InvokeClosure passes the captured values first, then the call's arguments,
// so the lifted function's parameters list the captures first.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "nimble/vm/object.h"

namespace nimble::vm {

class ClosureNode : public Object {
 public:
  ClosureNode(int32_t function_index, std::vector<Ref<Object>> captured)
      : function_index_(function_index), captured_(std::move(captured)) {}

  int32_t function_index() const { return function_index_; }
  const std::vector<Ref<Object>>& captured() const { return captured_; }

 private:
  int32_t function_index_;
  std::vector<Ref<Object>> captured_;
};
using Closure = Ref<ClosureNode>;

}  // namespace nimble::vm
