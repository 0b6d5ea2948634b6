// Algebraic data type values: a constructor tag and its fields. Tuples are
// ADTs with tag 0, so the same GetField serves both.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <vector>

#include "nimble/vm/object.h"
#include "nimble/vm/ref_array.h"

namespace nimble {

class ADTNode : public Object {
 public:
  ADTNode(int32_t tag, std::vector<Ref<Object>> fields) : tag_(tag), fields_(std::move(fields)) {}
  // The ADT whose fields are fill(0), ..., fill(size - 1).
  template <typename Fill>
  ADTNode(int32_t tag, size_t size, Fill fill) : tag_(tag), fields_(size, fill) {}

  int32_t tag() const { return tag_; }
  const RefArray& fields() const { return fields_; }
  size_t size() const { return fields_.size(); }
  const Ref<Object>& field(size_t index) const {
    if (index >= fields_.size()) throw std::out_of_range("ADT field index out of range");
    return fields_[index];
  }

 private:
  int32_t tag_;
  RefArray fields_;
};
using ADT = Ref<ADTNode>;

inline ADT MakeTuple(std::vector<Ref<Object>> fields) {
  return Make<ADTNode>(0, std::move(fields));
}

}  // namespace nimble
