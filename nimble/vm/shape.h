// A tensor's dimensions: a vector of int64 that keeps up to kInlineRank
// dimensions inside itself.
//
// Every tensor the VM creates carries one, and with std::vector each cost a
// heap block: a malloc and free per kernel output, a second cache line per
// tensor, and the largest share of the VM's time in a deep recursion that
// keeps hundreds of thousands of small tensors alive. Three dimensions keep
// a Shape at 32 bytes and a TensorNode at one 64-byte line (with four, a
// tensor took two lines and that list program's non-kernel time was 1.18x);
// higher ranks (BERT's attention: 4, on large tensors) fall back to the heap.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <span>
#include <vector>

namespace nimble {

// The most dimensions a tensor may have: the elementwise loops keep a shape
// on the stack (vm/kernels/elemwise_loops.h), and a type relation whose
// result would have more refuses it (expand_dims' num_newaxis).
inline constexpr int32_t kMaxRank = 32;

class Shape {
 public:
  using value_type = int64_t;
  using size_type = size_t;
  using iterator = int64_t*;
  using const_iterator = const int64_t*;

  static constexpr size_t kInlineRank = 3;

  Shape() = default;
  explicit Shape(size_t rank, int64_t value = 0) { assign(rank, value); }
  Shape(std::initializer_list<int64_t> dims) { assign(dims.begin(), dims.end()); }
  template <std::input_iterator It>
  Shape(It first, It last) {
    assign(first, last);
  }
  Shape(std::span<const int64_t> dims) { assign(dims.begin(), dims.end()); }     // NOLINT
  Shape(const std::vector<int64_t>& dims) { assign(dims.begin(), dims.end()); }  // NOLINT
  Shape(const Shape& other) { assign(other.begin(), other.end()); }
  Shape(Shape&& other) noexcept { MoveFrom(other); }
  ~Shape() { FreeHeap(); }

  Shape& operator=(const Shape& other) {
    if (this != &other) assign(other.begin(), other.end());
    return *this;
  }
  Shape& operator=(Shape&& other) noexcept {
    if (this != &other) {
      FreeHeap();
      MoveFrom(other);
    }
    return *this;
  }

  operator std::vector<int64_t>() const { return {begin(), end()}; }  // NOLINT

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  int64_t* data() { return OnHeap() ? heap_ : inline_; }
  const int64_t* data() const { return OnHeap() ? heap_ : inline_; }
  iterator begin() { return data(); }
  iterator end() { return data() + size_; }
  const_iterator begin() const { return data(); }
  const_iterator end() const { return data() + size_; }
  std::reverse_iterator<const_iterator> rbegin() const {
    return std::reverse_iterator<const_iterator>(end());
  }
  std::reverse_iterator<const_iterator> rend() const {
    return std::reverse_iterator<const_iterator>(begin());
  }
  int64_t& operator[](size_t i) { return data()[i]; }
  int64_t operator[](size_t i) const { return data()[i]; }
  int64_t& front() { return data()[0]; }
  int64_t front() const { return data()[0]; }
  int64_t& back() { return data()[size_ - 1]; }
  int64_t back() const { return data()[size_ - 1]; }

  void reserve(size_t capacity) {
    if (capacity <= capacity_) return;
    int64_t* grown = new int64_t[capacity];
    std::copy(begin(), end(), grown);
    if (OnHeap()) delete[] heap_;
    heap_ = grown;
    capacity_ = static_cast<uint32_t>(capacity);
  }
  void clear() { size_ = 0; }
  void push_back(int64_t value) {
    if (size_ == capacity_) reserve(2 * capacity_);
    data()[size_++] = value;
  }
  void pop_back() { --size_; }
  void resize(size_t rank, int64_t value = 0) {
    reserve(rank);
    if (rank > size_) std::fill(data() + size_, data() + rank, value);
    size_ = static_cast<uint32_t>(rank);
  }
  void assign(size_t rank, int64_t value) {
    clear();
    resize(rank, value);
  }
  template <std::input_iterator It>
  void assign(It first, It last) {
    clear();
    if constexpr (std::forward_iterator<It>)
      reserve(static_cast<size_t>(std::distance(first, last)));
    for (; first != last; ++first) push_back(static_cast<int64_t>(*first));
  }
  iterator insert(const_iterator position, int64_t value) {
    const size_t index = static_cast<size_t>(position - begin());
    push_back(value);
    std::rotate(begin() + index, end() - 1, end());
    return begin() + index;
  }
  template <std::input_iterator It>
  iterator insert(const_iterator position, It first, It last) {
    const size_t index = static_cast<size_t>(position - begin());
    const size_t old_size = size_;
    for (; first != last; ++first) push_back(static_cast<int64_t>(*first));
    std::rotate(begin() + index, begin() + old_size, end());
    return begin() + index;
  }
  iterator erase(const_iterator position) { return erase(position, position + 1); }
  iterator erase(const_iterator first, const_iterator last) {
    const size_t index = static_cast<size_t>(first - begin());
    std::copy(begin() + (last - begin()), end(), begin() + index);
    size_ -= static_cast<uint32_t>(last - first);
    return begin() + index;
  }

  friend bool operator==(const Shape& a, const Shape& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }
  friend auto operator<=>(const Shape& a, const Shape& b) {
    return std::lexicographical_compare_three_way(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  bool OnHeap() const { return capacity_ > kInlineRank; }
  void FreeHeap() {
    if (OnHeap()) delete[] heap_;
    capacity_ = kInlineRank;
    size_ = 0;
  }
  void MoveFrom(Shape& other) {
    size_ = other.size_;
    capacity_ = other.capacity_;
    if (other.OnHeap()) {
      heap_ = other.heap_;
    } else {
      std::copy(other.inline_, other.inline_ + size_, inline_);
    }
    other.capacity_ = kInlineRank;
    other.size_ = 0;
  }

  uint32_t size_ = 0;
  uint32_t capacity_ = kInlineRank;
  union {
    int64_t inline_[kInlineRank];
    int64_t* heap_;
  };
};

}  // namespace nimble
