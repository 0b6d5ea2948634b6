// Runtime values: Storage (one device allocation) and Tensor (shape, dtype and a
// byte offset into a Storage). Reshapes and contiguous slices are zero-copy
// views sharing the Storage. Tensors are always dense and row-major. Element
// accessors (data<T>(), GetAsDouble...) are for tensors on the CPU.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "nimble/vm/allocator.h"
#include "nimble/vm/device.h"
#include "nimble/vm/dtype.h"
#include "nimble/vm/object.h"
#include "nimble/vm/shape.h"

namespace nimble {

// Number of elements of `shape` (1 for a scalar). Throws on negative dims or
// overflow, so a bad shape from a file or a shape function never allocates.
int64_t ShapeNumel(std::span<const int64_t> shape);
// Bytes of a dense tensor of `shape` and `dtype`. Every place that turns a
// shape into bytes goes through it: where ShapeNumel fits int64 the byte
// count may not (2^62 float32 elements wrap to 0 bytes, and a tiny buffer is
// then filled), so it throws "storage for shape (...) of DTYPE overflows".
int64_t ShapeBytes(std::span<const int64_t> shape, DataType dtype);
std::string ShapeToString(std::span<const int64_t> shape);

// Element `index` of a CPU array of `dtype` elements, converted.
double LoadElementAsDouble(const void* data, DataType dtype, int64_t index);
int64_t LoadElementAsInt64(const void* data, DataType dtype, int64_t index);

class StorageNode;
using Storage = Ref<StorageNode>;

// One buffer of device memory, given back to its allocator when the last
// tensor viewing it dies.
class StorageNode : public Object {
 public:
  // `bytes` zero-filled bytes on the CPU, aligned to kAlignment.
  explicit StorageNode(size_t bytes);
  // Owns `buffer`, of which the first `size` bytes are this storage, and
  // frees it to `allocator`. A null allocator leaves releasing the memory to
  // a subclass (memory borrowed from elsewhere, e.g. a DLPack producer).
  StorageNode(Buffer buffer, size_t size, Allocator* allocator);
  ~StorageNode() override;

  // `bytes` uninitialised bytes on `device` from its pooled allocator: the
  // path of the VM's AllocStorage, which must not pay for a memset.
  static Storage Allocate(Device device, size_t bytes, size_t alignment = kAlignment);

  static constexpr size_t kAlignment = 64;

  std::byte* data() const { return static_cast<std::byte*>(buffer_.data); }
  // The bytes requested; the buffer may have more capacity.
  size_t size() const { return size_; }
  Device device() const { return buffer_.device; }
  const Buffer& buffer() const { return buffer_; }

 private:
  Buffer buffer_;
  size_t size_;
  Allocator* allocator_;
};

class TensorNode;
using Tensor = Ref<TensorNode>;

class TensorNode : public Object {
 public:
  TensorNode(Storage storage, size_t byte_offset, Shape shape, DataType dtype);

  // A new zero-filled tensor with its own storage.
  static Tensor Empty(const Shape& shape, DataType dtype);
  // A tensor holding a copy of `values`.
  template <typename T>
  static Tensor FromVector(const Shape& shape, DataType dtype, const std::vector<T>& values);
  // A rank-0 tensor.
  template <typename T>
  static Tensor Scalar(DataType dtype, T value) {
    return FromVector<T>({}, dtype, {value});
  }

  const Shape& shape() const { return shape_; }
  int64_t ndim() const { return static_cast<int64_t>(shape_.size()); }
  DataType dtype() const { return dtype_; }
  int64_t numel() const { return ShapeNumel(shape_); }
  size_t nbytes() const { return static_cast<size_t>(ShapeBytes(shape_, dtype_)); }
  const Storage& storage() const { return storage_; }
  size_t byte_offset() const { return byte_offset_; }
  Device device() const { return storage_->device(); }

  void* raw_data() const { return storage_->data() + byte_offset_; }
  template <typename T>
  T* data() const {
    return static_cast<T*>(raw_data());
  }

  // Zero-copy view with another shape of the same element count.
  Tensor View(const Shape& new_shape) const;
  // Zero-copy view of rows [begin, end) along axis 0.
  Tensor SliceRows(int64_t begin, int64_t end) const;
  // A deep copy with its own storage on the same device.
  Tensor Copy() const;
  // A copy with its own storage on `device`.
  Tensor CopyTo(Device device) const;

  // Element `index` (flat) converted to double / int64, for any dtype.
  double GetAsDouble(int64_t index) const;
  int64_t GetAsInt64(int64_t index) const;
  void SetFromDouble(int64_t index, double value) const;

  // "Tensor[(2, 3), float32]": the type of this value in Relay syntax.
  std::string TypeString() const;

 private:
  // First, in the base's tail padding, so that a tensor is one cache line.
  DataType dtype_;
  Storage storage_;
  size_t byte_offset_;
  Shape shape_;  // never changes: AsDLTensor hands out shape_.data()
};

template <typename T>
Tensor TensorNode::FromVector(const Shape& shape, DataType dtype, const std::vector<T>& values) {
  Tensor tensor = Empty(shape, dtype);
  const size_t count = std::min(values.size(), static_cast<size_t>(tensor->numel()));
  // Convert straight to the element type (not through double), so int64
  // values above 2^53 stay exact.
  DispatchDType(dtype, [&](auto tag) {
    using E = decltype(tag);
    E* data = tensor->data<E>();
    for (size_t i = 0; i < count; ++i) {
      if constexpr (kIsFloatBits<E>) {
        data[i] = FloatToFloatBits<E>(static_cast<float>(values[i]));
      } else if constexpr (std::is_same_v<E, bool>) {
        data[i] = values[i] != T{};
      } else {
        data[i] = static_cast<E>(values[i]);
      }
    }
  });
  return tensor;
}

}  // namespace nimble
