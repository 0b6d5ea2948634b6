// The fixed references of an ADT's fields or a closure's captured values:
// up to kInlineSize live inside the array itself, more in one heap block.
//
// A list cell has two fields and a tuple rarely more than a few, so with a
// std::vector every cell cost a second heap block: one more malloc and free,
// and one more cache miss each time a 200,000-cell list is built, walked and
// dropped.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "nimble/vm/object.h"

namespace nimble {

class RefArray {
 public:
  static constexpr size_t kInlineSize = 2;

  RefArray() = default;
  explicit RefArray(std::vector<Ref<Object>> refs)
      : RefArray(refs.size(), [&](size_t i) { return std::move(refs[i]); }) {}
  // The array of `size` references fill(0), ..., fill(size - 1).
  template <typename Fill>
  RefArray(size_t size, Fill fill) : size_(static_cast<uint32_t>(size)) {
    if (size > kInlineSize) heap_ = new Ref<Object>[size];
    Ref<Object>* refs = data();
    for (size_t i = 0; i < size; ++i) refs[i] = fill(i);
  }
  RefArray(const RefArray&) = delete;
  RefArray& operator=(const RefArray&) = delete;
  ~RefArray() { delete[] heap_; }

  size_t size() const { return size_; }
  const Ref<Object>* data() const { return heap_ ? heap_ : inline_; }
  const Ref<Object>* begin() const { return data(); }
  const Ref<Object>* end() const { return data() + size_; }
  const Ref<Object>& operator[](size_t index) const { return data()[index]; }

 private:
  Ref<Object>* data() { return heap_ ? heap_ : inline_; }

  Ref<Object> inline_[kInlineSize];
  Ref<Object>* heap_ = nullptr;
  uint32_t size_ = 0;
};

}  // namespace nimble
