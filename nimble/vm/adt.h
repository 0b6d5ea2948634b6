// Algebraic data type values: a constructor tag and its fields. Tuples are
// ADTs with tag 0, so the same GetField serves both.
#pragma once

#include <cstdint>
#include <vector>

#include "nimble/vm/object.h"

namespace nimble {

class ADTNode : public Object {
 public:
  ADTNode(int32_t tag, std::vector<Ref<Object>> fields) : tag_(tag), fields_(std::move(fields)) {}

  int32_t tag() const { return tag_; }
  const std::vector<Ref<Object>>& fields() const { return fields_; }
  size_t size() const { return fields_.size(); }
  const Ref<Object>& field(size_t index) const { return fields_.at(index); }

 private:
  int32_t tag_;
  std::vector<Ref<Object>> fields_;
};
using ADT = Ref<ADTNode>;

inline ADT MakeTuple(std::vector<Ref<Object>> fields) {
  return Make<ADTNode>(0, std::move(fields));
}

}  // namespace nimble
