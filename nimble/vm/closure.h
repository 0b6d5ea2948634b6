// A VM closure: a lambda-lifted bytecode function and the values it captured.
// InvokeClosure passes the captured values first, then the call's arguments,
// so the lifted function's parameters list the captures first.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "nimble/vm/object.h"
#include "nimble/vm/ref_array.h"

namespace nimble::vm {

class ClosureNode : public Object {
 public:
  ClosureNode(int32_t function_index, std::vector<Ref<Object>> captured)
      : function_index_(function_index), captured_(std::move(captured)) {}
  // The closure whose captured values are fill(0), ..., fill(size - 1).
  template <typename Fill>
  ClosureNode(int32_t function_index, size_t size, Fill fill)
      : function_index_(function_index), captured_(size, fill) {}

  int32_t function_index() const { return function_index_; }
  const RefArray& captured() const { return captured_; }

 private:
  int32_t function_index_;
  RefArray captured_;
};
using Closure = Ref<ClosureNode>;

}  // namespace nimble::vm
