#include "nimble/vm/dlpack.h"

#include <string>
#include <vector>

#include "nimble/vm/error.h"

namespace nimble {
namespace {

#if DLPACK_VERSION >= 80 || defined(DLPACK_MAJOR_VERSION)
constexpr DLDataType kDLBoolType = {kDLBool, 8, 1};
#else
constexpr DLDataType kDLBoolType = {kDLUInt, 1, 1};
#endif
constexpr DLDataType kTvmBoolType = {kDLUInt, 1, 1};

bool SameType(DLDataType a, DLDataType b) {
  return a.code == b.code && a.bits == b.bits && a.lanes == b.lanes;
}

// "float32", "bfloat16", "int8x4", as in TVM.
std::string DLTypeName(DLDataType type) {
  static constexpr const char* kCodeNames[] = {"int",    "uint",    "float", "handle",
                                               "bfloat", "complex", "bool"};
  std::string name = type.code < std::size(kCodeNames) ? kCodeNames[type.code]
                                                       : "code" + std::to_string(type.code) + "_";
  name += std::to_string(type.bits);
  if (type.lanes != 1) name += "x" + std::to_string(type.lanes);
  return name;
}

std::vector<int64_t> CompactStrides(const Shape& shape) {
  std::vector<int64_t> strides(shape.size());
  int64_t stride = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= shape[i];
  }
  return strides;
}

// What a DLManagedTensor made by ToDLPack points to: the tensor it keeps alive
// and the strides array it exposes.
struct ExportContext {
  DLManagedTensor managed;
  Tensor tensor;
  std::vector<int64_t> strides;
};

void DeleteExportContext(DLManagedTensor* managed) {
  delete static_cast<ExportContext*>(managed->manager_ctx);
}

// Memory imported from a DLPack producer, released through its deleter.
class DLPackStorage final : public StorageNode {
 public:
  DLPackStorage(DLManagedTensor* managed, Buffer buffer)
      : StorageNode(buffer, buffer.size, nullptr), managed_(managed) {}
  ~DLPackStorage() override {
    if (managed_->deleter) managed_->deleter(managed_);
  }

 private:
  DLManagedTensor* managed_;
};

Device FromDLDevice(DLDevice device) {
  switch (device.device_type) {
    case kDLCPU:
      return Device{DeviceType::kCPU, device.device_id};
    case kDLCUDA:
      return Device{DeviceType::kCUDA, device.device_id};
    default:
      throw Error("unsupported DLPack device type " + std::to_string(device.device_type) +
                  " (expected CPU or CUDA)");
  }
}

// The shape of `dl`, checking that its layout is dense row-major.
Shape DenseShape(const DLTensor& dl) {
  if (dl.ndim < 0) throw Error("negative ndim " + std::to_string(dl.ndim));
  const Shape shape(dl.shape, dl.shape + dl.ndim);
  if (!dl.strides || ShapeNumel(shape) == 0) return shape;
  const std::vector<int64_t> compact = CompactStrides(shape);
  for (size_t i = 0; i < shape.size(); ++i) {
    // The stride of a dimension of extent 1 never matters.
    if (shape[i] != 1 && dl.strides[i] != compact[i]) {
      throw Error("strides " + ShapeToString(std::span(dl.strides, shape.size())) + " of shape " +
                  ShapeToString(shape) + " are not compact row-major (nimble tensors are dense)");
    }
  }
  return shape;
}

Tensor WrapDLPack(DLManagedTensor* managed) {
  const DLTensor& dl = managed->dl_tensor;
  const DataType dtype = FromDLDataType(dl.dtype);
  const Device device = FromDLDevice(dl.device);
  const Shape shape = DenseShape(dl);
  const size_t nbytes = static_cast<size_t>(ShapeBytes(shape, dtype));
  if (!dl.data && nbytes != 0) throw Error("null data pointer");
  const Buffer buffer{dl.data, dl.byte_offset + nbytes, device};
  return Make<TensorNode>(Make<DLPackStorage>(managed, buffer), dl.byte_offset, shape, dtype);
}

}  // namespace

DLDataType ToDLDataType(DataType dtype) {
  switch (dtype.code()) {
    case DataType::Code::kBool:
      return kDLBoolType;
    case DataType::Code::kInt:
      return {kDLInt, static_cast<uint8_t>(dtype.bits()), 1};
    case DataType::Code::kUInt:
      return {kDLUInt, static_cast<uint8_t>(dtype.bits()), 1};
    case DataType::Code::kFloat:
      return {kDLFloat, static_cast<uint8_t>(dtype.bits()), 1};
    case DataType::Code::kBFloat:
      return {kDLBfloat, static_cast<uint8_t>(dtype.bits()), 1};
  }
  throw Error("dtype " + dtype.name() + " has no DLPack equivalent");
}

DataType FromDLDataType(DLDataType type) {
  if (type.lanes != 1) {
    throw Error("unsupported DLPack dtype " + DLTypeName(type) + ": " + std::to_string(type.lanes) +
                " lanes (only 1 is supported)");
  }
  if (SameType(type, kDLBoolType) || SameType(type, kTvmBoolType)) return DataType::Bool();
  // Kernels convert every argument on every call: no strings on this path.
  switch (type.code) {
    case kDLInt:
      if (type.bits == 8) return DataType::Int8();
      if (type.bits == 32) return DataType::Int32();
      if (type.bits == 64) return DataType::Int64();
      break;
    case kDLUInt:
      if (type.bits == 8) return DataType::UInt8();
      break;
    case kDLFloat:
      if (type.bits == 16) return DataType::Float16();
      if (type.bits == 32) return DataType::Float32();
      if (type.bits == 64) return DataType::Float64();
      break;
    case kDLBfloat:
      if (type.bits == 16) return DataType::BFloat16();
      break;
    default:
      break;
  }
  throw Error("unsupported DLPack dtype " + DLTypeName(type) +
              " (expected bool, int8, uint8, int32, int64, float16, bfloat16, float32 or float64)");
}

DLTensor AsDLTensor(const TensorNode& tensor) {
  DLTensor dl{};
  dl.data = tensor.raw_data();
  dl.device = tensor.device().ToDLDevice();
  dl.ndim = static_cast<int>(tensor.ndim());
  dl.dtype = ToDLDataType(tensor.dtype());
  dl.shape = const_cast<int64_t*>(tensor.shape().data());
  dl.strides = nullptr;
  dl.byte_offset = 0;
  return dl;
}

DLManagedTensor* ToDLPack(const Tensor& tensor) {
  auto* context = new ExportContext{{}, tensor, CompactStrides(tensor->shape())};
  context->managed.dl_tensor = AsDLTensor(tensor);
  context->managed.dl_tensor.strides = context->strides.data();
  context->managed.manager_ctx = context;
  context->managed.deleter = DeleteExportContext;
  return &context->managed;
}

Tensor FromDLPack(DLManagedTensor* managed) {
  if (!managed) throw Error("FromDLPack: null DLManagedTensor");
  try {
    return WrapDLPack(managed);
  } catch (const Error& e) {
    if (managed->deleter) managed->deleter(managed);
    throw Error(std::string("FromDLPack: ") + e.what());
  }
}

}  // namespace nimble
