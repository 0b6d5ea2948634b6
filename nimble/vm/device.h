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
#include <string>

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

  // The API of `device`; throws nimble::Error ("no CUDA device: ...") when it
  // is not available on this machine.
  static DeviceAPI* Get(Device device);
};

}  // namespace nimble
