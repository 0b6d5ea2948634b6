// The CUDA device: memory through the CUDA runtime, with one stream per device
// on which copies between devices are queued. Built as the loadable module
// libnimble_cuda.so (see cuda_device_api.h); it does not link the runtime
// library, only its headers.
#include "nimble/vm/cuda/cuda_device_api.h"

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <type_traits>

#include "nimble/vm/device.h"
#include "nimble/vm/error.h"

namespace nimble {
namespace {

constexpr size_t kCudaMallocAlignment = 256;

std::string DeviceName(int32_t id) {
  return "cuda(" + std::to_string(id) + ")";
}

// "out of memory (cudaErrorMemoryAllocation, error 2)", plus what to do about
// the errors that mean the machine has no usable GPU.
std::string Describe(cudaError_t status) {
  std::string text = std::string(cudaGetErrorString(status)) + " (" + cudaGetErrorName(status) +
                     ", error " + std::to_string(static_cast<int>(status)) + ")";
  if (status == cudaErrorInsufficientDriver) {
    text += ": the NVIDIA driver (libcuda.so.1) is missing or older than the CUDA runtime";
  } else if (status == cudaErrorNoDevice) {
    text += ": the driver sees no GPU";
  }
  return text;
}

void Check(cudaError_t status, const std::string& what) {
  if (status != cudaSuccess) {
    cudaGetLastError();  // clears the sticky status of non-fatal errors
    throw Error("CUDA " + what + " failed: " + Describe(status));
  }
}

class CudaDeviceAPI final : public DeviceAPI {
 public:
  explicit CudaDeviceAPI(int32_t id) : id_(id) {
    Check(cudaSetDevice(id_), "cudaSetDevice on " + DeviceName(id_));
    Check(cudaStreamCreate(&stream_), "cudaStreamCreate on " + DeviceName(id_));
  }

  void* Alloc(size_t bytes, size_t alignment) override {
    if (alignment > kCudaMallocAlignment) {
      throw Error("unsupported alignment " + std::to_string(alignment) + " on " + DeviceName(id_) +
                  " (cudaMalloc aligns to 256 bytes)");
    }
    Select();
    void* data = nullptr;
    Check(cudaMalloc(&data, bytes == 0 ? 1 : bytes),
          "cudaMalloc of " + std::to_string(bytes) + " bytes on " + DeviceName(id_));
    return data;
  }

  // Errors are ignored: at process exit the runtime may already be unloading,
  // and memory that cannot be freed cannot be recovered anyway.
  void Free(void* data) override {
    if (cudaSetDevice(id_) == cudaSuccess) cudaFree(data);
    cudaGetLastError();
  }

  // Copies that touch host memory are complete on return (the host buffer may
  // be reused at once); copies between GPUs are queued on this device's stream.
  void Copy(void* dst, Device dst_device, const void* src, Device src_device,
            size_t bytes) override {
    if (bytes == 0) return;
    const bool dst_host = dst_device.type == DeviceType::kCPU;
    const bool src_host = src_device.type == DeviceType::kCPU;
    if (dst_host && src_host) {
      std::memcpy(dst, src, bytes);
      return;
    }
    Select();
    const std::string what = "copy of " + std::to_string(bytes) + " bytes to " +
                             (dst_host ? std::string("cpu") : DeviceName(dst_device.id)) +
                             " from " + (src_host ? std::string("cpu") : DeviceName(src_device.id));
    if (!dst_host && !src_host && dst_device.id != src_device.id) {
      Check(cudaMemcpyPeerAsync(dst, dst_device.id, src, src_device.id, bytes, stream_), what);
      return;
    }
    const cudaMemcpyKind kind = dst_host   ? cudaMemcpyDeviceToHost
                                : src_host ? cudaMemcpyHostToDevice
                                           : cudaMemcpyDeviceToDevice;
    Check(cudaMemcpyAsync(dst, src, bytes, kind, stream_), what);
    if (dst_host || src_host) Check(cudaStreamSynchronize(stream_), what);
  }

  void Synchronize() override {
    Select();
    Check(cudaStreamSynchronize(stream_), "synchronize of " + DeviceName(id_));
  }

 private:
  // The current device is per host thread; make it ours before each call.
  void Select() { Check(cudaSetDevice(id_), "cudaSetDevice on " + DeviceName(id_)); }

  int32_t id_;
  cudaStream_t stream_ = nullptr;
};

DeviceAPI* CreateDeviceAPI(int32_t device_id) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    cudaGetLastError();
    throw Error("cudaGetDeviceCount failed: " + Describe(status));
  }
  if (count == 0) throw Error("the driver reports 0 GPUs");
  if (device_id < 0 || device_id >= count) {
    throw Error(DeviceName(device_id) + " does not exist (this machine has " +
                std::to_string(count) + " GPU" + (count == 1 ? "" : "s") + ")");
  }
  return new CudaDeviceAPI(device_id);
}

}  // namespace
}  // namespace nimble

extern "C" __attribute__((visibility("default"))) nimble::DeviceAPI* NimbleCudaCreateDeviceAPI(
    int32_t device_id, char* error, size_t error_size) {
  static_assert(std::is_same_v<decltype(&NimbleCudaCreateDeviceAPI), NimbleCudaDeviceAPIFactory>);
  try {
    return nimble::CreateDeviceAPI(device_id);
  } catch (const std::exception& e) {
    std::snprintf(error, error_size, "%s", e.what());
    return nullptr;
  }
}
