// Devices and the per-device API the runtime allocates and copies through.
// The CPU is always there. The CUDA device lives in a separately loaded
// module (libnimble_cuda.so, built when the CUDA toolkit is present), so a
// runtime without CUDA libraries still starts; where there is no GPU or no
// driver, using it fails with a "no CUDA device" error, never a silent
// fallback.
#pragma once

#include <dlpack/dlpack.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "nimble/vm/error.h"

namespace nimble {

enum class DeviceType : int32_t {
  kCPU = kDLCPU,
  kCUDA = kDLCUDA,
};

// "cpu", "cuda".
std::string DeviceTypeName(DeviceType type);

struct Device {
  DeviceType type = DeviceType::kCPU;
  int32_t id = 0;

  bool operator==(const Device&) const = default;
  // "cpu(0)", "cuda(1)".
  std::string ToString() const;
  DLDevice ToDLDevice() const { return DLDevice{static_cast<DLDeviceType>(type), id}; }
};

// A kernel of a device's own library: the calling convention of kernel.h's
// NimbleKernelFunc, with a DeviceKernelState as its state.
using DeviceKernelFunc = int (*)(void* state, DLTensor* const* args, int32_t num_args);

class DeviceAPI;

// What a device's library kernel is bound to: its device, and the attributes
// of the matrix products (nn.batch_matmul's; nn.dense is transpose_b).
struct DeviceKernelState {
  DeviceAPI* api = nullptr;
  // NimbleKernelSetError: a device module does not link the runtime.
  void (*set_error)(const char* message) = nullptr;
  bool transpose_a = false;
  bool transpose_b = true;
};

// GPU code loaded on a device (DeviceAPI::LoadCode): the kernels that the
// host code of generated GPU kernels launches, and the device memory their
// temporaries use. All of it is queued on the device's stream, in order, so
// nothing waits for the device.
class DeviceCode {
 public:
  virtual ~DeviceCode() = default;
  // Queues kernel `kernel` on `blocks` blocks of `block_threads` threads
  // (the generated code's choice) with cuLaunchKernel's `params`: a pointer
  // to each argument. Throws nimble::Error.
  virtual void Launch(const char* kernel, int64_t blocks, int32_t block_threads, void** params) = 0;
  // Device memory, allocated and freed in stream order; throws nimble::Error.
  virtual void* Alloc(int64_t bytes) = 0;
  virtual void Free(void* data) = 0;
};

// Every member is defined here: the CUDA module, which does not link the
// runtime, derives from this class and needs its type information.
class DeviceAPI {
 public:
  virtual ~DeviceAPI() = default;
  // Raw device memory; throws nimble::Error when the device cannot supply it.
  virtual void* Alloc(size_t bytes, size_t alignment) = 0;
  virtual void Free(void* data) = 0;
  // Copies between this device and the CPU, or within this device.
  virtual void Copy(void* dst, Device dst_device, const void* src, Device src_device,
                    size_t bytes) = 0;
  // Waits for all work queued on the device.
  virtual void Synchronize() = 0;
  // What the device is, for records of what ran where ("NVIDIA H200, sm_90,
  // 139.8 GiB"); "" for the CPU, which hosts describe themselves.
  virtual std::string Describe() { return ""; }
  // Loads `code` (PTX, for the CUDA device); throws nimble::Error where the
  // device runs no such code or the code does not load.
  virtual std::unique_ptr<DeviceCode> LoadCode(std::span<const std::byte> /*code*/) {
    throw Error("this device runs no device code");
  }
  // The device's library kernel `name` (the CUDA device's cuBLAS products:
  // nn.dense.cublas, nn.batch_matmul.cublas), or null. It reads this
  // device's memory and takes a DeviceKernelState of this API as its state.
  virtual DeviceKernelFunc LibraryKernel(const std::string& /*name*/) { return nullptr; }

  // The API of `device`; throws nimble::Error ("no CUDA device: ...") when it
  // is not available on this machine.
  static DeviceAPI* Get(Device device);
};

}  // namespace nimble
