// Tagged, intrusively reference-counted objects shared by the runtime (tensors,
// ADTs, closures) and the compiler (IR nodes).
//
// Release is iterative: when a count reaches zero inside another object's
// destructor, the object is queued instead of deleted on the spot. A 10,000-long
// chain of `let`s or a deep list therefore frees in constant stack.
//
// Objects are small and short-lived (a tensor per kernel output, a cell per
// list element), so their memory comes from per-thread free lists by size
// class rather than from malloc, whose slow paths took a quarter of the VM's
// time building and dropping a 200,000-element list. The lists are refilled
// from 64 KiB chunks carved in address order: objects made one after another
// sit side by side, and a deep list stays compact (with blocks from glibc,
// scattered over a heap fragmented by earlier runs, the same program's
// non-kernel time was about 1.6x longer).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <utility>

namespace nimble {

class Object {
 public:
  Object() = default;
  Object(const Object&) = delete;
  Object& operator=(const Object&) = delete;
  virtual ~Object() = default;

  // The free lists (object.cc). The sized delete receives the dynamic type's
  // size, as every object is deleted through its virtual destructor.
  static void* operator new(size_t size);
  static void operator delete(void* pointer, size_t size);

  void IncRef() const { ref_count_.fetch_add(1, std::memory_order_relaxed); }
  void DecRef() const {
    if (ref_count_.fetch_sub(1, std::memory_order_acq_rel) == 1) Release(this);
  }
  int32_t use_count() const { return ref_count_.load(std::memory_order_relaxed); }

 private:
  static void Release(const Object* object);
  mutable std::atomic<int32_t> ref_count_{0};
};

// A strong reference to an Object subclass. Null by default.
template <typename T>
class Ref {
 public:
  Ref() = default;
  Ref(std::nullptr_t) {}  // NOLINT: implicit null, like a pointer.
  explicit Ref(T* pointer) : ptr_(pointer) {
    if (ptr_) ptr_->IncRef();
  }
  Ref(const Ref& other) : ptr_(other.ptr_) {
    if (ptr_) ptr_->IncRef();
  }
  Ref(Ref&& other) noexcept : ptr_(std::exchange(other.ptr_, nullptr)) {}
  template <typename U>
  requires std::is_convertible_v<U*, T*> Ref(const Ref<U>& other)
      : Ref(other.get()) {}  // NOLINT: upcast.
  template <typename U>
  requires std::is_convertible_v<U*, T*> Ref(Ref<U>&& other)
  noexcept : ptr_(other.release()) {}  // NOLINT: upcast.
  ~Ref() {
    if (ptr_) ptr_->DecRef();
  }
  Ref& operator=(Ref other) noexcept {
    std::swap(ptr_, other.ptr_);
    return *this;
  }

  T* get() const { return ptr_; }
  T* operator->() const { return ptr_; }
  T& operator*() const { return *ptr_; }
  explicit operator bool() const { return ptr_ != nullptr; }
  bool operator==(const Ref& other) const { return ptr_ == other.ptr_; }
  bool operator==(std::nullptr_t) const { return ptr_ == nullptr; }

  // Dynamic downcast: null when the object is not a U.
  template <typename U>
  Ref<U> as() const {
    return Ref<U>(dynamic_cast<U*>(ptr_));
  }
  template <typename U>
  bool is() const {
    return dynamic_cast<const U*>(ptr_) != nullptr;
  }

  // Gives up ownership without decrementing; used for moves across types.
  T* release() { return std::exchange(ptr_, nullptr); }

 private:
  T* ptr_ = nullptr;
};

template <typename T, typename... Args>
Ref<T> Make(Args&&... args) {
  return Ref<T>(new T(std::forward<Args>(args)...));
}

struct RefHash {
  template <typename T>
  size_t operator()(const Ref<T>& ref) const {
    return std::hash<const void*>()(ref.get());
  }
};

}  // namespace nimble
