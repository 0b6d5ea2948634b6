#include "nimble/vm/tensor.h"

#include <cstring>
#include <limits>

#include "nimble/vm/error.h"

namespace nimble {

int64_t ShapeNumel(std::span<const int64_t> shape) {
  int64_t numel = 1;
  for (int64_t dim : shape) {
    if (dim < 0) throw Error("negative dimension in shape " + ShapeToString(shape));
    if (dim != 0 && numel > std::numeric_limits<int64_t>::max() / dim) {
      throw Error("shape " + ShapeToString(shape) + " has too many elements");
    }
    numel *= dim;
  }
  return numel;
}

int64_t ShapeBytes(std::span<const int64_t> shape, DataType dtype) {
  for (int64_t dim : shape) {
    if (dim < 0) throw Error("negative dimension in shape " + ShapeToString(shape));
    if (dim == 0) return 0;
  }
  int64_t bytes = static_cast<int64_t>(dtype.bytes());
  for (int64_t dim : shape) {
    if (__builtin_mul_overflow(bytes, dim, &bytes)) {
      throw Error("storage for shape " + ShapeToString(shape) + " of " + dtype.name() +
                  " overflows");
    }
  }
  return bytes;
}

std::string ShapeToString(std::span<const int64_t> shape) {
  std::string text = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) text += ", ";
    text += std::to_string(shape[i]);
  }
  if (shape.size() == 1) text += ",";
  return text + ")";
}

StorageNode::StorageNode(size_t bytes)
    : StorageNode(GetAllocator(Device{})->Alloc(bytes, kAlignment), bytes, GetAllocator(Device{})) {
  if (bytes) std::memset(data(), 0, bytes);
}

StorageNode::StorageNode(Buffer buffer, size_t size, Allocator* allocator)
    : buffer_(buffer), size_(size), allocator_(allocator) {}

StorageNode::~StorageNode() {
  if (allocator_) allocator_->Free(buffer_);
}

Storage StorageNode::Allocate(Device device, size_t bytes, size_t alignment) {
  Allocator* allocator = GetAllocator(device);
  return Make<StorageNode>(allocator->Alloc(bytes, alignment), bytes, allocator);
}

static_assert(sizeof(TensorNode) <= 64, "a tensor is one cache line (see shape.h)");

TensorNode::TensorNode(Storage storage, size_t byte_offset, Shape shape, DataType dtype)
    : dtype_(dtype),
      storage_(std::move(storage)),
      byte_offset_(byte_offset),
      shape_(std::move(shape)) {
  if (byte_offset_ > storage_->size() || nbytes() > storage_->size() - byte_offset_) {
    throw Error("tensor of type " + TypeString() + " at offset " + std::to_string(byte_offset_) +
                " does not fit in a storage of " + std::to_string(storage_->size()) + " bytes");
  }
}

Tensor TensorNode::Empty(const Shape& shape, DataType dtype) {
  const size_t bytes = static_cast<size_t>(ShapeBytes(shape, dtype));
  return Make<TensorNode>(Make<StorageNode>(bytes), 0, shape, dtype);
}

Tensor TensorNode::View(const Shape& new_shape) const {
  if (ShapeNumel(new_shape) != numel()) {
    throw Error("cannot view a tensor of shape " + ShapeToString(shape_) + " as shape " +
                ShapeToString(new_shape));
  }
  return Make<TensorNode>(storage_, byte_offset_, new_shape, dtype_);
}

Tensor TensorNode::SliceRows(int64_t begin, int64_t end) const {
  if (shape_.empty() || begin < 0 || end < begin || end > shape_[0]) {
    throw Error("row slice [" + std::to_string(begin) + ", " + std::to_string(end) +
                ") out of range for shape " + ShapeToString(shape_));
  }
  Shape sliced = shape_;
  sliced[0] = end - begin;
  const int64_t row_elements = shape_[0] == 0 ? 0 : numel() / shape_[0];
  return Make<TensorNode>(storage_, byte_offset_ + begin * row_elements * dtype_.bytes(), sliced,
                          dtype_);
}

Tensor TensorNode::Copy() const {
  return CopyTo(device());
}

Tensor TensorNode::CopyTo(Device device) const {
  Tensor copy = Make<TensorNode>(StorageNode::Allocate(device, nbytes()), 0, shape_, dtype_);
  // The API of the accelerator side copies to and from the host.
  const Device source = this->device();
  DeviceAPI::Get(device.type != DeviceType::kCPU ? device : source)
      ->Copy(copy->raw_data(), device, raw_data(), source, nbytes());
  return copy;
}

double LoadElementAsDouble(const void* data, DataType dtype, int64_t index) {
  return DispatchDType(dtype, [&](auto tag) -> double {
    using T = decltype(tag);
    const T value = static_cast<const T*>(data)[index];
    if constexpr (kIsFloatBits<T>) {
      return FloatBitsToFloat(value);
    } else {
      return static_cast<double>(value);
    }
  });
}

int64_t LoadElementAsInt64(const void* data, DataType dtype, int64_t index) {
  return DispatchDType(dtype, [&](auto tag) -> int64_t {
    using T = decltype(tag);
    const T value = static_cast<const T*>(data)[index];
    if constexpr (kIsFloatBits<T>) {
      return static_cast<int64_t>(FloatBitsToFloat(value));
    } else {
      return static_cast<int64_t>(value);
    }
  });
}

double TensorNode::GetAsDouble(int64_t index) const {
  return LoadElementAsDouble(raw_data(), dtype_, index);
}

int64_t TensorNode::GetAsInt64(int64_t index) const {
  return LoadElementAsInt64(raw_data(), dtype_, index);
}

void TensorNode::SetFromDouble(int64_t index, double value) const {
  DispatchDType(dtype_, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (kIsFloatBits<T>) {
      data<T>()[index] = FloatToFloatBits<T>(static_cast<float>(value));
    } else if constexpr (std::is_same_v<T, bool>) {
      data<T>()[index] = value != 0;
    } else {
      data<T>()[index] = static_cast<T>(value);
    }
  });
}

std::string TensorNode::TypeString() const {
  std::string text = "Tensor[(";
  for (size_t i = 0; i < shape_.size(); ++i) {
    if (i) text += ", ";
    text += std::to_string(shape_[i]);
  }
  if (shape_.size() == 1) text += ",";
  return text + "), " + dtype_.name() + "]";
}

}  // namespace nimble
